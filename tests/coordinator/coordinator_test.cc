// A real coordinator on an ephemeral port with real agent clients on threads. Every
// wait has a deadline; nothing sleeps for a fixed time.
#include "coordinator/coordinator.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <limits>
#include <mutex>
#include <optional>
#include <zmq.hpp>

#include "control/codec.h"
#include "control/join_auth.h"
#include "control_client/coordinator_client.h"
#include "tests/support/curve_socket.h"
#include "tests/support/rank_threads.h"

namespace tributary::coordinator {
namespace {

using control_client::ClientConfig;
using control_client::CoordinatorClient;
using membership::View;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr char kSecret[] = "correct horse battery staple";

// Collects log lines from every component; tests wait for a line with a deadline.
class LogCapture {
 public:
  // A Logger whose lines are captured as "<who>: <message>" (and echoed to stderr).
  Logger logger(std::string who) {
    return Logger(who, [this, who](const LogRecord& r) {
      std::fprintf(stderr, "[%s] %s\n", who.c_str(), format_log_line(r, LogFormat::kText).c_str());
      {
        std::lock_guard lock(mu_);
        lines_.push_back(who + ": " + std::string(r.message));
      }
      cv_.notify_all();
    });
  }
  // True once a line contains every needle.
  bool wait_for(std::initializer_list<std::string_view> needles,
                Deadline deadline = Deadline::after(seconds(10))) {
    std::unique_lock lock(mu_);
    return cv_.wait_until(lock, deadline.at, [&] {
      for (const auto& line : lines_) {
        bool all = true;
        for (auto n : needles) all = all && line.find(n) != std::string::npos;
        if (all) return true;
      }
      return false;
    });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> lines_;
};

// Metrics off unless a test scrapes them: stopping civetweb takes up to 2 s.
CoordinatorConfig coordinator_config(std::size_t initial,
                                     milliseconds heartbeat_timeout = milliseconds(2000),
                                     bool metrics = false) {
  CoordinatorConfig c;
  c.secret = kSecret;
  if (!metrics) c.metrics_address.clear();
  c.initial_world_size = initial;
  c.heartbeat_timeout = heartbeat_timeout;
  return c;
}

ClientConfig client_config(const Coordinator& coordinator, std::string host, int port,
                           std::string secret = kSecret) {
  ClientConfig c;
  c.endpoint = coordinator.endpoint();
  c.secret = std::move(secret);
  c.host = host;
  c.zone = "test";
  c.data_address = "127.0.0.1:" + std::to_string(port);
  c.capabilities = {"tcp"};
  c.name = host + "-" + std::to_string(port);
  return c;
}

Deadline soon() { return Deadline::after(seconds(10)); }

// A minimal HTTP/1.0 GET of /metrics; empty on failure.
std::string scrape(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return {};
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string body;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    const std::string req = "GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n";
    if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size())) {
      char buf[4096];
      for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;)
        body.append(buf, static_cast<std::size_t>(n));
    }
  }
  ::close(fd);
  return body;
}

// The value of the first sample whose line starts with `series` (name plus labels).
std::optional<double> metric(const std::string& text, const std::string& series) {
  std::size_t pos = 0;
  while ((pos = text.find(series + " ", pos)) != std::string::npos) {
    if (pos == 0 || text[pos - 1] == '\n') return std::stod(text.substr(pos + series.size() + 1));
    pos += series.size();
  }
  return std::nullopt;
}

// Writes `bytes` on a plain TCP connection to the coordinator's port and closes it.
void raw_tcp_write(const std::string& endpoint, const std::string& bytes) {
  const int port = std::stoi(endpoint.substr(endpoint.rfind(':') + 1));
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  EXPECT_EQ(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(bytes.size()));
  ::close(fd);
}

class CoordinatorTest : public ::testing::Test {
 protected:
  void start(CoordinatorConfig config) {
    coordinator_ = std::make_unique<Coordinator>(std::move(config), logs_.logger("coordinator"));
    Status st = coordinator_->start();
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    ASSERT_TRUE(coordinator_->endpoint().starts_with("tcp://127.0.0.1:"))
        << coordinator_->endpoint();
  }
  std::unique_ptr<CoordinatorClient> client(std::string name) {
    return std::make_unique<CoordinatorClient>(logs_.logger(std::move(name)));
  }
  // Joins `host` and returns the client, failing the test on error.
  std::unique_ptr<CoordinatorClient> joined(const std::string& host, int port) {
    auto c = client(host);
    auto r = c->join(client_config(*coordinator_, host, port), soon());
    EXPECT_TRUE(r.is_ok()) << r.status().to_string();
    return c;
  }

  LogCapture logs_;
  std::unique_ptr<Coordinator> coordinator_;
};

TEST_F(CoordinatorTest, ClientsJoinAndShareOneViewWithHostsAdjacent) {
  start(coordinator_config(4, milliseconds(2000), true));
  ASSERT_GT(coordinator_->metrics_port(), 0) << "civetweb reports the ephemeral port it bound";
  const std::vector<std::string> hosts = {"b", "a", "b", "a"};
  std::vector<std::unique_ptr<CoordinatorClient>> clients(hosts.size());
  std::vector<View> views(hosts.size());
  auto results = testing::run_ranks(static_cast<int>(hosts.size()), [&](int r) -> Status {
    auto& c = clients[static_cast<std::size_t>(r)];
    c = client("agent" + std::to_string(r));
    auto j =
        c->join(client_config(*coordinator_, hosts[static_cast<std::size_t>(r)], 7000 + r), soon());
    if (!j) return j.status();
    if (j->member_id == 0) return error(StatusCode::kInternal, "member id 0");
    auto v = c->wait_for_view(1, soon());
    if (!v) return v.status();
    views[static_cast<std::size_t>(r)] = *v;
    return Status::ok();
  });
  for (const auto& st : results) ASSERT_TRUE(st.is_ok()) << st.to_string();
  for (const auto& v : views) EXPECT_EQ(v, views[0]) << "every member holds the same view";
  const View& v = views[0];
  EXPECT_EQ(v.epoch, 1u);
  ASSERT_EQ(v.size(), 4u);
  EXPECT_EQ(v.members[0].host, "a");
  EXPECT_EQ(v.members[1].host, "a");
  EXPECT_EQ(v.members[2].host, "b");
  EXPECT_EQ(v.members[3].host, "b");
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    const auto* me = v.find(clients[i]->member_id());
    ASSERT_NE(me, nullptr);
    EXPECT_EQ(me->data_address, "127.0.0.1:" + std::to_string(7000 + i));
    EXPECT_EQ(me->capabilities, std::vector<std::string>{"tcp"});
  }
  EXPECT_EQ(coordinator_->current_view(), v);

  const std::string text = scrape(coordinator_->metrics_port());
  EXPECT_EQ(metric(text, "tributary_membership_size"), 4.0) << text;
  EXPECT_EQ(metric(text, "tributary_epoch"), 1.0);
  EXPECT_EQ(metric(text, "tributary_joins_total"), 4.0);
  EXPECT_EQ(metric(text, "tributary_control_messages_total{type=\"join_request\"}"), 4.0);
  EXPECT_EQ(metric(text, "tributary_control_malformed_total"), 0.0);
  for (auto& c : clients) EXPECT_TRUE(c->health().is_ok()) << c->health().to_string();
}

TEST_F(CoordinatorTest, WrongSecretIsRejectedWithAClearMessageOnBothSides) {
  start(coordinator_config(1, milliseconds(2000), true));
  auto intruder = client("intruder");
  auto r = intruder->join(client_config(*coordinator_, "evil", 6666, "guessed secret"), soon());
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kAuthFailed);
  EXPECT_NE(r.status().message().find("wrong cluster secret"), std::string::npos)
      << r.status().to_string();
  // Its CURVE handshake already fails: nothing it sends reaches the coordinator's logic.
  EXPECT_TRUE(logs_.wait_for({"coordinator: refused a connection", "wrong cluster secret"}));
  EXPECT_TRUE(logs_.wait_for(
      {"intruder: coordinator", "refused our CURVE handshake", "wrong cluster secret"}));
  intruder.reset();

  auto good = joined("good", 7000);
  EXPECT_EQ(good->view().size(), 1u) << "the honest agent is not disturbed";
  const std::string text = scrape(coordinator_->metrics_port());
  EXPECT_GE(metric(text, "tributary_join_auth_failures_total").value_or(0), 1.0) << text;
  EXPECT_EQ(metric(text, "tributary_control_messages_total{type=\"join_request\"}"), 1.0)
      << "only the honest join reached the coordinator's logic";
}

TEST_F(CoordinatorTest, GarbageDropsOnlyTheConnectionThatSentIt) {
  start(coordinator_config(1, milliseconds(600), true));
  auto a = joined("a", 7000);
  ASSERT_EQ(a->view().epoch, 1u);

  // A ZeroMQ peer speaking garbage: bytes that are no Envelope, then a proper JoinRequest
  // on the same connection, which must now be ignored.
  zmq::context_t ctx;
  zmq::socket_t junk(ctx, zmq::socket_type::dealer);
  junk.set(zmq::sockopt::linger, 0);
  testing::use_cluster_client_keys(junk, kSecret);  // a peer holding the secret, misbehaving
  junk.connect(coordinator_->endpoint());
  junk.send(zmq::str_buffer("\xff\x01 this is not protobuf \x00\x01"), zmq::send_flags::none);
  ASSERT_TRUE(logs_.wait_for({"dropped malformed message from", "do not parse"}));
  // An agent-bound message type from a second connection, and a multi-frame message from a third.
  zmq::socket_t forger(ctx, zmq::socket_type::dealer);
  forger.set(zmq::sockopt::linger, 0);
  testing::use_cluster_client_keys(forger, kSecret);
  forger.connect(coordinator_->endpoint());
  forger.send(zmq::str_buffer("\x42\x02\x08\x05"),
              zmq::send_flags::none);  // Envelope{view{epoch 5}}
  ASSERT_TRUE(
      logs_.wait_for({"dropped malformed message from", "coordinator-only message 'view'"}));
  zmq::socket_t frames(ctx, zmq::socket_type::dealer);
  frames.set(zmq::sockopt::linger, 0);
  testing::use_cluster_client_keys(frames, kSecret);
  frames.connect(coordinator_->endpoint());
  frames.send(zmq::str_buffer("one"), zmq::send_flags::sndmore);
  frames.send(zmq::str_buffer("two"), zmq::send_flags::none);
  ASSERT_TRUE(logs_.wait_for({"dropped malformed message from", "2 frames, expected 1"}));
  // A plain ZeroMQ peer (no CURVE: no proof of the secret) never gets a message through.
  zmq::socket_t plain(ctx, zmq::socket_type::dealer);
  plain.set(zmq::sockopt::linger, 0);
  plain.connect(coordinator_->endpoint());
  plain.send(zmq::str_buffer("\x42\x02\x08\x05"), zmq::send_flags::none);
  ASSERT_TRUE(logs_.wait_for({"connection", "no proof of the cluster secret"}));

  // Plain TCP garbage, no ZMTP at all; and a ZMTP-looking signature followed by junk.
  raw_tcp_write(coordinator_->endpoint(),
                "GET / HTTP/1.1\r\nHost: x\r\n\r\n" + std::string(4096, '\x07'));
  raw_tcp_write(
      coordinator_->endpoint(),
      std::string("\xff\x00\x00\x00\x00\x00\x00\x00\x01\x7f", 10) + std::string(64, '\x13'));

  // Everyone else carries on: a newcomer joins, the first member gets the new view and
  // stays in it past a full heartbeat timeout.
  auto b = joined("b", 7001);
  a->request_boundary(1, false);  // b waits for a step boundary
  auto v = a->wait_for_view(2, soon());
  ASSERT_TRUE(v.is_ok()) << v.status().to_string();
  EXPECT_EQ(v->size(), 2u);
  EXPECT_TRUE(a->health().is_ok());

  junk.send(zmq::str_buffer(""),
            zmq::send_flags::none);  // would be malformed again: ignored silently
  EXPECT_GE(
      metric(scrape(coordinator_->metrics_port()), "tributary_control_malformed_total").value_or(0),
      3.0);
  auto c = joined("c", 7002);
  a->request_boundary(2, false);
  b->request_boundary(2, false);
  auto v3 = a->wait_for_view(3, soon());
  ASSERT_TRUE(v3.is_ok()) << v3.status().to_string();
  EXPECT_EQ(v3->size(), 3u);
  EXPECT_EQ(coordinator_->member_count(), 3u);
}

// Waits up to `deadline` for one Envelope on a raw DEALER.
std::optional<control::Envelope> receive(zmq::socket_t& s, Deadline deadline = soon()) {
  while (!deadline.passed()) {
    zmq::pollitem_t item{s.handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, milliseconds(20));
    zmq::message_t msg;
    if ((item.revents & ZMQ_POLLIN) && s.recv(msg, zmq::recv_flags::dontwait)) {
      auto env = control::decode_envelope(msg.to_string_view());
      if (env) return *env;
    }
  }
  return std::nullopt;
}

void send(zmq::socket_t& s, const control::Envelope& env) {
  const std::string bytes = control::encode_envelope(env);
  s.send(zmq::buffer(bytes), zmq::send_flags::none);
}

TEST_F(CoordinatorTest, MemberThatBreaksTheProtocolIsRemovedOthersCarryOn) {
  start(coordinator_config(1));
  auto honest = joined("honest", 7000);

  // A member driven by hand over a raw DEALER: join properly, then heartbeat on behalf of
  // the honest member's id (an impersonation attempt).
  zmq::context_t ctx;
  zmq::socket_t rogue(ctx, zmq::socket_type::dealer);
  rogue.set(zmq::sockopt::linger, 0);
  testing::use_cluster_client_keys(rogue, kSecret);
  rogue.connect(coordinator_->endpoint());
  control::Envelope req;
  auto* jr = req.mutable_join_request();
  jr->set_protocol_version(control::kProtocolVersion);
  jr->set_name("rogue");
  jr->set_host("r");
  jr->set_data_address("127.0.0.1:7999");
  send(rogue, req);
  auto challenge = receive(rogue);
  ASSERT_TRUE(challenge && challenge->has_challenge());
  const Nonce server = *control::nonce_from_bytes(challenge->challenge().nonce());
  const Nonce client = random_nonce();
  control::Envelope proof;
  proof.mutable_join_proof()->set_client_nonce(control::to_bytes(client));
  proof.mutable_join_proof()->set_mac(
      control::to_bytes(control::join_proof_mac(kSecret, server, client, "rogue")));
  send(rogue, proof);
  auto accepted = receive(rogue);
  ASSERT_TRUE(accepted && accepted->has_join_accepted());
  const auto rogue_id = accepted->join_accepted().member_id();
  honest->request_boundary(1, false);  // admits the rogue at a step boundary
  ASSERT_TRUE(honest->wait_for_view(2, soon()).is_ok());

  control::Envelope hb;
  hb.mutable_heartbeat()->set_member_id(honest->member_id());
  send(rogue, hb);
  EXPECT_TRUE(
      logs_.wait_for({"dropped malformed message from", "(member " + std::to_string(rogue_id) + ")",
                      "heartbeat for member " + std::to_string(honest->member_id())}));
  auto v = honest->wait_for_view(3, soon());
  ASSERT_TRUE(v.is_ok()) << v.status().to_string();
  EXPECT_FALSE(v->contains(rogue_id));
  EXPECT_TRUE(v->contains(honest->member_id()));
  auto evicted = receive(rogue);
  while (evicted && evicted->has_view()) evicted = receive(rogue);  // the view that admitted it
  ASSERT_TRUE(evicted && evicted->has_evicted());
  EXPECT_EQ(evicted->evicted().reason(), "malformed");
  EXPECT_TRUE(honest->health().is_ok());
}

// A member driven by hand over a raw DEALER: joins with the real handshake.
struct RawMember {
  RawMember(zmq::context_t& ctx, const std::string& endpoint, const std::string& name)
      : socket(ctx, zmq::socket_type::dealer) {
    socket.set(zmq::sockopt::linger, 0);
    testing::use_cluster_client_keys(socket, kSecret);
    socket.connect(endpoint);
    control::Envelope req;
    auto* jr = req.mutable_join_request();
    jr->set_protocol_version(control::kProtocolVersion);
    jr->set_name(name);
    jr->set_host(name);
    jr->set_data_address("127.0.0.1:7999");
    send(socket, req);
    auto challenge = receive(socket);
    EXPECT_TRUE(challenge && challenge->has_challenge());
    if (!challenge || !challenge->has_challenge()) return;
    const Nonce server = *control::nonce_from_bytes(challenge->challenge().nonce());
    const Nonce client = random_nonce();
    control::Envelope proof;
    proof.mutable_join_proof()->set_client_nonce(control::to_bytes(client));
    proof.mutable_join_proof()->set_mac(
        control::to_bytes(control::join_proof_mac(kSecret, server, client, name)));
    send(socket, proof);
    auto accepted = receive(socket);
    EXPECT_TRUE(accepted && accepted->has_join_accepted());
    if (accepted && accepted->has_join_accepted()) id = accepted->join_accepted().member_id();
  }
  // The next View or ViewDelta (other messages are dropped).
  std::optional<control::Envelope> next_view() {
    for (auto env = receive(socket); env; env = receive(socket)) {
      if (env->has_view() || env->has_view_delta()) return env;
    }
    return std::nullopt;
  }
  void heartbeat(membership::Epoch epoch, bool want_view = false) {
    control::Envelope hb;
    hb.mutable_heartbeat()->set_member_id(id);
    hb.mutable_heartbeat()->set_epoch(epoch);
    hb.mutable_heartbeat()->set_want_view(want_view);
    send(socket, hb);
  }
  void ready(membership::Epoch epoch) {  // a joiner's Ready: no previous epoch, no seqs
    control::Envelope e;
    e.mutable_ready()->set_member_id(id);
    e.mutable_ready()->set_epoch(epoch);
    send(socket, e);
  }
  void boundary(membership::Epoch epoch) {
    control::Envelope b;
    b.mutable_boundary_request()->set_member_id(id);
    b.mutable_boundary_request()->set_epoch(epoch);
    send(socket, b);
  }
  zmq::socket_t socket;
  membership::MemberId id = 0;
};

// Federated rounds over the real coordinator and its ZeroMQ clients (docs/federated.md): a
// round decided at its deadline by the service loop's timer, a late member answered with
// the stored decision, the commit once every contributor sent RoundDone; a RoundReady with
// a NaN weight is malformed: its sender alone is dropped, the other member goes on.
TEST_F(CoordinatorTest, FederatedRoundsDecideCommitAndRefuseMalformedWeights) {
  start(coordinator_config(1, milliseconds(2000), /*metrics=*/true));
  auto a = joined("a", 7000);
  ASSERT_TRUE(a->wait_for_view(1, soon()).is_ok());
  zmq::context_t ctx;
  RawMember rogue(ctx, coordinator_->endpoint(), "rogue");
  ASSERT_NE(rogue.id, 0u);
  a->request_boundary(1, false);  // admits the raw member
  ASSERT_TRUE(a->wait_for_view(2, soon()).is_ok());

  membership::RoundReady r;
  r.epoch = 2;
  r.round = 1;
  r.weight = 2.5;
  r.deadline = milliseconds(300);
  const auto asked = std::chrono::steady_clock::now();
  auto decided = a->await_round(r, soon());
  ASSERT_TRUE(decided.is_ok()) << decided.status().to_string();
  EXPECT_GE(std::chrono::steady_clock::now() - asked, milliseconds(250)) << "closed at the deadline";
  EXPECT_EQ(decided->epoch, 2u);
  EXPECT_EQ(decided->members, 2u);
  ASSERT_EQ(decided->contributors.size(), 1u);
  EXPECT_EQ(decided->contributors[0].id, a->member_id());
  EXPECT_EQ(decided->contributors[0].weight, 2.5);

  // The raw member was broadcast the decision; asking late, it gets the stored one.
  control::Envelope late;
  auto* lr = late.mutable_round_ready();
  lr->set_member_id(rogue.id);
  lr->set_epoch(2);
  lr->set_round(1);
  lr->set_weight(1);
  lr->set_deadline_ms(300);
  lr->set_min_participants(1);
  send(rogue.socket, late);
  rogue.heartbeat(2);  // it stays a member meanwhile
  int decisions = 0;
  while (decisions < 2) {
    auto env = receive(rogue.socket, Deadline::after(seconds(1)));
    if (!env) break;
    if (!env->has_round_decision()) continue;
    ++decisions;
    EXPECT_EQ(env->round_decision().round(), 1u);
    EXPECT_EQ(env->round_decision().contributors_size(), 1);
  }
  EXPECT_EQ(decisions, 2) << "the broadcast and the answer to the late RoundReady";
  const Status committed = a->commit_round(2, 1, soon());
  EXPECT_TRUE(committed.is_ok()) << "the only contributor's RoundDone: " << committed.to_string();

  // A NaN weight: malformed; only its sender goes.
  control::Envelope bad = late;
  bad.mutable_round_ready()->set_round(2);
  bad.mutable_round_ready()->set_weight(std::numeric_limits<double>::quiet_NaN());
  send(rogue.socket, bad);
  EXPECT_TRUE(logs_.wait_for({"dropped malformed message from", "round_ready: weight"}));
  auto v3 = a->wait_for_view(3, soon());
  ASSERT_TRUE(v3.is_ok()) << v3.status().to_string();
  EXPECT_FALSE(v3->contains(rogue.id));
  r.epoch = 3;
  r.round = 2;
  auto next = a->await_round(r, soon());  // alone in the view: decided at once
  ASSERT_TRUE(next.is_ok()) << next.status().to_string();
  EXPECT_EQ(next->epoch, 3u);
  EXPECT_TRUE(a->commit_round(3, 2, soon()).is_ok());
  const std::string text = scrape(coordinator_->metrics_port());
  EXPECT_EQ(metric(text, "tributary_federated_rounds_total{outcome=\"decided\"}"), 2.0) << text;
  EXPECT_EQ(metric(text, "tributary_federated_rounds_total{outcome=\"committed\"}"), 2.0);
  EXPECT_EQ(metric(text, "tributary_federated_late_members_total"), 1.0);
  EXPECT_TRUE(a->health().is_ok());
}

TEST_F(CoordinatorTest, UpToDateMembersGetDeltasOthersTheWholeView) {
  start(coordinator_config(1, milliseconds(2000), /*metrics=*/true));
  auto a = joined("a", 7000);
  ASSERT_EQ(a->view().epoch, 1u);
  // a reports that it adopted view 1 (a Ready is a report of the epoch it holds).
  ASSERT_TRUE(a->ready({1, 0, 0, 0}, soon()).is_ok());

  zmq::context_t ctx;
  RawMember r(ctx, coordinator_->endpoint(), "r");
  ASSERT_NE(r.id, 0u);
  a->request_boundary(1, false);  // admits r
  // r is a joiner: the whole view. a holds view 1: a delta, which it applies.
  auto first = r.next_view();
  ASSERT_TRUE(first && first->has_view()) << "a joiner gets the whole view";
  auto v2 = control::view_from_proto(first->view());
  ASSERT_TRUE(v2.is_ok()) << v2.status().to_string();
  EXPECT_EQ(v2->epoch, 2u);
  auto at_a = a->wait_for_view(2, soon());
  ASSERT_TRUE(at_a.is_ok()) << at_a.status().to_string();
  EXPECT_EQ(*at_a, *v2);
  EXPECT_EQ(*at_a, coordinator_->current_view());
  EXPECT_TRUE(logs_.wait_for({"epoch 2 went out as 1 deltas", "and 1 full views"}));

  // Both hold view 2 now (r says so in a heartbeat, both in their Ready); c joins: both
  // get a delta, c the whole view.
  r.heartbeat(2);
  r.ready(2);
  auto go = a->ready({2, 1, 0, 0}, soon());
  ASSERT_TRUE(go.is_ok()) << go.status().to_string();
  auto c = joined("c", 7002);
  r.boundary(2);
  a->request_boundary(2, false);
  auto second = r.next_view();
  ASSERT_TRUE(second && second->has_view_delta()) << "r held the delta's base";
  auto delta = control::view_delta_from_proto(second->view_delta());
  ASSERT_TRUE(delta.is_ok()) << delta.status().to_string();
  EXPECT_EQ(delta->base_epoch, 2u);
  EXPECT_EQ(delta->added.size(), 1u);
  auto v3 = membership::apply_delta(*v2, *delta);
  ASSERT_TRUE(v3.is_ok()) << v3.status().to_string();
  EXPECT_EQ(*v3, coordinator_->current_view()) << "rebuilt bit for bit";
  at_a = a->wait_for_view(3, soon());
  ASSERT_TRUE(at_a.is_ok()) << at_a.status().to_string();
  EXPECT_EQ(*at_a, *v3);
  auto at_c = c->wait_for_view(3, soon());
  ASSERT_TRUE(at_c.is_ok()) << at_c.status().to_string();
  EXPECT_EQ(*at_c, *v3);
  EXPECT_TRUE(logs_.wait_for({"epoch 3 went out as 2 deltas", "and 1 full views"}));
  // Operators see the same on /metrics: one delta for epoch 2, two for epoch 3.
  const std::string text = scrape(coordinator_->metrics_port());
  EXPECT_EQ(metric(text, "tributary_views_sent_total{kind=\"delta\"}"), 3.0) << text;
  EXPECT_GE(metric(text, "tributary_views_sent_total{kind=\"full\"}"), 2.0) << text;
  EXPECT_GT(metric(text, "tributary_view_bytes_sent_total{kind=\"delta\"}"), 0.0) << text;
  EXPECT_GT(metric(text, "tributary_view_bytes_sent_total{kind=\"full\"}"),
            metric(text, "tributary_view_bytes_sent_total{kind=\"delta\"}"))
      << text;

  // A member that could not apply a delta asks with its heartbeat: the whole view comes at
  // once, though the push went out just now (kViewResendAfter does not hold it back).
  r.heartbeat(2, /*want_view=*/true);
  auto whole = r.next_view();
  ASSERT_TRUE(whole && whole->has_view());
  auto again = control::view_from_proto(whole->view());
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(*again, *v3);
}

TEST_F(CoordinatorTest, SilentMemberIsRemovedByHeartbeatTimeout) {
  start(coordinator_config(2, milliseconds(300), true));
  auto a = client("a");
  auto b = client("b");
  auto results = testing::run_ranks(2, [&](int r) -> Status {
    auto& c = r == 0 ? a : b;
    auto j = c->join(client_config(*coordinator_, r == 0 ? "a" : "b", 7000 + r), soon());
    return j ? c->wait_for_view(1, soon()).status() : j.status();
  });
  for (const auto& st : results) ASSERT_TRUE(st.is_ok()) << st.to_string();
  const auto b_id = b->member_id();

  b.reset();  // a crash: no Leave, heartbeats simply stop
  auto v = a->wait_for_view(2, soon());
  ASSERT_TRUE(v.is_ok()) << v.status().to_string();
  EXPECT_EQ(v->size(), 1u);
  EXPECT_FALSE(v->contains(b_id));
  EXPECT_EQ(v->members[0].rank, 0u);
  EXPECT_TRUE(logs_.wait_for({"removed member " + std::to_string(b_id), "heartbeat_timeout"}));
  const std::string text = scrape(coordinator_->metrics_port());
  EXPECT_EQ(metric(text, "tributary_members_removed_total{reason=\"heartbeat_timeout\"}"), 1.0)
      << text;
  EXPECT_EQ(metric(text, "tributary_epoch"), 2.0);
  EXPECT_TRUE(a->health().is_ok()) << "the live member kept heartbeating through it";
}

TEST_F(CoordinatorTest, MemberThatHeartbeatsTooRarelyIsEvictedAndTold) {
  start(coordinator_config(1, milliseconds(300)));
  auto a = joined("a", 7000);
  auto slow = client("slow");
  ClientConfig cfg = client_config(*coordinator_, "slow", 7001);
  cfg.heartbeat_interval = seconds(30);  // first heartbeat at once, then silence
  ASSERT_TRUE(slow->join(cfg, soon()).is_ok());
  auto v = slow->wait_for_view(100, soon());
  EXPECT_EQ(v.status().code(), StatusCode::kEvicted) << v.status().to_string();
  EXPECT_NE(v.status().message().find("heartbeat_timeout"), std::string::npos);
  EXPECT_EQ(slow->health().code(), StatusCode::kEvicted);
  EXPECT_TRUE(slow->leave(soon()).is_ok()) << "leaving when already out is fine";
}

TEST_F(CoordinatorTest, LeaveAndLateJoinEachProduceANewView) {
  start(coordinator_config(2, milliseconds(2000), true));
  auto a = client("a");
  auto b = client("b");
  auto results = testing::run_ranks(2, [&](int r) -> Status {
    auto& c = r == 0 ? a : b;
    auto j = c->join(client_config(*coordinator_, r == 0 ? "a" : "b", 7000 + r), soon());
    return j ? c->wait_for_view(1, soon()).status() : j.status();
  });
  for (const auto& st : results) ASSERT_TRUE(st.is_ok()) << st.to_string();

  auto late = client("late");
  auto j = late->join(client_config(*coordinator_, "a", 7002), soon());
  ASSERT_TRUE(j.is_ok()) << j.status().to_string();
  EXPECT_EQ(j->view.epoch, 0u) << "a joiner after the first view waits for a step boundary";
  ASSERT_TRUE(
      logs_.wait_for({"member " + std::to_string(j->member_id), "waits for a step boundary"}));
  a->request_boundary(1, false);
  b->request_boundary(1, false);
  auto admitted = late->wait_for_view(2, soon());
  ASSERT_TRUE(admitted.is_ok()) << admitted.status().to_string();
  EXPECT_EQ(admitted->find(j->member_id)->rank, 1u) << "next to the other member on host a";
  ASSERT_TRUE(b->wait_for_view(2, soon()).is_ok());

  const auto b_id = b->member_id();
  ASSERT_TRUE(b->leave(soon()).is_ok());
  EXPECT_EQ(b->wait_for_view(3, soon()).status().code(), StatusCode::kAborted);
  auto v = a->wait_for_view(3, soon());
  ASSERT_TRUE(v.is_ok()) << v.status().to_string();
  EXPECT_EQ(v->epoch, 3u);
  EXPECT_EQ(v->size(), 2u);
  EXPECT_FALSE(v->contains(b_id));
  EXPECT_TRUE(logs_.wait_for({"member " + std::to_string(b_id), "left"}));
  const std::string text = scrape(coordinator_->metrics_port());
  EXPECT_EQ(metric(text, "tributary_leaves_total"), 1.0) << text;
  EXPECT_EQ(metric(text, "tributary_members_removed_total{reason=\"heartbeat_timeout\"}"), 0.0);
}

TEST_F(CoordinatorTest, UnreachableCoordinatorIsUnavailableByTheDeadline) {
  std::string endpoint;
  {
    Coordinator gone(coordinator_config(1), logs_.logger("gone"));
    ASSERT_TRUE(gone.bind().is_ok());
    endpoint = gone.endpoint();
  }  // closed: nothing listens on that port now
  CoordinatorClient c(logs_.logger("lonely"));
  ClientConfig cfg;
  cfg.endpoint = endpoint;
  cfg.secret = kSecret;
  cfg.host = "h";
  cfg.data_address = "127.0.0.1:7000";
  auto r = c.join(cfg, Deadline::after(milliseconds(300)));
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find(endpoint), std::string::npos) << r.status().to_string();
}

TEST_F(CoordinatorTest, BadConfigurationAndLabelsAreInvalidArgument) {
  CoordinatorConfig no_secret = coordinator_config(1);
  no_secret.secret.clear();
  EXPECT_EQ(Coordinator(no_secret, logs_.logger("x")).start().code(), StatusCode::kInvalidArgument);
  CoordinatorConfig udp = coordinator_config(1);
  udp.bind_address = "udp://127.0.0.1:0";
  EXPECT_EQ(validate(udp).code(), StatusCode::kInvalidArgument);

  start(coordinator_config(1));
  auto c = client("bad");
  ClientConfig cfg = client_config(*coordinator_, "h", 7000);
  cfg.data_address = "no-port";
  auto r = c->join(cfg, soon());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("data_address"), std::string::npos) << r.status().to_string();
  auto bad_endpoint = client("bad-endpoint");
  cfg = client_config(*coordinator_, "h", 7000);
  cfg.endpoint = "carrier-pigeon://coop";
  EXPECT_EQ(bad_endpoint->join(cfg, soon()).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tributary::coordinator
