// PowerSGD: exact reconstruction at rank r, identical bits across simulated workers,
// error feedback, layout rules.
#include "compression/powersgd.h"

#include <cmath>

#include "test_util.h"

namespace tributary::compression {
namespace {

// A rank-`r` rows x cols matrix written at `at`.
void low_rank(float* at, std::size_t rows, std::size_t cols, std::size_t r, std::uint32_t seed) {
  const auto a = testing::gaussian(rows * r, seed);
  const auto b = testing::gaussian(cols * r, seed + 1);
  for (std::size_t i = 0; i < rows; ++i) {
    for (std::size_t j = 0; j < cols; ++j) {
      float s = 0;
      for (std::size_t k = 0; k < r; ++k) s += a[i * r + k] * b[j * r + k];
      at[i * cols + j] = s;
    }
  }
}

struct Buffers {
  std::vector<float> p, q, dense, out;
  explicit Buffers(const PowerSgd& s)
      : p(s.p_count()), q(s.q_count()), dense(s.dense_count()), out(s.total_count()) {}
};

// One worker, where every all-reduce is the identity.
void step(PowerSgd& s, const std::vector<float>& grad, Buffers& b) {
  s.compute_p(grad.data(), b.p);
  s.orthogonalize(b.p);
  s.compute_q(b.p, b.q);
  s.pack_uncompressed(grad.data(), b.dense);
  s.reconstruct(b.p, b.q, b.dense, b.out.data());
}

// Layout: [bias 10][40x30 matrix][bias 5][16x64 matrix][3x2 matrix (too small)]
const std::size_t kTotal = 10 + 1200 + 5 + 1024 + 6;
std::vector<MatrixShape> layout() { return {{10, 40, 30}, {1215, 16, 64}, {2239, 3, 2}}; }

TEST(PowerSgd, LayoutSendsVectorsAndSmallMatricesDense) {
  auto s = PowerSgd::create(kTotal, layout(), {.rank = 2});
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  EXPECT_EQ(s->p_count(), (40u + 16u) * 2);
  EXPECT_EQ(s->q_count(), (30u + 64u) * 2);
  EXPECT_EQ(s->dense_count(), 10u + 5u + 6u);
  EXPECT_NEAR(s->compression_ratio(), 2245.0 / (112 + 188 + 21), 1e-9);
  EXPECT_FALSE(PowerSgd::create(100, {{0, 10, 10}, {50, 10, 10}}, {}).is_ok()) << "overlap";
  EXPECT_FALSE(PowerSgd::create(100, {{90, 10, 10}}, {}).is_ok()) << "outside";
  EXPECT_FALSE(PowerSgd::create(100, {}, {.rank = 0}).is_ok());
}

TEST(PowerSgd, ReconstructsALowRankMatrixExactlyAtRankR) {
  auto s = PowerSgd::create(kTotal, layout(), {.rank = 2, .seed = 3});
  ASSERT_TRUE(s.is_ok());
  auto grad = testing::gaussian(kTotal, 31);
  low_rank(grad.data() + 10, 40, 30, 2, 32);
  low_rank(grad.data() + 1215, 16, 64, 2, 34);
  Buffers b(*s);
  step(*s, grad, b);
  double err = 0, norm = 0;
  for (std::size_t i = 0; i < kTotal; ++i) {
    err = std::max(err, static_cast<double>(std::fabs(b.out[i] - grad[i])));
    norm = std::max(norm, static_cast<double>(std::fabs(grad[i])));
  }
  EXPECT_LT(err, 1e-4 * norm);
  // Dense parts are passed through bit for bit.
  for (std::size_t i = 0; i < 10; ++i) EXPECT_EQ(b.out[i], grad[i]);
  for (std::size_t i = 2239; i < kTotal; ++i) EXPECT_EQ(b.out[i], grad[i]);
}

TEST(PowerSgd, WorkersReconstructIdenticalBitsAndErrorFeedbackAccumulates) {
  auto w0 = PowerSgd::create(kTotal, layout(), {.rank = 1, .seed = 5});
  auto w1 = PowerSgd::create(kTotal, layout(), {.rank = 1, .seed = 5});
  Buffers b0(*w0), b1(*w1);
  std::vector<double> sum_in(kTotal, 0), sum_out(kTotal, 0);
  for (int t = 0; t < 20; ++t) {
    const auto g0 = testing::gaussian(kTotal, 100 + t);
    const auto g1 = testing::gaussian(kTotal, 200 + t);
    auto avg = [](std::vector<float>& a, std::vector<float>& b) {
      for (std::size_t i = 0; i < a.size(); ++i) a[i] = b[i] = (a[i] + b[i]) * 0.5f;
    };
    w0->compute_p(g0.data(), b0.p);
    w1->compute_p(g1.data(), b1.p);
    avg(b0.p, b1.p);
    w0->orthogonalize(b0.p);
    w1->orthogonalize(b1.p);
    w0->compute_q(b0.p, b0.q);
    w1->compute_q(b1.p, b1.q);
    avg(b0.q, b1.q);
    w0->pack_uncompressed(g0.data(), b0.dense);
    w1->pack_uncompressed(g1.data(), b1.dense);
    avg(b0.dense, b1.dense);
    w0->reconstruct(b0.p, b0.q, b0.dense, b0.out.data());
    w1->reconstruct(b1.p, b1.q, b1.dense, b1.out.data());
    ASSERT_EQ(b0.out, b1.out) << "step " << t;
    for (std::size_t i = 0; i < kTotal; ++i) {
      sum_in[i] += 0.5 * (g0[i] + g1[i]);
      sum_out[i] += b0.out[i];
    }
  }
  // Error feedback: what was not sent is still owed; over 20 steps of noise the gap stays
  // at the scale of a couple of steps' gradients, not 20 steps' (sqrt(20) ~ 4.5 sigma).
  double gap2 = 0, in2 = 0;
  for (std::size_t i = 10; i < 1210; ++i) {
    gap2 += (sum_in[i] - sum_out[i]) * (sum_in[i] - sum_out[i]);
    in2 += sum_in[i] * sum_in[i];
  }
  EXPECT_LT(gap2, in2);
  // Snapshot/restore round trip and reset.
  const auto snap = w0->snapshot();
  w0->reset();
  w0->restore(snap);
  EXPECT_EQ(w0->snapshot().q, snap.q);
}

TEST(PowerSgd, OrthogonalizeGivesOrthonormalColumns) {
  auto s = PowerSgd::create(400, {{0, 40, 10}}, {.rank = 3});
  ASSERT_TRUE(s.is_ok());
  auto p = testing::gaussian(s->p_count(), 41);
  s->orthogonalize(p);
  for (int a = 0; a < 3; ++a) {
    for (int c = 0; c < 3; ++c) {
      double d = 0;
      for (int i = 0; i < 40; ++i) d += p[i * 3 + a] * p[i * 3 + c];
      EXPECT_NEAR(d, a == c ? 1.0 : 0.0, 1e-5);
    }
  }
}

}  // namespace
}  // namespace tributary::compression
