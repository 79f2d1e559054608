// The real coordinator at scale (issue 19's "Membership at scale"): `tributary coordinator`
// as a process, and N simulated agents in this process that speak only the control
// protocol (one ZeroMQ DEALER each, the real join handshake, heartbeats at the interval
// the coordinator asks for, answers to probes; no data plane, no Ready/Go), spread over
// --threads threads so that the simulator can generate the load. Per N:
//   joins/s              N joins (at most 48 handshakes in flight) until all are accepted
//   first view (s)       start -> every agent holds the initial view
//   interval (ms)        the heartbeat interval the coordinator asks for at N members
//   heartbeats/s         heartbeats the agents sent per second in 5 s of steady state
//   acks/s               HeartbeatAcks received per second over those 5 s
//   coordinator cores    the coordinator process's CPU time over those 5 s / 5 s
//   reported failure (s) an agent "killed" (it stops sending and answering) while its ring
//                        neighbour reports the failure at once, as a broken TCP connection
//                        makes it do: the kill -> the new view at a third agent
//   silent failure (s)   an agent that just stops, reported by nobody: its last heartbeat
//                        -> the new view (the heartbeat timeout, scaled with the pace)
//   view bytes           the failure view's encoded size
// The simulated agents share this machine's cores with the coordinator.
//
// Usage: coordinator_scale_bench --tributary PATH [--sizes 64,512,4096] [--threads 4]
//                                [--heartbeat-timeout-ms 1000] [--coordinator-flag FLAG=V]...
// (--coordinator-flag passes one more flag, e.g. --coordinator-flag --max-heartbeat-rate=0)
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "control/codec.h"
#include "control_client/curve_dealer.h"
#include "control_client/handshake.h"
#include "core/process_stat.h"

extern char** environ;

namespace {

using namespace tributary;
using Wall = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr const char* kSecret = "coordinator-scale-bench";
constexpr std::size_t kInFlight = 48;  // the coordinator admits 64 handshakes per source
constexpr double kSteadySeconds = 5;

double since(Wall::time_point t) { return std::chrono::duration<double>(Wall::now() - t).count(); }

struct Agent {
  zmq::socket_t socket;
  std::optional<control_client::Handshake> handshake;
  std::size_t index = 0;
  bool started = false;
  bool connected = false;
  std::atomic<membership::MemberId> id{0};
  std::atomic<membership::Epoch> epoch{0};
  std::atomic<std::size_t> view_bytes{0};
  Wall::duration interval = milliseconds(100);
  Wall::time_point next_heartbeat{};
  std::atomic<bool> dead{false};        // sends and answers nothing any more
  std::atomic<bool> report_now{false};  // send a FailureReport (suspect unknown) now
  std::atomic<std::int64_t> last_heartbeat_ns{0};
};

// What every simulator thread adds up, read by the main thread.
struct Totals {
  std::atomic<std::size_t> heartbeats{0};
  std::atomic<std::size_t> acks{0};
  std::atomic<std::int64_t> interval_ms{0};
  std::atomic<std::size_t> in_flight{0};  // join handshakes started, not yet accepted
  std::atomic<bool> stop{false};
};

control::JoinRequest request(std::size_t i) {
  control::JoinRequest r;
  r.set_protocol_version(control::kProtocolVersion);
  r.set_name("sim-" + std::to_string(i));
  r.set_host("host-" + std::to_string(i / 8));
  r.set_data_address("127.0.0.1:" + std::to_string(20000 + i % 40000));
  r.add_capabilities("tcp");
  return r;
}

void send(Agent& a, const control::Envelope& e) {
  const std::string bytes = control::encode_envelope(e);
  (void)a.socket.send(zmq::buffer(bytes), zmq::send_flags::dontwait);
}

void heartbeat(Agent& a, Totals& totals, Wall::time_point now) {
  control::Envelope e;
  e.mutable_heartbeat()->set_member_id(a.id.load());
  e.mutable_heartbeat()->set_epoch(a.epoch.load());
  send(a, e);
  ++totals.heartbeats;
  a.last_heartbeat_ns.store(now.time_since_epoch().count());
  a.next_heartbeat = now + a.interval;
}

void on_message(Agent& a, const zmq::message_t& msg, Totals& totals) {
  auto env = control::decode_envelope(msg.to_string_view());
  if (!env) return;
  if (env->has_challenge()) {
    if (auto proof = a.handshake->answer(env->challenge())) send(a, *proof);
  } else if (env->has_join_accepted()) {
    const auto& acc = env->join_accepted();
    if (a.handshake->verify(acc)) {
      a.id.store(acc.member_id());
      --totals.in_flight;
    }
    if (acc.has_view()) a.epoch.store(acc.view().epoch());
  } else if (env->has_view()) {
    if (env->view().epoch() > a.epoch.load()) {
      a.view_bytes.store(msg.size());
      a.epoch.store(env->view().epoch());
    }
  } else if (env->has_heartbeat_ack()) {
    ++totals.acks;
    if (env->heartbeat_ack().heartbeat_interval_ms() > 0) {
      a.interval = milliseconds(env->heartbeat_ack().heartbeat_interval_ms());
      totals.interval_ms.store(env->heartbeat_ack().heartbeat_interval_ms());
    }
  } else if (env->body_case() == control::Envelope::kProbe) {
    heartbeat(a, totals, Wall::now());  // as the agent's client thread answers at once
  } else if (env->has_join_rejected() &&
             env->join_rejected().reason().starts_with("coordinator busy")) {
    a.started = false;  // try again in a later round
    --totals.in_flight;
  } else if (env->has_join_rejected()) {
    std::fprintf(stderr, "join rejected: %s\n", env->join_rejected().reason().c_str());
    std::exit(1);
  }
}

// One simulator thread: its slice of the agents, connected and joined as handshakes
// free up (bounded in flight), heartbeating and answering,
// until told to stop. It works in 10 ms rounds (one non-blocking poll over its slice per
// round), so that its cost does not grow with the message rate.
void simulate(std::vector<Agent*> agents, const std::string& endpoint, Totals& totals,
              std::size_t in_flight_limit) {
  constexpr auto kRound = milliseconds(10);
  std::vector<zmq::pollitem_t> items;
  for (Agent* a : agents) items.push_back({a->socket.handle(), 0, ZMQ_POLLIN, 0});
  while (!totals.stop.load()) {
    const auto round = Wall::now();
    for (Agent* a : agents) {
      if (a->started || totals.in_flight.load() >= in_flight_limit) continue;
      if (!a->connected) a->socket.connect(endpoint);  // connections open as agents start
      a->connected = true;
      ++totals.in_flight;
      a->started = true;
      a->handshake = control_client::Handshake::join(kSecret, request(a->index).name());
      send(*a, a->handshake->request(request(a->index)));
    }
    zmq::poll(items.data(), items.size(), milliseconds(0));
    const auto now = Wall::now();
    for (std::size_t i = 0; i < agents.size(); ++i) {
      Agent& a = *agents[i];
      zmq::message_t msg;
      while ((items[i].revents & ZMQ_POLLIN) && a.socket.recv(msg, zmq::recv_flags::dontwait)) {
        if (!a.dead.load()) on_message(a, msg, totals);
      }
      if (a.id.load() == 0 || a.dead.load()) continue;
      if (a.report_now.exchange(false)) {
        control::Envelope e;
        e.mutable_failure_report()->set_reporter(a.id.load());
        e.mutable_failure_report()->set_epoch(a.epoch.load());
        e.mutable_failure_report()->set_detail("simulated: connection to a peer closed");
        send(a, e);
      }
      if (now >= a.next_heartbeat) heartbeat(a, totals, now);
    }
    std::this_thread::sleep_until(round + kRound);  // the simulator's pace, not a wait
  }
}

pid_t spawn_coordinator(const std::string& tributary, std::size_t n, const std::string& timeout_ms,
                        const std::vector<std::string>& extra, const std::string& ready) {
  std::vector<std::string> args = {tributary,
                                   "coordinator",
                                   "--bind",
                                   "tcp://127.0.0.1:0",
                                   "--secret",
                                   kSecret,
                                   "--world-size",
                                   std::to_string(n),
                                   "--ready-file",
                                   ready,
                                   "--log-level",
                                   "warn",
                                   "--heartbeat-timeout-ms",
                                   timeout_ms};
  args.insert(args.end(), extra.begin(), extra.end());
  std::vector<char*> argv;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0) std::exit(1);
  return pid;
}

// Waits (bounded by `limit_s`) until agent `watch` holds an epoch above `before`; the
// seconds since `from`, or -1.
double until_new_view(const Agent& watch, membership::Epoch before, Wall::time_point from,
                      double limit_s) {
  while (watch.epoch.load() <= before && since(from) < limit_s)
    std::this_thread::sleep_for(milliseconds(1));  // polls a flag; bounded by limit_s
  return watch.epoch.load() > before ? since(from) : -1.0;
}

void measure(const std::string& tributary, std::size_t n, std::size_t threads,
             const std::string& timeout_ms, const std::vector<std::string>& extra) {
  char dir[] = "/tmp/coordinator-scale-XXXXXX";
  if (::mkdtemp(dir) == nullptr) std::exit(1);
  const std::string ready = std::string(dir) + "/endpoint";
  const pid_t pid = spawn_coordinator(tributary, n, timeout_ms, extra, ready);
  std::string endpoint;
  for (auto start = Wall::now(); endpoint.empty() && since(start) < 20;) {
    std::ifstream in(ready);
    std::getline(in, endpoint);
    if (endpoint.empty()) std::this_thread::sleep_for(milliseconds(10));  // bounded: 20 s
  }
  if (endpoint.empty()) std::exit(1);

  zmq::context_t context(2);
  context.set(zmq::ctxopt::max_sockets, static_cast<int>(n + 64));
  std::vector<std::unique_ptr<Agent>> agents;
  std::vector<std::vector<Agent*>> slices(threads);
  const control::ClusterCurveKeys keys = control::derive_curve_keys(kSecret);
  for (std::size_t i = 0; i < n; ++i) {
    agents.push_back(std::make_unique<Agent>());
    Agent& a = *agents.back();
    a.index = i;
    a.socket = zmq::socket_t(context, zmq::socket_type::dealer);
    a.socket.set(zmq::sockopt::linger, 0);
    control_client::use_cluster_client_keys(a.socket, keys);
    slices[i % threads].push_back(&a);
  }
  Totals totals;
  const auto start = Wall::now();
  std::vector<std::thread> sim;
  for (auto& slice : slices)
    sim.emplace_back(simulate, slice, endpoint, std::ref(totals), kInFlight);
  auto count = [&](auto pred) {
    std::size_t k = 0;
    for (auto& a : agents) k += pred(*a);
    return k;
  };
  for (std::size_t joined = 0; joined < n && since(start) < 150;) {
    std::this_thread::sleep_for(milliseconds(5));  // the threads do the work; bounded
    joined = count([](const Agent& a) { return a.id.load() != 0; });
  }
  const double join_s = since(start);
  while (count([](const Agent& a) { return a.epoch.load() >= 1; }) < n && since(start) < 150)
    std::this_thread::sleep_for(milliseconds(5));
  const double view_s = since(start);

  // Let the members learn the paced interval before the steady window.
  std::this_thread::sleep_for(milliseconds(1500));
  const auto steady = Wall::now();
  const double cpu0 = process_cpu_seconds(pid);
  const std::size_t hb0 = totals.heartbeats.load(), acks0 = totals.acks.load();
  std::this_thread::sleep_for(std::chrono::duration<double>(kSteadySeconds));
  const double window = since(steady);
  const double cores = (process_cpu_seconds(pid) - cpu0) / window;
  const double hb_rate = static_cast<double>(totals.heartbeats.load() - hb0) / window;
  const double ack_rate = static_cast<double>(totals.acks.load() - acks0) / window;

  // A kill that a neighbour notices at once (its TCP connection closes).
  Agent& watch = *agents[2];
  membership::Epoch before = watch.epoch.load();
  const auto killed = Wall::now();
  agents[0]->dead.store(true);
  agents[1]->report_now.store(true);
  const double reported_s = until_new_view(watch, before, killed, 30);
  const std::size_t view_bytes = watch.view_bytes.load();

  // A member that stops and whom nobody reports: only its silence tells.
  std::this_thread::sleep_for(milliseconds(500));
  before = watch.epoch.load();
  agents[3]->dead.store(true);
  const auto last_heard = Wall::time_point(Wall::duration(agents[3]->last_heartbeat_ns.load()));
  const double silent_s = until_new_view(watch, before, last_heard, 60);

  std::printf("| %zu | %.0f | %.2f | %lld | %.0f | %.0f | %.3f | %.3f | %.3f | %zu |\n", n,
              static_cast<double>(n) / join_s, view_s,
              static_cast<long long>(totals.interval_ms.load()), hb_rate, ack_rate, cores,
              reported_s, silent_s, view_bytes);
  std::fflush(stdout);
  totals.stop.store(true);
  for (auto& t : sim) t.join();
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  ::unlink(ready.c_str());
  ::rmdir(dir);
}

}  // namespace

int main(int argc, char** argv) {
  std::string tributary;
  std::string timeout_ms = "1000";
  std::size_t threads = 4;
  std::vector<std::string> extra;
  std::vector<std::size_t> sizes = {64, 512, 4096};
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--tributary") == 0) {
      tributary = argv[i + 1];
    } else if (std::strcmp(argv[i], "--heartbeat-timeout-ms") == 0) {
      timeout_ms = argv[i + 1];
    } else if (std::strcmp(argv[i], "--threads") == 0) {
      threads = std::max<std::size_t>(1, std::stoul(argv[i + 1]));
    } else if (std::strcmp(argv[i], "--coordinator-flag") == 0) {
      extra.emplace_back(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--sizes") == 0) {
      sizes.clear();
      std::stringstream list(argv[i + 1]);
      for (std::string s; std::getline(list, s, ',');) sizes.push_back(std::stoul(s));
    } else {
      std::fprintf(stderr, "unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  if (tributary.empty()) {
    std::fprintf(stderr,
                 "usage: coordinator_scale_bench --tributary PATH [--sizes 64,512,4096] "
                 "[--threads 4] [--heartbeat-timeout-ms 1000] [--coordinator-flag FLAG=V]...\n");
    return 2;
  }
  std::printf(
      "| members | joins/s | first view (s) | interval (ms) | heartbeats/s | acks/s | "
      "coordinator cores | reported failure -> view (s) | silent failure -> view (s) | "
      "view bytes |\n|---|---|---|---|---|---|---|---|---|---|\n");
  for (std::size_t n : sizes) measure(tributary, n, std::min(threads, n), timeout_ms, extra);
  return 0;
}
