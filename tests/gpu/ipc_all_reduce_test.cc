// The CUDA IPC all-reduce (gpu/ipc_all_reduce.h) over its host-memory seam
// (gpu/host_device_memory.h: buffers are shared-memory objects mapped by name, so the
// handle exchange and mapping are real), ranks as threads over the in-memory link: the
// result against a left fold in rank order, to the bit; chunking; the injected failure of
// each step on one rank going to the staged path mid-collective on every rank; a group
// that cannot map its peers; ranks that disagree; the host link failing. Across real
// processes and TCP: gpu_ipc_bench --memory host (ctest gpu_ipc_processes_test).
#include "gpu/ipc_all_reduce.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "algorithms/collectives.h"
#include "algorithms/memory_link.h"
#include "core/reduce.h"
#include "gpu/fault_injecting_memory.h"
#include "gpu/host_device_memory.h"
#include "tests/support/rank_threads.h"

namespace tributary::gpu {
namespace {

using algorithms::MemoryFabric;
using std::chrono::seconds;

Deadline soon() { return Deadline::after(seconds(10)); }

// Distinct, not exactly representable sums: any change of order changes bits.
std::vector<float> input_of(int rank, std::size_t count) {
  std::vector<float> v(count);
  for (std::size_t i = 0; i < count; ++i) {
    v[i] = 0.1f * static_cast<float>(rank + 1) + 1e-3f * static_cast<float>(i % 97) +
           (rank % 2 ? 1e-7f : -3e-8f) * static_cast<float>(i);
  }
  return v;
}

// What the IPC all-reduce must give: every element folded left in rank order.
std::vector<float> left_fold(int n, std::size_t count, ReduceOp op) {
  std::vector<float> acc = input_of(0, count);
  for (int r = 1; r < n; ++r) {
    const std::vector<float> next = input_of(r, count);
    reduce_into(acc.data(), next.data(), count, DType::kFloat32, op);
  }
  if (op == ReduceOp::kAvg) scale_by_count(acc.data(), count, DType::kFloat32, n);
  return acc;
}

// Integer-valued inputs: any order of summation gives the same bits, so a result part IPC
// and part staged can be compared exactly.
std::vector<float> integers_of(int rank, std::size_t count) {
  std::vector<float> v(count);
  for (std::size_t i = 0; i < count; ++i) v[i] = static_cast<float>((rank + 1) * 1000 + i % 501);
  return v;
}

struct Group {
  explicit Group(int n) : fabric(n), memories(static_cast<std::size_t>(n)) {
    for (auto& m : memories) m = std::make_unique<HostDeviceMemory>();
  }
  MemoryFabric fabric;
  std::vector<std::unique_ptr<HostDeviceMemory>> memories;
};

// The staged path of these tests: the group's host all-reduce (the "device" is host memory).
StagedAllReduce staged_over(algorithms::Link& link, std::uint64_t seq) {
  return [&link, seq](const void* send, void* recv, std::size_t count) {
    algorithms::CollectiveOptions o;
    o.seq = seq;
    o.deadline = soon();
    return algorithms::all_reduce(link, send, recv, count, DType::kFloat32, ReduceOp::kSum, o);
  };
}

class IpcAllReduceSizes
    : public ::testing::TestWithParam<std::tuple<int, std::size_t, ReduceOp, bool>> {};

TEST_P(IpcAllReduceSizes, GivesTheLeftFoldInRankOrderOnEveryRank) {
  const auto [n, count, op, in_place] = GetParam();
  Group g(n);
  const std::vector<float> want = left_fold(n, count, op);
  // 4 KiB buffers: 2 KiB chunks (512 floats), so the larger counts take several.
  const auto results = testing::run_ranks(n, [&](int r) -> Status {
    algorithms::Link& link = g.fabric.link(r);
    auto ipc = IpcAllReduce::open(link, *g.memories[static_cast<std::size_t>(r)], 4096, 1, soon());
    TRIB_RETURN_IF_ERROR(ipc.status());
    EXPECT_EQ((*ipc)->chunk_bytes(), 2048u);
    // The "device" buffers are host memory here.
    std::vector<float> send;
    std::vector<float> out(count, -1.0f);
    for (std::uint64_t seq = 2; seq < 4; ++seq) {  // twice: the buffers are reused
      send = input_of(r, count);
      float* recv = in_place ? send.data() : out.data();
      const auto o = (*ipc)->all_reduce(send.data(), recv, count, DType::kFloat32, op, seq, soon());
      TRIB_RETURN_IF_ERROR(o.status);
      EXPECT_EQ(o.done, count);
      EXPECT_EQ(std::memcmp(recv, want.data(), count * sizeof(float)), 0)
          << "rank " << r << " seq " << seq;
    }
    EXPECT_TRUE((*ipc)->usable());
    return Status::ok();
  });
  for (const Status& st : results) EXPECT_TRUE(st.is_ok()) << st.to_string();
}

INSTANTIATE_TEST_SUITE_P(
    Groups, IpcAllReduceSizes,
    ::testing::Combine(::testing::Values(2, 3, 4),
                       ::testing::Values(std::size_t{0}, std::size_t{1}, std::size_t{7},
                                         std::size_t{512}, std::size_t{1500}),
                       ::testing::Values(ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax),
                       ::testing::Bool()));

TEST(IpcAllReduce, MoreRanksThanOneReductionTakesFoldInBatchesInRankOrder) {
  constexpr int n = 10;  // DeviceMemory::kMaxSources is 8
  constexpr std::size_t count = 1500;
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
    Group g(n);
    const std::vector<float> want = left_fold(n, count, op);
    const auto results = testing::run_ranks(n, [&](int r) -> Status {
      auto ipc = IpcAllReduce::open(g.fabric.link(r), *g.memories[static_cast<std::size_t>(r)],
                                    8192, 1, soon());
      TRIB_RETURN_IF_ERROR(ipc.status());
      const std::vector<float> send = input_of(r, count);
      std::vector<float> out(count);
      TRIB_RETURN_IF_ERROR(
          (*ipc)
              ->all_reduce(send.data(), out.data(), count, DType::kFloat32, op, 2, soon())
              .status);
      EXPECT_EQ(std::memcmp(out.data(), want.data(), count * sizeof(float)), 0) << "rank " << r;
      return Status::ok();
    });
    for (const Status& st : results) EXPECT_TRUE(st.is_ok()) << st.to_string();
  }
}

TEST(IpcAllReduce, HalfPrecisionReducesLikeTheHost) {
  constexpr int n = 3;
  constexpr std::size_t count = 1000;
  Group g(n);
  std::vector<std::vector<std::uint16_t>> in(n, std::vector<std::uint16_t>(count));
  for (int r = 0; r < n; ++r) {
    const std::vector<float> f = input_of(r, count);
    float_to_bfloat16(f.data(), in[static_cast<std::size_t>(r)].data(), count);
  }
  std::vector<std::uint16_t> want = in[0];
  for (int r = 1; r < n; ++r)
    reduce_into(want.data(), in[static_cast<std::size_t>(r)].data(), count, DType::kBFloat16,
                ReduceOp::kSum);
  const auto results = testing::run_ranks(n, [&](int r) -> Status {
    auto ipc = IpcAllReduce::open(g.fabric.link(r), *g.memories[static_cast<std::size_t>(r)], 1024,
                                  1, soon());
    TRIB_RETURN_IF_ERROR(ipc.status());
    std::vector<std::uint16_t> out(count);
    const auto o = (*ipc)->all_reduce(in[static_cast<std::size_t>(r)].data(), out.data(), count,
                                      DType::kBFloat16, ReduceOp::kSum, 2, soon());
    TRIB_RETURN_IF_ERROR(o.status);
    EXPECT_EQ(out, want) << "rank " << r;
    return Status::ok();
  });
  for (const Status& st : results) EXPECT_TRUE(st.is_ok()) << st.to_string();
}

// One rank's device fails at its k-th stream operation (k runs through every step of the
// first two chunks: copy in, the slice's copy and reductions, the gather): every rank ends
// the IPC part at the same chunk and the staged path does the rest, in the same collective;
// the result is exact; the group stays staged afterwards.
class IpcFallback : public ::testing::TestWithParam<std::tuple<int, bool>> {};

TEST_P(IpcFallback, AFailedDeviceOperationOnOneRankGoesStagedOnEveryRankMidCollective) {
  const auto [fail_op, in_place] = GetParam();
  constexpr int n = 3;
  constexpr std::size_t count = 1200;  // 512 floats a chunk: 3 chunks
  Group g(n);
  std::vector<float> want(count, 0.0f);
  for (int r = 0; r < n; ++r) {
    const auto v = integers_of(r, count);
    for (std::size_t i = 0; i < count; ++i) want[i] += v[i];
  }
  std::vector<std::size_t> done(n);
  const auto results = testing::run_ranks(n, [&](int r) -> Status {
    algorithms::Link& link = g.fabric.link(r);
    FaultInjectingMemory memory(*g.memories[static_cast<std::size_t>(r)]);
    if (r == 1) memory.fail_op = static_cast<std::uint64_t>(fail_op);
    auto ipc = IpcAllReduce::open(link, memory, 4096, 1, soon());
    TRIB_RETURN_IF_ERROR(ipc.status());
    std::vector<float> send = integers_of(r, count);
    std::vector<float> out(count, -1.0f);
    float* recv = in_place ? send.data() : out.data();
    const auto o =
        (*ipc)->all_reduce(send.data(), recv, count, DType::kFloat32, ReduceOp::kSum, 2, soon());
    done[static_cast<std::size_t>(r)] = o.done;
    EXPECT_EQ(o.status.code(), StatusCode::kUnavailable) << o.status.to_string();
    EXPECT_NE(o.status.message().find("rank 1"), std::string::npos) << o.status.to_string();
    EXPECT_FALSE((*ipc)->usable());
    // The caller's fallback: the rest staged, from where the IPC part ended.
    const std::size_t skip = o.done;
    TRIB_RETURN_IF_ERROR(staged_over(link, 3)(send.data() + skip, recv + skip, count - skip));
    EXPECT_EQ(std::memcmp(recv, want.data(), count * sizeof(float)), 0) << "rank " << r;
    // Afterwards the whole collective goes staged, through all_reduce_with_fallback.
    std::vector<float> again = integers_of(r, count);
    std::vector<float> out2(count);
    TRIB_RETURN_IF_ERROR(all_reduce_with_fallback(ipc->get(), again.data(), out2.data(), count,
                                                  DType::kFloat32, ReduceOp::kSum, 4, soon(),
                                                  staged_over(link, 5), Logger()));
    EXPECT_EQ(out2, want) << "rank " << r;
    return Status::ok();
  });
  for (const Status& st : results) EXPECT_TRUE(st.is_ok()) << st.to_string();
  // Every rank stopped at the same chunk boundary.
  EXPECT_EQ(done[0], done[1]);
  EXPECT_EQ(done[1], done[2]);
  EXPECT_EQ(done[0] % 512, 0u);
}

// Rank 1's operations per chunk: the copy in, the slice's reduction, 3 copies out (= 5).
// 1: the copy in; 2: the reduction; 3-5: the gather; 6, 7, 9: the same in chunk 2.
INSTANTIATE_TEST_SUITE_P(EveryStep, IpcFallback,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 5, 6, 7, 9),
                                            ::testing::Bool()));

TEST(IpcAllReduce, TheWrapperRunsTheWholeCollectiveOnIpcWhenNothingFails) {
  constexpr int n = 2;
  constexpr std::size_t count = 2000;
  Group g(n);
  const auto results = testing::run_ranks(n, [&](int r) -> Status {
    algorithms::Link& link = g.fabric.link(r);
    auto ipc = IpcAllReduce::open(link, *g.memories[static_cast<std::size_t>(r)], 4096, 1, soon());
    TRIB_RETURN_IF_ERROR(ipc.status());
    std::vector<float> v = integers_of(r, count);
    bool staged_ran = false;
    const StagedAllReduce staged = [&](const void*, void*, std::size_t) {
      staged_ran = true;
      return error(StatusCode::kInternal, "the staged path should not run");
    };
    TRIB_RETURN_IF_ERROR(all_reduce_with_fallback(ipc->get(), v.data(), v.data(), count,
                                                  DType::kFloat32, ReduceOp::kSum, 2, soon(),
                                                  staged, Logger()));
    EXPECT_FALSE(staged_ran);
    EXPECT_EQ(v[10], static_cast<float>(1000 + 10 + 2000 + 10));
    return Status::ok();
  });
  for (const Status& st : results) EXPECT_TRUE(st.is_ok()) << st.to_string();
}

TEST(IpcAllReduce, AGroupWhereOneRankCannotMapItsPeersHasNoIpcPathOnAnyRank) {
  constexpr int n = 3;
  Group g(n);
  const auto results = testing::run_ranks(n, [&](int r) -> Status {
    FaultInjectingMemory memory(*g.memories[static_cast<std::size_t>(r)]);
    memory.fail_open_peer = r == 2;
    auto ipc = IpcAllReduce::open(g.fabric.link(r), memory, 4096, 1, soon());
    EXPECT_EQ(ipc.status().code(), StatusCode::kUnavailable) << ipc.status().to_string();
    EXPECT_NE(ipc.status().message().find("rank 2"), std::string::npos) << ipc.status().to_string();
    EXPECT_NE(ipc.status().message().find("mapping"), std::string::npos)
        << ipc.status().to_string();
    // The group goes staged; the link is intact.
    std::vector<float> v = integers_of(r, 100);
    return all_reduce_with_fallback(nullptr, v.data(), v.data(), 100, DType::kFloat32,
                                    ReduceOp::kSum, 2, soon(), staged_over(g.fabric.link(r), 3),
                                    Logger());
  });
  for (const Status& st : results) EXPECT_TRUE(st.is_ok()) << st.to_string();
}

TEST(IpcAllReduce, RanksThatDisagreeOnTheCountFailWithMismatch) {
  constexpr int n = 2;
  Group g(n);
  const auto results = testing::run_ranks(n, [&](int r) -> Status {
    auto ipc = IpcAllReduce::open(g.fabric.link(r), *g.memories[static_cast<std::size_t>(r)], 4096,
                                  1, soon());
    TRIB_RETURN_IF_ERROR(ipc.status());
    std::vector<float> v(100 + static_cast<std::size_t>(r), 1.0f);
    return (*ipc)
        ->all_reduce(v.data(), v.data(), v.size(), DType::kFloat32, ReduceOp::kSum, 2, soon())
        .status;
  });
  for (const Status& st : results) EXPECT_EQ(st.code(), StatusCode::kMismatch) << st.to_string();
}

TEST(IpcAllReduce, AHostLinkFailureIsNotAnIpcFailure) {
  constexpr int n = 3;
  Group g(n);
  std::vector<std::unique_ptr<IpcAllReduce>> ipcs(n);
  const auto opened = testing::run_ranks(n, [&](int r) -> Status {
    auto ipc = IpcAllReduce::open(g.fabric.link(r), *g.memories[static_cast<std::size_t>(r)], 4096,
                                  1, soon());
    TRIB_RETURN_IF_ERROR(ipc.status());
    ipcs[static_cast<std::size_t>(r)] = std::move(*ipc);
    return Status::ok();
  });
  for (const Status& st : opened) ASSERT_TRUE(st.is_ok()) << st.to_string();
  g.fabric.kill(2);
  const auto results = testing::run_ranks(2, [&](int r) -> Status {
    std::vector<float> v(100, 1.0f);
    bool staged_ran = false;
    const Status st = all_reduce_with_fallback(
        ipcs[static_cast<std::size_t>(r)].get(), v.data(), v.data(), v.size(), DType::kFloat32,
        ReduceOp::kSum, 2, soon(),
        [&](const void*, void*, std::size_t) {
          staged_ran = true;
          return Status::ok();
        },
        Logger());
    EXPECT_FALSE(staged_ran);
    return st;
  });
  for (const Status& st : results) EXPECT_EQ(st.code(), StatusCode::kPeerLost) << st.to_string();
}

TEST(IpcAllReduce, ABufferTooSmallForTheGroupIsRefused) {
  Group g(1);
  HostDeviceMemory memory;
  auto ipc = IpcAllReduce::open(g.fabric.link(0), memory, 8, 1, soon());
  EXPECT_EQ(ipc.status().code(), StatusCode::kInvalidArgument);
}

TEST(HostDeviceMemory, APeerMapsTheSameBytesByHandleAndAFreedBufferCannotBeMapped) {
  HostDeviceMemory a;
  HostDeviceMemory b;
  auto buf = a.allocate(4096);
  ASSERT_TRUE(buf.is_ok()) << buf.status().to_string();
  std::memset(*buf, 0x5a, 4096);
  auto h = a.export_handle(*buf);
  ASSERT_TRUE(h.is_ok());
  auto mapped = b.open_peer(*h);
  ASSERT_TRUE(mapped.is_ok()) << mapped.status().to_string();
  EXPECT_EQ(static_cast<unsigned char*>(*mapped)[4095], 0x5a);
  static_cast<unsigned char*>(*mapped)[0] = 0x11;  // shared, both ways
  EXPECT_EQ(static_cast<unsigned char*>(*buf)[0], 0x11);
  b.close_peer(*mapped);
  a.free(*buf);
  EXPECT_EQ(b.open_peer(*h).status().code(), StatusCode::kUnavailable);
  IpcHandle garbage{};
  EXPECT_EQ(b.open_peer(garbage).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tributary::gpu
