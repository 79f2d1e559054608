#!/usr/bin/env bash
# Configures and builds a preset (default: release) with -j2; with targets after the
# preset, only those (scripts/demo.sh builds just `tributary`).
#   scripts/build.sh [PRESET [TARGET...]]
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-release}
shift || true
cmake --preset "$preset" >/dev/null
if (($#)); then
  cmake --build --preset "$preset" --target "$@"
else
  cmake --build --preset "$preset"
fi
