#include "algorithms/cost_model.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "algorithms/all_reduce_impl.h"
#include "algorithms/partition.h"
#include "algorithms/zone_layout.h"
#include "core/check.h"

namespace tributary::algorithms {
namespace {

bool usable(double v) { return std::isfinite(v) && v >= 0; }

}  // namespace

CostModel::CostModel(double alpha, double beta, double gamma, std::size_t chunk_bytes, int cores)
    : alpha_(alpha), beta_(beta), gamma_(gamma), chunk_bytes_(chunk_bytes), cores_(cores) {
  TRIB_CHECK(usable(alpha) && usable(beta) && usable(gamma) && chunk_bytes > 0 && cores > 0)
      << "alpha=" << alpha << " beta=" << beta << " gamma=" << gamma
      << " chunk_bytes=" << chunk_bytes << " cores=" << cores;
}

Result<CostModel> CostModel::fit(std::size_t small_bytes, double small_seconds,
                                 std::size_t large_bytes, double large_seconds, double gamma,
                                 std::size_t chunk_bytes) {
  if (large_bytes <= small_bytes || !usable(small_seconds) || !usable(large_seconds) ||
      large_seconds < small_seconds || !usable(gamma) || chunk_bytes == 0) {
    return error(StatusCode::kInvalidArgument,
                 "cannot fit a cost model through (" + std::to_string(small_bytes) + " B, " +
                     std::to_string(small_seconds) + " s) and (" + std::to_string(large_bytes) +
                     " B, " + std::to_string(large_seconds) + " s)");
  }
  const double beta =
      (large_seconds - small_seconds) / static_cast<double>(large_bytes - small_bytes);
  const double alpha = std::max(0.0, small_seconds - beta * static_cast<double>(small_bytes));
  return CostModel(alpha, beta, gamma, chunk_bytes);
}

const CostModel& CostModel::default_model() {
  static const CostModel model;
  return model;
}

CostModel CostModel::with_wan(double alpha, double beta) const {
  TRIB_CHECK(usable(alpha) && usable(beta)) << "wan alpha=" << alpha << " beta=" << beta;
  CostModel m = *this;
  m.wan_alpha_ = alpha;
  m.wan_beta_ = beta;
  return m;
}

CostModel CostModel::fitted_to(double measured_alpha, double measured_beta) const {
  CostModel m = *this;
  if (!usable(measured_beta) || measured_beta < kMeasuredBetaFactor * beta_) return m;
  m.beta_ = measured_beta;
  if (usable(measured_alpha) && measured_alpha >= kMeasuredAlphaFactor * alpha_) {
    m.alpha_ = measured_alpha;
  }
  return m;
}

CostModel CostModel::with_link(double alpha, double beta) const {
  TRIB_CHECK(usable(alpha) && usable(beta)) << "alpha=" << alpha << " beta=" << beta;
  CostModel m = *this;
  m.alpha_ = alpha;
  m.beta_ = beta;
  return m;
}

CostModel CostModel::on_shared_memory() const {
  CostModel m = with_link(kSharedMemoryAlpha, kSharedMemoryBeta);
  m.single_copy_from_ranks_ = 2 * cores_;
  return m;
}

CostModel::LinkTerms CostModel::link_terms(AllReduceAlgorithm algorithm, int world_size,
                                           std::size_t bytes) const {
  // One-sided differences: exact on a linear piece, and a step this small (relative
  // 1e-6) stays on the piece unless the model sits on a kink, where it takes one side.
  const double da = alpha_ > 0 ? alpha_ * 1e-6 : 1e-15;
  const double db = beta_ > 0 ? beta_ * 1e-6 : 1e-21;
  const double at = predict(algorithm, world_size, bytes);
  LinkTerms terms;
  terms.per_alpha = (with_link(alpha_ + da, beta_).predict(algorithm, world_size, bytes) - at) / da;
  terms.per_beta = (with_link(alpha_, beta_ + db).predict(algorithm, world_size, bytes) - at) / db;
  terms.rest = at - alpha_ * terms.per_alpha - beta_ * terms.per_beta;
  return terms;
}

CostModel CostModel::cross_zone() const {
  constexpr int kUnbounded = 1 << 20;  // the link, not the cores, is the bottleneck
  return CostModel(wan_alpha_, wan_beta_, gamma_, chunk_bytes_, kUnbounded);
}

double CostModel::predict(AllReduceAlgorithm algorithm, const ZoneLayout& layout,
                          std::size_t bytes) const {
  const int n = layout.size();
  if (layout.zones() <= 1) return predict(algorithm, n, bytes);
  if (algorithm == AllReduceAlgorithm::kAuto) return predict(choose(layout, bytes), layout, bytes);
  const CostModel wan = cross_zone();
  if (algorithm != AllReduceAlgorithm::kHierarchical) return wan.predict(algorithm, n, bytes);
  const double s = static_cast<double>(bytes);
  const double shards = layout.shards();
  const double k = layout.largest_zone();
  const double c = static_cast<double>(chunk_bytes_);
  const double shard = s / shards;
  // Zone phases: a ring reduce-scatter and all-gather of blocks of s / shards over k.
  const double zone_phases = 2 * (k - 1) * std::max(1.0, std::ceil(shard / c)) * alpha_ +
                             (k - 1) * shard * (beta_ + std::max(beta_, gamma_));
  // Cross phase: one group's all-reduce, plus the other groups' bytes on the shared link.
  const int z = layout.zones();
  const auto shard_bytes = static_cast<std::size_t>(shard);
  const double one_group = wan.predict(wan.choose(z, shard_bytes), z, shard_bytes);
  const double others = (shards - 1) * 2 * (z - 1) / z * shard * wan_beta_;
  return zone_phases + one_group + others;
}

AllReduceAlgorithm CostModel::choose(const ZoneLayout& layout, std::size_t bytes) const {
  const int n = layout.size();
  if (layout.zones() <= 1) return choose(n, bytes);
  const AllReduceAlgorithm flat = cross_zone().choose(n, bytes);
  return predict(AllReduceAlgorithm::kHierarchical, layout, bytes) < predict(flat, layout, bytes)
             ? AllReduceAlgorithm::kHierarchical
             : flat;
}

double CostModel::predict(AllReduceAlgorithm algorithm, int world_size, std::size_t bytes) const {
  if (world_size <= 1) return 0.0;
  if (algorithm == AllReduceAlgorithm::kAuto) {
    return predict(choose(world_size, bytes), world_size, bytes);
  }
  // Without zones a hierarchical all-reduce is a ring all-reduce over one zone.
  if (algorithm == AllReduceAlgorithm::kHierarchical) algorithm = AllReduceAlgorithm::kRing;
  const double n = world_size;
  const double s = static_cast<double>(bytes);
  // Work of all ranks together: `messages` sends (each costs alpha), `moved` bytes through
  // the transport and `reduced` bytes through a reduction, spread over the cores.
  auto work = [&](double messages, double moved, double reduced) {
    return (messages * alpha_ + moved * beta_ + reduced * gamma_) / cores_;
  };
  const double c = static_cast<double>(chunk_bytes_);
  auto msgs = [c](double b) { return std::max(1.0, std::ceil(b / c)); };
  const double t = critical_path(algorithm, world_size, bytes);
  // Every bandwidth-optimal algorithm moves 2(n-1)s bytes and reduces (n-1)s in all.
  const double moved = 2 * (n - 1) * s;
  const double reduced = (n - 1) * s;
  switch (algorithm) {
    case AllReduceAlgorithm::kRing: {
      const double steps = 2 * (n - 1) * msgs(s / n);
      double total = std::max(t, work(n * steps, moved, reduced));
      // With more ranks than cores a ring stalls at every step whose sender is not
      // running: each of its 2(n-1) hops per chunk waits for a wake-up (the trees' chains
      // are log n long). Measured on 2 cores, 16 MiB: ring 0.58 GB/s busbw against 0.63-0.96
      // for the trees at n=4, 0.33 against 0.36-0.43 at n=8. Under single copy each such
      // stall is a wake-up (kSingleCopyRingStall).
      const double stall = single_copy(world_size) ? kSingleCopyRingStall : alpha_;
      if (world_size > cores_) total += steps * stall * (n - cores_) / cores_;
      return total;
    }
    case AllReduceAlgorithm::kTree: return std::max(t, work(2 * (n - 1) * msgs(s), moved, reduced));
    case AllReduceAlgorithm::kDoubleTree:
      return std::max(t, work(4 * (n - 1) * msgs(s / 2), moved, reduced));
    case AllReduceAlgorithm::kHalvingDoubling: {
      const int log_p = floor_log2(world_size);
      const double p = static_cast<double>(1 << log_p);
      double m = 0;
      // Each step sends its whole range at once but posts only kRecvDepth receives
      // ahead, so what the partner sends beyond them arrives unexpected and is copied
      // once more by the link: charged as that many more bytes moved. Under single copy
      // nothing arrives unexpected (a send waits for its receive), but a part beyond
      // kSingleCopyHalvingPart costs about as much again (see there).
      double copied = 0;
      const double ahead =
          single_copy(world_size) ? kSingleCopyHalvingPart : static_cast<double>(kRecvDepth) * c;
      double part = s;  // s / 2^i, halved exactly (no pow(): the choice runs every call)
      for (int i = 1; i <= log_p; ++i) {
        part /= 2;
        m += 2 * p * msgs(part);
        copied += 2 * p * std::max(0.0, part - ahead);
      }
      const double extra = n - p;
      return std::max(t, work(m + 2 * extra * msgs(s), moved + copied, reduced));
    }
    case AllReduceAlgorithm::kDirect:
      return std::max(t, work(n * (n - 1), n * (n - 1) * s, n * (n - 1) * s));
    case AllReduceAlgorithm::kAuto:
    case AllReduceAlgorithm::kHierarchical: break;
  }
  return t;
}

double CostModel::critical_path(AllReduceAlgorithm algorithm, int world_size,
                                std::size_t bytes) const {
  const double n = world_size;
  const double s = static_cast<double>(bytes);
  const double c = static_cast<double>(chunk_bytes_);
  // Messages of at most one chunk each to move `b` bytes, at least one.
  auto msgs = [c](double b) { return std::max(1.0, std::ceil(b / c)); };
  const double depth = floor_log2(world_size);
  switch (algorithm) {
    case AllReduceAlgorithm::kAuto: break;
    case AllReduceAlgorithm::kHierarchical:  // one zone: a ring
      return critical_path(AllReduceAlgorithm::kRing, world_size, bytes);
    case AllReduceAlgorithm::kRing: {
      // 2(n-1) steps of s/n bytes; the reduction of a chunk overlaps the next transfer.
      const double per_phase = (n - 1) / n * s;
      return 2 * (n - 1) * msgs(s / n) * alpha_ + per_phase * beta_ +
             per_phase * std::max(beta_, gamma_);
    }
    case AllReduceAlgorithm::kTree: {
      // The first chunk climbs to the root and comes back (2 depth hops); every later
      // one costs an interior node 2 chunks received and 1 sent up, 1 received and 2
      // sent down.
      const double first = std::min(s, c);
      const double fill = 2 * depth * (alpha_ + first * beta_);
      return fill + 6 * (msgs(s) - 1) * alpha_ + 3 * (s - first) * beta_;
    }
    case AllReduceAlgorithm::kDoubleTree: {
      // Interior in one tree (3 x s/2 each way), a leaf in the other (s/2 each way).
      const double first = std::min(s / 2, c);
      const double fill = 2 * (depth + 1) * (alpha_ + first * beta_);
      return fill + 8 * (msgs(s / 2) - 1) * alpha_ + 2 * (s - 2 * first) * beta_;
    }
    case AllReduceAlgorithm::kHalvingDoubling: {
      const int log_p = floor_log2(world_size);
      const double p = static_cast<double>(1 << log_p);
      double t = 0;
      double part = s;
      for (int i = 1; i <= log_p; ++i) {
        part /= 2;
        t += 2 * msgs(part) * alpha_;
      }
      // Each step reduces before the next can send: the reduction is not hidden.
      t += 2 * (p - 1) / p * s * beta_ + (p - 1) / p * s * gamma_;
      if (world_size != (1 << log_p)) t += 2 * msgs(s) * alpha_ + 2 * s * beta_ + s * gamma_;
      return t;
    }
    case AllReduceAlgorithm::kDirect: return (n - 1) * (alpha_ + s * beta_ + s * gamma_);
  }
  return 0.0;
}

AllReduceAlgorithm CostModel::choose(int world_size, std::size_t bytes) const {
  if (world_size <= 1) return AllReduceAlgorithm::kDirect;
  // When the shared cores' work bounds several algorithms alike (large messages: every
  // bandwidth-optimal one does the same work), the one with the shorter critical path
  // has the most slack to absorb a descheduled rank: take it.
  constexpr double kTie = 0.02;
  AllReduceAlgorithm best = AllReduceAlgorithm::kRing;
  double best_time = predict(best, world_size, bytes);
  double best_path = critical_path(best, world_size, bytes);
  for (auto a : {AllReduceAlgorithm::kTree, AllReduceAlgorithm::kDoubleTree,
                 AllReduceAlgorithm::kHalvingDoubling, AllReduceAlgorithm::kDirect}) {
    const double t = predict(a, world_size, bytes);
    const double path = critical_path(a, world_size, bytes);
    const bool tie = std::abs(t - best_time) <= kTie * best_time;
    if (tie ? path < best_path : t < best_time) {
      best = a;
      best_time = t;
      best_path = path;
    }
  }
  return best;
}

}  // namespace tributary::algorithms
