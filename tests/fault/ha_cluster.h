// Replicated coordinators for the failover tests: a real etcd of the test's own, several
// `tributary coordinator --etcd` processes sharing it, and soak agents given every
// coordinator's endpoint (tests/fault/soak_cluster.h checks their committed steps).
#pragma once

#include <map>
#include <optional>

#include "tests/fault/soak_cluster.h"
#include "tests/integration/etcd_server.h"
#include "tests/integration/http_get.h"

namespace tributary::fault {

inline constexpr int kTestLeaseSeconds = 2;

class HaCluster {
 public:
  // Starts etcd, the first coordinator (it wins the election), then `coordinators - 1`
  // standbys. ok() is false (with failure() saying why) when something did not start.
  // `coordinator_extra`: more flags for every coordinator.
  HaCluster(int world, int coordinators, std::vector<std::string> agent_extra,
            const std::vector<std::string>& coordinator_extra = {}) {
    etcd.emplace(etcd_dir);
    if (etcd->url().empty()) {
      failure_ = etcd->failure();
      return;
    }
    std::vector<std::string> ha = {"--etcd",    etcd->url(),
                                   "--lease-s", std::to_string(kTestLeaseSeconds),
                                   "--metrics", "127.0.0.1:0"};
    ha.insert(ha.end(), coordinator_extra.begin(), coordinator_extra.end());
    soak.emplace(world, ha, std::move(agent_extra));
    if (soak->endpoint.empty()) {
      failure_ = "the first coordinator did not start";
      return;
    }
    std::string endpoints = soak->endpoint;
    for (int i = 1; i < coordinators; ++i) {
      standbys.push_back(std::make_unique<CoordinatorProcess>(
          soak->dir, "standby" + std::to_string(i), soak->secret, world, ha));
      const std::string e = standbys.back()->wait_ready(deadline_after(seconds(20)));
      if (e.empty()) {
        failure_ = "standby " + std::to_string(i) + " did not start";
        return;
      }
      endpoints += "," + e;
    }
    soak->endpoint = endpoints;  // what agents are given
  }

  bool ok() const { return failure_.empty(); }
  const std::string& failure() const { return failure_; }

  std::vector<Process*> coordinators() {
    std::vector<Process*> all = {&*soak->coordinator->process};
    for (auto& s : standbys) all.push_back(&*s->process);
    return all;
  }

  // The endpoint agents dial for coordinator `p`.
  std::string endpoint_of(const Process* p) {
    if (p == &*soak->coordinator->process) return soak->coordinator->endpoint();
    for (auto& s : standbys)
      if (p == &*s->process) return s->endpoint();
    return {};
  }

  // The value of the unlabelled series `name` on coordinator `p`'s /metrics (its port is
  // in its "listening on" line), or nullopt.
  std::optional<double> metric(const Process& p, const std::string& name) {
    static const std::regex port_re(R"(metrics on port (\d+))");
    std::smatch m;
    const std::string log = p.err();
    if (!std::regex_search(log, m, port_re)) return std::nullopt;
    const auto response = integration::http_get("127.0.0.1", std::stoi(m[1]), "/metrics");
    if (!response || response->status != 200) return std::nullopt;
    const std::regex line("\n" + name + " ([0-9.e+-]+)");
    if (!std::regex_search(response->body, m, line)) return std::nullopt;
    return std::stod(m[1]);
  }

  // The live coordinators that were elected and have not stood down since (two only
  // while a paused one has not yet noticed it lost its lease).
  std::vector<Process*> leaders() {
    static const std::regex elected("elected leader");
    static const std::regex stood_down("stopped leading");
    std::vector<Process*> found;
    for (Process* p : coordinators()) {
      if (p->poll().has_value()) continue;
      const std::string log = p->err();
      if (count_matches(log, elected) > count_matches(log, stood_down)) found.push_back(p);
    }
    return found;
  }
  Process* leader() {
    const auto all = leaders();
    return all.size() == 1 ? all.front() : nullptr;
  }

  // Waits (bounded) for a live leader other than `not_this`.
  Process* wait_leader(SteadyTime deadline, const Process* not_this = nullptr) {
    Process* found = nullptr;
    poll_until(deadline, [&] {
      for (Process* p : leaders()) {
        if (p != not_this) found = p;
      }
      return found != nullptr;
    });
    return found;
  }

  // epoch -> the coordinators whose logs say they issued it ("view epoch E").
  std::map<std::uint64_t, std::vector<std::string>> issued_epochs() {
    static const std::regex re(R"(view epoch (\d+) )");
    std::map<std::uint64_t, std::vector<std::string>> issued;
    for (Process* p : coordinators()) {
      const std::string log = p->err();
      for (auto it = std::sregex_iterator(log.begin(), log.end(), re); it != std::sregex_iterator();
           ++it) {
        issued[std::stoull((*it)[1])].push_back(p->name());
      }
    }
    return issued;
  }

  // Every epoch issued once, by one coordinator.
  void expect_no_epoch_twice() {
    for (const auto& [epoch, who] : issued_epochs()) {
      std::string names;
      for (const auto& n : who) names += n + " ";
      EXPECT_EQ(who.size(), 1u) << "epoch " << epoch << " issued by " << names << "\n" << dump();
    }
  }

  std::string dump() {
    std::string s = soak->dump();
    for (auto& p : standbys)
      s += "==== " + p->process->name() + ":\n" + tail(p->process->err(), 12000);
    s += "==== etcd:\n" + tail(etcd->process().err(), 4000);
    return s;
  }

  TempDir etcd_dir;
  std::optional<integration::EtcdServer> etcd;
  std::optional<SoakCluster> soak;
  std::vector<std::unique_ptr<CoordinatorProcess>> standbys;

 private:
  std::string failure_;
};

}  // namespace tributary::fault
