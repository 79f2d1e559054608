// What a launcher needs around a Worker when nobody started a cluster for it: a coordinator
// of its own inside the process (the torch backend under torchrun: one rank of each group
// hosts it), and a look at an existing coordinator before joining it, so that a world that
// cannot form is named at once instead of after the join timeout.
//
// Part of the Python runtime library (libtributary_runtime.so), so that the extensions get
// the coordinator without a static copy of the control plane of their own (its protobuf
// descriptors may be registered once per process).
#pragma once

#include <memory>
#include <string>

#include "core/clock.h"
#include "core/status.h"

namespace tributary::coordinator {
class Coordinator;
}

namespace tributary::python {

// A coordinator serving on a thread of this process until destroyed. Its world forms once
// `world_size` members joined; no metrics endpoint, no journal (it lives and dies with its
// host process, as the group it serves does).
class EmbeddedCoordinator {
 public:
  // `bind`: "tcp://HOST:0" (an ephemeral port); kUnavailable when it cannot bind.
  // `serve_jobs`: a world that empties forms again from `world_size` joiners (--serve-jobs).
  static Result<std::unique_ptr<EmbeddedCoordinator>> start(const std::string& bind,
                                                            const std::string& secret,
                                                            int world_size,
                                                            bool serve_jobs = false);
  ~EmbeddedCoordinator();
  EmbeddedCoordinator(const EmbeddedCoordinator&) = delete;
  EmbeddedCoordinator& operator=(const EmbeddedCoordinator&) = delete;

  // "tcp://HOST:PORT", what members dial.
  std::string endpoint() const;
  // Members it knows now (in a view, joining, or waiting for a step boundary).
  std::size_t member_count() const;
  // Waits (polling) until no member is left (they left, or were removed as silent), or
  // `deadline`: the host's own group is gone, the others may still be leaving through it.
  void wait_until_empty(Deadline deadline) const;

 private:
  explicit EmbeddedCoordinator(std::unique_ptr<coordinator::Coordinator> c);
  std::unique_ptr<coordinator::Coordinator> coordinator_;
};

// Asks the coordinator at `endpoint` (over the authenticated status request, without
// joining) whether a world of `world_size` members can form there now. kOk when it is
// forming a world of that size (first, or again with --serve-jobs) or resuming after a
// restart; kMismatch naming both sizes when it forms another size; kUnavailable, saying why
// and what to do, when its world formed already (emptied without --serve-jobs, or another
// job is running on it); the fetch's own error (kTimedOut, kAuthFailed, ...) when it does
// not answer as it should.
Status check_world_forms(const std::string& endpoint, const std::string& secret, int world_size,
                         Duration timeout);

}  // namespace tributary::python
