// The federated-rounds check used by the multi-process integration test
// (tests/integration/integration_federated_test.cc): `tributary agent --workload
// federated-check`. Each round: a step boundary, then "compute" (a sleep; the slow rank
// sleeps much longer in odd rounds, so it misses their deadline and is on time in even
// ones), then Worker::federated_round with LatePolicy::kDrop of inputs that are a
// deterministic function of (member id, round) and a weight of (member id % 4 + 1). A
// contributor checks its result bit for bit against the reference computed from exactly
// the contributors and weights the outcome names. One line per round:
//   federated round R epoch E member M contributed|late contributors id:w,... total W sha256 H ok|WRONG
// (a late member prints "sha256 -"). Not the digits training workload (cli/federated_workload.cc).
#pragma once

#include <cstdio>

#include "agent/worker.h"

namespace tributary::cli {

struct FederatedCheckSpec {
  int rounds = 8;
  std::size_t count = 10000;  // float32 elements per round
  long deadline_ms = 1000;
  long step_ms = 20;     // compute time per round
  long slow_ms = 3000;   // the slow rank's compute time in odd rounds
  int min_participants = 1;
};

// kMismatch if a contributor's result differs from its reference; a round's failure as is.
Status run_federated_check(agent::Worker& worker, const FederatedCheckSpec& spec, std::FILE* out);

}  // namespace tributary::cli
