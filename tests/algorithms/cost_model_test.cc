#include "algorithms/cost_model.h"

#include <gtest/gtest.h>

#include <atomic>

#include "algorithms/collectives.h"
#include "algorithms/memory_link.h"
#include "tests/support/rank_threads.h"

namespace tributary {
namespace {

constexpr algorithms::AllReduceAlgorithm kConcrete[] = {
    algorithms::AllReduceAlgorithm::kRing, algorithms::AllReduceAlgorithm::kTree,
    algorithms::AllReduceAlgorithm::kDoubleTree, algorithms::AllReduceAlgorithm::kHalvingDoubling,
    algorithms::AllReduceAlgorithm::kDirect};

// The default profile with one core per rank: no shared-core work bound.
const algorithms::CostModel& one_rank_per_core() {
  static const algorithms::CostModel model(
      algorithms::CostModel::kDefaultAlpha, algorithms::CostModel::kDefaultBeta,
      algorithms::CostModel::kDefaultGamma, algorithms::CostModel::kDefaultChunkBytes, 1 << 20);
  return model;
}

TEST(CostModel, LatencyBoundMessagesAvoidTheRing) {
  const algorithms::CostModel& model = one_rank_per_core();
  for (int n : {2, 3, 4, 8, 12, 16, 64}) {
    const algorithms::AllReduceAlgorithm a = model.choose(n, 16);
    // One round, or log2(n) of them each way (halving-doubling and the tree tie).
    EXPECT_TRUE(a == algorithms::AllReduceAlgorithm::kDirect ||
                a == algorithms::AllReduceAlgorithm::kHalvingDoubling ||
                a == algorithms::AllReduceAlgorithm::kTree)
        << "n=" << n << " chose " << to_string(a);
  }
  EXPECT_EQ(model.choose(2, 8), algorithms::AllReduceAlgorithm::kDirect);
  EXPECT_NE(model.choose(16, 8), algorithms::AllReduceAlgorithm::kDirect);
}

TEST(CostModel, BandwidthBoundMessagesTakeTheRing) {
  const algorithms::CostModel& model = one_rank_per_core();
  for (int n : {2, 3, 4, 7, 8, 16, 64}) {
    EXPECT_EQ(model.choose(n, std::size_t{1} << 30), algorithms::AllReduceAlgorithm::kRing)
        << "n=" << n;
  }
}

// The default profile: more ranks than cores (measured on the 2-core machines, see the
// constants). Small messages take one round while that is cheap, then the tree, whose
// 2(n-1) messages in all cost the shared cores least; large ones avoid the ring, whose
// every hop waits for a descheduled neighbour.
TEST(CostModel, SharedCoresFavourFewMessagesAndShortChains) {
  const algorithms::CostModel& model = algorithms::CostModel::default_model();
  EXPECT_EQ(model.choose(2, 4096), algorithms::AllReduceAlgorithm::kDirect);
  EXPECT_EQ(model.choose(4, 4096), algorithms::AllReduceAlgorithm::kTree);
  EXPECT_EQ(model.choose(8, 4096), algorithms::AllReduceAlgorithm::kTree);
  EXPECT_EQ(model.choose(2, std::size_t{16} << 20), algorithms::AllReduceAlgorithm::kRing);
  for (int n : {3, 4, 8, 16}) {
    for (std::size_t bytes : {std::size_t{16} << 20, std::size_t{256} << 20}) {
      const algorithms::AllReduceAlgorithm a = model.choose(n, bytes);
      EXPECT_TRUE(a == algorithms::AllReduceAlgorithm::kTree ||
                  a == algorithms::AllReduceAlgorithm::kDoubleTree)
          << "n=" << n << " bytes=" << bytes << " chose " << to_string(a);
    }
  }
  // The shared-core bound only ever adds time.
  for (algorithms::AllReduceAlgorithm a : kConcrete) {
    for (int n : {2, 4, 8}) {
      EXPECT_GE(model.predict(a, n, 1 << 20), one_rank_per_core().predict(a, n, 1 << 20));
    }
  }
}

TEST(CostModel, PredictionsArePositiveAndGrowWithSize) {
  const algorithms::CostModel& model = algorithms::CostModel::default_model();
  EXPECT_EQ(model.predict(algorithms::AllReduceAlgorithm::kRing, 1, 1 << 20), 0.0);
  for (algorithms::AllReduceAlgorithm a : kConcrete) {
    for (int n : {2, 5, 16}) {
      double previous = 0;
      for (std::size_t bytes :
           {std::size_t{0}, std::size_t{4096}, std::size_t{1} << 22, std::size_t{1} << 28}) {
        const double t = model.predict(a, n, bytes);
        EXPECT_GT(t, 0) << to_string(a) << " n=" << n << " bytes=" << bytes;
        EXPECT_GE(t, previous) << to_string(a) << " n=" << n << " bytes=" << bytes;
        previous = t;
      }
    }
  }
  // kAuto predicts its own choice, which is the minimum.
  for (int n : {2, 5, 16}) {
    for (std::size_t bytes : {std::size_t{64}, std::size_t{1} << 24}) {
      const double best = model.predict(algorithms::AllReduceAlgorithm::kAuto, n, bytes);
      for (algorithms::AllReduceAlgorithm a : kConcrete)
        EXPECT_LE(best, model.predict(a, n, bytes));
    }
  }
}

TEST(CostModel, HighLatencyLinksPreferFewerMessages) {
  // A cross-datacenter profile: 5 ms per message. Even 64 MiB is latency-heavy at n=64.
  const algorithms::CostModel wan(5e-3, 1.0 / 1e9);
  EXPECT_NE(wan.choose(64, std::size_t{1} << 20), algorithms::AllReduceAlgorithm::kRing);
  EXPECT_GT(wan.predict(algorithms::AllReduceAlgorithm::kRing, 64, 1 << 20),
            wan.predict(algorithms::AllReduceAlgorithm::kHalvingDoubling, 64, 1 << 20));
}

TEST(CostModel, FitFromTwoTransfers) {
  const Result<algorithms::CostModel> fitted =
      algorithms::CostModel::fit(8, 20e-6, 8 + 1000000, 20e-6 + 1e-3);
  ASSERT_TRUE(fitted.is_ok()) << fitted.status().to_string();
  EXPECT_NEAR(fitted->beta(), 1e-9, 1e-15);
  EXPECT_NEAR(fitted->alpha(), 20e-6 - 8e-9, 1e-12);
  EXPECT_EQ(algorithms::CostModel::fit(100, 1e-3, 100, 2e-3).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(algorithms::CostModel::fit(10, 2e-3, 100, 1e-3).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(algorithms::CostModel::fit(10, -1, 100, 1e-3).status().code(),
            StatusCode::kInvalidArgument);
}

// A link that counts its sends, to see which algorithm all_reduce actually ran.
class CountingLink final : public algorithms::Link {
 public:
  explicit CountingLink(algorithms::Link& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  Handle send(int peer, algorithms::Tag tag, std::span<const std::byte> data) override {
    ++sends;
    return inner_.send(peer, tag, data);
  }
  Handle recv(int peer, algorithms::Tag tag, std::span<std::byte> data) override {
    return inner_.recv(peer, tag, data);
  }
  Status wait(Handle h, Deadline d) override { return inner_.wait(h, d); }
  void abort(const Status& reason) override { inner_.abort(reason); }
  int sends = 0;

 private:
  algorithms::Link& inner_;
};

int sends_of_rank0(algorithms::AllReduceAlgorithm algorithm, const algorithms::CostModel* model,
                   int n, std::size_t count) {
  algorithms::MemoryFabric fabric(n);
  std::vector<int> sends(static_cast<std::size_t>(n));
  const auto statuses = testing::run_ranks(n, [&](int r) {
    CountingLink link(fabric.link(r));
    std::vector<float> data(count, 1.0f);
    algorithms::CollectiveOptions options;
    options.algorithm = algorithm;
    options.cost_model = model;
    options.chunk_bytes = 1 << 20;
    Status st =
        all_reduce(link, data.data(), data.data(), count, DType::kFloat32, ReduceOp::kSum, options);
    sends[static_cast<std::size_t>(r)] = link.sends;
    return st;
  });
  for (const Status& st : statuses) EXPECT_TRUE(st.is_ok()) << st.to_string();
  return sends[0];
}

TEST(CostModel, AllReduceHonoursForcedAlgorithmAndModel) {
  // n=8, tiny message: direct sends 7 messages, ring 14, halving-doubling 6.
  EXPECT_EQ(sends_of_rank0(algorithms::AllReduceAlgorithm::kDirect, nullptr, 8, 8), 7);
  EXPECT_EQ(sends_of_rank0(algorithms::AllReduceAlgorithm::kRing, nullptr, 8, 8), 14);
  EXPECT_EQ(sends_of_rank0(algorithms::AllReduceAlgorithm::kHalvingDoubling, nullptr, 8, 8), 6);
  // kAuto follows the model it is given: with free messages, bandwidth decides (ring).
  const algorithms::CostModel free_messages(0.0, 1.0 / 5e9, 1.0 / 10e9);
  EXPECT_EQ(free_messages.choose(8, 32), algorithms::AllReduceAlgorithm::kRing);
  EXPECT_EQ(sends_of_rank0(algorithms::AllReduceAlgorithm::kAuto, &free_messages, 8, 8), 14);
  // The default (shared-core) model takes the tree there: rank 0 is its root, 2 sends.
  EXPECT_EQ(sends_of_rank0(algorithms::AllReduceAlgorithm::kAuto, nullptr, 8, 8), 2);
}

}  // namespace
}  // namespace tributary
