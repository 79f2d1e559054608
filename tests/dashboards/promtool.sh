#!/bin/sh
# Runs promtool with the given arguments; reports the test as skipped (77) with the reason
# when promtool is not installed (Debian package prometheus, installed by scripts/deps.sh).
command -v promtool >/dev/null 2>&1 || {
  echo "promtool is not installed (Debian package prometheus; scripts/deps.sh installs it)"
  exit 77
}
exec promtool "$@"
