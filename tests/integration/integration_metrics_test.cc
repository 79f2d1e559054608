// Metrics as an operator sees them: a real Prometheus server scrapes a real coordinator and
// real agents (all on ephemeral ports) while they run an all-reduce benchmark, and the
// test asks Prometheus's HTTP API for the series the dashboards use: membership size and
// epoch (coordinator and agents), collectives by op and algorithm, bytes by peer link,
// the transport carrying each peer and bytes by transport, and the latency histogram (through histogram_quantile, as a dashboard would).
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cmath>
#include <map>
#include <regex>
#include <set>

#include "tests/integration/http_get.h"
#include "tests/integration/process.h"

namespace tributary::integration {
namespace {

constexpr int kAgents = 3;

std::string find_prometheus() {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  dirs += ":/usr/bin:/usr/local/bin";
  std::size_t start = 0;
  while (start <= dirs.size()) {
    const std::size_t colon = std::min(dirs.find(':', start), dirs.size());
    const std::string candidate = dirs.substr(start, colon - start) + "/prometheus";
    struct stat st {};
    if (colon > start && ::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
    start = colon + 1;
  }
  return "";
}

// One element of an instant-vector answer.
struct Sample {
  std::map<std::string, std::string> labels;
  double value = NAN;
};

// Parses {"status":"success","data":{"resultType":"vector","result":[{"metric":{...},
// "value":[ts,"v"]}, ...]}}. Label values here are names and addresses: no escapes.
std::optional<std::vector<Sample>> parse_vector(const std::string& body) {
  if (body.find(R"("status":"success")") == std::string::npos) return std::nullopt;
  static const std::regex element(R"re(\{"metric":\{([^}]*)\},"value":\[[^,\]]+,"([^"]*)"\]\})re");
  static const std::regex label(R"re("([^"]+)":"([^"]*)")re");
  std::vector<Sample> out;
  for (auto it = std::sregex_iterator(body.begin(), body.end(), element);
       it != std::sregex_iterator(); ++it) {
    Sample s;
    const std::string labels = (*it)[1].str();
    for (auto l = std::sregex_iterator(labels.begin(), labels.end(), label);
         l != std::sregex_iterator(); ++l) {
      s.labels[(*l)[1].str()] = (*l)[2].str();
    }
    s.value = std::strtod((*it)[2].str().c_str(), nullptr);
    out.push_back(std::move(s));
  }
  return out;
}

class PrometheusServer {
 public:
  // Starts Prometheus on a free port, retrying if another program takes the port first;
  // returns once /-/ready answers 200. ok() is false (and why() says why) otherwise.
  PrometheusServer(const TempDir& dir, const std::string& binary, const std::string& config) {
    for (int attempt = 0; attempt < 3 && !ready_; ++attempt) {
      port_ = pick_free_port();
      process_.reset();
      process_ = std::make_unique<Process>(
          dir, "prometheus" + std::to_string(attempt),
          std::vector<std::string>{
              binary, "--config.file=" + config,
              "--storage.tsdb.path=" + dir.file("tsdb" + std::to_string(attempt)),
              "--web.listen-address=127.0.0.1:" + std::to_string(port_), "--log.level=warn"});
      ready_ = poll_until(deadline_after(seconds(90)),
                          [&] {
                            if (process_->poll().has_value()) return true;
                            auto r = http_get("127.0.0.1", port_, "/-/ready", milliseconds(2000));
                            return r && r->status == 200;
                          }) &&
               !process_->poll().has_value();
    }
  }

  bool ok() const { return ready_; }
  std::string dump() const { return process_ ? process_->dump() : ""; }

  std::optional<std::vector<Sample>> query(const std::string& promql) const {
    auto r = http_get("127.0.0.1", port_, "/api/v1/query?query=" + url_encode(promql),
                      milliseconds(5000));
    if (!r || r->status != 200) return std::nullopt;
    return parse_vector(r->body);
  }

  std::string targets() const {
    auto r = http_get("127.0.0.1", port_, "/api/v1/targets", milliseconds(5000));
    return r ? r->body : "(no answer)";
  }

 private:
  int port_ = 0;
  bool ready_ = false;
  std::unique_ptr<Process> process_;
};

TEST(Prometheus, ScrapesCoordinatorAndAgentsWhileTheyWork) {
  const std::string prometheus = find_prometheus();
  if (prometheus.empty()) {
    GTEST_SKIP() << "prometheus is not installed (no 'prometheus' on PATH); scripts/deps.sh "
                    "installs the Debian package, which this test needs to scrape real endpoints";
  }
  TempDir dir;
  const std::string secret = "metrics-secret";
  CoordinatorProcess coordinator(dir, "coordinator", secret, kAgents, {"--metrics", "127.0.0.1:0"});
  ASSERT_FALSE(coordinator.wait_ready(deadline_after(seconds(30))).empty())
      << coordinator.process->dump();
  const auto listening = coordinator.process->wait_for_line(
      std::regex(R"(listening on \S+, metrics on port (\d+))"), deadline_after(seconds(30)));
  ASSERT_TRUE(listening) << coordinator.process->dump();
  const int coordinator_metrics = std::stoi((*listening)[1]);

  // An endless all-reduce benchmark keeps the counters moving until the test kills it.
  std::vector<std::unique_ptr<Process>> agents;
  for (int i = 0; i < kAgents; ++i) {
    agents.push_back(std::make_unique<Process>(
        dir, "agent" + std::to_string(i),
        agent_argv(coordinator.endpoint(), secret,
                   {"--workload", "bench", "--op", "all_reduce", "-b", "64K", "-e", "64K",
                    "--warmup", "1", "--iters", "100000000", "--metrics", "127.0.0.1:0"})));
  }
  auto dumps = [&] {
    std::string s = coordinator.process->dump();
    for (const auto& a : agents) s += a->dump();
    return s;
  };
  std::vector<int> agent_metrics;
  std::set<std::string> data_addresses;
  for (auto& a : agents) {
    const auto line = a->wait_for_line(agent_ready_line(), deadline_after(seconds(60)));
    ASSERT_TRUE(line) << a->name() << " did not come up\n" << dumps();
    data_addresses.insert((*line)[3] + ":" + (*line)[4]);
    agent_metrics.push_back(std::stoi((*line)[5]));
    ASSERT_GT(agent_metrics.back(), 0) << dumps();
  }

  const std::string config = dir.file("prometheus.yml");
  {
    std::ofstream yml(config);
    yml << "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"
        << "scrape_configs:\n"
        << "  - job_name: coordinator\n    static_configs:\n      - targets: ['127.0.0.1:"
        << coordinator_metrics << "']\n"
        << "  - job_name: agents\n    static_configs:\n      - targets: [";
    for (std::size_t i = 0; i < agent_metrics.size(); ++i) {
      yml << (i ? ", " : "") << "'127.0.0.1:" << agent_metrics[i] << "'";
    }
    yml << "]\n";
  }
  PrometheusServer server(dir, prometheus, config);
  ASSERT_TRUE(server.ok()) << "prometheus did not become ready\n" << server.dump();

  const auto deadline = deadline_after(seconds(120));
  // Polls `promql` until `good` accepts the answer; on timeout, reports the last answer.
  auto expect_eventually = [&](const std::string& promql,
                               const std::function<bool(const std::vector<Sample>&)>& good) {
    std::optional<std::vector<Sample>> last;
    const bool ok = poll_until(deadline, [&] {
      last = server.query(promql);
      return last && good(*last);
    });
    std::string answer = "(no answer)";
    if (last) {
      answer.clear();
      for (const auto& s : *last) {
        for (const auto& [k, v] : s.labels) answer += k + "=" + v + " ";
        answer += "=> " + std::to_string(s.value) + "\n";
      }
    }
    EXPECT_TRUE(ok) << "query: " << promql << "\nlast answer:\n"
                    << answer << "targets: " << server.targets() << "\n"
                    << dumps();
    return ok;
  };
  auto every = [](std::size_t n, auto pred) {
    return [n, pred](const std::vector<Sample>& v) {
      return v.size() == n && std::all_of(v.begin(), v.end(), pred);
    };
  };

  expect_eventually("up", every(kAgents + 1, [](const Sample& s) { return s.value == 1; }));
  expect_eventually(R"(tributary_membership_size{job="coordinator"})",
                    every(1, [](const Sample& s) { return s.value == kAgents; }));
  expect_eventually(R"(tributary_membership_size{job="agents"})",
                    every(kAgents, [](const Sample& s) { return s.value == kAgents; }));
  expect_eventually(R"(tributary_epoch{job="coordinator"})",
                    every(1, [](const Sample& s) { return s.value >= 1; }));
  expect_eventually(R"(tributary_epoch{job="agents"})",
                    every(kAgents, [](const Sample& s) { return s.value >= 1; }));
  // Collectives by op and algorithm, on every agent.
  expect_eventually(
      R"(sum by (instance, op, algorithm) (tributary_collectives_total{job="agents",op="all_reduce",result="ok"}))",
      [&](const std::vector<Sample>& v) {
        std::set<std::string> instances;
        for (const auto& s : v) {
          if (s.value > 0 && !s.labels.count("algorithm")) return false;
          if (s.value > 0) instances.insert(s.labels.at("instance"));
        }
        return instances.size() == kAgents;
      });
  // Bytes by peer link: every agent sent to and received from some peer, and every peer
  // label is the data address of a member.
  for (const char* direction : {"sent", "received"}) {
    expect_eventually(
        std::string("tributary_link_bytes_") + direction + R"(_total{job="agents"} > 0)",
        [&](const std::vector<Sample>& v) {
          std::set<std::string> instances;
          for (const auto& s : v) {
            auto peer = s.labels.find("peer");
            if (peer == s.labels.end() || !data_addresses.count(peer->second)) return false;
            instances.insert(s.labels.at("instance"));
          }
          return instances.size() == kAgents;
        });
  }
  // The path of every peer (local agents: shared memory), and bytes by transport.
  expect_eventually(R"(tributary_peer_transport{job="agents"} == 1)",
                    [&](const std::vector<Sample>& v) {
                      std::set<std::string> instances;
                      for (const auto& s : v) {
                        if (s.labels.at("transport") != "shm") return false;
                        instances.insert(s.labels.at("instance"));
                      }
                      return v.size() == kAgents * (kAgents - 1) && instances.size() == kAgents;
                    });
  expect_eventually(R"(tributary_transport_bytes_sent_total{job="agents",transport="shm"} > 0)",
                    every(kAgents, [](const Sample&) { return true; }));
  // The latency histogram, read the way a dashboard reads it.
  expect_eventually(
      R"(sum by (instance) (tributary_collective_seconds_bucket{job="agents",op="all_reduce",le="+Inf"}))",
      every(kAgents, [](const Sample& s) { return s.value > 0; }));
  expect_eventually(
      R"(histogram_quantile(0.5, sum by (le) (rate(tributary_collective_seconds_bucket{job="agents",op="all_reduce"}[10s]))))",
      every(1,
            [](const Sample& s) { return std::isfinite(s.value) && s.value > 0 && s.value < 10; }));

  // Still one cluster at the end: nobody fell over while being scraped.
  for (auto& a : agents) EXPECT_FALSE(a->poll().has_value()) << a->name() << " exited\n" << dumps();
}

}  // namespace
}  // namespace tributary::integration
