// SIGTERM (a spot instance's notice, the demo's drain, a scheduler stopping a job) drains
// the elastic loop that is running: it leaves at its next step boundary and nobody sees a
// failure. A guard: installed for the loop's run, the previous handler restored after.
// Used by the CLI's workloads and by the Python binding's elastic loop (a C handler: Python's
// own run only between bytecodes, not while a join or a step boundary blocks).
#pragma once

#include <signal.h>

#include "agent/elastic_loop.h"

namespace tributary::agent {

class DrainOnSigterm {
 public:
  explicit DrainOnSigterm(ElasticLoop& loop);
  ~DrainOnSigterm();
  DrainOnSigterm(const DrainOnSigterm&) = delete;
  DrainOnSigterm& operator=(const DrainOnSigterm&) = delete;

 private:
  struct sigaction previous_ {};
};

}  // namespace tributary::agent
