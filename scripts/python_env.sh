#!/usr/bin/env bash
# Creates (or completes) the project's Python virtual environment, .venv at the repository
# root, from Debian's python3 and python3-venv (scripts/deps.sh installs both), and installs
# what the Python package, the torch.distributed backend and their tests need from PyPI:
# torch, numpy, pytest. Prints the venv's python on stdout.
#
# torch is pinned: the backend is built against this version's headers and loaded by this
# version's library (the build finds Torch through the venv's python). PyPI's wheel for
# Linux x86-64 is the CUDA build and pulls NVIDIA's libraries (several GB) even where no
# GPU is; the backend uses it on the CPU.
#
# Idempotent and quick when done: a venv whose packages are already at these versions is
# left alone (pip is not even asked). TRIBUTARY_VENV overrides the location.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${TRIBUTARY_VENV:-$PWD/.venv}
requirements=(torch==2.15.0 numpy pytest)
stamp="$venv/.tributary-requirements"
want="${requirements[*]}"
if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "$venv/bin/python"
  exit 0
fi
if [ ! -x "$venv/bin/python" ]; then
  echo "tributary: creating the Python environment $venv (Debian's python3)" >&2
  # Debian's interpreter, not whichever python3 comes first on PATH (pyenv, conda): its
  # headers (python3-dev) are the ones the extensions are compiled against.
  /usr/bin/python3 -m venv "$venv"
fi
echo "tributary: installing ${requirements[*]} into $venv (torch's first download is several GB)" >&2
start=$(date +%s)
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input \
  "${requirements[@]}" >&2
echo "tributary: Python environment ready in $(($(date +%s) - start)) s" >&2
echo "$want" >"$stamp"
echo "$venv/bin/python"
