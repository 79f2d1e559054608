"""What the script tests share: a Debian-packaged tool or the reason the test is skipped,
and the verdict (one FAIL line per problem; the exit status ctest reads)."""
import shutil
import sys
from pathlib import Path

SKIPPED = 77  # SKIP_RETURN_CODE in CMakeLists.txt


def tool(name, package):
    """The tool's path, or None after saying why the test cannot run."""
    path = shutil.which(name)
    if not path:
        print(f"{name} is not installed (Debian package {package}; scripts/deps.sh installs it)")
    return path


def verdict(problems):
    for p in problems:
        print("FAIL:", p)
    return 1 if problems else 0


def run_with_promtool(checks):
    """checks(source_dir, promtool) -> problems, for a test run as `TEST.py SOURCE_DIR`."""
    promtool = tool("promtool", "prometheus")
    if not promtool:
        return SKIPPED
    return verdict(checks(Path(sys.argv[1]).resolve(), promtool))
