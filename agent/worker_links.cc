// The cost model of a view's links (docs/algorithms.md): measured when the links come up
// (fit_links: the probe, the ring order over several host labels) and refitted to the
// all-reduces as they run, agreed at step boundaries (vote_refit / adopt_refit, boundary_vote.h);
// and what the coordinator is told of their paths (report_links, `tributary status`).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <optional>
#include <set>
#include <string>

#include "agent/worker_impl.h"
#include "algorithms/collectives.h"
#include "algorithms/link_probe.h"
#include "algorithms/ring_order.h"
#include "algorithms/seq_space.h"
#include "algorithms/sub_link.h"

namespace tributary::agent {

Status Worker::Impl::fit_links() {
  // Every member connects a view over the same transport (the view decides it), so every
  // member starts from the same constants.
  const bool shared_memory = data_plane != nullptr && data_plane->group_on_shared_memory();
  const algorithms::CostModel base =
      shared_memory ? configured_cost_model.on_shared_memory() : configured_cost_model;
  const char* base_name = shared_memory ? "shared-memory default" : "default";
  ViewContext& here = *ctx;
  here.fitted = base;
  // With zones the ring's slowest link is the inter-zone one, which --wan-mbps describes;
  // fitting the zones' own links to it would price every hop as a WAN hop.
  if (!config.measure_links || here.size() <= 1 || here.layout.zones() > 1) return Status::ok();
  TRIB_ASSIGN_OR_RETURN(here.ring_order, order_ring());
  // The ring's critical path is its slowest hop in the order it runs in.
  std::optional<algorithms::SubLink> ordered;
  if (!here.ring_order.empty()) ordered.emplace(*here.link, here.ring_order);
  algorithms::Link& ring = ordered ? static_cast<algorithms::Link&>(*ordered) : *here.link;
  algorithms::LinkProbeParams probe;
  algorithms::CollectiveOptions options;
  options.seq = algorithms::seq_in(algorithms::SeqSpace::kLinkProbe, 2 * here.epoch());
  options.deadline = collective_deadline(probe.bulk_bytes).deadline;
  auto measured = algorithms::measure_ring_links(ring, options, probe);
  if (!measured) return measured.status();
  here.fitted = base.fitted_to(measured->alpha, measured->beta);
  const char* alpha_from = here.fitted.alpha() != base.alpha() ? "measured" : base_name;
  const char* beta_from = here.fitted.beta() != base.beta() ? "measured" : base_name;
  log.logf(LogLevel::kInfo,
           "slowest link of view %llu: %.1f us per message, %.1f MB/s; the cost model uses "
           "%.1f us (%s), %.1f MB/s (%s)",
           static_cast<unsigned long long>(here.epoch()), measured->alpha * 1e6,
           measured->beta > 0 ? 1e-6 / measured->beta : 0.0, here.fitted.alpha() * 1e6, alpha_from,
           1e-6 / here.fitted.beta(), beta_from);
  return Status::ok();
}

bool Worker::Impl::refit_enabled() const {
  // With zones the model prices flat hops as inter-zone ones (fit_links() above).
  return config.measure_links && ctx->size() > 1 && ctx->layout.zones() <= 1;
}

void Worker::Impl::vote_refit(BoundaryVote* vote) const {
  // alpha in ns, beta in fs per byte (CostRefit's floors are 100 of each).
  if (!refit_enabled()) return;
  const auto fit = refit.fit(ctx->fitted);
  if (!fit) return;
  vote->refit_alpha_ns = std::max<std::int64_t>(1, std::llround(fit->alpha * 1e9));
  vote->refit_beta_fs = std::max<std::int64_t>(1, std::llround(fit->beta * 1e15));
}

void Worker::Impl::adopt_refit(const BoundaryVote& agreed) {
  if (!agreed.has_refit()) return;  // some member has no fit
  const double alpha = static_cast<double>(agreed.refit_alpha_ns) * 1e-9;
  const double beta = static_cast<double>(agreed.refit_beta_fs) * 1e-15;
  // Within kRefitChange of the model in use: keep it, so that noise does not flip choices.
  constexpr double kRefitChange = 0.25;
  auto moved = [&](double now, double before) {
    return std::abs(now - before) > kRefitChange * before;
  };
  if (!moved(alpha, cost_model.alpha()) && !moved(beta, cost_model.beta())) return;
  const algorithms::CostModel before = cost_model;
  set_cost_model(ctx->fitted.with_link(alpha, beta));
  const int n = ctx->size();
  std::string changes;
  for (std::size_t bytes = 1024; bytes <= (std::size_t{1} << 30); bytes *= 4) {
    const auto was = before.choose(n, bytes);
    const auto now = cost_model.choose(n, bytes);
    if (was == now) continue;
    changes += (changes.empty() ? "" : ", ") + std::to_string(bytes) + " B " +
               std::string(to_string(now)) + " (was " + std::string(to_string(was)) + ")";
  }
  log.logf(changes.empty() ? LogLevel::kDebug : LogLevel::kInfo,
           "cost model refitted to the all-reduces of view %llu: %.1f us per message, %.1f MB/s "
           "(was %.1f us, %.1f MB/s)%s%s",
           static_cast<unsigned long long>(ctx->epoch()), alpha * 1e6, 1e-6 / beta,
           before.alpha() * 1e6, 1e-6 / before.beta(), changes.empty() ? "" : "; auto now picks ",
           changes.c_str());
}

Result<std::vector<int>> Worker::Impl::order_ring() {
  const membership::View& view = ctx->view;
  const int n = static_cast<int>(view.size());
  // The coordinator sorts ranks by host label (membership.cc), so members that share a
  // label are contiguous already: what the labels hide (distinct labels on one machine, as
  // containers have) only a measurement shows. So every view over more than one label is
  // measured; one label is one machine, where every order is alike, and a ring of three
  // is the rank order or its reverse.
  std::set<std::string> hosts;
  for (const auto& m : view.members) hosts.insert(m.host);
  if (hosts.size() <= 1 || n < 4 || n > algorithms::kRingOrderMaxRanks) {
    return std::vector<int>{};
  }
  auto matrix = pair_matrix();
  if (!matrix) return matrix.status();
  std::vector<int> order = algorithms::ring_order(*matrix, n);
  if (algorithms::is_identity(order)) return std::vector<int>{};
  std::vector<int> identity(order.size());
  std::iota(identity.begin(), identity.end(), 0);
  std::string ranks;
  for (int r : order) {
    ranks += ' ';  // not " " + to_string(r): GCC 12 warns (-Wrestrict) on that, wrongly
    ranks += std::to_string(r);
  }
  log.logf(LogLevel::kInfo,
           "ring order of view %llu by measured bandwidth:%s (slowest hop %.1f MB/s, was %.1f "
           "MB/s)",
           static_cast<unsigned long long>(view.epoch), ranks.c_str(),
           algorithms::score_ring(*matrix, n, order).bottleneck * 1e-6,
           algorithms::score_ring(*matrix, n, identity).bottleneck * 1e-6);
  return order;
}

Result<std::vector<double>> Worker::Impl::pair_matrix() {
  const membership::View& view = ctx->view;
  algorithms::Link& link = *ctx->link;
  const int n = static_cast<int>(view.size());
  const auto nz = static_cast<std::size_t>(n);
  // Measuring takes n - 1 rounds of bulk transfers. A view that only lost members (a
  // failure, a drain) has had every pair measured already: the last measurement's rows
  // and columns of the members still here.
  std::vector<std::size_t> old_index(nz);
  bool covered = pairs.epoch != 0;
  for (const auto& m : view.members) {
    if (!covered) break;
    const auto it = std::find(pairs.ids.begin(), pairs.ids.end(), m.id);
    covered = it != pairs.ids.end();
    if (covered) old_index.at(m.rank) = static_cast<std::size_t>(it - pairs.ids.begin());
  }
  // Every member must decide alike and order the ring from the same matrix, and a move
  // that failed half-way may have left some members with a newer measurement than others:
  // reuse only if every member covers the view from the same one (min of the epoch and of
  // its negation: equal on every member; 0 where one does not cover).
  std::int64_t agree[2] = {covered ? static_cast<std::int64_t>(pairs.epoch) : 0,
                           covered ? -static_cast<std::int64_t>(pairs.epoch) : 0};
  algorithms::CollectiveOptions options;
  options.seq = algorithms::seq_in(algorithms::SeqSpace::kPairReuse, view.epoch);
  options.deadline = collective_deadline(sizeof agree).deadline;
  TRIB_RETURN_IF_ERROR(
      algorithms::all_reduce(link, agree, agree, 2, DType::kInt64, ReduceOp::kMin, options));
  if (agree[0] > 0 && agree[0] == -agree[1]) {
    const std::size_t m = pairs.ids.size();
    std::vector<double> matrix(nz * nz, 0.0);
    for (std::size_t i = 0; i < nz; ++i) {
      for (std::size_t j = 0; j < nz; ++j) {
        if (i != j) matrix[i * nz + j] = pairs.matrix[old_index[i] * m + old_index[j]];
      }
    }
    log.logf(LogLevel::kDebug, "view %llu reuses the pair measurement of view %llu",
             static_cast<unsigned long long>(view.epoch),
             static_cast<unsigned long long>(pairs.epoch));
    return matrix;
  }
  algorithms::PairProbeParams probe;
  options.seq = algorithms::seq_in(algorithms::SeqSpace::kPairProbe, 2 * view.epoch);
  options.deadline = collective_deadline(2 * static_cast<std::size_t>(probe.bulks) *
                                         nz * probe.bulk_bytes)
                         .deadline;
  auto matrix = algorithms::measure_pair_links(link, options, probe);
  if (!matrix) return matrix.status();
  pairs.epoch = view.epoch;
  pairs.ids.assign(nz, 0);
  for (const auto& m : view.members) pairs.ids.at(m.rank) = m.id;
  pairs.matrix = *matrix;
  return matrix;
}

void Worker::Impl::report_links() {
  if (!data_plane || !client) return;
  path_changes_reported = data_plane->path_change_total();
  // The worker's thread (the one that replaces ctx).
  const std::uint64_t epoch = ctx->epoch();
  const int rank = ctx->rank;
  std::vector<PairReport> pairs = data_plane->pair_report();
  // As `tributary status` shows them: every peer in a small view, the ring neighbours in a
  // large one (coordinator/status_report.cc).
  const int n = ctx->size();
  std::vector<membership::LinkPath> links;
  for (PairReport& p : pairs) {
    const bool shown = n <= static_cast<int>(membership::kMaxFullLinkMembers) ||
                       p.rank == (rank + 1) % n || p.rank == (rank + n - 1) % n;
    if (!shown) continue;
    // Within the bounds the coordinator checks (our own names: never near them).
    if (p.paths.size() > membership::kMaxLinkPaths) p.paths.resize(membership::kMaxLinkPaths);
    for (std::string& name : p.paths) name.resize(std::min(name.size(), membership::kMaxPathNameBytes));
    p.last_move.resize(std::min(p.last_move.size(), membership::kMaxLastMoveBytes));
    links.push_back({p.member, std::move(p.transport), std::move(p.address), "agent",
                     std::move(p.paths), p.moves, std::move(p.last_move)});
  }
  client->report_links(epoch, std::move(links));
}

}  // namespace tributary::agent
