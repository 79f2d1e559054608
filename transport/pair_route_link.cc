#include "transport/pair_route_link.h"

#include <sched.h>

#include <algorithm>
#include <unordered_map>

#include "core/check.h"
#include "transport/path_peers.h"

namespace tributary::transport {
namespace {

using Handle = algorithms::Link::Handle;

class PairRouteLink final : public algorithms::Link {
 public:
  PairRouteLink(PairRouteParams params,
                std::vector<std::unique_ptr<algorithms::PollableLink>> paths)
      : params_(std::move(params)), paths_(std::move(paths)) {
    rank_ = paths_.front()->rank();
    size_ = paths_.front()->size();
    for (const auto& path : paths_) {
      TRIB_CHECK(path->rank() == rank_ && path->size() == size_) << "paths of different groups";
    }
    route_.assign(static_cast<std::size_t>(size_), -1);
    used_.assign(paths_.size(), false);
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      const int k = first_path(params_.path_peers, paths_.size(), r);
      TRIB_CHECK(k >= 0) << "no path carries rank " << r;
      route_[static_cast<std::size_t>(r)] = k;
      used_[static_cast<std::size_t>(k)] = true;
    }
    combines_ = true;
    for (std::size_t k = 0; k < paths_.size(); ++k) {
      if (used_[k] && !paths_[k]->combines()) combines_ = false;
    }
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  Handle send(int peer, algorithms::Tag tag, std::span<const std::byte> data) override {
    const int k = path_of(peer);
    return track(k, paths_[static_cast<std::size_t>(k)]->send(peer, tag, data));
  }
  Handle recv(int peer, algorithms::Tag tag, std::span<std::byte> data) override {
    const int k = path_of(peer);
    return track(k, paths_[static_cast<std::size_t>(k)]->recv(peer, tag, data));
  }
  // Only where every path in use combines: an algorithm then combines on any pair.
  bool combines() const override { return combines_; }
  Handle recv_combine(int peer, algorithms::Tag tag, std::span<std::byte> data,
                      const algorithms::Combine& c) override {
    TRIB_CHECK(combines_) << "recv_combine() on a link whose paths do not all combine";
    const int k = path_of(peer);
    return track(k, paths_[static_cast<std::size_t>(k)]->recv_combine(peer, tag, data, c));
  }

  Status wait(Handle handle, Deadline deadline) override {
    const auto found = ops_.find(handle);
    TRIB_CHECK(found != ops_.end()) << "unknown or already waited handle " << handle;
    const auto [k, inner] = found->second;
    ops_.erase(found);
    algorithms::PollableLink& path = *paths_[static_cast<std::size_t>(k)];
    const Duration window = path.polls_best()       ? params_.memory_busy_poll
                            : params_.core_per_rank ? params_.core_per_rank_busy_poll
                                                    : params_.busy_poll;
    auto spin_until = std::chrono::steady_clock::now() + window;
    for (;;) {
      // Every path in use, without blocking: the others' operations move meanwhile.
      bool moved = false;
      for (std::size_t j = 0; j < paths_.size(); ++j) {
        if (used_[j] && paths_[j]->look()) moved = true;
      }
      if (path.test(inner)) break;
      const auto now = std::chrono::steady_clock::now();
      if (deadline.passed(now)) break;  // the path's own wait() times it out, as alone
      if (moved) {
        spin_until = now + window;
      } else if (now < spin_until) {
        if (!params_.core_per_rank) sched_yield();
      } else {
        path.drive(Deadline{std::min(deadline.at, now + params_.slice)});
      }
    }
    return path.wait(inner, deadline);
  }

  void abort(const Status& reason) override {
    for (auto& path : paths_) path->abort(reason);
  }

 private:
  int path_of(int peer) const {
    TRIB_CHECK(peer >= 0 && peer < size_ && peer != rank_) << "bad peer " << peer;
    return route_[static_cast<std::size_t>(peer)];
  }
  Handle track(int path, Handle inner) {
    const Handle h = next_handle_++;
    ops_.emplace(h, std::make_pair(path, inner));
    return h;
  }

  PairRouteParams params_;
  std::vector<std::unique_ptr<algorithms::PollableLink>> paths_;
  int rank_ = 0;
  int size_ = 1;
  std::vector<int> route_;  // by rank: the path that carries the pair
  std::vector<bool> used_;  // by path: some pair is on it
  bool combines_ = false;
  Handle next_handle_ = 1;
  std::unordered_map<Handle, std::pair<int, Handle>> ops_;  // ours -> (path, the path's)
};

}  // namespace

Result<std::unique_ptr<algorithms::Link>> make_pair_route_link(
    PairRouteParams params, std::vector<std::unique_ptr<algorithms::PollableLink>> paths) {
  if (paths.size() < 2) {
    return error(StatusCode::kInvalidArgument, "a link that routes pairs needs two paths");
  }
  TRIB_RETURN_IF_ERROR(check_path_peers(params.path_peers, paths.size(), paths.front()->rank(),
                                        paths.front()->size()));
  return std::unique_ptr<algorithms::Link>(
      std::make_unique<PairRouteLink>(std::move(params), std::move(paths)));
}

}  // namespace tributary::transport
