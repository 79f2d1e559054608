// PowerSGD (Vogels et al., 2019): rank-r compression of the matrices of a flat gradient
// buffer, with error feedback and warm start.
//
// PowerSGD is not an encode/decode codec: it needs two all-reduces per step, so this
// class exposes the steps and the collective drives them:
//
//   PowerSgd psgd(layout, params);                 // one per gradient buffer, per worker
//   psgd.compute_p(grad, p);                        // M = grad + residual; P = M Q
//   allreduce_avg(p);                               // dense, p.size() = p_count()
//   psgd.orthogonalize(p);                          // Gram-Schmidt on each P's columns
//   psgd.compute_q(p, q);                           // Q = M^T P
//   allreduce_avg(q);                               // dense, q.size() = q_count()
//   psgd.pack_uncompressed(grad, dense);            // vectors/biases, and small matrices
//   allreduce_avg(dense);                           // dense, dense.size() = dense_count()
//   psgd.reconstruct(p, q, dense, out);             // out = P Q^T (+ dense parts);
//                                                   // residual = M - P Q^T; Q kept
//
// Every worker must run the same layout and params (the initial Q comes from the counter
// RNG keyed by `seed`, so it is identical everywhere without communication). After the
// all-reduces every worker holds the same P and Q, and orthogonalize()/reconstruct() are
// plain fixed-order float loops (no reassociation, no FMA contraction), so `out` is
// bitwise identical on every worker whatever its CPU.
//
// Error feedback: the residual lives in this object (it is per-worker state). Membership
// policy as in error_feedback.h: keep across a view change; reset() on rejoin after
// eviction or when the layout changes (construct a new PowerSgd). An aborted step is
// re-run by calling snapshot() before compute_p and restore() on abort.
// Not thread-safe; buffers are the caller's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "core/status.h"

namespace tributary::compression {

// A row-major rows x cols matrix at `offset` (elements) in the flat gradient buffer.
struct MatrixShape {
  std::size_t offset = 0;
  std::size_t rows = 0;
  std::size_t cols = 0;
};

struct PowerSgdParams {
  std::uint32_t rank = 4;
  bool error_feedback = true;
  // Q from the previous step seeds the next power iteration (false: fresh random Q).
  bool warm_start = true;
  std::uint64_t seed = 0;
};

class PowerSgd {
 public:
  // `total_count` elements in the flat buffer; `matrices` must not overlap and must lie
  // inside it. Elements not covered by a matrix (biases, norms), and matrices for which
  // rank r would not save bytes ((rows + cols) * r >= rows * cols) or with a dimension
  // of 1, travel uncompressed. kInvalidArgument on a bad layout.
  static Result<PowerSgd> create(std::size_t total_count, std::vector<MatrixShape> matrices,
                                 PowerSgdParams params);

  std::size_t p_count() const { return p_count_; }          // floats in the P buffer
  std::size_t q_count() const { return q_count_; }          // floats in the Q buffer
  std::size_t dense_count() const { return dense_count_; }  // floats sent uncompressed
  std::size_t total_count() const { return total_count_; }
  // Floats on the wire per step (p + q + dense) vs total_count.
  double compression_ratio() const;

  // M = grad + residual (for compressed matrices); p = M Q. grad has total_count floats.
  void compute_p(const float* grad, std::span<float> p);
  // In place, on the all-reduced P: orthonormal columns (modified Gram-Schmidt, twice).
  // A column that vanishes (norm ~ 0) becomes zero.
  void orthogonalize(std::span<float> p) const;
  // q = M^T p (M from the last compute_p).
  void compute_q(std::span<const float> p, std::span<float> q) const;
  // Gathers the uncompressed elements of grad (in layout order) into `dense`.
  void pack_uncompressed(const float* grad, std::span<float> dense) const;
  // out = P Q^T for compressed matrices and the (all-reduced) dense values elsewhere.
  // Updates the residual (M - P Q^T) and keeps q as the next step's warm start.
  void reconstruct(std::span<const float> p, std::span<const float> q, std::span<const float> dense,
                   float* out);

  void reset();  // zero residuals and draw a fresh Q (rejoin after eviction)

  struct Snapshot {
    std::vector<float> residual;
    std::vector<float> q;
    std::uint64_t step = 0;
  };
  Snapshot snapshot() const;
  void restore(const Snapshot& snapshot);

 private:
  struct Block {
    MatrixShape shape;
    std::size_t p_offset = 0;  // into the P buffer (rows x rank, row-major)
    std::size_t q_offset = 0;  // into the Q buffer (cols x rank, row-major)
  };
  PowerSgd() = default;
  void init_q();

  PowerSgdParams params_;
  std::size_t total_count_ = 0;
  std::size_t p_count_ = 0;
  std::size_t q_count_ = 0;
  std::size_t dense_count_ = 0;
  std::vector<Block> blocks_;
  // [begin, end) ranges of the flat buffer sent uncompressed, in order.
  std::vector<std::pair<std::size_t, std::size_t>> dense_ranges_;
  std::vector<float> residual_;  // total_count (only compressed matrices used)
  std::vector<float> m_;         // M = grad + residual of the current step, total_count
  std::vector<float> q_;         // warm-start Q, q_count
  std::uint64_t step_ = 0;       // steps reconstructed (keys a fresh Q without warm start)
};

}  // namespace tributary::compression
