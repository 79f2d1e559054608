#!/usr/bin/env bash
# A newcomer's first run, timed: from a fresh Debian 12 root (debootstrap) and a clean
# clone, `scripts/demo.sh` (no flags) until the demo's first line, per revision, one after
# another.
#
#   sudo bench/first_run.sh [-r REV]... [-o OUT.md] [-k BASE_DIR]
#
# The base root holds what a fresh machine of the development kind has before any
# project script runs (compilers, cmake, GoogleTest, python3, git; the CUDA toolkit and
# what else the machine keeps in /usr/local are bind-mounted); it is built once into BASE_DIR
# (default /var/tmp/tributary-first-run-base) and copied for each revision, so every run
# starts from the same state: no Debian package of the project's, no build, no ccache.
# Needs root, debootstrap and Debian's mirror. Package downloads count (they are part of a
# first run); the mirror's speed is the run's, so compare revisions in the same run.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
revs=()
out=""
base=/var/tmp/tributary-first-run-base
while getopts "r:o:k:" opt; do
  case $opt in
    r) revs+=("$OPTARG") ;;
    o) out=$OPTARG ;;
    k) base=$OPTARG ;;
    *) echo "usage: $0 [-r REV]... [-o OUT.md] [-k BASE_DIR]" >&2; exit 2 ;;
  esac
done
((${#revs[@]})) || revs=(HEAD)
[ "$(id -u)" -eq 0 ] || { echo "first_run.sh: needs root (chroot, mounts)" >&2; exit 1; }
command -v debootstrap >/dev/null || { echo "first_run.sh: install debootstrap" >&2; exit 1; }

if [ ! -x "$base/usr/bin/cmake" ]; then
  echo "first_run.sh: building the base root in $base" >&2
  rm -rf "$base"
  debootstrap --variant=minbase \
    --include=build-essential,cmake,python3,libgtest-dev,libgmock-dev,git,ca-certificates,procps \
    bookworm "$base" http://deb.debian.org/debian >/dev/null
fi

root=""
cleanup() {
  [ -n "$root" ] || return 0
  for m in usr/local dev sys proc; do
    mountpoint -q "$root/$m" 2>/dev/null && umount -R -l "$root/$m"
  done
  rm -rf "$root"
}
trap cleanup EXIT

rows=()
for rev in "${revs[@]}"; do
  sha=$(git -C "$REPO" rev-parse --short "$rev")
  root=$(mktemp -d /var/tmp/tributary-first-run-XXXXXX)
  cp -a "$base/." "$root/"
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  # This kind's image patches CMake's FindCUDAToolkit for CUDA 13 (no nvToolsExt); a
  # fresh machine of it has the patched module, so the root does too.
  cp /usr/share/cmake-3.25/Modules/FindCUDAToolkit.cmake \
    "$root/usr/share/cmake-3.25/Modules/FindCUDAToolkit.cmake"
  git clone -q "$REPO" "$root/src"
  git -C "$root/src" checkout -q "$sha"
  mount -t proc proc "$root/proc"
  mount --rbind /sys "$root/sys"
  mount --rbind /dev "$root/dev"
  mount --rbind /usr/local "$root/usr/local"
  log=$root/first_run.log
  echo "first_run.sh: $rev ($sha): scripts/demo.sh in a fresh root" >&2
  start=$(date +%s.%N)
  # Seconds since the start on every line; stop at the demo's first line.
  first=""
  while IFS= read -r line; do
    t=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    printf '%8.1f %s\n' "$t" "$line" >>"$log"
    if [[ $line == "tributary demo: coordinator +"* ]]; then first=$t; break; fi
  done < <(chroot "$root" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
             HOME=/root TERM=dumb /bin/bash -c 'cd /src && scripts/demo.sh 2>&1' || true)
  pkill -9 -f "$root/src/build" 2>/dev/null || true
  apt_s=$(awk '/tributary: building|^-- /{print $1; exit}' "$log")
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  rows+=("| $rev | $sha | ${first:-none} | ${apt_s:--} | $load |")
  echo "first_run.sh: $rev: first demo line after ${first:-never} s (log: $log)" >&2
  tail -5 "$log" >&2
  cp "$log" "/tmp/first_run_${sha}.log"
  cleanup
  root=""
done

table=$(printf '%s\n' "| revision | commit | seconds to the demo's first line | seconds to the build's start | load average after |" \
  "|---|---|---:|---:|---|" "${rows[@]}")
echo "$table"
if [ -n "$out" ]; then
  {
    echo "# First run: a fresh Debian 12 root to the demo's first line"
    echo
    echo "Command: \`sudo bench/first_run.sh $(printf -- '-r %s ' "${revs[@]}")\`; $(nproc) cores; $(date -u +%Y-%m-%dT%H:%MZ)."
    echo
    echo "$table"
  } >"$out"
fi
