#include "transport/tcp/knock.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "transport/tcp/host_port.h"

namespace tributary::transport {
namespace {

enum class Answer { kAccepted, kRefused, kSilent };

Answer knock_one(const sockaddr* to, socklen_t len, Deadline deadline) {
  const int fd = ::socket(to->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return Answer::kSilent;
  Answer answer = Answer::kSilent;
  if (::connect(fd, to, len) == 0) {
    answer = Answer::kAccepted;
  } else if (errno == ECONNREFUSED) {
    answer = Answer::kRefused;
  } else if (errno == EINPROGRESS) {
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline.at - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      pollfd p{fd, POLLOUT, 0};
      const int rc = ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 1000)));
      if (rc < 0 && errno == EINTR) continue;
      if (rc <= 0) continue;
      int err = 0;
      socklen_t err_len = sizeof err;
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &err_len);
      answer = err == 0              ? Answer::kAccepted
               : err == ECONNREFUSED ? Answer::kRefused
                                     : Answer::kSilent;
      break;
    }
  }
  ::close(fd);
  return answer;
}

}  // namespace

Status knock(const std::vector<std::string>& addresses, Deadline deadline) {
  if (addresses.empty()) return error(StatusCode::kInvalidArgument, "knock: no address");
  bool silent = false;
  for (const std::string& address : addresses) {
    std::string host, port;
    if (!split_host_port(address, &host, &port)) {
      return error(StatusCode::kInvalidArgument, "knock: bad address '" + address + "'");
    }
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    addrinfo* found = nullptr;
    if (::getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0 || found == nullptr) {
      return error(StatusCode::kInvalidArgument, "knock: cannot resolve '" + address + "'");
    }
    const Answer a = knock_one(found->ai_addr, found->ai_addrlen, deadline);
    ::freeaddrinfo(found);
    if (a == Answer::kAccepted) return Status::ok();
    silent = silent || a == Answer::kSilent;
  }
  if (silent) return error(StatusCode::kTimedOut, "knock: no answer by the deadline");
  return error(
      StatusCode::kPeerLost,
      "nothing listens at " +
          (addresses.size() == 1 ? addresses[0] : std::to_string(addresses.size()) + " addresses") +
          " (connections refused: the member's process is gone)");
}

}  // namespace tributary::transport
