// Waiting on link operations the way collectives.h promises.
//
// - The first error is returned unchanged, and the link is aborted before returning:
//   after a failed collective, no operation still posted on a caller's buffer or on a
//   collective's scratch buffer can touch it (link.h: "after abort() returns the link
//   touches no caller buffer again"). The link is dead anyway (errors are sticky).
// - Every wait uses the collective's deadline.
#pragma once

#include <cstddef>
#include <deque>

#include "algorithms/link.h"

namespace tributary::algorithms {

// Waits for `handle`; on error aborts the link and returns the error.
Status wait_or_abort(Link& link, Link::Handle handle, Deadline deadline);

// Sends that are kept in flight while the collective goes on. At most `limit` are
// outstanding: adding one more first waits for the oldest, which bounds what the link
// has to queue. Buffers of sends still in flight must not be written.
class SendWindow {
 public:
  SendWindow(Link& link, Deadline deadline, std::size_t limit = 16)
      : link_(link), deadline_(deadline), limit_(limit) {}
  Status add(Link::Handle handle);
  // Waits for every outstanding send.
  Status drain();
  bool empty() const { return pending_.empty(); }

 private:
  Link& link_;
  Deadline deadline_;
  std::size_t limit_;
  std::deque<Link::Handle> pending_;
};

}  // namespace tributary::algorithms
