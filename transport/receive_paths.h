// Which receive paths a group's links take on this host, from how many of its ranks share
// the host's cores. Measured on the 2-core development VM (docs/transports.md, "Combining
// receives" and "Single copy"): when cores are to spare (ranks <= cores), a plain receive
// and a separate reduction run in parallel with the peer's copying, and both fused paths
// cost time (a combining receive up to 1.3x at N = 2, single copy up to 1.7x); when the
// ranks outnumber the cores, every pass over memory is CPU time somebody waits for, and
// combining saves 10-25%; single copy, whose rendezvous adds a round trip per message,
// pays from twice as many ranks as cores (N = 8 on 2 cores: 0.6-0.8x of the time; N = 4:
// 0.8x at 256 KiB-4 MiB, about even above; N = 3: no gain,
// bench/results/single_copy_n4_2026-11-28.md).
#pragma once

#include <string_view>

#include "core/status.h"
#include "transport/transport.h"

namespace tributary::transport {

// auto: decided per group as above; on/off: always, never.
enum class PathChoice { kAuto, kOn, kOff };
Result<PathChoice> parse_path_choice(std::string_view text);  // "auto", "on", "off"
std::string_view to_string(PathChoice choice);

struct ReceivePaths {
  bool combine = false;      // Link::combines(): receives reduce as the bytes arrive
  bool single_copy = false;  // shared memory: large messages read from the sender
};

// Pure: the paths for `local_ranks` ranks of a group on a host with `cores` cores.
ReceivePaths choose_receive_paths(PathChoice combine, PathChoice single_copy, int local_ranks,
                                  int cores);

// Pure: whether each of the `local_ranks` ranks has a core of its own, so that a wait may
// poll longer before it sleeps, and without yielding (TcpGroupOptions::core_per_rank).
bool core_per_rank(int local_ranks, int cores);

// The ranks of `spec` on this host (this one included): members that advertise this
// member's shared-memory host key, or whose first data address names the same host.
int ranks_on_this_host(const GroupSpec& spec);

// The cores this process may run on (its CPU affinity), at least 1.
int usable_cores();

}  // namespace tributary::transport
