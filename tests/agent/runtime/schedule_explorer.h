// A randomized schedule explorer for the epoch protocol: N epoch machines
// (agent/runtime/epoch_machine.h), the real coordinator decisions (membership::Membership)
// and a simulated network and data plane, driven through one random interleaving per seed
// of deliveries, kills (kill -9), freezes (SIGSTOP/SIGCONT), link failures, coordinator
// restarts, joins and drains (admitted and let go at step boundaries), with simulated time. Each
// schedule checks the protocol's invariants:
//  - survivors agree: every two survivors that returned a seq returned the same bits;
//  - nothing committed is lost: a result returned after the commit round (or committed by
//    a Go for a member that held it) is what every survivor returned for that seq, whoever
//    returned it; one returned without the round (speculatively, or received in the repair
//    step) may be dropped only when every member that returned it is gone;
//  - no returned result is re-run: each member returns consecutive seqs, each once;
//  - every result is real: its bits are those of a data phase that every member of one
//    epoch completed, with those members' inputs for that seq;
//  - one epoch, one seq: the members of an epoch never run different seqs at once;
//  - no hang: every survivor finishes its calls (no wait without a deadline, no call that
//    fails while the member survives).
// Used by tests/agent/runtime/epoch_explorer_test.cc (a fixed seed set in CI) and by the
// epoch_explorer command (millions of seeds offline).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tributary::agent::runtime {

struct ExplorerOptions {
  int min_members = 2;
  int max_members = 4;
  int calls = 8;       // the programs run seqs 1..calls; every third is a step boundary
  int max_faults = 3;  // injected per schedule (0..max_faults)
  bool kills = true;
  bool freezes = true;
  bool link_failures = true;
  bool coordinator_restarts = true;
  bool joins = true;   // a new member joins; admitted at the next step boundary
  bool drains = true;  // a member drains: it leaves at the next step boundary
  bool trace = false;  // keep a line per event (for a failing seed)
};

struct ScheduleResult {
  std::uint64_t seed = 0;
  bool ok = true;
  std::vector<std::string> violations;
  std::vector<std::string> trace;
  // What happened, for the summary.
  int members = 0;
  int kills = 0, freezes = 0, link_failures = 0, restarts = 0, joins = 0, drains = 0;
  int boundaries = 0;  // step boundaries that moved the members to a new view
  int views = 0;
  int returns = 0, repaired = 0, speculative = 0, reruns = 0;
  std::uint64_t events = 0;
};

ScheduleResult explore(std::uint64_t seed, const ExplorerOptions& options);

// Sums over many schedules (the CI test's and the epoch_explorer command's), and their line.
struct ExplorerTotals {
  std::uint64_t schedules = 0, violated = 0, events = 0;
  std::uint64_t kills = 0, freezes = 0, link_failures = 0, restarts = 0, joins = 0, drains = 0;
  std::uint64_t views = 0, boundaries = 0, speculative = 0, reruns = 0, repaired = 0;

  void add(const ScheduleResult& r);
  std::uint64_t faults() const {
    return kills + freezes + link_failures + restarts + joins + drains;
  }
  // "V violated; E events; faults: K kills, ...; X views, ..., R repairs"
  std::string summary() const;
};

}  // namespace tributary::agent::runtime
