// reduce_scatter and all_gather sweeps: world size 1..16 x counts x layouts, including
// the in-place layouts of collectives.h and many tiny chunks.
#include <gtest/gtest.h>

#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "algorithms/collectives.h"
#include "algorithms/memory_link.h"
#include "test_values.h"
#include "tests/support/rank_threads.h"

namespace tributary {
namespace {

using testing::Bytes;

struct Case {
  std::size_t count;  // per block
  DType dtype;
  ReduceOp op;
  bool in_place;
  std::size_t chunk_bytes;
};

std::string describe(const char* what, int n, const Case& c) {
  std::ostringstream s;
  s << what << " n=" << n << " count=" << c.count << " " << to_string(c.dtype) << " "
    << to_string(c.op) << (c.in_place ? " in-place" : " out-of-place")
    << " chunk=" << c.chunk_bytes;
  return s.str();
}

std::vector<Case> sweep_cases(int n) {
  const auto un = static_cast<std::size_t>(n);
  std::vector<Case> cases;
  for (bool in_place : {false, true}) {
    for (std::size_t count :
         {std::size_t{0}, std::size_t{1}, std::size_t{7}, un + 1, std::size_t{257}}) {
      cases.push_back({count, DType::kFloat32, ReduceOp::kSum, in_place, 64});
      cases.push_back({count, DType::kBFloat16, ReduceOp::kAvg, in_place, 64});
      cases.push_back({count, DType::kInt8, ReduceOp::kMin, in_place, 5});
      cases.push_back({count, DType::kInt64, ReduceOp::kProd, in_place, 1 << 20});
    }
  }
  return cases;
}

class RingCollectivesSweep : public ::testing::TestWithParam<int> {};

TEST_P(RingCollectivesSweep, ReduceScatter) {
  const int n = GetParam();
  const auto un = static_cast<std::size_t>(n);
  const std::vector<Case> cases = sweep_cases(n);
  algorithms::MemoryFabric fabric(n);
  // send[k][r]: n blocks; recv[k][r]: one block, or a view into send when in place.
  std::vector<std::vector<Bytes>> inputs(cases.size()), send(cases.size()), recv(cases.size());
  for (std::size_t k = 0; k < cases.size(); ++k) {
    for (int r = 0; r < n; ++r) {
      inputs[k].push_back(testing::make_input(cases[k].dtype, cases[k].op, r, cases[k].count * un));
    }
    send[k] = inputs[k];
    recv[k].assign(un, Bytes(cases[k].count * dtype_size(cases[k].dtype), std::byte{0xCD}));
  }
  const auto statuses = testing::run_ranks(n, [&](int r) -> Status {
    const auto ur = static_cast<std::size_t>(r);
    for (std::size_t k = 0; k < cases.size(); ++k) {
      const Case& c = cases[k];
      algorithms::CollectiveOptions options;
      options.seq = k + 1;
      options.chunk_bytes = c.chunk_bytes;
      options.deadline = Deadline::after(std::chrono::seconds(20));
      std::byte* in = send[k][ur].data();
      std::byte* out = c.in_place ? in + ur * c.count * dtype_size(c.dtype) : recv[k][ur].data();
      Status st = reduce_scatter(fabric.link(r), in, out, c.count, c.dtype, c.op, options);
      if (!st.is_ok())
        return error(st.code(), describe("reduce_scatter", n, c) + ": " + st.message());
    }
    return Status::ok();
  });
  for (int r = 0; r < n; ++r)
    ASSERT_TRUE(statuses[static_cast<std::size_t>(r)].is_ok())
        << statuses[static_cast<std::size_t>(r)].to_string();
  for (std::size_t k = 0; k < cases.size(); ++k) {
    const Case& c = cases[k];
    SCOPED_TRACE(describe("reduce_scatter", n, c));
    const std::size_t block_bytes = c.count * dtype_size(c.dtype);
    const Bytes want = testing::reference_reduce(inputs[k], c.count * un, c.dtype, c.op);
    for (std::size_t r = 0; r < un; ++r) {
      const std::byte* got = c.in_place ? send[k][r].data() + r * block_bytes : recv[k][r].data();
      EXPECT_EQ(testing::first_difference(
                    Bytes(got, got + block_bytes),
                    Bytes(want.begin() + static_cast<std::ptrdiff_t>(r * block_bytes),
                          want.begin() + static_cast<std::ptrdiff_t>((r + 1) * block_bytes)),
                    c.dtype),
                "")
          << "rank " << r;
      if (!c.in_place) {
        EXPECT_EQ(send[k][r], inputs[k][r]) << "rank " << r << " send modified";
      }
    }
  }
}

TEST_P(RingCollectivesSweep, AllGather) {
  const int n = GetParam();
  const auto un = static_cast<std::size_t>(n);
  const std::vector<Case> cases = sweep_cases(n);
  algorithms::MemoryFabric fabric(n);
  std::vector<std::vector<Bytes>> inputs(cases.size()), recv(cases.size());
  for (std::size_t k = 0; k < cases.size(); ++k) {
    const std::size_t block_bytes = cases[k].count * dtype_size(cases[k].dtype);
    for (int r = 0; r < n; ++r) {
      inputs[k].push_back(testing::make_input(cases[k].dtype, cases[k].op, r, cases[k].count));
      recv[k].emplace_back(block_bytes * un, std::byte{0xCD});
      if (cases[k].in_place && block_bytes > 0) {
        std::memcpy(recv[k].back().data() + static_cast<std::size_t>(r) * block_bytes,
                    inputs[k].back().data(), block_bytes);
      }
    }
  }
  const auto statuses = testing::run_ranks(n, [&](int r) -> Status {
    const auto ur = static_cast<std::size_t>(r);
    for (std::size_t k = 0; k < cases.size(); ++k) {
      const Case& c = cases[k];
      algorithms::CollectiveOptions options;
      options.seq = k + 1;
      options.chunk_bytes = c.chunk_bytes;
      options.deadline = Deadline::after(std::chrono::seconds(20));
      std::byte* out = recv[k][ur].data();
      const std::byte* in =
          c.in_place ? out + ur * c.count * dtype_size(c.dtype) : inputs[k][ur].data();
      Status st = all_gather(fabric.link(r), in, out, c.count, c.dtype, options);
      if (!st.is_ok()) return error(st.code(), describe("all_gather", n, c) + ": " + st.message());
    }
    return Status::ok();
  });
  for (int r = 0; r < n; ++r)
    ASSERT_TRUE(statuses[static_cast<std::size_t>(r)].is_ok())
        << statuses[static_cast<std::size_t>(r)].to_string();
  for (std::size_t k = 0; k < cases.size(); ++k) {
    const Case& c = cases[k];
    SCOPED_TRACE(describe("all_gather", n, c));
    Bytes want;
    for (const Bytes& in : inputs[k]) want.insert(want.end(), in.begin(), in.end());
    for (std::size_t r = 0; r < un; ++r) {
      EXPECT_EQ(testing::first_difference(recv[k][r], want, c.dtype), "") << "rank " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, RingCollectivesSweep, ::testing::Range(1, 17),
                         [](const ::testing::TestParamInfo<int>& info) {
                           // Appending, not "n" + ...: GCC 12 warns falsely (-Wrestrict).
                           std::string name = "n";
                           name += std::to_string(info.param);
                           return name;
                         });

TEST(RingCollectivesArguments, OverlapThatIsNotTheInPlaceLayout) {
  algorithms::MemoryFabric fabric(1);
  std::vector<float> buf(16, 1.0f);
  algorithms::CollectiveOptions options;
  EXPECT_EQ(reduce_scatter(fabric.link(0), buf.data(), buf.data() + 1, 8, DType::kFloat32,
                           ReduceOp::kSum, options)
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(
      all_gather(fabric.link(0), buf.data() + 1, buf.data(), 8, DType::kFloat32, options).code(),
      StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tributary
