#include "gpu/gpu_info.h"

#include <gtest/gtest.h>

namespace tributary::gpu {
namespace {

TEST(GpuInfo, ExplainsWhyGpuIsUnavailable) {
  const GpuInfo info = query_gpu();
  if (!info.usable()) {
    EXPECT_FALSE(info.reason.empty());
    GTEST_SKIP() << "no usable GPU: " << info.reason;
  }
  EXPECT_GT(info.device_count, 0);
  EXPECT_TRUE(info.reason.empty());
}

}  // namespace
}  // namespace tributary::gpu
