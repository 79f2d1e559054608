// PowerSGD steps (powersgd.h). The loops are plain fixed-order float loops: the target
// builds with -ffp-contract=off and no -ffast-math, so no clone reassociates or fuses,
// and every worker reconstructs the same bits from the same all-reduced P and Q.
#include "compression/powersgd.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "compression/counter_rng.h"
#include "core/check.h"

namespace tributary::compression {
namespace {

constexpr std::uint64_t kQStream = 0x5053474dull;  // "PSGD"

void gram_schmidt_pass(float* p, std::size_t rows, std::size_t r) {
  for (std::size_t k = 0; k < r; ++k) {
    for (std::size_t j = 0; j < k; ++j) {
      float d = 0.0f;
      for (std::size_t i = 0; i < rows; ++i) d += p[i * r + k] * p[i * r + j];
      for (std::size_t i = 0; i < rows; ++i) p[i * r + k] -= d * p[i * r + j];
    }
    float n2 = 0.0f;
    for (std::size_t i = 0; i < rows; ++i) n2 += p[i * r + k] * p[i * r + k];
    const float norm = std::sqrt(n2);
    // A column that vanished (rank-deficient P) carries nothing: zero it rather than
    // blow noise up to unit length.
    const float inv = norm > 1e-30f ? 1.0f / norm : 0.0f;
    for (std::size_t i = 0; i < rows; ++i) p[i * r + k] *= inv;
  }
}

}  // namespace

Result<PowerSgd> PowerSgd::create(std::size_t total_count, std::vector<MatrixShape> matrices,
                                  PowerSgdParams params) {
  if (params.rank == 0) return error(StatusCode::kInvalidArgument, "powersgd: rank must be >= 1");
  std::sort(matrices.begin(), matrices.end(),
            [](const MatrixShape& a, const MatrixShape& b) { return a.offset < b.offset; });
  PowerSgd s;
  s.params_ = params;
  s.total_count_ = total_count;
  std::size_t cursor = 0;  // end of the previous matrix
  const std::size_t r = params.rank;
  for (const MatrixShape& m : matrices) {
    const std::size_t n = m.rows * m.cols;
    if (m.rows != 0 && n / m.rows != m.cols) {
      return error(StatusCode::kInvalidArgument, "powersgd: matrix size overflows");
    }
    if (m.offset < cursor || m.offset > total_count || n > total_count - m.offset) {
      return error(StatusCode::kInvalidArgument,
                   "powersgd: matrix at offset " + std::to_string(m.offset) +
                       " overlaps another or lies outside the buffer");
    }
    const bool compress = m.rows > 1 && m.cols > 1 && (m.rows + m.cols) * r < n;
    if (compress) {
      if (m.offset > cursor) s.dense_ranges_.emplace_back(cursor, m.offset);
      s.blocks_.push_back({m, s.p_count_, s.q_count_});
      s.p_count_ += m.rows * r;
      s.q_count_ += m.cols * r;
      cursor = m.offset + n;
    }
  }
  if (cursor < total_count) s.dense_ranges_.emplace_back(cursor, total_count);
  // Merge adjacent dense ranges (uncompressed matrices next to vectors).
  std::vector<std::pair<std::size_t, std::size_t>> merged;
  for (const auto& d : s.dense_ranges_) {
    if (d.first == d.second) continue;
    if (!merged.empty() && merged.back().second == d.first) {
      merged.back().second = d.second;
    } else {
      merged.push_back(d);
    }
  }
  s.dense_ranges_ = std::move(merged);
  for (const auto& d : s.dense_ranges_) s.dense_count_ += d.second - d.first;
  s.residual_.assign(total_count, 0.0f);
  s.m_.assign(total_count, 0.0f);
  s.init_q();
  return s;
}

double PowerSgd::compression_ratio() const {
  const std::size_t wire = p_count_ + q_count_ + dense_count_;
  return wire == 0 ? 1.0 : static_cast<double>(total_count_) / static_cast<double>(wire);
}

void PowerSgd::init_q() {
  q_.assign(q_count_, 0.0f);
  const RngKey key = rng_key(params_.seed, kQStream, step_, 0);
  for (std::size_t i = 0; i < q_count_; ++i) {
    q_[i] = rng_uniform(rng_bits(key, std::uint64_t{i})) * 2.0f - 1.0f;  // uniform [-1, 1)
  }
}

void PowerSgd::compute_p(const float* grad, std::span<float> p) {
  TRIB_CHECK(p.size() == p_count_) << "P buffer has " << p.size() << " floats, need " << p_count_;
  const std::size_t r = params_.rank;
  std::fill(p.begin(), p.end(), 0.0f);
  for (const Block& b : blocks_) {
    const std::size_t rows = b.shape.rows, cols = b.shape.cols;
    float* m = m_.data() + b.shape.offset;
    const float* g = grad + b.shape.offset;
    const float* e = residual_.data() + b.shape.offset;
    const std::size_t n = rows * cols;
    if (params_.error_feedback) {
      for (std::size_t i = 0; i < n; ++i) m[i] = g[i] + e[i];
    } else {
      std::memcpy(m, g, n * sizeof(float));
    }
    const float* q = q_.data() + b.q_offset;
    float* pb = p.data() + b.p_offset;
    for (std::size_t i = 0; i < rows; ++i) {
      float* prow = pb + i * r;
      for (std::size_t j = 0; j < cols; ++j) {
        const float mij = m[i * cols + j];
        const float* qrow = q + j * r;
        for (std::size_t k = 0; k < r; ++k) prow[k] += mij * qrow[k];
      }
    }
  }
}

void PowerSgd::orthogonalize(std::span<float> p) const {
  TRIB_CHECK(p.size() == p_count_) << "P buffer has " << p.size() << " floats, need " << p_count_;
  for (const Block& b : blocks_) {
    // Twice: one pass of Gram-Schmidt in float loses orthogonality on ill-conditioned P.
    gram_schmidt_pass(p.data() + b.p_offset, b.shape.rows, params_.rank);
    gram_schmidt_pass(p.data() + b.p_offset, b.shape.rows, params_.rank);
  }
}

void PowerSgd::compute_q(std::span<const float> p, std::span<float> q) const {
  TRIB_CHECK(p.size() == p_count_ && q.size() == q_count_) << "P/Q buffer sizes";
  const std::size_t r = params_.rank;
  std::fill(q.begin(), q.end(), 0.0f);
  for (const Block& b : blocks_) {
    const std::size_t rows = b.shape.rows, cols = b.shape.cols;
    const float* m = m_.data() + b.shape.offset;
    const float* pb = p.data() + b.p_offset;
    float* qb = q.data() + b.q_offset;
    for (std::size_t i = 0; i < rows; ++i) {
      const float* prow = pb + i * r;
      for (std::size_t j = 0; j < cols; ++j) {
        const float mij = m[i * cols + j];
        float* qrow = qb + j * r;
        for (std::size_t k = 0; k < r; ++k) qrow[k] += mij * prow[k];
      }
    }
  }
}

void PowerSgd::pack_uncompressed(const float* grad, std::span<float> dense) const {
  TRIB_CHECK(dense.size() == dense_count_) << "dense buffer size";
  std::size_t at = 0;
  for (const auto& [begin, end] : dense_ranges_) {
    std::memcpy(dense.data() + at, grad + begin, (end - begin) * sizeof(float));
    at += end - begin;
  }
}

void PowerSgd::reconstruct(std::span<const float> p, std::span<const float> q,
                           std::span<const float> dense, float* out) {
  TRIB_CHECK(p.size() == p_count_ && q.size() == q_count_ && dense.size() == dense_count_)
      << "P/Q/dense buffer sizes";
  const std::size_t r = params_.rank;
  for (const Block& b : blocks_) {
    const std::size_t rows = b.shape.rows, cols = b.shape.cols;
    const float* pb = p.data() + b.p_offset;
    const float* qb = q.data() + b.q_offset;
    float* o = out + b.shape.offset;
    for (std::size_t i = 0; i < rows; ++i) {
      for (std::size_t j = 0; j < cols; ++j) {
        float s = 0.0f;
        for (std::size_t k = 0; k < r; ++k) s += pb[i * r + k] * qb[j * r + k];
        o[i * cols + j] = s;
      }
    }
    if (params_.error_feedback) {
      const float* m = m_.data() + b.shape.offset;
      float* e = residual_.data() + b.shape.offset;
      for (std::size_t i = 0; i < rows * cols; ++i) e[i] = m[i] - o[i];
    }
  }
  std::size_t at = 0;
  for (const auto& [begin, end] : dense_ranges_) {
    std::memcpy(out + begin, dense.data() + at, (end - begin) * sizeof(float));
    at += end - begin;
  }
  ++step_;
  if (params_.warm_start) {
    q_.assign(q.begin(), q.end());
  } else {
    init_q();
  }
}

void PowerSgd::reset() {
  std::fill(residual_.begin(), residual_.end(), 0.0f);
  step_ = 0;
  init_q();
}

PowerSgd::Snapshot PowerSgd::snapshot() const { return {residual_, q_, step_}; }

void PowerSgd::restore(const Snapshot& s) {
  TRIB_CHECK(s.residual.size() == residual_.size() && s.q.size() == q_.size())
      << "snapshot from another layout";
  residual_ = s.residual;
  q_ = s.q;
  step_ = s.step;
}

}  // namespace tributary::compression
