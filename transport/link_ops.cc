#include "transport/link_ops.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>

namespace tributary::transport {

Status match_status(const std::string& peer, const PendingOp& op, std::uint64_t length,
                    std::uint32_t check) {
  if (length == op.size && check == op.tag.check) return Status();
  return error(StatusCode::kMismatch,
               peer + " sent " + std::to_string(length) + " bytes (check " + std::to_string(check) +
                   ") for seq " + std::to_string(op.tag.seq) + " slot " +
                   std::to_string(op.tag.slot) + ", expected " + std::to_string(op.size) +
                   " (check " + std::to_string(op.tag.check) + ")");
}

Status timed_out(const std::string& peer, const PendingOp& op) {
  if (op.is_send) {
    return error(StatusCode::kTimedOut,
                 peer + " did not take " + std::to_string(op.size) + " bytes before the deadline");
  }
  return error(StatusCode::kTimedOut, "no message from " + peer + " for seq " +
                                          std::to_string(op.tag.seq) + " slot " +
                                          std::to_string(op.tag.slot) + " before the deadline");
}

AbortState::~AbortState() { ::close(wake_fd_); }

bool AbortState::raise(const Status& reason) {
  bool first = false;
  {
    std::lock_guard lock(mu_);
    if (!raised_.load(std::memory_order_relaxed)) {
      status_ = reason.is_ok() ? error(StatusCode::kAborted, "aborted") : reason;
      raised_.store(true, std::memory_order_release);
      first = true;
    }
  }
  const std::uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof(one));
  return first;
}

Status AbortState::status() const {
  std::lock_guard lock(mu_);
  return status_;
}

Result<int> make_wake_fd() {
  const int fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0) return error(StatusCode::kInternal, std::string("eventfd: ") + std::strerror(errno));
  return fd;
}

}  // namespace tributary::transport
