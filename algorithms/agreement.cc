#include "algorithms/agreement.h"

#include <vector>

#include "algorithms/in_flight.h"

namespace tributary::algorithms {

Status agreement_round(Link& link, const CollectiveOptions& options) {
  const int n = link.size();
  if (n > kDirectAgreementMax) return barrier(link, options);
  // The check is "AGRE": wire protocol, equal on every agent.
  const Tag tag{options.seq, 0, 0x41475245u};
  std::vector<Link::Handle> handles;
  handles.reserve(2 * static_cast<std::size_t>(n));
  for (int p = 0; p < n; ++p) {
    if (p != link.rank()) handles.push_back(link.recv(p, tag, {}));
  }
  for (int p = 0; p < n; ++p) {
    if (p != link.rank()) handles.push_back(link.send(p, tag, {}));
  }
  for (Link::Handle h : handles) TRIB_RETURN_IF_ERROR(wait_or_abort(link, h, options.deadline));
  return Status::ok();
}

}  // namespace tributary::algorithms
