#include "transport/channel_io.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace tributary::transport {

Status drain_channel(int fd, const std::string& peer) {
  std::byte buf[256];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n > 0) continue;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Status::ok();
    const int err = n < 0 ? errno : 0;
    return error(StatusCode::kPeerLost,
                 peer + (err == 0 ? " closed the connection"
                                  : " connection failed: " + std::string(std::strerror(err))));
  }
}

Status channel_exchange(int fd, std::byte* buf, std::size_t n, bool out, Deadline deadline,
                        const std::string& peer, const std::string& setup) {
  std::size_t done = 0;
  while (done < n) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline.at - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      return error(StatusCode::kTimedOut, setup + " with " + peer + " not done by the deadline");
    }
    pollfd p{fd, static_cast<short>(out ? POLLOUT : POLLIN), 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 1 << 30)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    const ssize_t k = out ? ::send(fd, buf + done, n - done, MSG_NOSIGNAL | MSG_DONTWAIT)
                          : ::recv(fd, buf + done, n - done, MSG_DONTWAIT);
    if (k > 0) {
      done += static_cast<std::size_t>(k);
    } else if (k == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      return error(StatusCode::kPeerLost, peer + " closed the connection during the " + setup);
    }
  }
  return Status();
}

}  // namespace tributary::transport
