// CompressionPlan::parse and the tag check derived from the plan: what every rank must
// agree on before a compressed collective can run.
#include "compression/collectives/compression_plan.h"

#include <gtest/gtest.h>

#include <string>

#include "compression/collectives/exchange.h"
#include "tests/compression/collectives_test_util.h"

namespace tributary::compression::collectives {
namespace {

using namespace testing;

TEST(CompressedAllReduce, PlanParsing) {
  EXPECT_TRUE(must_plan("qint8").error_feedback);
  EXPECT_FALSE(must_plan("qint8:ef=0").error_feedback);
  EXPECT_FALSE(must_plan("float16").error_feedback);
  EXPECT_TRUE(must_plan("bfloat16:ef=1").error_feedback);
  EXPECT_EQ(must_plan("topk:density=0.01").kind, CompressionPlan::Kind::kSparse);
  EXPECT_EQ(must_plan("sign").kind, CompressionPlan::Kind::kQuantized);
  const CompressionPlan ps = must_plan("powersgd:rank=3,warm=0");
  EXPECT_EQ(ps.kind, CompressionPlan::Kind::kPowerSgd);
  EXPECT_EQ(ps.powersgd.rank, 3u);
  EXPECT_FALSE(ps.powersgd.warm_start);
  EXPECT_EQ(must_plan("qint8:bucket=512,ef=1").spec, must_plan("qint8").spec);
  for (const char* bad : {"qint9", "qint8:ef=2", "qint8:dense_at=2", "powersgd:rank=0",
                          "powersgd:bucket=3", "float32:ef=1", "topk:dense_at=-1"}) {
    EXPECT_FALSE(CompressionPlan::parse(bad).is_ok()) << bad;
  }
}

// The canonical spec and the tag check are what ranks compare: their values are pinned
// (computed by the code before the split into compression/collectives/, when the FNV-1a
// loop was hand-written), so a refactor cannot make old and new builds disagree silently.
TEST(CompressedAllReduce, CanonicalSpecsAndTagChecksArePinned) {
  struct Row {
    const char* spec;
    const char* canonical;
    std::uint32_t check_sum;  // count 1000, kSum, step 5, n 4
    std::uint32_t check_avg;  // count 0, kAvg, step 0, n 1
  };
  const Row rows[] = {
      {"float32", "float32", 0xe78abea2, 0x76240833},
      {"float16", "float16:ef=0", 0x622603f0, 0x1ddd282d},
      {"qint8", "qint8:bucket=512,stochastic=1,ef=1", 0x8dc8dd3a, 0xc132cf9b},
      {"qint4:bucket=256,zstd",
       "qint4:bucket=256,stochastic=1,zstd,zstd_level=1,zstd_min_gain=0.1,ef=1", 0x9c4c1e76,
       0xaf94345f},
      // Sign's canonical spec gained its momentum correction (2026-11-23): a plan that
      // changed, so its text and check changed with it.
      {"sign:bucket=64", "sign:bucket=64,momentum=0.9,ef=1", 0xf1f51708, 0x65eaf335},
      {"topk:density=0.01,warmup=50",
       "topk:density=0.01,warmup=50,momentum=0,values=bf16,ef=1,dense_at=1.000000", 0xeabefbda,
       0x830f4cfb},
      {"powersgd:rank=2", "powersgd:rank=2,ef=1,warm=1", 0x8320911d, 0x2478cda0},
      {"qint8:ef=0", "qint8:bucket=512,stochastic=1,ef=0", 0xab477569, 0xbcdba374},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.spec);
    const CompressionPlan plan = must_plan(row.spec);
    EXPECT_EQ(plan.spec, row.canonical);
    EXPECT_EQ(descriptor_check(plan, 1000, ReduceOp::kSum, 5, 4), row.check_sum);
    EXPECT_EQ(descriptor_check(plan, 0, ReduceOp::kAvg, 0, 1), row.check_avg);
  }
}

}  // namespace
}  // namespace tributary::compression::collectives
