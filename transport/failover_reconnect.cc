// The new connections of a FailoverLink's failed paths (failover_link.h,
// FailoverParams::on_down): the inbox they arrive in from whoever re-dialled them, and
// putting them in on the link's own thread; and a pair whose every path failed, waiting
// for one (FailoverParams::stranded_grace).
#include <chrono>
#include <string>
#include <utility>

#include "transport/failover_link_impl.h"

namespace tributary::transport {

void ReconnectInbox::post(Reconnection r) {
  std::lock_guard lock(mu_);
  items_.push_back(std::move(r));
  pending_.store(true, std::memory_order_release);
}

std::vector<Reconnection> ReconnectInbox::take() {
  std::lock_guard lock(mu_);
  pending_.store(false, std::memory_order_relaxed);
  return std::exchange(items_, {});
}

void FailoverLink::take_reconnections() {
  for (Reconnection& r : params_.reconnects->take()) {
    if (r.peer < 0 || r.peer >= size_ || r.peer == rank_ || abort_.raised()) continue;
    Pair& p = pairs_[static_cast<std::size_t>(r.peer)];
    if (!r.gone.is_ok()) {
      // The peer is gone: a pair waiting for a new connection to it waits no longer.
      if (p.lost.is_ok() && p.stranded_until) lose_pair(p, r.gone);
      continue;
    }
    if (r.path < 0 || r.path >= static_cast<int>(paths_.size())) continue;
    if (!p.lost.is_ok() || p.route.state(r.path) != PathState::kDown || !r.install) continue;
    const std::string& name = params_.path_names[static_cast<std::size_t>(r.path)];
    if (Status st = r.install(*paths_[static_cast<std::size_t>(r.path)]); !st.is_ok()) {
      params_.log.warn("epoch " + std::to_string(params_.epoch) + ": " + name_of(rank_) + " to " +
                       pair_name(p) + ": the new connection of path " + name +
                       " could not be put in (the path stays down): " + st.to_string());
      continue;
    }
    // Below the pair's path: it has to prove itself (a probe answered, which takes the
    // peer's new connection too) before the pair moves back up to it. A stranded pair's
    // only way on: it moves there at once, and its resume meets the peer's.
    const bool stranded = p.stranded_until.has_value();
    p.route.on_reconnected(r.path, now_, params_.probe_interval);
    post_resume_listener(p, r.path);
    post_probe_listeners(p, r.path);
    params_.log.info("epoch " + std::to_string(params_.epoch) + ": " + name_of(rank_) + " to " +
                     pair_name(p) + ": path " + name + " reconnected" +
                     (stranded                     ? "; the pair goes on there"
                      : r.path < p.route.current() ? "; probing it"
                                                   : ""));
    if (stranded) {
      p.stranded_until.reset();
      move_to(p, r.path, p.route.generation() + 1, "a new connection after every path failed",
              false, false, /*recovery=*/true);
    }
  }
}

bool FailoverLink::may_strand() const {
  return params_.stranded_grace > Duration::zero() && params_.on_down && params_.reconnects &&
         !abort_.raised();
}

void FailoverLink::strand(Pair& p, const Status& why) {
  p.stranded_until = now_ + params_.stranded_grace;
  p.stranded_why = why;
  p.awaiting_resume = true;  // sends wait, as after a move, for the resume on the new path
  if (p.resume_send_h != kNoHandle) cancel(p.resume_send_path, p.resume_send_h);
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(params_.stranded_grace).count();
  params_.log.warn("epoch " + std::to_string(params_.epoch) + ": " + name_of(rank_) + " to " +
                   pair_name(p) + ": every path failed (the last: " + why.to_string() +
                   "); waiting up to " + std::to_string(ms) + " ms for a new connection");
  if (params_.on_change) {
    PathChange c{p.peer, p.route.current(), -1, why.to_string(), false, false, false};
    c.stranded = true;
    params_.on_change(c);
  }
  if (params_.on_stranded) params_.on_stranded(p.peer);
}

void FailoverLink::expire_stranded(Pair& p) {
  if (!p.stranded_until || now_ < *p.stranded_until) return;
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(params_.stranded_grace).count();
  lose_pair(p,
            error(p.stranded_why.code(), p.stranded_why.message() + "; no new connection within " +
                                             std::to_string(ms) + " ms"));
}

}  // namespace tributary::transport
