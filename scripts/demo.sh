#!/usr/bin/env bash
# The README's main job: installs what the demo needs (only that: the tests' packages are
# scripts/test.sh's job), builds the `tributary` binary (not the tests), and runs the local
# cluster demo: a coordinator and worker processes training an MLP on the digits data,
# through a kill -9, a frozen worker, a join and a drain. Extra arguments go to
# `tributary demo` (see `tributary demo --help`; --no-faults for a plain run).
set -euo pipefail
cd "$(dirname "$0")/.."
groups=(demo)
for a in "$@"; do [[ $a == --ha ]] && groups+=(ha); done
scripts/deps.sh "${groups[@]}"
echo "tributary: building the tributary binary (build/release)" >&2
scripts/build.sh release tributary >/dev/null
exec build/release/cli/tributary demo "$@"
