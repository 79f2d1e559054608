#!/usr/bin/env bash
# The README's test command: installs what is missing (Debian's packages, then the Python
# environment .venv with torch from PyPI), builds (release preset, -j2) and runs every ctest
# test. Extra arguments go to ctest (e.g. -L unit).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/python_env.sh >/dev/null
scripts/build.sh release
cd build/release
ctest --output-on-failure --timeout 600 -j2 "$@"
