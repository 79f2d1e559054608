// Which TCP congestion control a data connection runs. Over loopback there is no
// bottleneck to pace for, and a pacing default (BBR's) times the bursts of a collective's
// segments with high-resolution timers; where each rank has a core of its own that cost
// N = 2 up to 1.6x the time from 256 KiB, while with more ranks than cores the pacing
// spread the load and unpaced bursts were up to 1.8x slower
// (bench/results/tcp_congestion_2026-11-28.md). So a link sets it only on connections
// whose two ends are on this host, and only where its group has a core per rank.
#pragma once

#include <string>

namespace tributary::transport {

// Both ends of connected socket `fd` are on this host: a loopback peer, or this host's
// own address at both ends. False when the OS cannot say.
bool same_host_connection(int fd);

// Sets congestion control `name` on `fd` when it is a same-host connection and `name` is
// not empty. A name the kernel refuses leaves the connection as it was (the system's
// default). Returns whether it was set.
bool set_same_host_congestion(int fd, const std::string& name);

}  // namespace tributary::transport
