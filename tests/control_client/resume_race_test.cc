// The client's resume after a coordinator restart, against a scripted coordinator on a
// real (CURVE) socket: answers that arrive late, after the client repeated its request,
// must still resume it. (Seen under chaos: a member that kept committing steps was removed
// for heartbeat_timeout: its client had taken the coordinator's late accept of its first
// resume request for a failed proof of the second, marked itself evicted and stopped
// heartbeating.) Also the client's side of incremental views (ViewDelta), and what its view
// listener hears.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>
#include <zmq.hpp>

#include "control/codec.h"
#include "control/join_auth.h"
#include "control_client/coordinator_client.h"
#include "tests/support/curve_socket.h"

namespace tributary::control_client {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr char kSecret[] = "resume-race";
constexpr membership::MemberId kId = 5;

// A coordinator played by hand: one ROUTER with the cluster's CURVE keys.
class ScriptedCoordinator {
 public:
  ScriptedCoordinator() : router_(ctx_, zmq::socket_type::router) {
    router_.set(zmq::sockopt::linger, 0);
    testing::use_cluster_server_keys(router_, kSecret);
    router_.bind("tcp://127.0.0.1:*");
  }
  std::string endpoint() { return router_.get(zmq::sockopt::last_endpoint); }

  // The next message of `type` (others are dropped), or nullopt after 5 s.
  std::optional<control::Envelope> expect(control::Envelope::BodyCase type) {
    const auto until = std::chrono::steady_clock::now() + seconds(5);
    while (std::chrono::steady_clock::now() < until) {
      zmq::pollitem_t item{router_.handle(), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, milliseconds(20));
      zmq::message_t id;
      zmq::message_t body;
      if (!(item.revents & ZMQ_POLLIN) || !router_.recv(id, zmq::recv_flags::dontwait)) continue;
      (void)router_.recv(body, zmq::recv_flags::none);
      peer_ = id.to_string();
      auto env = control::decode_envelope(body.to_string_view());
      if (env && env->body_case() == type) return *env;
    }
    return std::nullopt;
  }
  void send(const control::Envelope& env) {
    const std::string bytes = control::encode_envelope(env);
    router_.send(zmq::buffer(peer_), zmq::send_flags::sndmore);
    router_.send(zmq::buffer(bytes), zmq::send_flags::none);
  }
  // Challenge with `nonce`; returns the client nonce of the proof that answers it.
  std::optional<Nonce> challenge(const Nonce& nonce) {
    control::Envelope c;
    c.mutable_challenge()->set_nonce(control::to_bytes(nonce));
    send(c);
    auto proof = expect(control::Envelope::kJoinProof);
    if (!proof) return std::nullopt;
    return *control::nonce_from_bytes(proof->join_proof().client_nonce());
  }
  void accept(const Nonce& server, const Nonce& client, std::uint64_t instance, bool with_view) {
    control::Envelope a;
    auto* acc = a.mutable_join_accepted();
    acc->set_member_id(kId);
    if (with_view) {
      membership::View v;
      v.epoch = 1;
      v.members = {{kId, 0, "127.0.0.1:7000", "h", "z", {"tcp"}}};
      v.ring = {0};
      control::view_to_proto(v, acc->mutable_view());
    }
    acc->set_heartbeat_interval_ms(20);
    acc->set_coordinator_mac(
        control::to_bytes(control::coordinator_proof_mac(kSecret, server, client, kId)));
    acc->set_instance_id(instance);
    send(a);
  }

 private:
  zmq::context_t ctx_;
  zmq::socket_t router_;
  std::string peer_;
};

// The client joins the scripted coordinator (instance 111) as a fresh member.
void join(ScriptedCoordinator& coordinator, CoordinatorClient& client) {
  ClientConfig cfg;
  cfg.endpoint = coordinator.endpoint();
  cfg.secret = kSecret;
  cfg.host = "h";
  cfg.data_address = "127.0.0.1:7000";
  cfg.name = "w0";
  std::thread coordinator_thread([&] {
    ASSERT_TRUE(coordinator.expect(control::Envelope::kJoinRequest));
    const Nonce n0 = random_nonce();
    auto c0 = coordinator.challenge(n0);
    ASSERT_TRUE(c0);
    coordinator.accept(n0, *c0, 111, true);
  });
  auto joined = client.join(cfg, Deadline::after(seconds(10)));
  coordinator_thread.join();
  ASSERT_TRUE(joined.is_ok()) << joined.status().to_string();
}

// The coordinator "restarted": its answer to the next heartbeat names another instance
// (222), and the client asks to resume.
void restart(ScriptedCoordinator& coordinator, std::optional<std::uint64_t> epoch) {
  ASSERT_TRUE(coordinator.expect(control::Envelope::kHeartbeat));
  control::Envelope ack;
  if (epoch) ack.mutable_heartbeat_ack()->set_epoch(*epoch);
  ack.mutable_heartbeat_ack()->set_instance_id(222);
  coordinator.send(ack);
  ASSERT_TRUE(coordinator.expect(control::Envelope::kResumeRequest));
}

TEST(Resume, AnAcceptThatArrivesAfterARepeatedRequestStillResumes) {
  ScriptedCoordinator coordinator;
  CoordinatorClient client(Logger("client"));
  ASSERT_NO_FATAL_FAILURE(join(coordinator, client));

  ASSERT_NO_FATAL_FAILURE(restart(coordinator, 1));
  const Nonce n1 = random_nonce();
  auto c1 = coordinator.challenge(n1);
  ASSERT_TRUE(c1);
  // The coordinator is slow to accept (busy replaying its journal, a loaded machine):
  // the client repeats its request. A coordinator answers a repeated request on a pending
  // handshake with the same challenge; the client answers it with the same proof.
  ASSERT_TRUE(coordinator.expect(control::Envelope::kResumeRequest));
  auto c1_again = coordinator.challenge(n1);
  ASSERT_TRUE(c1_again);
  EXPECT_EQ(*c1_again, *c1) << "the same challenge gets the same proof";
  // Only now the accept of the first proof arrives.
  coordinator.accept(n1, *c1, 222, false);
  // The client resumed: it heartbeats again, and is not evicted.
  ASSERT_TRUE(coordinator.expect(control::Envelope::kHeartbeat)) << "heartbeats resumed";
  ASSERT_TRUE(coordinator.expect(control::Envelope::kHeartbeat));
  EXPECT_NE(client.health().code(), StatusCode::kEvicted) << client.health().to_string();
}

TEST(Resume, AStaleOrOutOfOrderAnswerDoesNotEvictTheResumingMember) {
  ScriptedCoordinator coordinator;
  CoordinatorClient client(Logger("client"));
  ASSERT_NO_FATAL_FAILURE(join(coordinator, client));
  ASSERT_NO_FATAL_FAILURE(restart(coordinator, std::nullopt));
  // An accept for a challenge this client never answered, then an out-of-order rejection:
  // neither is a verdict on this member.
  coordinator.accept(random_nonce(), random_nonce(), 222, false);
  control::Envelope rejected;
  rejected.mutable_join_rejected()->set_kind(control::JoinRejected::PROTOCOL);
  rejected.mutable_join_rejected()->set_reason("join proof without a live challenge");
  coordinator.send(rejected);
  // The real exchange follows and resumes it.
  ASSERT_TRUE(coordinator.expect(control::Envelope::kResumeRequest));
  const Nonce n1 = random_nonce();
  auto c1 = coordinator.challenge(n1);
  ASSERT_TRUE(c1);
  coordinator.accept(n1, *c1, 222, false);
  ASSERT_TRUE(coordinator.expect(control::Envelope::kHeartbeat)) << "heartbeats resumed";
  EXPECT_NE(client.health().code(), StatusCode::kEvicted) << client.health().to_string();
}

// The next heartbeat that asks for the whole view, or nullopt after 5 s.
std::optional<control::Envelope> want_view(ScriptedCoordinator& coordinator) {
  for (int i = 0; i < 200; ++i) {
    auto hb = coordinator.expect(control::Envelope::kHeartbeat);
    if (!hb) return std::nullopt;
    if (hb->heartbeat().want_view()) return hb;
  }
  return std::nullopt;
}

membership::View view_of(membership::Epoch epoch, std::vector<membership::MemberId> ids) {
  membership::View v;
  v.epoch = epoch;
  for (std::uint32_t r = 0; r < ids.size(); ++r) {
    v.members.push_back({ids[r], r, "127.0.0.1:" + std::to_string(7000 + ids[r]), "h", "z", {"tcp"}});
    v.ring.push_back(r);
  }
  return v;
}

TEST(ViewDeltaClient, AppliesADeltaOnItsBaseAndAsksForTheWholeViewOtherwise) {
  ScriptedCoordinator coordinator;
  CoordinatorClient client(Logger("client"));
  ASSERT_NO_FATAL_FAILURE(join(coordinator, client));
  // join() held view 1 = {kId} (address 127.0.0.1:7000).
  membership::View v1 = view_of(1, {kId});
  v1.members[0].data_address = "127.0.0.1:7000";
  ASSERT_EQ(client.view(), v1);
  auto send_delta = [&](const membership::ViewDelta& d) {
    control::Envelope e;
    control::view_delta_to_proto(d, e.mutable_view_delta());
    coordinator.send(e);
  };
  // Right base: applied, the same view bit for bit.
  membership::View v2 = view_of(2, {3, kId, 9});
  v2.members[1].data_address = "127.0.0.1:7000";
  send_delta(*membership::make_delta(v1, v2));
  auto got = client.wait_for_view(2, Deadline::after(seconds(5)));
  ASSERT_TRUE(got.is_ok()) << got.status().to_string();
  EXPECT_EQ(*got, v2);

  // Another base (the client missed epoch 3): ignored, and the whole view asked for.
  membership::View v3 = v2;
  v3.epoch = 3;
  membership::View v4 = v2;
  v4.epoch = 4;
  v4.members.pop_back();
  v4.ring.pop_back();
  send_delta(*membership::make_delta(v3, v4));
  auto ask = want_view(coordinator);
  ASSERT_TRUE(ask) << "no heartbeat asked for the whole view";
  EXPECT_EQ(ask->heartbeat().epoch(), 2u);
  EXPECT_EQ(client.view().epoch, 2u) << "a delta on another base is not applied";
  control::Envelope full;
  control::view_to_proto(v4, full.mutable_view());
  coordinator.send(full);
  got = client.wait_for_view(4, Deadline::after(seconds(5)));
  ASSERT_TRUE(got.is_ok()) << got.status().to_string();
  EXPECT_EQ(*got, v4);

  // The right base but a corrupted delta (its digest does not match): not applied either.
  membership::View v5 = v4;
  v5.epoch = 5;
  auto bad = *membership::make_delta(v4, v5);
  bad.digest ^= 0x10;
  send_delta(bad);
  ask = want_view(coordinator);
  ASSERT_TRUE(ask) << "no heartbeat asked for the whole view";
  EXPECT_EQ(ask->heartbeat().epoch(), 4u);
  EXPECT_EQ(client.view(), v4);
  // A stale delta (its epoch is not newer) is simply dropped: no request.
  send_delta(*membership::make_delta(v1, v2));
  EXPECT_EQ(client.view(), v4);
}

// What a set_view_listener() listener hears, and when: kept under a lock, waited for with a
// deadline (it runs on the client's thread).
class Heard {
 public:
  void operator()(const Result<membership::View>& news) {
    std::lock_guard lock(mu_);
    news_.push_back(news);
    cv_.notify_all();
  }
  // The first `n` pieces of news, or what was heard by the deadline.
  std::vector<Result<membership::View>> first(std::size_t n) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, seconds(5), [&] { return news_.size() >= n; });
    return news_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Result<membership::View>> news_;
};

TEST(ViewListener, HearsEachNewerViewWholeOrDeltaThenTheEvictionAndNothingOnceCleared) {
  ScriptedCoordinator coordinator;
  CoordinatorClient client(Logger("client"));
  ASSERT_NO_FATAL_FAILURE(join(coordinator, client));
  Heard heard;
  client.set_view_listener([&](const Result<membership::View>& v) { heard(v); });
  auto send_view = [&](const membership::View& v) {
    control::Envelope e;
    control::view_to_proto(v, e.mutable_view());
    coordinator.send(e);
  };
  membership::View v1 = view_of(1, {kId});
  v1.members[0].data_address = "127.0.0.1:7000";
  membership::View v2 = view_of(2, {3, kId});
  membership::View v3 = view_of(3, {kId});
  send_view(v2);
  send_view(v1);  // older: nobody hears of it
  {
    control::Envelope e;
    control::view_delta_to_proto(*membership::make_delta(v2, v3), e.mutable_view_delta());
    coordinator.send(e);
  }
  send_view(v3);  // the same epoch again: nothing new
  ASSERT_TRUE(client.wait_for_view(3, Deadline::after(seconds(5))).is_ok());
  control::Envelope evicted;
  evicted.mutable_evicted()->set_member_id(kId);
  evicted.mutable_evicted()->set_reason("straggler");
  coordinator.send(evicted);
  auto news = heard.first(3);
  ASSERT_EQ(news.size(), 3u);
  ASSERT_TRUE(news[0].is_ok());
  EXPECT_EQ(*news[0], v2);
  ASSERT_TRUE(news[1].is_ok());
  EXPECT_EQ(*news[1], v3);
  EXPECT_EQ(news[2].status().code(), StatusCode::kEvicted);
  EXPECT_NE(news[2].status().message().find("straggler"), std::string::npos);
  // Cleared: returns with no call in progress, and later news goes unheard.
  client.set_view_listener(nullptr);
  coordinator.send(evicted);
  send_view(view_of(4, {kId}));
  std::this_thread::yield();
  EXPECT_EQ(heard.first(3).size(), 3u);
}

}  // namespace
}  // namespace tributary::control_client
