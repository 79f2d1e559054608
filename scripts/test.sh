#!/usr/bin/env bash
# The README's test command: installs what is missing, builds (release preset, -j2) and
# runs every ctest test. Extra arguments go to ctest (e.g. -L unit).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh release
cd build/release
ctest --output-on-failure --timeout 600 -j2 "$@"
