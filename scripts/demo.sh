#!/usr/bin/env bash
# The README's main job: installs what is missing, builds, and runs the local cluster demo
# (a coordinator and worker processes training an MLP on the digits data with all-reduced
# gradients). Extra arguments go to `tributary demo` (see `tributary demo --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh release >/dev/null
exec build/release/cli/tributary demo "$@"
