// Single-copy messages between processes on one host: the receiver reads the sender's
// buffer with process_vm_readv(2) (cross-memory attach) instead of the payload passing
// through a shared-memory ring (one copy in, one copy out).
//
// Who may be read: only the pair's own peer. A peer names its pid when the pair's segment
// is set up (over their authenticated connection); the claim is believed only when that
// process maps this very segment (its name is random and known to the two of them alone,
// /proc/<pid>/maps) and its probe word reads back through process_vm_readv. So a peer
// cannot point the reads at another process of the same user, and a machine that forbids
// them (ptrace restrictions, a seccomp profile) is found out at setup, where the pair then
// keeps to its rings.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/status.h"

namespace tributary::transport {

// The address of this process's probe word, for the peer's check.
std::uint64_t cma_probe_address();

// OK when `pid` maps the shared-memory segment `segment_name` ("/tributary-...") and its
// probe word at `probe` reads back as this build's probe value; else why not.
Status check_cma_peer(pid_t pid, const std::string& segment_name, std::uint64_t probe);

// Reads n bytes at `remote` in process `pid` into dst: all of them, or kPeerLost (the
// process is gone) or kBadFrame (an address that is not readable there).
Status cma_read(pid_t pid, std::uint64_t remote, std::byte* dst, std::size_t n);

}  // namespace tributary::transport
