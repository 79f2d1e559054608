// TLS on data-plane links (transport/tcp/tls.h): endpoints with --tls all / cross-zone run
// all-reduces bit-exact against plaintext ones over every size class (one element, a
// partial record, many records, several MiB: partial writes and reads), with the
// pre-shared key and with certificates; a peer whose certificate another CA signed, or a
// peer that presents none, or a mismatched PSK, is refused on both sides with an error
// naming TLS; a TLS/plaintext mode mismatch fails both sides at once; a flipped bit inside
// a record fails the peer instead of reaching the sum.
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <thread>

#include "transport/tcp/tls.h"
#include "transport/tcp/tls_stream.h"
#include "algorithms/collectives.h"
#include "tests/agent/tcp_test_util.h"
#include "tests/hostile/tcp_proxy.h"

namespace tributary::testing {
namespace {

using transport::TlsConfig;
using transport::TlsMode;

// A throwaway CA and member certificates, made with the openssl command.
class Pki {
 public:
  Pki() {
    char tmpl[] = "/tmp/tributary-tls-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
  }
  ~Pki() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  static bool available() { return std::system("openssl version >/dev/null 2>&1") == 0; }
  // A CA named `ca` (its key and certificate in the directory).
  bool make_ca(const std::string& ca) {
    return run("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout " +
               path(ca + ".key") + " -out " + path(ca + ".pem") + " -days 2 -subj /CN=" + ca);
  }
  // A member certificate signed by `ca`.
  transport::TlsConfig member(const std::string& name, const std::string& ca, transport::TlsMode mode = transport::TlsMode::kAll) {
    run("openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout " +
        path(name + ".key") + " -out " + path(name + ".csr") + " -subj /CN=" + name);
    run("openssl x509 -req -in " + path(name + ".csr") + " -CA " + path(ca + ".pem") +
        " -CAkey " + path(ca + ".key") + " -CAcreateserial -out " + path(name + ".pem") +
        " -days 2");
    transport::TlsConfig c;
    c.mode = mode;
    c.cert_file = path(name + ".pem");
    c.key_file = path(name + ".key");
    c.ca_file = path(ca + ".pem");
    return c;
  }
  std::string path(const std::string& file) const { return dir_ + "/" + file; }

 private:
  static bool run(const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()) == 0; }
  std::string dir_;
};

Cluster tls_cluster(LogCapture& logs, const std::vector<transport::TlsConfig>& tls) {
  Cluster c;
  for (std::size_t r = 0; r < tls.size(); ++r) {
    transport::TcpEndpointConfig config = test_config(logs, static_cast<int>(r));
    config.tls = tls[r];
    config.handshake_timeout = std::chrono::seconds(5);
    auto ep = transport::TcpEndpoint::listen(config);
    if (!ep.is_ok()) throw std::runtime_error(ep.status().to_string());
    c.addresses.push_back((*ep)->address());
    c.endpoints.push_back(std::move(*ep));
  }
  c.links.resize(tls.size());
  return c;
}

std::vector<Status> connect_zoned(Cluster& c, std::uint64_t epoch,
                                  const std::vector<std::string>& zones,
                                  Duration timeout = std::chrono::seconds(10)) {
  const Deadline deadline = Deadline::after(timeout);
  return run_ranks(static_cast<int>(c.endpoints.size()), [&](int r) {
    auto link = c.endpoints[r]->connect_group(epoch, r, c.addresses, deadline, zones);
    if (!link.is_ok()) return link.status();
    c.links[r] = std::move(*link);
    return Status();
  });
}

// Every rank's all-reduce output of `count` floats (random inputs, so rounding makes the
// comparison bit-exact rather than merely equal).
std::vector<std::vector<float>> all_reduce_on(Cluster& c, std::size_t count, std::uint64_t seq) {
  const int n = static_cast<int>(c.links.size());
  std::vector<std::vector<float>> out(static_cast<std::size_t>(n));
  const std::vector<Status> st = run_ranks(n, [&](int r) {
    std::mt19937 rng(static_cast<unsigned>(1000 * r + count));
    std::uniform_real_distribution<float> d(-1.0f, 1.0f);
    std::vector<float> in(count);
    for (float& x : in) x = d(rng);
    out[r].assign(count, 0.0f);
    algorithms::CollectiveOptions opt;
    opt.seq = seq;
    opt.chunk_bytes = 256 * 1024;
    opt.deadline = Deadline::after(std::chrono::seconds(30));
    return all_reduce(*c.links[r], in.data(), out[r].data(), count, DType::kFloat32,
                      ReduceOp::kSum, opt);
  });
  expect_all_ok(st);
  return out;
}

void expect_same_sums(Cluster& plain, Cluster& tls) {
  std::uint64_t seq = 1;
  for (std::size_t count : {std::size_t{1}, std::size_t{7}, std::size_t{4099}, std::size_t{70001},
                            std::size_t{3} << 20}) {
    const auto want = all_reduce_on(plain, count, seq);
    const auto got = all_reduce_on(tls, count, seq);
    ++seq;
    for (std::size_t r = 0; r < want.size(); ++r) {
      ASSERT_EQ(std::memcmp(want[r].data(), got[r].data(), count * sizeof(float)), 0)
          << count << " floats, rank " << r;
    }
  }
}

// A pair whose connection failed and was re-dialled (TcpEndpoint::reconnect, as the
// failover link's redialer does) runs TLS again on the new connection, with a key from the
// new handshake: the link's sums stay those of plain TCP.
TEST(Tls, AReconnectedPairRunsTlsAgain) {
  LogCapture logs;
  Cluster plain = make_cluster(3, logs);
  expect_all_ok(connect_all(plain, 1));
  Cluster tls = tls_cluster(logs, std::vector<transport::TlsConfig>(3, transport::TlsConfig{transport::TlsMode::kAll, "", "", ""}));
  expect_all_ok(connect_zoned(tls, 1, {}));
  std::vector<transport::PeerSocket> got = cut_and_reconnect_pair01(tls, 1);
  ASSERT_EQ(got.size(), 2u);
  for (int r = 0; r < 2; ++r) {
    ASSERT_GE(got[r].fd, 0);
    EXPECT_NE(got[r].tls, nullptr) << "rank " << r << ": the new connection is not encrypted";
    ASSERT_TRUE(transport::replace_peer_socket(*tls.links[r], std::move(got[r])).is_ok());
  }
  expect_same_sums(plain, tls);
}

TEST(Tls, ModesParseAndPairsFollowZones) {
  EXPECT_EQ(*transport::parse_tls_mode("cross-zone"), transport::TlsMode::kCrossZone);
  EXPECT_EQ(transport::parse_tls_mode("yes").status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(transport::tls_between(transport::TlsMode::kAll, "a", "a"));
  EXPECT_TRUE(transport::tls_between(transport::TlsMode::kCrossZone, "a", "b"));
  EXPECT_FALSE(transport::tls_between(transport::TlsMode::kCrossZone, "a", "a"));
  EXPECT_FALSE(transport::tls_between(transport::TlsMode::kOff, "a", "b"));
  transport::TlsConfig half;
  half.mode = transport::TlsMode::kAll;
  half.cert_file = "x.pem";
  EXPECT_EQ(transport::validate_tls_config(half).code(), StatusCode::kInvalidArgument);
  LogCapture logs;
  transport::TcpEndpointConfig config = test_config(logs, 0);
  config.tls = {transport::TlsMode::kAll, "/nonexistent.pem", "/nonexistent.key", "/nonexistent-ca.pem"};
  auto ep = transport::TcpEndpoint::listen(config);
  ASSERT_FALSE(ep.is_ok());
  EXPECT_NE(ep.status().message().find("--tls-cert"), std::string::npos) << ep.status().to_string();
}

TEST(Tls, PreSharedKeyAllReducesBitExactAgainstPlaintext) {
  for (int n : {2, 3}) {
    LogCapture logs;
    Cluster plain = make_cluster(n, logs);
    Cluster tls = tls_cluster(logs, std::vector<transport::TlsConfig>(n, transport::TlsConfig{transport::TlsMode::kAll, "", "", ""}));
    expect_all_ok(connect_all(plain, 1));
    expect_all_ok(connect_all(tls, 1));
    EXPECT_EQ(tls.endpoints[0]->stats().tls_peers, static_cast<std::uint64_t>(n - 1));
    EXPECT_EQ(plain.endpoints[0]->stats().tls_peers, 0u);
    expect_same_sums(plain, tls);
    EXPECT_TRUE(logs.contains("TLS 1.3", "pre-shared key")) << logs.dump();
  }
}

TEST(Tls, CrossZoneEncryptsOnlyThePairsBetweenZones) {
  LogCapture logs;
  Cluster plain = make_cluster(3, logs);
  Cluster tls = tls_cluster(logs, std::vector<transport::TlsConfig>(3, transport::TlsConfig{transport::TlsMode::kCrossZone, "", "", ""}));
  expect_all_ok(connect_all(plain, 1));
  expect_all_ok(connect_zoned(tls, 1, {"east", "east", "west"}));
  EXPECT_EQ(tls.endpoints[0]->stats().tls_peers, 1u);  // rank 2 only
  EXPECT_EQ(tls.endpoints[2]->stats().tls_peers, 2u);
  expect_same_sums(plain, tls);
}

TEST(Tls, CertificatesAllReduceBitExactAndAForeignCaIsRefusedOnBothSides) {
  if (!Pki::available()) GTEST_SKIP() << "no openssl command to make certificates with";
  Pki pki;
  ASSERT_TRUE(pki.make_ca("ca"));
  ASSERT_TRUE(pki.make_ca("other-ca"));
  std::vector<transport::TlsConfig> good = {pki.member("m0", "ca"), pki.member("m1", "ca"),
                                 pki.member("m2", "ca")};
  {
    LogCapture logs;
    Cluster plain = make_cluster(3, logs);
    Cluster tls = tls_cluster(logs, good);
    expect_all_ok(connect_all(plain, 1));
    expect_all_ok(connect_all(tls, 1));
    expect_same_sums(plain, tls);
    EXPECT_TRUE(logs.contains("TLS 1.3", "(certificates)")) << logs.dump();
  }
  // Rank 1's certificate comes from another CA (its own trust is the cluster's CA).
  for (int intruder : {0, 1}) {
    LogCapture logs;
    std::vector<transport::TlsConfig> tls_configs = {good[0], good[1]};
    transport::TlsConfig foreign = pki.member("intruder", "other-ca");
    foreign.ca_file = pki.path("ca.pem");
    tls_configs[intruder] = foreign;
    Cluster c = tls_cluster(logs, tls_configs);
    const auto start = std::chrono::steady_clock::now();
    const std::vector<Status> st = connect_all(c, 1);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(st[r].code(), StatusCode::kAuthFailed) << "intruder " << intruder << " rank " << r
                                                       << ": " << st[r].to_string();
      EXPECT_NE(st[r].message().find("TLS with rank"), std::string::npos) << st[r].to_string();
    }
    const Status& victim = st[1 - intruder];
    EXPECT_NE(victim.message().find("does not verify"), std::string::npos) << victim.to_string();
    EXPECT_NE(st[intruder].message().find("refused our certificate"), std::string::npos)
        << st[intruder].to_string();
    EXPECT_EQ(c.endpoints[0]->stats().tls_failures + c.endpoints[1]->stats().tls_failures, 2u);
  }
}

TEST(Tls, AModeMismatchFailsBothSidesAtOnce) {
  for (transport::TlsConfig odd : {transport::TlsConfig{transport::TlsMode::kOff, "", "", ""}, transport::TlsConfig{transport::TlsMode::kAll, "", "", ""}}) {
    for (int odd_rank : {0, 1}) {
      LogCapture logs;
      std::vector<transport::TlsConfig> configs(2, transport::TlsConfig{odd.mode == transport::TlsMode::kOff ? transport::TlsMode::kAll
                                                                           : transport::TlsMode::kOff,
                                                  "", "", ""});
      configs[odd_rank] = odd;
      Cluster c = tls_cluster(logs, configs);
      const auto start = std::chrono::steady_clock::now();
      const std::vector<Status> st = connect_all(c, 1, std::chrono::seconds(20));
      EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
      for (int r = 0; r < 2; ++r) {
        EXPECT_EQ(st[r].code(), StatusCode::kMismatch) << st[r].to_string();
        EXPECT_NE(st[r].message().find("TLS mode mismatch"), std::string::npos) << st[r].to_string();
      }
    }
  }
}

TEST(Tls, CertificatesAgainstThePreSharedKeyIsAMismatchToo) {
  if (!Pki::available()) GTEST_SKIP() << "no openssl command to make certificates with";
  Pki pki;
  ASSERT_TRUE(pki.make_ca("ca"));
  LogCapture logs;
  Cluster c = tls_cluster(logs, {pki.member("m0", "ca"), transport::TlsConfig{transport::TlsMode::kAll, "", "", ""}});
  const std::vector<Status> st = connect_all(c, 1);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(st[r].code(), StatusCode::kMismatch) << st[r].to_string();
    EXPECT_NE(st[r].message().find("certificates"), std::string::npos) << st[r].to_string();
  }
}

// Below the endpoint: two streams over a socket pair, as a misconfigured or hostile peer
// would drive them.
struct StreamPair {
  int fds[2] = {-1, -1};
  StreamPair() { ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds); }
  ~StreamPair() {
    ::close(fds[0]);
    ::close(fds[1]);
  }
};

TEST(Tls, AMismatchedPreSharedKeyIsRefusedOnBothSides) {
  auto ctx = transport::TlsContext::create(transport::TlsConfig{transport::TlsMode::kAll, "", "", ""});
  ASSERT_TRUE(ctx.is_ok());
  StreamPair sp;
  Mac a{}, b{};
  a[0] = 1;
  b[0] = 2;
  auto client = transport::TlsStream::create(*ctx, sp.fds[0], true, a);
  auto server = transport::TlsStream::create(*ctx, sp.fds[1], false, b);
  ASSERT_TRUE(client.is_ok() && server.is_ok());
  std::vector<transport::TlsHandshake> hs = {{client->get(), sp.fds[0], "server", Status()},
                                         {server->get(), sp.fds[1], "client", Status()}};
  const Status st = run_tls_handshakes(hs, Deadline::after(std::chrono::seconds(5)));
  EXPECT_FALSE(st.is_ok());
  for (const auto& h : hs) {
    EXPECT_EQ(h.status.code(), StatusCode::kAuthFailed) << h.status.to_string();
    EXPECT_NE(h.status.message().find("PSK mismatch"), std::string::npos) << h.status.to_string();
  }
}

TEST(Tls, APeerPresentingNoCertificateIsRefusedOnBothSides) {
  if (!Pki::available()) GTEST_SKIP() << "no openssl command to make certificates with";
  Pki pki;
  ASSERT_TRUE(pki.make_ca("ca"));
  auto ctx = transport::TlsContext::create(pki.member("m0", "ca"));
  ASSERT_TRUE(ctx.is_ok()) << ctx.status().to_string();
  StreamPair sp;
  auto server = transport::TlsStream::create(*ctx, sp.fds[1], false, Mac{});
  ASSERT_TRUE(server.is_ok());
  // The client: TLS 1.3 that trusts the CA but has no certificate of its own.
  SSL_CTX* bare = SSL_CTX_new(TLS_client_method());
  SSL_CTX_set_min_proto_version(bare, TLS1_3_VERSION);
  ASSERT_EQ(SSL_CTX_load_verify_locations(bare, pki.path("ca.pem").c_str(), nullptr), 1);
  SSL* ssl = SSL_new(bare);
  SSL_set_fd(ssl, sp.fds[0]);
  SSL_set_connect_state(ssl);
  std::vector<transport::TlsHandshake> hs = {{server->get(), sp.fds[1], "client", Status()}};
  std::string client_error;
  std::thread t([&] {
    const Deadline d = Deadline::after(std::chrono::seconds(5));
    char buf[8];
    while (!d.passed()) {
      const int ret = SSL_do_handshake(ssl) == 1 ? SSL_read(ssl, buf, sizeof buf) : -1;
      const int e = SSL_get_error(ssl, ret);
      if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        std::this_thread::yield();
        continue;
      }
      const char* reason = ERR_reason_error_string(ERR_get_error());
      if (e == SSL_ERROR_SSL && reason != nullptr) client_error = reason;
      break;
    }
  });
  const Status st = run_tls_handshakes(hs, Deadline::after(std::chrono::seconds(5)));
  t.join();
  SSL_free(ssl);
  SSL_CTX_free(bare);
  EXPECT_EQ(st.code(), StatusCode::kAuthFailed) << st.to_string();
  EXPECT_NE(st.message().find("peer presented no certificate"), std::string::npos) << st.to_string();
  EXPECT_NE(client_error.find("certificate required"), std::string::npos) << client_error;
}

TEST(Tls, AFlippedBitInsideARecordFailsThePeerInsteadOfTheSum) {
  LogCapture logs;
  Cluster c = tls_cluster(logs, std::vector<transport::TlsConfig>(2, transport::TlsConfig{transport::TlsMode::kAll, "", "", ""}));
  hostile::TcpProxy proxy(c.endpoints[1]->port());
  // Well past the handshakes (two 64-byte messages, then TLS's few hundred bytes): inside
  // the all-reduce's records.
  proxy.corrupt_at(100000);
  c.addresses[1] = "127.0.0.1:" + std::to_string(proxy.port());
  expect_all_ok(connect_all(c, 1));
  const std::vector<Status> st = run_ranks(2, [&](int r) {
    std::vector<float> in(1 << 20, 1.0f), out(1 << 20);
    algorithms::CollectiveOptions opt;
    opt.seq = 1;
    opt.deadline = Deadline::after(std::chrono::seconds(10));
    Status s = all_reduce(*c.links[r], in.data(), out.data(), in.size(), DType::kFloat32,
                          ReduceOp::kSum, opt);
    if (!s.is_ok()) c.links[r]->abort(s);
    return s;
  });
  ASSERT_TRUE(proxy.corrupted());
  EXPECT_EQ(st[1].code(), StatusCode::kBadFrame) << st[1].to_string();
  EXPECT_NE(st[1].message().find("TLS"), std::string::npos) << st[1].to_string();
  EXPECT_NE(st[1].message().find("altered in transit"), std::string::npos) << st[1].to_string();
}

}  // namespace
}  // namespace tributary::testing
