// SIGTERM (a spot instance's notice, the demo's drain, a scheduler stopping a job) drains
// the elastic loop that is running: it leaves at its next step boundary and nobody sees a
// failure. A guard: installed for the loop's run, the previous handler restored after.
#pragma once

#include <signal.h>

#include "agent/elastic_loop.h"

namespace tributary::cli {

class DrainOnSigterm {
 public:
  explicit DrainOnSigterm(agent::ElasticLoop& loop);
  ~DrainOnSigterm();
  DrainOnSigterm(const DrainOnSigterm&) = delete;
  DrainOnSigterm& operator=(const DrainOnSigterm&) = delete;

 private:
  struct sigaction previous_ {};
};

}  // namespace tributary::cli
