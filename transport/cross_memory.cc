#include "transport/cross_memory.h"

#include <sys/uio.h>

#include <cerrno>
#include <cstring>
#include <fstream>

namespace tributary::transport {
namespace {

// Read by the peer to prove it can read this process; volatile so that it is kept in
// memory under its own address.
volatile const std::uint64_t kProbeWord = 0x54524942434d4131ull;  // "TRIBCMA1"

}  // namespace

std::uint64_t cma_probe_address() {
  return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(&kProbeWord));
}

Status check_cma_peer(pid_t pid, const std::string& segment_name, std::uint64_t probe) {
  if (pid <= 0) return error(StatusCode::kInvalidArgument, "no process id");
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  if (!maps) return error(StatusCode::kUnavailable, "cannot read its memory map");
  const std::string path = "/dev/shm" + segment_name;
  bool mapped = false;
  for (std::string line; !mapped && std::getline(maps, line);) {
    const auto at = line.find(path);
    if (at == std::string::npos) continue;
    const std::size_t end = at + path.size();
    mapped = end == line.size() || line[end] == ' ';  // "... (deleted)" once unlinked
  }
  if (!mapped) {
    return error(StatusCode::kUnavailable,
                 "process " + std::to_string(pid) + " does not map the pair's segment");
  }
  std::uint64_t word = 0;
  TRIB_RETURN_IF_ERROR(cma_read(pid, probe, reinterpret_cast<std::byte*>(&word), sizeof(word)));
  if (word != kProbeWord) return error(StatusCode::kUnavailable, "its probe word differs");
  return Status::ok();
}

Status cma_read(pid_t pid, std::uint64_t remote, std::byte* dst, std::size_t n) {
  std::size_t done = 0;
  while (done < n) {
    iovec local{dst + done, n - done};
    iovec far{reinterpret_cast<void*>(static_cast<std::uintptr_t>(remote + done)), n - done};
    const ssize_t got = ::process_vm_readv(pid, &local, 1, &far, 1, 0);
    if (got > 0) {
      done += static_cast<std::size_t>(got);
      continue;
    }
    const int err = got == 0 ? EFAULT : errno;
    if (err == EINTR) continue;
    if (err == ESRCH) {
      return error(StatusCode::kPeerLost, "process " + std::to_string(pid) + " is gone");
    }
    return error(err == EFAULT ? StatusCode::kBadFrame : StatusCode::kUnavailable,
                 "process_vm_readv of " + std::to_string(n - done) + " bytes at " +
                     std::to_string(remote + done) + " in process " + std::to_string(pid) +
                     ": " + std::strerror(err));
  }
  return Status::ok();
}

}  // namespace tributary::transport
