// What Linux's /proc/<pid>/stat says about a process, for benchmarks and tests that
// measure another process (a coordinator under load, an agent under attack).
#pragma once

#include <sys/types.h>

namespace tributary {

// CPU seconds (user + system) `pid` has used so far; 0 when it cannot be read.
double process_cpu_seconds(pid_t pid);

}  // namespace tributary
