// Re-dials the TCP paths of the current group whose connections failed with an error
// (transport/failover_link.h, FailoverParams::on_down), in the background, and hands
// each new connection to the group's failover link, which puts it in on its own thread.
//
// One thread, one attempt at a time per path (and one for a stranded pair's knocks: knock()): each
// attempt is a TcpEndpoint::reconnect of every peer still wanted on that path, bounded by `attempt`
// (the lower rank dials, the higher waits for it; both ends of a failed pair want it, each from its
// own link). After an attempt that connects nobody the path waits before the next one, from
// `first_pause` doubling to `max_pause` (a peer whose network is down is not dialled in a
// loop); one that connects someone starts the pauses over. Nothing here blocks the
// caller of want(): it only queues. A new group (start) or stop() drops what an earlier
// group wanted, and end the attempt in progress at once (kAborted), as a newer view's
// DataPlane::cancel_connect does.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/log.h"

namespace tributary::transport {
class ReconnectInbox;
class TcpEndpoint;
}

namespace tributary::agent {

struct RedialParams {
  // How long a knock waits for each address of a stranded pair's peer (knock()).
  Duration knock = std::chrono::milliseconds(250);
  Duration attempt = std::chrono::milliseconds(1500);
  Duration first_pause = std::chrono::milliseconds(50);
  Duration max_pause = std::chrono::milliseconds(800);
};

class PathRedialer {
 public:
  // One path of the group: the endpoint that carries it and every rank's addresses on it,
  // or no endpoint (shared memory, RDMA): not re-dialled.
  struct Path {
    transport::TcpEndpoint* endpoint = nullptr;
    std::vector<std::vector<std::string>> addresses;  // by rank
  };

  explicit PathRedialer(Logger log, RedialParams params = {});
  ~PathRedialer();
  PathRedialer(const PathRedialer&) = delete;
  PathRedialer& operator=(const PathRedialer&) = delete;

  // The group of `epoch` whose failover link takes its connections from `inbox`.
  void start(std::uint64_t epoch, int rank, std::vector<Path> paths,
             std::vector<std::string> zones, std::shared_ptr<transport::ReconnectInbox> inbox);
  // From the link's thread: path `path` to `peer` failed (ignored for another epoch or a
  // path that is not re-dialled).
  void want(std::uint64_t epoch, int path, int peer);
  // From the link's thread: every path to `peer` failed (FailoverParams::on_stranded).
  // Finds out, before any re-dial, whether the peer's process is gone: when every TCP
  // path's addresses of it refuse a connection (transport/tcp/knock.h) the link is told
  // (a Reconnection with `gone`) and fails the pair at once instead of waiting out its
  // grace; when one accepts, or does not answer, nothing is said. Ignored for another epoch.
  void knock(std::uint64_t epoch, int peer);
  // Drops every wish and waits for the attempt in progress to end (the caller cancels
  // the endpoints' connects first to make that prompt). start() may follow.
  void stop();
  // Connections made and handed over so far (monotonic).
  std::uint64_t reconnects() const;

 private:
  struct Wanted {
    std::set<int> peers;
    TimePoint not_before{};
    Duration pause{};
  };
  void run();
  // The knocks' own thread (a knock must not wait behind an attempt of up to `attempt`).
  void run_knocks();
  // Knocks at the first peer of knocks_ (unlocking while it does). Under mu_.
  void run_knock(std::unique_lock<std::mutex>& lock);
  // Ends the attempt in progress, if any, with kAborted. Under mu_.
  void cancel_attempt();

  Logger log_;
  RedialParams params_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool quit_ = false;
  bool busy_ = false;  // an attempt is under way (outside the lock)
  bool knocking_ = false;                               // a knock is under way (outside the lock)
  transport::TcpEndpoint* attempt_endpoint_ = nullptr;  // ... on this endpoint, for this epoch
  std::uint64_t attempt_epoch_ = 0;
  std::uint64_t epoch_ = 0;
  int rank_ = 0;
  std::vector<Path> paths_;
  std::vector<std::string> zones_;
  std::shared_ptr<transport::ReconnectInbox> inbox_;
  std::map<int, Wanted> wanted_;  // by path
  std::set<int> knocks_;          // peers to knock at
  std::uint64_t reconnects_ = 0;
  std::thread thread_;
  std::thread knock_thread_;
};

}  // namespace tributary::agent
