// ShmTransport: which pairs it connects (host keys), and building a group over
// authenticated connections (here socketpairs from a fake channel source): segments
// offered, mapped and unlinked, a working link, and a garbage offer refused; and the sweep of
// segments left in /dev/shm by members killed while they connected.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ctime>
#include <map>

#include "algorithms/collectives.h"
#include "tests/algorithms/test_values.h"
#include "tests/support/rank_threads.h"
#include "transport/shm_transport.h"

namespace tributary::testing {
namespace {

using namespace std::chrono_literals;
using transport::GroupSpec;
using transport::MemberAdvert;

// Connections for every pair of an n-rank group, handed out per rank.
class FakeChannels final : public transport::ChannelSource {
 public:
  explicit FakeChannels(int n) : by_rank_(static_cast<std::size_t>(n)) {
    for (int lo = 0; lo < n; ++lo) {
      for (int hi = lo + 1; hi < n; ++hi) {
        int fds[2];
        if (::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) continue;
        by_rank_[lo].push_back({hi, fds[0], "fake"});
        by_rank_[hi].push_back({lo, fds[1], "fake"});
      }
    }
  }
  Result<std::vector<transport::PeerChannel>> connect_channels(const GroupSpec& spec,
                                                               Deadline) override {
    std::lock_guard lock(mu_);
    return std::move(by_rank_[spec.rank]);
  }
  // Takes rank `rank`'s end towards `peer` away, for a test to speak on it by hand.
  int steal(int rank, int peer) {
    std::lock_guard lock(mu_);
    auto& v = by_rank_[rank];
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (it->rank == peer) {
        const int fd = it->fd;
        v.erase(it);
        return fd;
      }
    }
    return -1;
  }

 private:
  std::mutex mu_;
  std::vector<std::vector<transport::PeerChannel>> by_rank_;
};

MemberAdvert member(std::vector<std::string> caps) {
  return MemberAdvert{1, "127.0.0.1:1", std::move(caps), ""};
}

TEST(ShmTransport, ConnectsExactlyTheMembersWithTheSameHostKey) {
  FakeChannels channels(1);
  transport::ShmTransport t({.host_key = "boot-a"}, channels);
  EXPECT_EQ(t.advertise(), std::vector<std::string>{"shm:boot-a"});
  EXPECT_TRUE(t.can_connect(member({"shm:boot-a", "tcp"}), member({"tcp", "shm:boot-a"})));
  EXPECT_FALSE(t.can_connect(member({"shm:boot-a"}), member({"shm:boot-b"})));
  EXPECT_FALSE(t.can_connect(member({"shm:boot-a"}), member({"tcp"})));
  EXPECT_FALSE(t.can_connect(member({"shm"}), member({"shm"})));  // no key, no claim
  EXPECT_FALSE(transport::host_key().empty());
  EXPECT_EQ(transport::host_key(), transport::host_key());
}

// Through rings, with combining receives, and single-copy (the setup's handshake finds
// that ranks of this very process may read each other).
class ShmTransportPaths : public ::testing::TestWithParam<transport::PathChoice> {};

TEST_P(ShmTransportPaths, BuildsAWorkingGroupOverTheChannels) {
  const int n = 3;
  FakeChannels channels(n);
  GroupSpec spec{5, 0, std::vector<MemberAdvert>(n, member({"shm:k"}))};
  std::vector<Bytes> out(n);
  const auto results = run_ranks(n, [&](int r) -> Status {
    transport::ShmTransport t({.ring_bytes = 8192,
                               .combine = GetParam(),
                               .single_copy = GetParam(),
                               .host_key = "k"},
                              channels);
    GroupSpec mine = spec;
    mine.rank = r;
    TRIB_ASSIGN_OR_RETURN(auto link, t.connect_group(mine, Deadline::after(10s)));
    const Bytes in = make_input(DType::kFloat32, ReduceOp::kSum, r, 50000);
    out[r].resize(in.size());
    algorithms::CollectiveOptions o;
    o.seq = 1;
    o.deadline = Deadline::after(10s);
    TRIB_RETURN_IF_ERROR(algorithms::all_reduce(*link, in.data(), out[r].data(), 50000,
                                                DType::kFloat32, ReduceOp::kSum, o));
    const auto traffic = t.traffic();
    if (traffic.size() != static_cast<std::size_t>(n - 1) || traffic[0].bytes_sent == 0) {
      return error(StatusCode::kInternal, "no traffic counted");
    }
    return Status();
  });
  for (const Status& s : results) ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(out[0], out[1]);
  EXPECT_EQ(out[0], out[2]);
}

INSTANTIATE_TEST_SUITE_P(Paths, ShmTransportPaths,
                         ::testing::Values(transport::PathChoice::kOff, transport::PathChoice::kOn),
                         [](const auto& info) { return std::string(to_string(info.param)); });

TEST(ShmTransport, ASegmentTheLowerRankCannotCreateFailsBothEndsAtOnce) {
  FakeChannels channels(2);
  GroupSpec spec{1, 0, std::vector<MemberAdvert>(2, member({"shm:k"}))};
  const auto t0 = std::chrono::steady_clock::now();
  const auto results = run_ranks(2, [&](int r) -> Status {
    // Rank 0 creates the pair's segment; a ring that is no power of two is refused.
    transport::ShmTransport t({.ring_bytes = r == 0 ? 5000u : 8192u, .host_key = "k"}, channels);
    GroupSpec mine = spec;
    mine.rank = r;
    return t.connect_group(mine, Deadline::after(20s)).status();
  });
  EXPECT_EQ(results[0].code(), StatusCode::kInvalidArgument) << results[0].to_string();
  EXPECT_EQ(results[1].code(), StatusCode::kUnavailable) << results[1].to_string();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
}

TEST(ShmTransport, AGarbageOfferIsRefused) {
  FakeChannels channels(2);
  const int fd = channels.steal(0, 1);
  ASSERT_GE(fd, 0);
  const char garbage[16] = "GET / HTTP/1.1\n";
  ASSERT_EQ(::write(fd, garbage, sizeof(garbage)), static_cast<ssize_t>(sizeof(garbage)));
  transport::ShmTransport t({.host_key = "k"}, channels);
  GroupSpec spec{1, 1, std::vector<MemberAdvert>(2, member({"shm:k"}))};
  auto link = t.connect_group(spec, Deadline::after(5s));
  ::close(fd);
  EXPECT_EQ(link.status().code(), StatusCode::kBadFrame) << link.status().to_string();
}

TEST(ShmTransport, APeerThatNeverAnswersFailsAtTheDeadline) {
  FakeChannels channels(2);
  const int fd = channels.steal(1, 0);  // rank 1's end: nobody reads the offer there
  transport::ShmTransport t({.host_key = "k"}, channels);
  GroupSpec spec{1, 0, std::vector<MemberAdvert>(2, member({"shm:k"}))};
  auto link = t.connect_group(spec, Deadline::after(200ms));
  ::close(fd);
  EXPECT_EQ(link.status().code(), StatusCode::kTimedOut) << link.status().to_string();
}

// A member killed while it set up a pair leaves the segment's name (and its rings' memory)
// in /dev/shm until the next boot; the next ShmTransport removes names of our shape older
// than ten minutes, and nothing else.
TEST(ShmSegment, StaleSegmentsAreSweptAndEverythingElseKept) {
  using transport::ShmSegment;
  auto old_name = ShmSegment::random_name();
  auto fresh_name = ShmSegment::random_name();
  ASSERT_TRUE(old_name.is_ok() && fresh_name.is_ok());
  const std::string other_name = "/tributary-not-a-segment-of-ours";
  ASSERT_TRUE(ShmSegment::create(*old_name, 1, 0, 1, 4096).is_ok());
  ASSERT_TRUE(ShmSegment::create(*fresh_name, 1, 0, 1, 4096).is_ok());
  const int other = ::shm_open(other_name.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_GE(other, 0);
  ::close(other);
  auto path = [](const std::string& name) { return "/dev/shm" + name; };
  // An hour old: the old segment and the file of another shape.
  const timespec an_hour_ago{::time(nullptr) - 3600, 0};
  const timespec times[2] = {an_hour_ago, an_hour_ago};
  ASSERT_EQ(::utimensat(AT_FDCWD, path(*old_name).c_str(), times, 0), 0);
  ASSERT_EQ(::utimensat(AT_FDCWD, path(other_name).c_str(), times, 0), 0);

  ShmSegment::sweep_stale(std::chrono::system_clock::now(), std::chrono::minutes(10));
  EXPECT_NE(::access(path(*old_name).c_str(), F_OK), 0);
  EXPECT_EQ(::access(path(*fresh_name).c_str(), F_OK), 0);
  EXPECT_EQ(::access(path(other_name).c_str(), F_OK), 0);
  ShmSegment::unlink(*fresh_name);
  ShmSegment::unlink(other_name);
}

}  // namespace
}  // namespace tributary::testing
