// The view this member is in and what was built for it. A move to a view (the epoch
// machine's adopt_view ... view_started, carried out by worker_driver.cc) makes a new one
// and fills it in the move's order: the view, the rank and the zones when it adopts the
// view, the link when it is connected, the fitted cost model and the ring order when the
// links are measured. Once the view has started nothing of it changes but the link, which
// a failure drops. Adopting the next view replaces the whole object, so nothing of one
// view (a ring order, a zone index, a fitted model) can outlive it into the next by
// accident; what does carry across views (the pair measurement, the compression
// residuals, the refit in use) lives outside, in Worker::Impl. Internal to agent/.
#pragma once

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "algorithms/cost_model.h"
#include "algorithms/link.h"
#include "algorithms/zone_layout.h"
#include "membership/view.h"

namespace tributary::agent {

struct ViewContext {
  // Before the first view: no members, and the layout of one member alone (a layout has
  // at least one rank).
  ViewContext() : layout({}, 1) {}
  // What adopting `view` as member `rank` (-1: not in it) knows before any link exists.
  ViewContext(membership::View v, int r)
      : view(std::move(v)),
        rank(r),
        zone_of_rank(zone_indices(view)),
        layout(zone_of_rank, std::max(1, static_cast<int>(view.size()))) {}

  membership::Epoch epoch() const { return view.epoch; }
  int size() const { return static_cast<int>(view.size()); }

  // Adopted with the view.
  const membership::View view;
  const int rank = -1;
  const std::vector<int> zone_of_rank;  // one index per rank, numbered by first appearance
  const algorithms::ZoneLayout layout;

  // The view's links, from the connect on; guarded by Worker::Impl::link_mu (on_control_news()
  // aborts them from its thread when a newer view supersedes this one). Dropped (reset) by
  // a failure; never replaced within the view.
  std::unique_ptr<algorithms::Link> link;
  // From the measurement of the links (fit_links()): the cost model fitted to the
  // slowest hop of the ring, and the order the ring runs its ranks in (empty: the
  // identity, rank r sends to r + 1).
  algorithms::CostModel fitted;
  std::vector<int> ring_order;

 private:
  static std::vector<int> zone_indices(const membership::View& view) {
    std::map<std::string, int> index;
    std::vector<int> zones(view.size(), 0);
    for (const auto& m : view.members) {
      zones.at(m.rank) = index.emplace(m.zone, static_cast<int>(index.size())).first->second;
    }
    return zones;
  }
};

}  // namespace tributary::agent
