#include "algorithms/in_flight.h"

namespace tributary::algorithms {

Status wait_or_abort(Link& link, Link::Handle handle, Deadline deadline) {
  Status st = link.wait(handle, deadline);
  if (!st.is_ok()) link.abort(st);
  return st;
}

Status SendWindow::add(Link::Handle handle) {
  pending_.push_back(handle);
  while (pending_.size() > limit_) {
    const Link::Handle oldest = pending_.front();
    pending_.pop_front();
    TRIB_RETURN_IF_ERROR(wait_or_abort(link_, oldest, deadline_));
  }
  return Status::ok();
}

Status SendWindow::drain() {
  while (!pending_.empty()) {
    const Link::Handle oldest = pending_.front();
    pending_.pop_front();
    TRIB_RETURN_IF_ERROR(wait_or_abort(link_, oldest, deadline_));
  }
  return Status::ok();
}

}  // namespace tributary::algorithms
