#include "agent/path_redialer.h"

#include <unistd.h>

#include <algorithm>

#include "transport/failover_link.h"
#include "transport/tcp/knock.h"
#include "transport/tcp/tcp_endpoint.h"
#include "transport/tcp/tcp_link.h"
#include "transport/tcp/tls_stream.h"

namespace tributary::agent {
namespace {

// A connection on its way to the link: closed unless the link put it in.
struct HeldSocket {
  explicit HeldSocket(transport::PeerSocket s) : socket(std::move(s)) {}
  ~HeldSocket() {
    socket.tls.reset();
    if (socket.fd >= 0) ::close(socket.fd);
  }
  transport::PeerSocket release() { return std::exchange(socket, transport::PeerSocket{}); }
  transport::PeerSocket socket;
};

std::string ranks_text(const std::vector<int>& peers) {
  std::string out;
  for (int r : peers) out += (out.empty() ? "rank " : ", ") + std::to_string(r);
  return out;
}

}  // namespace

PathRedialer::PathRedialer(Logger log, RedialParams params)
    : log_(std::move(log)), params_(params) {}

void PathRedialer::cancel_attempt() {
  // Older than any later group of the endpoint: that one is not affected.
  if (attempt_endpoint_ != nullptr) attempt_endpoint_->cancel_connect(attempt_epoch_ + 1);
}

PathRedialer::~PathRedialer() {
  {
    std::lock_guard lock(mu_);
    quit_ = true;
    cancel_attempt();
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (knock_thread_.joinable()) knock_thread_.join();
}

void PathRedialer::start(std::uint64_t epoch, int rank, std::vector<Path> paths,
                         std::vector<std::string> zones,
                         std::shared_ptr<transport::ReconnectInbox> inbox) {
  std::lock_guard lock(mu_);
  epoch_ = epoch;
  rank_ = rank;
  paths_ = std::move(paths);
  zones_ = std::move(zones);
  inbox_ = std::move(inbox);
  wanted_.clear();
  knocks_.clear();
  if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  if (!knock_thread_.joinable()) knock_thread_ = std::thread([this] { run_knocks(); });
}

void PathRedialer::want(std::uint64_t epoch, int path, int peer) {
  {
    std::lock_guard lock(mu_);
    if (epoch != epoch_ || !inbox_ || path < 0 || path >= static_cast<int>(paths_.size()) ||
        paths_[static_cast<std::size_t>(path)].endpoint == nullptr) {
      return;
    }
    Wanted& w = wanted_[path];
    if (w.peers.empty() && w.pause == Duration::zero()) w.not_before = TimePoint{};
    w.peers.insert(peer);
  }
  cv_.notify_all();
}

void PathRedialer::knock(std::uint64_t epoch, int peer) {
  {
    std::lock_guard lock(mu_);
    if (epoch != epoch_ || !inbox_ || peer < 0 || peer == rank_) return;
    knocks_.insert(peer);
  }
  cv_.notify_all();
}

void PathRedialer::stop() {
  std::unique_lock lock(mu_);
  wanted_.clear();
  knocks_.clear();
  inbox_.reset();
  paths_.clear();
  epoch_ = 0;
  cancel_attempt();
  cv_.wait(lock, [&] { return !busy_ && !knocking_; });
}

std::uint64_t PathRedialer::reconnects() const {
  std::lock_guard lock(mu_);
  return reconnects_;
}

void PathRedialer::run_knock(std::unique_lock<std::mutex>& lock) {
  const int peer = *knocks_.begin();
  knocks_.erase(knocks_.begin());
  const std::uint64_t epoch = epoch_;
  const std::shared_ptr<transport::ReconnectInbox> inbox = inbox_;
  std::vector<std::vector<std::string>> addresses;  // the peer's, on each TCP path
  for (const Path& p : paths_) {
    if (p.endpoint != nullptr && peer < static_cast<int>(p.addresses.size()) &&
        !p.addresses[static_cast<std::size_t>(peer)].empty()) {
      addresses.push_back(p.addresses[static_cast<std::size_t>(peer)]);
    }
  }
  if (addresses.empty() || !inbox) return;
  knocking_ = true;
  lock.unlock();
  // Gone only if every path says so: one that accepts, or stays silent, may come back.
  Status gone;
  const auto t0 = std::chrono::steady_clock::now();
  for (const auto& a : addresses) {
    Status st = transport::knock(a, Deadline::after(params_.knock));
    if (st.code() != StatusCode::kPeerLost) {
      gone = Status();
      break;
    }
    gone = st;
  }
  lock.lock();
  knocking_ = false;
  cv_.notify_all();
  if (gone.is_ok() || epoch != epoch_) return;
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  log_.info("epoch " + std::to_string(epoch) + ": rank " + std::to_string(peer) +
            " is gone: " + gone.message() + " (knocked in " + std::to_string(ms) + " ms)");
  inbox->post({-1, peer, {}, gone});
}

void PathRedialer::run_knocks() {
  std::unique_lock lock(mu_);
  while (!quit_) {
    if (knocks_.empty()) {
      cv_.wait(lock);
      continue;
    }
    run_knock(lock);
  }
}

void PathRedialer::run() {
  std::unique_lock lock(mu_);
  while (!quit_) {
    int path = -1;
    TimePoint due = TimePoint::max();
    for (const auto& [k, w] : wanted_) {
      if (!w.peers.empty() && w.not_before < due) {
        due = w.not_before;
        path = k;
      }
    }
    if (path < 0) {
      cv_.wait(lock);
      continue;
    }
    if (due > std::chrono::steady_clock::now()) {
      cv_.wait_until(lock, due);
      continue;
    }
    const std::vector<int> peers(wanted_[path].peers.begin(), wanted_[path].peers.end());
    const Path target = paths_[static_cast<std::size_t>(path)];
    const std::uint64_t epoch = epoch_;
    const int rank = rank_;
    const std::vector<std::string> zones = zones_;
    const std::shared_ptr<transport::ReconnectInbox> inbox = inbox_;
    busy_ = true;
    attempt_endpoint_ = target.endpoint;
    attempt_epoch_ = epoch;
    lock.unlock();
    auto got = target.endpoint->reconnect(epoch, rank, target.addresses, peers,
                                          Deadline::after(params_.attempt), zones);
    lock.lock();
    busy_ = false;
    attempt_endpoint_ = nullptr;
    cv_.notify_all();
    std::vector<std::shared_ptr<HeldSocket>> held;
    if (got) {
      for (transport::PeerSocket& s : *got) held.push_back(std::make_shared<HeldSocket>(std::move(s)));
    }
    auto it = wanted_.find(path);
    if (epoch != epoch_ || it == wanted_.end()) continue;  // the group is gone: closed
    Wanted& w = it->second;
    const std::string where = "epoch " + std::to_string(epoch) + ": path " + std::to_string(path);
    if (!got) {
      const StatusCode code = got.status().code();
      if (code == StatusCode::kStaleEpoch || code == StatusCode::kAborted) {
        wanted_.clear();  // a newer view: its own links
        continue;
      }
      const bool first = w.pause == Duration::zero();
      w.pause = first ? params_.first_pause : std::min(2 * w.pause, params_.max_pause);
      w.not_before = std::chrono::steady_clock::now() + w.pause;
      log_.log(first ? LogLevel::kInfo : LogLevel::kDebug,
               where + ": re-dialling " + ranks_text(peers) +
                   " failed, trying again: " + got.status().to_string());
      continue;
    }
    w.pause = Duration::zero();
    w.not_before = TimePoint{};
    for (const std::shared_ptr<HeldSocket>& h : held) {
      const int peer = h->socket.rank;
      w.peers.erase(peer);
      ++reconnects_;
      log_.info(where + ": a new connection to rank " + std::to_string(peer) + " at " +
                h->socket.address + "; handed to the link");
      inbox->post({path, peer,
                   [h](algorithms::PollableLink& link) {
                     return replace_peer_socket(link.carrier(), h->release());
                   },
                   Status()});
    }
  }
}

}  // namespace tributary::agent
