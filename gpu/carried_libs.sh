# Sourced by the device scripts: puts on LD_LIBRARY_PATH the carried shared libraries
# (build/gpu-carry/lib, from gpu/carry.sh) that this machine lacks, and only those: a library
# the system has (the same soname) stays the system's, so that Python, torch and the tools
# keep the copies they were built with.
carried_libs() {
  local carry=$1 dir=${TMPDIR:-/tmp}/tributary-carried-libs lib
  local known
  known=$( (ldconfig -p || /sbin/ldconfig -p) 2>/dev/null)  # read once: no grep -q on a pipe
  rm -rf "$dir"
  mkdir -p "$dir"
  for lib in "$carry"/lib/*; do
    [[ -e $lib ]] || continue
    if ! grep -q "^[[:space:]]*$(basename "$lib") " <<< "$known"; then
      ln -s "$(cd "$(dirname "$lib")" && pwd)/$(basename "$lib")" "$dir/"
    fi
  done
  export LD_LIBRARY_PATH=$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  echo "carried libraries used (missing here): $(ls "$dir" | tr '\n' ' ')"
}
