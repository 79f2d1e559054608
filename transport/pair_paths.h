// Which path one pair of a FailoverLink is on, and the rules that move it: a failure
// (an error or a stall), the peer's resume, an answered probe, a reconnection. Pure: events
// in, decisions out, the time passed in; no links, no buffers, no clock of its own. The
// failover link (failover_pair.cc) carries the decisions out (cancels, sends, logs) and
// calls enter() once it has left the old path. Each rule is tested alone in
// tests/transport/pair_paths_test.cc.
//
// Generations: every move of the pair starts one (this side's move: generation + 1;
// following the peer: the peer's). Resumes and probes carry it, so a message of an
// earlier stint on a path is told apart from the current one's.
#pragma once

#include <cstdint>
#include <vector>

#include "core/clock.h"

namespace tributary::transport {

// A path as one pair sees it. A stalled path was left because nothing moved on it; it is
// probed, and the pair moves back up to it when a probe is answered. A down path failed
// with an error (a reset, a close, a corrupt frame): its connection is gone until a new one
// is put in. An absent path does not carry this pair at all (FailoverParams::path_peers:
// shared memory to a member on another host): nothing is ever posted on it for the pair.
enum class PathState { kUp, kStalled, kDown, kAbsent };
// Whether the pair may have operations on the path (listeners, probes, resumes).
inline bool connected(PathState s) { return s == PathState::kUp || s == PathState::kStalled; }

class PairPaths {
 public:
  // `carried[k]`: path k carries this pair. The pair starts on the first that does; at
  // least one must.
  PairPaths(const std::vector<bool>& carried, TimePoint now);
  PairPaths() = default;  // no paths yet; assigned before use

  int current() const { return current_; }
  std::uint32_t generation() const { return generation_; }
  PathState state(int path) const { return state_[static_cast<std::size_t>(path)]; }
  int path_count() const { return static_cast<int>(state_.size()); }
  // The paths that carry the pair (every state but kAbsent).
  int carrying() const;

  // ---- a path failed ----
  struct Failure {
    enum class Verdict {
      kIgnored,  // the path was not connected (already down, or absent): nothing to do
      kStandby,  // a path the pair is not on: it is only marked
      kMove,     // the pair's path: move to `to` in `generation`
      kLost,     // the pair's path, and no other is left
    };
    Verdict verdict = Verdict::kIgnored;
    // The failed path's connection is gone (an error, or any failure of a path the pair is
    // not on): its listeners go, and a new connection is asked for. Otherwise (a stall of
    // the pair's path) it stays connected, for the peer's probes and resumes.
    bool down = false;
    int to = -1;
    std::uint32_t generation = 0;
  };
  // Path `path` failed; `stall`: nothing moved on it for the stall deadline (only the
  // pair's own path stalls). The failed path's state changes at once; a move is the first
  // path that is up, failing that a stalled one (the pair's last chance: the caller's
  // deadline decides), in list order.
  Failure on_failure(int path, bool stall);
  // Whether the pair's path may be left for a stall: a later path is up. On the pair's
  // last path a silence is for the caller's deadline to judge.
  bool may_leave_for_stall() const;

  // ---- the peer's resume on `path`, of `generation` ----
  enum class Resume {
    kStale,   // from before a later move, or the peer follows this side: ignore it
    kAccept,  // the pair is where the peer resumed: resend from its acknowledgement
    kFollow,  // move to (path, generation) as the peer did, then accept
  };
  // Both sides moved at once in the same generation: the one further down the list wins (it
  // knows of more failures), the other follows. A peer that resumed below this side's path
  // left the paths above it: those that are up here become stalled (suspect; probed).
  Resume on_resume(int path, std::uint32_t generation);

  // ---- probes of stalled paths above the pair's ----
  // Whether a probe round is due (once per probe interval).
  bool probe_due(TimePoint now, Duration interval) const { return now - probed_at_ >= interval; }
  // Whether path `path` is one to probe: stalled and above the pair's path.
  bool wants_probe(int path) const;
  void probed(TimePoint now) { probed_at_ = now; }
  // An answer to a probe of `generation` on `path`: true when the pair moves back up to it
  // (in generation + 1); the path is up again then.
  bool on_probe_answer(int path, std::uint32_t generation);

  // Whether no path is left connected (every one the pair had failed with an error): the
  // pair either fails or waits for a new connection (FailoverParams::stranded_grace).
  bool stranded() const;

  // ---- a new connection of a down path was put in ----
  // Returns false (nothing changes) unless the path is down. Below the pair's path it
  // comes back stalled: it has to prove itself (a probe answered, which takes the peer's
  // new connection too) before the pair moves back up to it, and it is probed at once.
  // For a stranded pair it comes back up, wherever it is: the pair's only way on, which
  // the link takes at once (a move, which the peer's resume confirms).
  bool on_reconnected(int path, TimePoint now, Duration probe_interval);

  // ---- the move itself ----
  // Enters `path` in `generation`, once the link has left the old path (which reads the
  // old one's state). The probe clock starts again.
  void enter(int path, std::uint32_t generation, TimePoint now);

 private:
  std::vector<PathState> state_;
  int current_ = -1;
  std::uint32_t generation_ = 0;
  TimePoint probed_at_{};
};

}  // namespace tributary::transport
