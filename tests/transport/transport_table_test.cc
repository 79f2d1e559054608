// The ordered transport table with fake transports: adverts in table order, the first
// entry that connects a pair, the one that carries a whole group, and the error when a
// pair has no common transport.
#include <gtest/gtest.h>

#include "transport/transport_table.h"

namespace tributary::testing {
namespace {

using transport::GroupSpec;
using transport::MemberAdvert;

// Connects members whose "<name>:<key>" adverts carry the same key ("" matches any).
class KeyedTransport final : public transport::Transport {
 public:
  KeyedTransport(std::string name, std::string key)
      : name_(std::move(name)), key_(std::move(key)) {}
  std::string_view name() const override { return name_; }
  std::vector<std::string> advertise() const override { return {name_ + ":" + key_}; }
  bool can_connect(const MemberAdvert& self, const MemberAdvert& peer) const override {
    const auto a = transport::capability_parameters(self.capabilities, name_);
    const auto b = transport::capability_parameters(peer.capabilities, name_);
    return !a.empty() && !b.empty() && (a[0] == b[0] || a[0].empty() || b[0].empty());
  }
  Result<std::unique_ptr<algorithms::Link>> connect_group(const GroupSpec&, Deadline) override {
    ++connects;
    return error(StatusCode::kUnavailable, name_ + " connects nothing in this test");
  }
  void cancel_connect(std::uint64_t newer) override { cancelled = newer; }
  std::vector<transport::PeerTraffic> traffic() const override { return {}; }
  int connects = 0;
  std::uint64_t cancelled = 0;

 private:
  std::string name_;
  std::string key_;
};

MemberAdvert advert(std::vector<std::string> caps) { return {0, "h:1", std::move(caps), ""}; }

struct Table {
  KeyedTransport* shm = nullptr;
  KeyedTransport* tcp = nullptr;
  std::unique_ptr<transport::TransportTable> table;
};

Table make_table() {
  Table t;
  std::vector<std::unique_ptr<transport::Transport>> ordered;
  auto shm = std::make_unique<KeyedTransport>("shm", "host-a");
  auto tcp = std::make_unique<KeyedTransport>("tcp", "");
  t.shm = shm.get();
  t.tcp = tcp.get();
  ordered.push_back(std::move(shm));
  ordered.push_back(std::move(tcp));
  t.table = std::make_unique<transport::TransportTable>(std::move(ordered), Logger("link"));
  return t;
}

TEST(CapabilityParameters, PicksTheEntriesOfOneTransportInOrder) {
  const std::vector<std::string> caps = {"tcp", "shm:k", "tcp:a:1", "tcpx:b", "tcp:[::1]:2"};
  EXPECT_EQ(transport::capability_parameters(caps, "tcp"),
            (std::vector<std::string>{"", "a:1", "[::1]:2"}));
  EXPECT_EQ(transport::capability_parameters(caps, "shm"), std::vector<std::string>{"k"});
  EXPECT_TRUE(transport::capability_parameters(caps, "rdma").empty());
}

TEST(TransportTable, AdvertisesEveryEntryInOrder) {
  Table t = make_table();
  EXPECT_EQ(t.table->advertise(), (std::vector<std::string>{"shm:host-a", "tcp:"}));
  EXPECT_EQ(t.table->names(), (std::vector<std::string>{"shm", "tcp"}));
}

TEST(TransportTable, ThePreferredTransportCarriesAGroupEveryPairOfWhichItConnects) {
  Table t = make_table();
  const MemberAdvert a = advert({"shm:host-a", "tcp:"});
  const MemberAdvert b = advert({"shm:host-b", "tcp:"});
  EXPECT_EQ(t.table->choose(a, a), t.shm);
  EXPECT_EQ(t.table->choose(a, b), t.tcp);
  GroupSpec local{1, 0, {a, a, a}};
  EXPECT_EQ(*t.table->group_transport(local), t.shm);
  // One member on another host: that pair needs TCP, so the whole group runs over it.
  GroupSpec mixed{1, 0, {a, a, b}};
  EXPECT_EQ(*t.table->group_transport(mixed), t.tcp);
  // Every member evaluates the same pairs, so every rank reaches the same answer.
  mixed.rank = 2;
  EXPECT_EQ(*t.table->group_transport(mixed), t.tcp);
}

TEST(TransportTable, APairWithoutACommonTransportIsAnErrorNamingThePeer) {
  Table t = make_table();
  GroupSpec spec{1, 0, {advert({"shm:host-a"}), advert({"rdma:x"})}};
  const auto g = t.table->group_transport(spec);
  ASSERT_FALSE(g.is_ok());
  EXPECT_EQ(g.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(g.status().message().find("rank 1"), std::string::npos) << g.status().to_string();
  EXPECT_EQ(t.table->connect_group(spec, Deadline::after(std::chrono::seconds(1))).status().code(),
            StatusCode::kUnavailable);
  EXPECT_EQ(t.shm->connects + t.tcp->connects, 0);
}

TEST(TransportTable, ConnectsThroughTheCarrierAndCancelsEveryEntry) {
  Table t = make_table();
  const MemberAdvert a = advert({"shm:host-a", "tcp:"});
  GroupSpec spec{3, 1, {a, a}};
  const auto g = t.table->connect_group(spec, Deadline::after(std::chrono::seconds(1)));
  EXPECT_FALSE(g.is_ok());
  EXPECT_EQ(t.shm->connects, 1);
  EXPECT_EQ(t.tcp->connects, 0);
  t.table->cancel_connect(9);
  EXPECT_EQ(t.shm->cancelled, 9u);
  EXPECT_EQ(t.tcp->cancelled, 9u);
}

}  // namespace
}  // namespace tributary::testing
