#!/bin/sh
# Creates the Python environment the deployment tests run in: a venv (Debian's
# python3-venv, installed by scripts/deps.sh) at DIR with requirements.txt from PyPI. A venv
# already holding these requirements is left as it is, without touching the network.
# ctest runs this first (fixture deploy_venv, tests/deploy/CMakeLists.txt).
# Usage: make_venv.sh DIR
set -eu
dir=${1:?usage: make_venv.sh DIR}
req=$(dirname "$0")/requirements.txt
if [ -x "$dir/bin/python" ] && cmp -s "$req" "$dir/requirements.txt"; then
  echo "deploy venv: $dir is up to date"
  exit 0
fi
/usr/bin/python3 -m venv --clear "$dir" || {
  echo "cannot create a venv: is Debian's python3-venv installed? (scripts/deps.sh)" >&2
  exit 1
}
"$dir/bin/pip" install --quiet --disable-pip-version-check --no-input -r "$req"
cp "$req" "$dir/requirements.txt"
echo "deploy venv: installed $(grep -c '==' "$req") pinned packages into $dir"
