// RdmaTransport: what it advertises and which pairs it connects (from adverts alone), and
// building a group over socketpair channels: over fake verbs (offers swapped and checked,
// queue pairs connected, a working link; a garbage offer, a silent peer, a member that
// cannot open its queue pairs), and over the real device when this machine has one.
#include <gtest/gtest.h>

#include <sys/socket.h>
#include <unistd.h>

#include "algorithms/collectives.h"
#include "algorithms/memory_link.h"
#include "tests/algorithms/test_values.h"
#include "tests/support/rank_threads.h"
#include "tests/transport/rdma_test_util.h"
#include "transport/rdma_transport.h"
#include "transport/transport_table.h"

namespace tributary::testing {
namespace {

using namespace std::chrono_literals;
using transport::GroupSpec;
using transport::MemberAdvert;
using transport::RdmaTransport;
using transport::RdmaTransportConfig;

MemberAdvert member(std::vector<std::string> caps) {
  return MemberAdvert{1, "127.0.0.1:1", std::move(caps), ""};
}

RdmaTransportConfig tiny_config() {
  RdmaTransportConfig c;
  c.slots = tiny_slots();
  return c;
}

TEST(RdmaTransport, AdvertisesTheDeviceItOpenedAndNothingWithoutOne) {
  auto fabric = std::make_shared<FakeFabric>();
  SocketpairChannels channels(1);
  RdmaTransport with(tiny_config(), channels,
                     fabric->device(0, "mlx5_0/1/fe800000000000000000000000000001"));
  EXPECT_EQ(with.advertise(),
            std::vector<std::string>{"rdma:mlx5_0/1/fe800000000000000000000000000001"});
  EXPECT_EQ(with.unavailable_reason(), "");
  RdmaTransport without(
      tiny_config(), channels,
      error(StatusCode::kUnavailable, "no RDMA device: ibv_get_device_list found none"));
  EXPECT_TRUE(without.advertise().empty());
  EXPECT_EQ(without.unavailable_reason(), "no RDMA device: ibv_get_device_list found none");
  GroupSpec spec{1, 0, std::vector<MemberAdvert>(2, member({"rdma:x/1/lid1"}))};
  const auto link = without.connect_group(spec, Deadline::after(1s));
  EXPECT_EQ(link.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(link.status().message().find("ibv_get_device_list found none"), std::string::npos)
      << link.status().to_string();
}

TEST(RdmaTransport, ConnectsMembersThatBothAdvertiseTheSameKindOfLink) {
  SocketpairChannels channels(1);
  RdmaTransport t(tiny_config(), channels, error(StatusCode::kUnavailable, "none"));
  const MemberAdvert ib1 = member({"shm:a", "rdma:mlx5_0/1/lid7", "tcp"});
  const MemberAdvert ib2 = member({"rdma:mlx5_1/2/lid9", "tcp"});
  const MemberAdvert roce = member({"rdma:rxe0/1/fe800000000000000000000000000001"});
  const MemberAdvert roce2 = member({"rdma:mlx5_0/1/00000000000000000000ffff0a000001"});
  const MemberAdvert plain = member({"shm:a", "tcp"});
  // The decision is made from adverts alone, so even a member without a device can say.
  EXPECT_TRUE(t.can_connect(ib1, ib2));
  EXPECT_TRUE(t.can_connect(ib2, ib1));
  EXPECT_TRUE(t.can_connect(roce, roce2));
  EXPECT_FALSE(t.can_connect(ib1, roce));  // InfiniBand and RoCE do not meet
  EXPECT_FALSE(t.can_connect(roce, ib1));
  EXPECT_FALSE(t.can_connect(ib1, plain));
  EXPECT_FALSE(t.can_connect(plain, ib1));
  EXPECT_FALSE(t.can_connect(member({"rdma"}), member({"rdma"})));      // no device named
  EXPECT_FALSE(t.can_connect(member({"rdma:x"}), member({"rdma:x"})));  // malformed
  EXPECT_FALSE(t.can_connect(member({"rdma:x/1/"}), member({"rdma:x/1/"})));
}

TEST(RdmaTransport, SitsBetweenSharedMemoryAndTcpInTheTable) {
  // A table [rdma, tcp-like]: rdma carries a group where every member advertises it.
  auto fabric = std::make_shared<FakeFabric>();
  SocketpairChannels channels(2);
  std::vector<std::unique_ptr<transport::Transport>> ordered;
  ordered.push_back(std::make_unique<RdmaTransport>(tiny_config(), channels, fabric->device(0)));
  transport::TransportTable table(std::move(ordered), Logger("link"));
  GroupSpec both{1, 0, {member({"rdma:fake0/1/lid1"}), member({"rdma:fake0/1/lid2"})}};
  GroupSpec one{1, 0, {member({"rdma:fake0/1/lid1"}), member({"tcp"})}};
  ASSERT_TRUE(table.group_transport(both).is_ok());
  EXPECT_EQ((*table.group_transport(both))->name(), "rdma");
  EXPECT_EQ(table.group_transport(one).status().code(), StatusCode::kUnavailable);
}

TEST(RdmaTransport, BuildsAWorkingGroupOverTheChannels) {
  const int n = 3;
  auto fabric = std::make_shared<FakeFabric>();
  SocketpairChannels channels(n);
  GroupSpec spec{5, 0, std::vector<MemberAdvert>(n, member({"rdma:fake0/1/lid1"}))};
  std::vector<Bytes> out(n);
  algorithms::MemoryFabric memory(n);
  std::vector<Bytes> want(n);
  const auto results = run_ranks(n, [&](int r) -> Status {
    RdmaTransport t(tiny_config(), channels, fabric->device(r));
    GroupSpec mine = spec;
    mine.rank = r;
    TRIB_ASSIGN_OR_RETURN(auto link, t.connect_group(mine, Deadline::after(10s)));
    const Bytes in = make_input(DType::kFloat32, ReduceOp::kSum, r, 50000);
    out[r].resize(in.size());
    want[r].resize(in.size());
    algorithms::CollectiveOptions o;
    o.seq = 1;
    o.deadline = Deadline::after(10s);
    TRIB_RETURN_IF_ERROR(algorithms::all_reduce(*link, in.data(), out[r].data(), 50000,
                                                DType::kFloat32, ReduceOp::kSum, o));
    TRIB_RETURN_IF_ERROR(algorithms::all_reduce(memory.link(r), in.data(), want[r].data(), 50000,
                                                DType::kFloat32, ReduceOp::kSum, o));
    const auto traffic = t.traffic();
    if (traffic.size() != static_cast<std::size_t>(n - 1) || traffic[0].bytes_sent == 0) {
      return error(StatusCode::kInternal, "no traffic counted");
    }
    return Status();
  });
  for (const Status& s : results) ASSERT_TRUE(s.is_ok()) << s.to_string();
  for (int r = 0; r < n; ++r) EXPECT_EQ(out[r], want[r]) << "rank " << r;
  EXPECT_EQ(fabric->rnr_errors(), 0u);
}

TEST(RdmaTransport, AMemberThatCannotOpenItsQueuePairsFailsBothEndsAtOnce) {
  auto fabric = std::make_shared<FakeFabric>();
  fabric->fail_open(0);
  SocketpairChannels channels(2);
  GroupSpec spec{1, 0, std::vector<MemberAdvert>(2, member({"rdma:fake0/1/lid1"}))};
  const auto t0 = std::chrono::steady_clock::now();
  const auto results = run_ranks(2, [&](int r) -> Status {
    RdmaTransport t(tiny_config(), channels, fabric->device(r));
    GroupSpec mine = spec;
    mine.rank = r;
    return t.connect_group(mine, Deadline::after(20s)).status();
  });
  EXPECT_EQ(results[0].code(), StatusCode::kUnavailable) << results[0].to_string();
  EXPECT_EQ(results[1].code(), StatusCode::kUnavailable) << results[1].to_string();
  EXPECT_NE(results[1].message().find("rank 0"), std::string::npos) << results[1].to_string();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
}

TEST(RdmaTransport, AnOfferForAnotherEpochIsAMismatch) {
  auto fabric = std::make_shared<FakeFabric>();
  SocketpairChannels channels(2);
  const auto results = run_ranks(2, [&](int r) -> Status {
    RdmaTransport t(tiny_config(), channels, fabric->device(r));
    GroupSpec spec{r == 0 ? 3u : 4u, r,
                   std::vector<MemberAdvert>(2, member({"rdma:fake0/1/lid1"}))};
    return t.connect_group(spec, Deadline::after(10s)).status();
  });
  EXPECT_EQ(results[0].code(), StatusCode::kMismatch) << results[0].to_string();
  EXPECT_EQ(results[1].code(), StatusCode::kMismatch) << results[1].to_string();
}

TEST(RdmaTransport, AGarbageOfferIsRefused) {
  auto fabric = std::make_shared<FakeFabric>();
  SocketpairChannels channels(2);
  const int fd = channels.steal(0, 1);
  ASSERT_GE(fd, 0);
  char garbage[64] = "GET / HTTP/1.1\n";
  ASSERT_EQ(::write(fd, garbage, sizeof(garbage)), static_cast<ssize_t>(sizeof(garbage)));
  RdmaTransport t(tiny_config(), channels, fabric->device(1));
  GroupSpec spec{1, 1, std::vector<MemberAdvert>(2, member({"rdma:fake0/1/lid1"}))};
  auto link = t.connect_group(spec, Deadline::after(5s));
  ::close(fd);
  EXPECT_EQ(link.status().code(), StatusCode::kBadFrame) << link.status().to_string();
}

TEST(RdmaTransport, APeerThatNeverAnswersFailsAtTheDeadlineNamingIt) {
  auto fabric = std::make_shared<FakeFabric>();
  SocketpairChannels channels(2);
  const int fd = channels.steal(1, 0);  // rank 1's end: nobody reads the offer there
  RdmaTransport t(tiny_config(), channels, fabric->device(0));
  GroupSpec spec{1, 0, std::vector<MemberAdvert>(2, member({"rdma:fake0/1/lid1"}))};
  auto link = t.connect_group(spec, Deadline::after(200ms));
  ::close(fd);
  EXPECT_EQ(link.status().code(), StatusCode::kTimedOut) << link.status().to_string();
  EXPECT_NE(link.status().message().find("rank 1"), std::string::npos) << link.status().to_string();
}

// The real thing: libibverbs, this machine's device, ranks as threads in one process (each
// with its own transport and queue pairs, looped back through the adapter).
TEST(RdmaHardware, EveryAllReduceOverTheRealDeviceMatchesTheMemoryFabric) {
  if (!transport::rdma_verbs_built()) {
    GTEST_SKIP() << "built without libibverbs: the verbs path is not compiled in";
  }
  auto device = transport::open_rdma_device();
  if (!device.is_ok()) GTEST_SKIP() << device.status().message();
  for (int n : {2, 3}) {
    SocketpairChannels channels(n);
    GroupSpec spec{1, 0, std::vector<MemberAdvert>(n, member({"rdma:" + (*device)->advert()}))};
    algorithms::MemoryFabric memory(n);
    std::uint64_t seq = 1;
    std::vector<std::unique_ptr<algorithms::Link>> links(static_cast<std::size_t>(n));
    const auto connected = run_ranks(n, [&](int r) -> Status {
      RdmaTransportConfig c;
      c.slots = {4, 8, 4096};
      RdmaTransport t(c, channels, *device);
      GroupSpec mine = spec;
      mine.rank = r;
      TRIB_ASSIGN_OR_RETURN(links[r], t.connect_group(mine, Deadline::after(10s)));
      return Status();
    });
    for (const Status& s : connected) ASSERT_TRUE(s.is_ok()) << s.to_string();
    for (int a = 1; a < algorithms::kNumAllReduceAlgorithms; ++a) {
      for (std::size_t count : {0, 1, 7, 1000, 70001}) {
        std::vector<Bytes> got(n), want(n);
        const auto results = run_ranks(n, [&](int r) -> Status {
          const Bytes in = make_input(DType::kFloat64, ReduceOp::kSum, r, count);
          got[r].resize(in.size());
          want[r].resize(in.size());
          algorithms::CollectiveOptions o;
          o.seq = seq;
          o.algorithm = static_cast<algorithms::AllReduceAlgorithm>(a);
          o.deadline = Deadline::after(10s);
          TRIB_RETURN_IF_ERROR(algorithms::all_reduce(*links[r], in.data(), got[r].data(), count,
                                                      DType::kFloat64, ReduceOp::kSum, o));
          return algorithms::all_reduce(memory.link(r), in.data(), want[r].data(), count,
                                        DType::kFloat64, ReduceOp::kSum, o);
        });
        ++seq;
        for (const Status& s : results) ASSERT_TRUE(s.is_ok()) << s.to_string();
        for (int r = 0; r < n; ++r) ASSERT_EQ(got[r], want[r]) << "n " << n << " rank " << r;
      }
    }
  }
}

}  // namespace
}  // namespace tributary::testing
