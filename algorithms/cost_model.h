// An alpha-beta-gamma cost model for choosing an all-reduce algorithm (kAuto).
//
// alpha is the cost of one message (latency plus the thread hand-offs around it, which
// dominate on loopback), beta the transfer cost per byte, gamma the reduction cost per
// byte. predict() estimates the time of one all-reduce for one rank along the critical
// path of each algorithm as implemented here (chunking included), or by the CPU work of
// all ranks spread over the cores they share, whichever is longer; choose() takes the
// cheapest. It is a ranking device, not a stopwatch.
//
// Every rank of a collective must choose the same algorithm: give them all the same
// model (the coordinator distributes the measured one). Ranks that choose differently
// fail with kMismatch or at their deadline, never with a wrong sum.
#pragma once

#include <cstddef>

#include "algorithms/collectives.h"
#include "core/status.h"

namespace tributary::algorithms {

class ZoneLayout;

class CostModel {
 public:
  // A loopback TCP profile on the 2-core development machines: ~5 us per message
  // (syscalls and a wake-up; our 4 KiB tree all-reduce at n=4, 4 hops, takes ~35 us),
  // 8 GB/s, ~10 GB/s for a vectorised float32 sum. One stream measures ~5 GB/s (iperf3);
  // against the algorithms' own times, forced one by one at N = 2, 4, 8
  // (tests/algorithms/data/, CostModelChoice), 8 GB/s ranks them right where 5 GB/s put
  // the double tree ahead of the tree at N = 4 and 256 KiB (1.3x slower there).
  static constexpr double kDefaultAlpha = 5e-6;
  static constexpr double kDefaultBeta = 1.0 / 8e9;
  static constexpr double kDefaultGamma = 1.0 / 10e9;
  static constexpr std::size_t kDefaultChunkBytes = 256 * 1024;
  // Cores the ranks of one collective share. On the development machines 2-8 ranks
  // share 2 cores, so the CPU work of all ranks together (every message and byte is
  // handled at both ends, every reduction somewhere) bounds the time as much as any
  // rank's critical path does. A large value describes one rank per core. Part of the
  // model, not read from the host: every rank must choose the same algorithm.
  static constexpr int kDefaultCores = 2;
  // The link between zones, when nothing better is known: 1 ms, 1 Gbit/s per direction,
  // shared by every flow that crosses it (one datacenter interconnect). Set the measured
  // or provisioned values with with_wan().
  static constexpr double kDefaultWanAlpha = 1e-3;
  static constexpr double kDefaultWanBeta = 8.0 / 1e9;

  // Shared memory between the processes of one host (transport/shm_transport.h), fitted
  // the same way against forced all-reduces at N = 2, 4, 8 (4 KiB-64 MiB) on those machines
  // (bench/results/cost_model_shm_2026-11-27.md): a message is a few ring-buffer writes and a
  // futex wake, not two system calls and the loopback stack, so it costs about a fifth of a
  // TCP message, and one byte about as much as over loopback once every rank's copies share
  // the two cores. With the TCP constants the model priced the ring's hops (and its stalls
  // with more ranks than cores) as TCP ones and chose the double tree from 4 MiB up at N = 4,
  // 1.8-2x slower than the ring there.
  static constexpr double kSharedMemoryAlpha = 1e-6;
  static constexpr double kSharedMemoryBeta = 1.0 / 3e9;
  // Where a host runs at least twice as many of the group's ranks as it has cores, the
  // shared-memory transport reads messages of 64 KiB and more straight from the sender's
  // memory (--shm-single-copy auto), and such a send completes only once its receiver has
  // read it: a ring's step can no longer run ahead into the ring buffer, it waits for the
  // next rank to be scheduled. Each of the ring's steps then stalls for about a wake-up,
  // not for alpha (fitted against forced all-reduces at N = 4 and 8, 4 KiB-64 MiB,
  // bench/results/cost_model_single_copy_2026-12-08.md: the ring took 1.3-1.5x
  // halving-doubling's time at N = 4, 1-4 MiB, and 1.13x the double tree's at N = 8, 4 MiB;
  // 10-40 us all rank the same). Halving-doubling's exchanges and the trees' hops are
  // rendezvous as well, but their partners are waiting for them already.
  static constexpr double kSingleCopyRingStall = 20e-6;
  // Under single copy halving-doubling's sends no longer arrive unexpected and copied (each
  // waits for its receive), but a step whose part is larger than about a core's L2 (2 MiB
  // on the development machines) no longer reduces in cache, and costs about what the
  // copies did: priced as copies beyond this part instead of beyond kRecvDepth chunks.
  // Fitted on the same sweep: halving-doubling 1.37x faster than the double tree at N = 4,
  // 4 MiB (parts of 2 and 1 MiB), 1.05-1.34x slower than the best at 16-64 MiB; 2-4 MiB
  // rank every cell the same.
  static constexpr double kSingleCopyHalvingPart = 2.0 * 1024 * 1024;

  CostModel() = default;
  // Trusted values (>= 0, finite); see fit() for measured ones.
  CostModel(double alpha, double beta, double gamma = kDefaultGamma,
            std::size_t chunk_bytes = kDefaultChunkBytes, int cores = kDefaultCores);

  // alpha and beta from two timed one-way transfers of different sizes (a small and a
  // large ping-pong, halved): time = alpha + bytes * beta through both points.
  // kInvalidArgument when the points cannot define a non-negative line.
  static Result<CostModel> fit(std::size_t small_bytes, double small_seconds,
                               std::size_t large_bytes, double large_seconds,
                               double gamma = kDefaultGamma,
                               std::size_t chunk_bytes = kDefaultChunkBytes);

  static const CostModel& default_model();

  // The same model with the inter-zone link at `alpha` seconds per message and `beta`
  // seconds per byte (trusted: >= 0, finite).
  CostModel with_wan(double alpha, double beta) const;
  double wan_alpha() const { return wan_alpha_; }
  double wan_beta() const { return wan_beta_; }
  // The same model fitted to measured links (link_probe.h: the slowest link's alpha and
  // beta): beta is replaced when the measurement is at least kMeasuredBetaFactor times
  // this model's, and then alpha too when it is at least kMeasuredAlphaFactor times; both
  // are kept otherwise. A high alpha alone is what busy cores look like (eight agents on
  // two cores measured 540 us per message over veth), and with the default bandwidth it
  // made the model pick the direct algorithm for 64 MiB. The defaults describe the loopback and shared memory of the machines the
  // model was tuned on (against measured algorithm times), and a measurement taken while
  // the ranks share busy cores reads a fast link several times slower than it is (eight
  // ranks on two cores: loopback TCP measured at 69 us per message and 360 MB/s, a
  // fraction of what its collectives move), so only a much slower link counts as a
  // different network: over 200 us one way (a WAN), under about 1 Gbit/s (125 MB/s).
  static constexpr double kMeasuredAlphaFactor = 40;
  static constexpr double kMeasuredBetaFactor = 64;
  CostModel fitted_to(double measured_alpha, double measured_beta) const;
  // The same model with alpha and beta replaced (trusted: >= 0, finite); gamma, the chunk
  // size, the cores and the inter-zone link are kept. What a refit (cost_refit.h) adopts.
  CostModel with_link(double alpha, double beta) const;
  // This model with the shared-memory link constants above: the base of a group that
  // shared memory carries (every member on one host), before its links are measured.
  // From twice as many ranks as cores() on it also prices single copy
  // (kSingleCopyRingStall, kSingleCopyHalvingPart): the transport's automatic rule, read
  // from the model's own cores() so that every rank prices it alike (a member whose flags
  // force single copy off is priced as if it were on; its choice may be slower, never
  // different from its peers').
  CostModel on_shared_memory() const;
  // The number of ranks from which the model prices shared memory's single copy; 0: never.
  int single_copy_from_ranks() const { return single_copy_from_ranks_; }

  // predict() as a linear function of alpha and beta around this model's constants:
  // predict = alpha * per_alpha + beta * per_beta + rest (rest: the reduction, and the
  // inter-zone link where there are zones). predict() is piecewise linear in the constants
  // (a max of linear terms), so these are the slopes of the piece this model is on (one
  // side of a kink); a fit through them is iterated (cost_refit.h).
  struct LinkTerms {
    double per_alpha = 0;
    double per_beta = 0;
    double rest = 0;
  };
  LinkTerms link_terms(AllReduceAlgorithm algorithm, int world_size, std::size_t bytes) const;
  // A model of the inter-zone link alone (its alpha and beta; no shared-core bound, the
  // link is the bottleneck): what prices an algorithm run among one member per zone.
  CostModel cross_zone() const;

  double alpha() const { return alpha_; }
  double beta() const { return beta_; }
  double gamma() const { return gamma_; }
  std::size_t chunk_bytes() const { return chunk_bytes_; }
  int cores() const { return cores_; }

  // Seconds; kAuto predicts the algorithm choose() picks. 0 for world_size <= 1.
  double predict(AllReduceAlgorithm algorithm, int world_size, std::size_t bytes) const;
  // Never kAuto. Predictions within 2% of each other are decided by the shorter
  // critical path, then by the earlier algorithm in the enum.
  AllReduceAlgorithm choose(int world_size, std::size_t bytes) const;

  // With zones: a flat algorithm is priced as if every hop crossed the inter-zone link
  // (its critical path does: a ring's every step waits for the hop that crosses);
  // kHierarchical as its zone phases on this model plus the cross-zone phase, whose
  // shards all share the inter-zone link. One zone: the same as the two above.
  double predict(AllReduceAlgorithm algorithm, const ZoneLayout& layout, std::size_t bytes) const;
  // The cheapest flat algorithm or kHierarchical (never kAuto).
  AllReduceAlgorithm choose(const ZoneLayout& layout, std::size_t bytes) const;

 private:
  // One rank's critical path alone, without the shared-core work bound.
  double critical_path(AllReduceAlgorithm algorithm, int world_size, std::size_t bytes) const;
  // Whether a group of `world_size` runs shared memory's single copy (single_copy_from_ranks).
  bool single_copy(int world_size) const {
    return single_copy_from_ranks_ > 0 && world_size >= single_copy_from_ranks_;
  }

  double alpha_ = kDefaultAlpha;
  double beta_ = kDefaultBeta;
  double gamma_ = kDefaultGamma;
  std::size_t chunk_bytes_ = kDefaultChunkBytes;
  int cores_ = kDefaultCores;
  double wan_alpha_ = kDefaultWanAlpha;
  double wan_beta_ = kDefaultWanBeta;
  int single_copy_from_ranks_ = 0;
};

}  // namespace tributary::algorithms
