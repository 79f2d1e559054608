// The etcd store against a real etcd: election by lease, state restored by the next
// leader, a deposed leader's record failing the compare-and-swap, no epoch recorded twice,
// resignation, and deadlines when etcd is unreachable.
#include "coordinator_store/etcd_store.h"

#include <gtest/gtest.h>

#include "tests/integration/etcd_server.h"

namespace tributary::coordinator_store {
namespace {

using integration::EtcdServer;
using integration::TempDir;
using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(Base64, RoundTripsEveryLengthAndByte) {
  std::string all;
  for (int i = 0; i < 256; ++i) all.push_back(static_cast<char>(i));
  for (std::size_t n = 0; n <= 7; ++n) {
    const std::string in = all.substr(250 - n, n);
    auto out = base64_decode(base64_encode(in));
    ASSERT_TRUE(out.is_ok()) << out.status().to_string();
    EXPECT_EQ(*out, in) << n;
  }
  EXPECT_EQ(base64_encode("etcd"), "ZXRjZA==");
  EXPECT_EQ(*base64_decode(base64_encode(all)), all);
  EXPECT_FALSE(base64_decode("abc").is_ok());
  EXPECT_FALSE(base64_decode("a*c=").is_ok());
}

TEST(EtcdStoreConfig, RefusesWhatCannotWork) {
  EtcdStoreConfig c;
  c.endpoints = {"http://127.0.0.1:2379"};
  c.advertise = "tcp://127.0.0.1:7070";
  EXPECT_TRUE(validate(c).is_ok());
  auto bad = [&](auto change) {
    EtcdStoreConfig b = c;
    change(b);
    return validate(b).code() == StatusCode::kInvalidArgument;
  };
  EXPECT_TRUE(bad([](auto& b) { b.endpoints.clear(); }));
  EXPECT_TRUE(bad([](auto& b) { b.prefix = "no-slash"; }));
  EXPECT_TRUE(bad([](auto& b) { b.prefix = "/trailing/"; }));
  EXPECT_TRUE(bad([](auto& b) { b.lease_ttl = milliseconds(1500); }));
  EXPECT_TRUE(bad([](auto& b) { b.request_timeout = seconds(3); }));
  EXPECT_TRUE(bad([](auto& b) { b.advertise.clear(); }));
  EtcdStoreConfig not_http = c;
  not_http.endpoints = {"127.0.0.1:2379"};
  EXPECT_EQ(EtcdStore::create(not_http).status().code(), StatusCode::kInvalidArgument);
}

TEST(EtcdClient, AnUnreachableEtcdFailsWithinTheDeadline) {
  const int port = integration::pick_free_port();  // nobody listens there
  auto client = EtcdClient::create({"http://127.0.0.1:" + std::to_string(port)}, milliseconds(300));
  ASSERT_TRUE(client.is_ok());
  const auto start = std::chrono::steady_clock::now();
  auto got = (*client)->get("/k");
  EXPECT_EQ(got.status().code(), StatusCode::kUnavailable);
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(1500));
}

class EtcdStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (EtcdServer::binary().empty())
      GTEST_SKIP() << "etcd is not installed (scripts/deps.sh installs Debian's etcd-server)";
    etcd_.emplace(dir_);
    ASSERT_FALSE(etcd_->url().empty()) << etcd_->failure();
  }

  EtcdStoreConfig config(const std::string& advertise) const {
    EtcdStoreConfig c;
    c.endpoints = {etcd_->url()};
    c.prefix = "/test/cluster";
    c.lease_ttl = seconds(2);
    c.advertise = advertise;
    c.instance_id = advertise.back();
    return c;
  }

  std::unique_ptr<EtcdStore> store(const std::string& advertise,
                                   const Clock& clock = SteadyClock::instance()) {
    auto s = EtcdStore::create(config(advertise), clock);
    EXPECT_TRUE(s.is_ok()) << s.status().to_string();
    return s.is_ok() ? std::move(s).value() : nullptr;
  }

  static membership::JournalEntry view(membership::Epoch epoch,
                                       std::vector<membership::MemberId> ids) {
    membership::JournalEntry e;
    e.epoch = epoch;
    for (auto id : ids) {
      e.last_member_id = std::max(e.last_member_id, id);
      std::string name = "m";  // appended: GCC 12's false -Wrestrict (PR105651)
      name += std::to_string(id);
      e.members.push_back({id, {name, "host", "zone", "127.0.0.1:1", {}}});
    }
    return e;
  }

  std::vector<EtcdKeyValue> epochs() {
    auto client = EtcdClient::create({etcd_->url()}, seconds(1));
    auto kvs = (*client)->get_prefix("/test/cluster/epochs/");
    EXPECT_TRUE(kvs.is_ok()) << kvs.status().to_string();
    return kvs.is_ok() ? *kvs : std::vector<EtcdKeyValue>{};
  }

  TempDir dir_;
  std::optional<EtcdServer> etcd_;
};

TEST_F(EtcdStoreTest, OneLeaderTheStateMovesOnAndADeposedLeaderIssuesNothing) {
  // A's clock stands still: it believes its lease valid forever, like a paused process
  // that just woke up. Only the compare-and-swap can stop it.
  FakeClock frozen(TimePoint{} + seconds(1000));
  auto a = store("tcp://a:1", frozen);
  auto b = store("tcp://b:2");
  ASSERT_TRUE(a && b);

  auto a_state = a->campaign(nullptr);
  ASSERT_TRUE(a_state.is_ok()) << a_state.status().to_string();
  EXPECT_EQ(a_state->last_epoch, 0u);
  std::string leader;
  auto b_state = b->campaign(&leader);
  EXPECT_EQ(b_state.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(leader, "tcp://a:1");
  EXPECT_EQ(b->record(view(1, {1})).code(), StatusCode::kAborted) << "a standby recorded";

  ASSERT_TRUE(a->record(view(1, {1, 2})).is_ok());
  ASSERT_TRUE(a->record({3, 0, {}}).is_ok());  // a joiner's id: the view stays

  // A stops renewing (its clock does not move); B takes over once etcd expires A's lease.
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(integration::poll_until(integration::deadline_after(seconds(10)), [&] {
    b_state = b->campaign(&leader);
    return b_state.is_ok();
  })) << b_state.status().to_string();
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_LT(took, seconds(4)) << "a 2 s lease";
  EXPECT_EQ(b_state->last_epoch, 1u);
  EXPECT_EQ(b_state->last_member_id, 3u);
  ASSERT_EQ(b_state->members.size(), 2u);
  EXPECT_EQ(b_state->members[1].id, 2u);
  EXPECT_EQ(b_state->members[1].labels.name, "m2");

  // A wakes up and issues epoch 2: the lease compare fails; it stands down.
  const Status stale = a->record(view(2, {1, 2}));
  EXPECT_EQ(stale.code(), StatusCode::kAborted) << stale.to_string();
  EXPECT_EQ(a->still_leading().code(), StatusCode::kAborted);
  ASSERT_TRUE(b->record(view(2, {2})).is_ok());

  const auto history = epochs();
  ASSERT_EQ(history.size(), 2u);
  EXPECT_EQ(history[0].value.substr(0, 9), "tcp://a:1");
  EXPECT_EQ(history[1].value.substr(0, 9), "tcp://b:2");
}

TEST_F(EtcdStoreTest, AnEpochIsNeverRecordedTwice) {
  auto a = store("tcp://a:1");
  ASSERT_TRUE(a && a->campaign(nullptr).is_ok());
  ASSERT_TRUE(a->record(view(5, {1})).is_ok());
  // A leader's bug or a replayed decision: the epoch key exists, the record fails.
  EXPECT_EQ(a->record(view(5, {1})).code(), StatusCode::kAborted);
  EXPECT_EQ(epochs().size(), 1u);
}

TEST_F(EtcdStoreTest, AResigningLeaderIsReplacedAtOnce) {
  auto a = store("tcp://a:1");
  auto b = store("tcp://b:2");
  ASSERT_TRUE(a && b && a->campaign(nullptr).is_ok());
  ASSERT_TRUE(a->record(view(1, {1})).is_ok());
  a.reset();  // revokes the lease
  auto b_state = b->campaign(nullptr);
  ASSERT_TRUE(b_state.is_ok()) << b_state.status().to_string();
  EXPECT_EQ(b_state->last_epoch, 1u);
}

TEST_F(EtcdStoreTest, ALeaderRidesOutAnEtcdRestartShorterThanItsLease) {
  auto a = store("tcp://a:1");
  ASSERT_TRUE(a && a->campaign(nullptr).is_ok());
  ASSERT_TRUE(a->record(view(1, {1})).is_ok());
  ASSERT_TRUE(etcd_->restart()) << etcd_->failure();
  // etcd keeps leases across a restart and extends them: A still leads (renewals that
  // failed while it was down are retried) and its next record succeeds.
  Status st;
  ASSERT_TRUE(integration::poll_until(integration::deadline_after(seconds(10)), [&] {
    st = a->record(view(2, {1}));
    return st.is_ok() || st.code() == StatusCode::kAborted;
  }));
  if (!st.is_ok()) {
    // The restart took longer than the lease: A stood down; it wins again on its lease.
    auto again = a->campaign(nullptr);
    ASSERT_TRUE(again.is_ok()) << st.to_string() << "; " << again.status().to_string();
    EXPECT_EQ(again->last_epoch, 1u);
    st = a->record(view(2, {1}));
  }
  EXPECT_TRUE(st.is_ok()) << st.to_string();
}

}  // namespace
}  // namespace tributary::coordinator_store
