#include "transport/pair_paths.h"

#include <algorithm>

#include "core/check.h"

namespace tributary::transport {

PairPaths::PairPaths(const std::vector<bool>& carried, TimePoint now) : probed_at_(now) {
  state_.reserve(carried.size());
  for (bool c : carried) state_.push_back(c ? PathState::kUp : PathState::kAbsent);
  const auto first = std::find(carried.begin(), carried.end(), true);
  TRIB_CHECK(first != carried.end()) << "no path carries the pair";
  current_ = static_cast<int>(first - carried.begin());
}

int PairPaths::carrying() const {
  return static_cast<int>(std::count_if(state_.begin(), state_.end(),
                                        [](PathState s) { return s != PathState::kAbsent; }));
}

PairPaths::Failure PairPaths::on_failure(int path, bool stall) {
  Failure f;
  PathState& s = state_[static_cast<std::size_t>(path)];
  if (!connected(s)) return f;
  f.down = path != current_ || !stall;
  s = f.down ? PathState::kDown : PathState::kStalled;
  if (path != current_) {
    f.verdict = Failure::Verdict::kStandby;
    return f;
  }
  for (PathState wanted : {PathState::kUp, PathState::kStalled}) {
    for (int k = 0; k < path_count(); ++k) {
      if (k != path && state(k) == wanted) {
        f.verdict = Failure::Verdict::kMove;
        f.to = k;
        f.generation = generation_ + 1;
        return f;
      }
    }
  }
  f.verdict = Failure::Verdict::kLost;
  return f;
}

bool PairPaths::may_leave_for_stall() const {
  return std::any_of(state_.begin() + current_ + 1, state_.end(),
                     [](PathState s) { return s == PathState::kUp; });
}

PairPaths::Resume PairPaths::on_resume(int path, std::uint32_t generation) {
  if (generation < generation_) return Resume::kStale;
  if (generation == generation_ && path < current_) return Resume::kStale;
  if (generation == generation_ && path == current_) return Resume::kAccept;
  if (path > current_) {
    for (int j = 0; j < path; ++j) {
      PathState& s = state_[static_cast<std::size_t>(j)];
      if (s == PathState::kUp) s = PathState::kStalled;
    }
  }
  return Resume::kFollow;
}

bool PairPaths::wants_probe(int path) const {
  return path < current_ && state(path) == PathState::kStalled;
}

bool PairPaths::on_probe_answer(int path, std::uint32_t generation) {
  if (generation != generation_ || !wants_probe(path)) return false;
  state_[static_cast<std::size_t>(path)] = PathState::kUp;
  return true;
}

bool PairPaths::stranded() const { return std::none_of(state_.begin(), state_.end(), connected); }

bool PairPaths::on_reconnected(int path, TimePoint now, Duration probe_interval) {
  const bool only_way_on = stranded();
  PathState& s = state_[static_cast<std::size_t>(path)];
  if (s != PathState::kDown) return false;
  s = path < current_ && !only_way_on ? PathState::kStalled : PathState::kUp;
  probed_at_ = now - probe_interval;
  return true;
}

void PairPaths::enter(int path, std::uint32_t generation, TimePoint now) {
  current_ = path;
  generation_ = generation;
  state_[static_cast<std::size_t>(path)] = PathState::kUp;
  probed_at_ = now;
}

}  // namespace tributary::transport
