// The real coordinator at scale (issue 19's "Membership at scale"): `tributary coordinator`
// as a process, and N simulated agents in this process that speak only the control
// protocol (one ZeroMQ DEALER each with CURVE, the real join handshake, heartbeats at the
// interval the coordinator asks for, answers to probes, failure reports; no data plane, no
// Ready/Go).
//
// The simulator. Agents are spread over worker threads, at most --agents-per-worker each
// (default 512), and every worker has its own ZeroMQ context (one I/O thread), so no
// socket, context or lock is shared between workers. A worker does not poll its sockets:
// it waits in epoll on their ZMQ_FDs and on its heartbeat schedule (a min-heap of due
// times) and touches a socket only when that socket signalled or has a heartbeat due, so
// its cost is per message, not per socket per round (the previous simulator scanned every
// socket every 10 ms with zmq_poll, which costs a system call per socket: at 4,096 sockets
// it could not generate the load). Threads rather than processes: on a 2-core machine the
// cores, not the isolation, bound the simulator; with a context per thread nothing is
// shared that a process would separate, and the main thread reads the agents' state
// (epochs, the time each view arrived) directly instead of over pipes.
//
// Per N, one row per run:
//   joins/s              N / (start -> every agent accepted); at most --joins-in-flight
//                        handshakes open at a time (the coordinator admits 64 per source)
//   first view (s)       start -> every agent holds the initial view
//   interval (ms)        the heartbeat interval the coordinator asks for at N members
//   hb due/s             what N agents at that interval should send (N / interval)
//   hb sent/s, acks/s    heartbeats the simulator sent and HeartbeatAcks it received per
//                        second over the steady window (--steady-s, default 10 s)
//   max lag (ms)         the latest any heartbeat went out after its due time in that
//                        window: the simulator's own stalls (a lag near the heartbeat
//                        timeout gets members removed for the simulator's sake)
//   coord cores          the coordinator process's utime + stime over the window / window
//   sim cores            this process's utime + stime over the window / window
//   reported (s)         an agent "killed" (it stops sending and answering) and its ring
//                        neighbour reports the failure at once, as a closed TCP connection
//                        makes a real agent do (report -> probes -> confirmation): kill ->
//                        the new view at the first member, and at the last member
//   silent (s)           an agent that just stops, reported by nobody: its last heartbeat
//                        -> the new view at the first member (the scaled heartbeat timeout)
//   view bytes           the failure view's encoded size
// Every wait has a deadline; a measurement that ran out of it prints -1.
//
// Usage: coordinator_scale_bench --tributary PATH [--sizes 64,512,4096] [--runs 1]
//          [--agents-per-worker 512] [--joins-in-flight 48] [--steady-s 10]
//          [--heartbeat-timeout-ms 1000] [--coordinator-flag FLAG=V]...
// (--coordinator-flag passes one more flag, e.g. --coordinator-flag --max-heartbeat-rate=0)
#include <signal.h>
#include <spawn.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <queue>
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

double since(Wall::time_point t) { return std::chrono::duration<double>(Wall::now() - t).count(); }
std::int64_t ns(Wall::time_point t) { return t.time_since_epoch().count(); }
Wall::time_point at_ns(std::int64_t v) { return Wall::time_point(Wall::duration(v)); }

double own_cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// One simulated agent. The atomics are read (and `dead`, `report_now` set) by the main
// thread; the rest belongs to the agent's worker.
struct Agent {
  zmq::socket_t socket;
  std::optional<control_client::Handshake> handshake;
  std::size_t index = 0;
  bool started = false;
  bool connected = false;
  Wall::duration interval = milliseconds(100);
  Wall::time_point next_heartbeat{};
  std::atomic<membership::MemberId> id{0};
  std::atomic<membership::Epoch> epoch{0};
  std::atomic<std::size_t> view_bytes{0};
  std::atomic<std::int64_t> view_at_ns{0};      // when the newest view arrived
  std::atomic<std::int64_t> last_heartbeat_ns{0};
  std::atomic<bool> dead{false};        // sends and answers nothing any more
  std::atomic<bool> report_now{false};  // send a FailureReport (suspect unknown) now
};

// What all workers add up, read by the main thread.
struct Totals {
  std::atomic<std::size_t> joined{0};
  std::atomic<std::size_t> heartbeats{0};
  std::atomic<std::size_t> acks{0};
  std::atomic<std::int64_t> interval_ms{0};
  std::atomic<std::int64_t> max_lag_ns{0};  // reset by the main thread per window
  std::atomic<std::size_t> in_flight{0};    // join handshakes started, not yet accepted
  std::atomic<bool> failed{false};          // a join was rejected for good
};

// The epoch of an Envelope holding a View, read without decoding the members: protobuf
// writes fields in number order, so View.epoch (field 1, a varint) leads Envelope.view
// (field 8). A real agent decodes one view; the simulator receives every member's copy of
// it (4,096 x 170 KB at 4,096 members) on the coordinator's cores, so it must not decode
// them all. nullopt: not a View envelope.
std::optional<std::uint64_t> peek_view_epoch(std::string_view b) {
  std::size_t at = 0;
  auto varint = [&]() -> std::optional<std::uint64_t> {
    std::uint64_t v = 0;
    for (int shift = 0; at < b.size() && shift < 64; shift += 7) {
      const auto byte = static_cast<std::uint8_t>(b[at++]);
      v |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
      if (!(byte & 0x80)) return v;
    }
    return std::nullopt;
  };
  if (b.empty() || b[at++] != char{(8 << 3) | 2} || !varint()) return std::nullopt;
  if (at >= b.size() || b[at] != char{(1 << 3) | 0}) return 0;  // epoch 0 is not written
  ++at;
  return varint();
}

control::JoinRequest request(std::size_t i) {
  control::JoinRequest r;
  r.set_protocol_version(control::kProtocolVersion);
  r.set_name("sim-" + std::to_string(i));
  r.set_host("host-" + std::to_string(i / 8));
  r.set_data_address("127.0.0.1:" + std::to_string(20000 + i % 40000));
  r.add_capabilities("tcp");
  return r;
}

// A worker: its agents, its ZeroMQ context, its epoll set and heartbeat schedule.
class Worker {
 public:
  Worker(std::size_t first, std::size_t count, std::string endpoint, Totals& totals,
         std::size_t in_flight_limit)
      : context_(1), endpoint_(std::move(endpoint)), totals_(totals),
        in_flight_limit_(in_flight_limit) {
    context_.set(zmq::ctxopt::max_sockets, static_cast<int>(count + 16));
    epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
    wake_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (epoll_ < 0 || wake_ < 0) std::exit(1);
    watch(wake_, kWake);
    const control::ClusterCurveKeys keys = control::derive_curve_keys(kSecret);
    for (std::size_t i = 0; i < count; ++i) {
      agents_.push_back(std::make_unique<Agent>());
      Agent& a = *agents_.back();
      a.index = first + i;
      a.socket = zmq::socket_t(context_, zmq::socket_type::dealer);
      a.socket.set(zmq::sockopt::linger, 0);
      control_client::use_cluster_client_keys(a.socket, keys);
      watch(a.socket.get(zmq::sockopt::fd), static_cast<std::uint32_t>(i));
    }
  }
  ~Worker() {
    stop();
    agents_.clear();  // sockets before the context
    ::close(wake_);
    ::close(epoll_);
  }

  Agent& agent(std::size_t i) { return *agents_[i]; }
  std::size_t size() const { return agents_.size(); }
  void start() { thread_ = std::thread([this] { run(); }); }
  // Look at the agents' command flags now (the main thread set one).
  void poke() {
    const std::uint64_t one = 1;
    (void)!::write(wake_, &one, sizeof one);
  }
  void stop() {
    stop_.store(true);
    poke();
    if (thread_.joinable()) thread_.join();
  }

 private:
  static constexpr std::uint32_t kWake = UINT32_MAX;
  using Due = std::pair<std::int64_t, std::uint32_t>;  // (due time in ns, agent)

  void watch(int fd, std::uint32_t tag) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u32 = tag;
    if (::epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &ev) != 0) std::exit(1);
  }

  void run() {
    std::vector<epoll_event> events(256);
    while (!stop_.load()) {
      start_joins();
      const auto now = Wall::now();
      // Sleep until the next heartbeat is due (rounded up to a millisecond), a socket
      // signals, or the main thread pokes; at most 100 ms.
      std::int64_t wait_ms = 100;
      if (!due_.empty()) {
        wait_ms = std::clamp<std::int64_t>((due_.top().first - ns(now) + 999'999) / 1'000'000, 0,
                                           wait_ms);
      }
      const int n = ::epoll_wait(epoll_, events.data(), static_cast<int>(events.size()),
                                 static_cast<int>(wait_ms));
      for (int e = 0; e < n; ++e) {
        const std::uint32_t tag = events[static_cast<std::size_t>(e)].data.u32;
        if (tag == kWake) {
          std::uint64_t v = 0;
          (void)!::read(wake_, &v, sizeof v);
          commands();
        } else {
          drain(*agents_[tag]);
        }
      }
      heartbeats_due(Wall::now());
    }
  }

  // Opens join handshakes while the bench-wide bound allows.
  void start_joins() {
    while (next_join_ < agents_.size() || !retry_.empty()) {
      if (totals_.in_flight.load() >= in_flight_limit_) return;
      Agent* a = nullptr;
      if (!retry_.empty()) {
        a = retry_.back();
        retry_.pop_back();
      } else {
        a = agents_[next_join_++].get();
      }
      if (!a->connected) a->socket.connect(endpoint_);
      a->connected = true;
      a->started = true;
      ++totals_.in_flight;
      a->handshake = control_client::Handshake::join(kSecret, request(a->index).name());
      send(*a, a->handshake->request(request(a->index)));
      drain(*a);
    }
  }

  // Reads everything the socket holds. Also after every send: a send may process the
  // socket's pending commands and so consume the signal on its ZMQ_FD.
  void drain(Agent& a) {
    zmq::message_t msg;
    while (a.socket.recv(msg, zmq::recv_flags::dontwait)) {
      if (!a.dead.load()) on_message(a, msg);
    }
  }

  void send(Agent& a, const control::Envelope& e) {
    const std::string bytes = control::encode_envelope(e);
    (void)a.socket.send(zmq::buffer(bytes), zmq::send_flags::dontwait);
  }

  // `due`: when this heartbeat was due; the next one is due an interval later (from now
  // when the worker fell more than an interval behind: no burst to catch up).
  void heartbeat(Agent& a, Wall::time_point now, Wall::time_point due) {
    control::Envelope e;
    e.mutable_heartbeat()->set_member_id(a.id.load());
    e.mutable_heartbeat()->set_epoch(a.epoch.load());
    send(a, e);
    ++totals_.heartbeats;
    a.last_heartbeat_ns.store(ns(now));
    a.next_heartbeat = (now - due < a.interval ? due : now) + a.interval;
    due_.push({ns(a.next_heartbeat), static_cast<std::uint32_t>(a.index - agents_[0]->index)});
  }

  void heartbeats_due(Wall::time_point now) {
    std::int64_t lag = 0;
    while (!due_.empty() && due_.top().first <= ns(now)) {
      const auto [due, i] = due_.top();
      due_.pop();
      Agent& a = *agents_[i];
      if (due != ns(a.next_heartbeat) || a.dead.load()) continue;  // superseded, or killed
      lag = std::max(lag, ns(now) - due);
      heartbeat(a, now, at_ns(due));
      drain(a);
    }
    std::int64_t seen = totals_.max_lag_ns.load();
    while (lag > seen && !totals_.max_lag_ns.compare_exchange_weak(seen, lag)) {
    }
  }

  void commands() {
    for (auto& p : agents_) {
      Agent& a = *p;
      if (a.dead.load() || a.id.load() == 0 || !a.report_now.exchange(false)) continue;
      control::Envelope e;
      e.mutable_failure_report()->set_reporter(a.id.load());
      e.mutable_failure_report()->set_epoch(a.epoch.load());
      e.mutable_failure_report()->set_detail("simulated: connection to a peer closed");
      send(a, e);
      drain(a);
    }
  }

  void on_view(Agent& a, membership::Epoch epoch, std::size_t bytes) {
    if (epoch <= a.epoch.load()) return;
    a.view_bytes.store(bytes);
    a.view_at_ns.store(ns(Wall::now()));
    a.epoch.store(epoch);
  }

  void on_message(Agent& a, const zmq::message_t& msg) {
    if (const auto epoch = peek_view_epoch(msg.to_string_view())) {
      return on_view(a, *epoch, msg.size());
    }
    auto env = control::decode_envelope(msg.to_string_view());
    if (!env) return;
    if (env->has_challenge()) {
      if (auto proof = a.handshake->answer(env->challenge())) send(a, *proof);
    } else if (env->has_join_accepted()) {
      const auto& acc = env->join_accepted();
      if (a.id.load() != 0 || !a.handshake->verify(acc)) return;
      a.id.store(acc.member_id());
      --totals_.in_flight;
      ++totals_.joined;
      if (acc.heartbeat_interval_ms() > 0) a.interval = milliseconds(acc.heartbeat_interval_ms());
      if (acc.has_view()) on_view(a, acc.view().epoch(), msg.size());
      a.next_heartbeat = Wall::now() + a.interval;  // the join counts as the first heartbeat
      due_.push({ns(a.next_heartbeat), static_cast<std::uint32_t>(a.index - agents_[0]->index)});
    } else if (env->has_view()) {
      on_view(a, env->view().epoch(), msg.size());
    } else if (env->has_view_delta()) {
      // Small: decoded (and bounds-checked) like any message; not applied, as full views
      // are not decoded: the epoch is what the simulated agent reports.
      on_view(a, env->view_delta().epoch(), msg.size());
    } else if (env->has_heartbeat_ack()) {
      ++totals_.acks;
      if (env->heartbeat_ack().heartbeat_interval_ms() > 0) {
        a.interval = milliseconds(env->heartbeat_ack().heartbeat_interval_ms());
        totals_.interval_ms.store(env->heartbeat_ack().heartbeat_interval_ms());
      }
    } else if (env->body_case() == control::Envelope::kProbe) {
      heartbeat(a, Wall::now(), Wall::now());  // as the agent's client thread answers at once
    } else if (env->has_join_rejected() &&
               env->join_rejected().reason().starts_with("coordinator busy")) {
      a.started = false;  // try again later
      --totals_.in_flight;
      retry_.push_back(&a);
    } else if (env->has_join_rejected()) {
      std::fprintf(stderr, "join rejected: %s\n", env->join_rejected().reason().c_str());
      totals_.failed.store(true);
    } else if (env->has_evicted()) {
      std::fprintf(stderr, "sim-%zu evicted: %s\n", a.index, env->evicted().reason().c_str());
    }
  }

  zmq::context_t context_;
  std::string endpoint_;
  Totals& totals_;
  std::size_t in_flight_limit_;
  int epoll_ = -1;
  int wake_ = -1;
  std::vector<std::unique_ptr<Agent>> agents_;
  std::size_t next_join_ = 0;
  std::vector<Agent*> retry_;
  std::priority_queue<Due, std::vector<Due>, std::greater<>> due_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

struct Options {
  std::string tributary;
  std::string timeout_ms = "1000";
  std::size_t agents_per_worker = 512;
  std::size_t joins_in_flight = 48;
  double steady_s = 10;
  std::size_t runs = 1;
  std::vector<std::string> extra;
  std::vector<std::size_t> sizes = {64, 512, 4096};
};

pid_t spawn_coordinator(const Options& o, std::size_t n, const std::string& ready) {
  std::vector<std::string> args = {o.tributary,  "coordinator",    "--bind",
                                   "tcp://127.0.0.1:0", "--secret", kSecret,
                                   "--world-size", std::to_string(n), "--ready-file",
                                   ready,        "--log-level",    "warn",
                                   "--heartbeat-timeout-ms", o.timeout_ms};
  args.insert(args.end(), o.extra.begin(), o.extra.end());
  std::vector<char*> argv;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0) std::exit(1);
  return pid;
}

// All agents, in index order, over their workers.
class Simulator {
 public:
  Simulator(std::size_t n, const Options& o, const std::string& endpoint) {
    const std::size_t workers = (n + o.agents_per_worker - 1) / o.agents_per_worker;
    for (std::size_t w = 0; w < workers; ++w) {
      const std::size_t first = w * n / workers, last = (w + 1) * n / workers;
      workers_.push_back(
          std::make_unique<Worker>(first, last - first, endpoint, totals, o.joins_in_flight));
      for (std::size_t i = 0; i < last - first; ++i) agents_.push_back(&workers_.back()->agent(i));
      owner_.insert(owner_.end(), last - first, workers_.back().get());
    }
  }
  ~Simulator() { workers_.clear(); }
  void start() {
    for (auto& w : workers_) w->start();
  }
  std::size_t workers() const { return workers_.size(); }
  Agent& agent(std::size_t i) { return *agents_[i]; }
  void kill(std::size_t i) { agents_[i]->dead.store(true); }
  void report(std::size_t i) {
    agents_[i]->report_now.store(true);
    owner_[i]->poke();
  }
  // Live agents holding an epoch above `before`, and the latest time one of them got it.
  std::pair<std::size_t, std::int64_t> holding_above(membership::Epoch before) const {
    std::size_t k = 0;
    std::int64_t last = 0;
    for (const Agent* a : agents_) {
      if (a->dead.load() || a->epoch.load() <= before) continue;
      ++k;
      last = std::max(last, a->view_at_ns.load());
    }
    return {k, last};
  }
  std::size_t alive() const {
    return static_cast<std::size_t>(
        std::count_if(agents_.begin(), agents_.end(), [](const Agent* a) { return !a->dead; }));
  }

  Totals totals;

 private:
  std::vector<std::unique_ptr<Worker>> workers_;
  std::vector<Agent*> agents_;
  std::vector<Worker*> owner_;
};

// Polls `done` every millisecond until it holds or `limit_s` passed; whether it held.
template <typename F>
bool wait_for(F done, double limit_s) {
  const auto start = Wall::now();
  while (!done()) {
    if (since(start) >= limit_s) return false;
    std::this_thread::sleep_for(milliseconds(1));  // polls flags the workers set; bounded
  }
  return true;
}

struct FailureTimes {
  double first = -1, last = -1;  // -1: not seen within the deadline
};

// From `from`, until the watcher holds an epoch above `before` (first), and every live
// agent does (last).
FailureTimes until_new_view(Simulator& sim, Agent& watch, membership::Epoch before,
                            Wall::time_point from, double limit_s) {
  FailureTimes t;
  if (!wait_for([&] { return watch.epoch.load() > before; }, limit_s)) return t;
  t.first = std::chrono::duration<double>(at_ns(watch.view_at_ns.load()) - from).count();
  const std::size_t alive = sim.alive();
  if (wait_for([&] { return sim.holding_above(before).first == alive; }, limit_s)) {
    t.last = std::chrono::duration<double>(at_ns(sim.holding_above(before).second) - from).count();
  }
  return t;
}

void measure(const Options& o, std::size_t n) {
  char dir[] = "/tmp/coordinator-scale-XXXXXX";
  if (::mkdtemp(dir) == nullptr) std::exit(1);
  const std::string ready = std::string(dir) + "/endpoint";
  const pid_t pid = spawn_coordinator(o, n, ready);
  std::string endpoint;
  wait_for(
      [&] {
        std::ifstream in(ready);
        std::getline(in, endpoint);
        return !endpoint.empty();
      },
      20);
  if (endpoint.empty()) std::exit(1);

  Simulator sim(n, o, endpoint);
  Totals& totals = sim.totals;
  const auto start = Wall::now();
  sim.start();
  const bool all_joined = wait_for([&] { return totals.joined.load() >= n || totals.failed; }, 300);
  const double join_s = since(start);
  const bool all_viewed = all_joined && wait_for(
                                            [&] {
                                              return sim.holding_above(0).first == n;
                                            },
                                            60);
  const double view_s = since(start);
  if (!all_viewed) {
    std::fprintf(stderr, "n=%zu: %zu joined, %zu hold a view after %.1f s; giving up\n", n,
                 totals.joined.load(), sim.holding_above(0).first, view_s);
  }

  // Let the members learn the paced interval before the steady window.
  std::this_thread::sleep_for(milliseconds(2000));
  const auto steady = Wall::now();
  const double cpu0 = process_cpu_seconds(pid), own0 = own_cpu_seconds();
  const std::size_t hb0 = totals.heartbeats.load(), acks0 = totals.acks.load();
  totals.max_lag_ns.store(0);
  std::this_thread::sleep_for(std::chrono::duration<double>(o.steady_s));
  const double window = since(steady);
  const double cores = (process_cpu_seconds(pid) - cpu0) / window;
  const double sim_cores = (own_cpu_seconds() - own0) / window;
  const double hb_rate = static_cast<double>(totals.heartbeats.load() - hb0) / window;
  const double ack_rate = static_cast<double>(totals.acks.load() - acks0) / window;
  const double max_lag_ms = static_cast<double>(totals.max_lag_ns.load()) / 1e6;
  const std::int64_t interval_ms = totals.interval_ms.load();

  // A kill that a neighbour notices at once (its TCP connection closes) and reports.
  Agent& watch = sim.agent(2);
  membership::Epoch before = watch.epoch.load();
  const auto killed = Wall::now();
  sim.kill(0);
  sim.report(1);
  const FailureTimes reported =
      all_viewed ? until_new_view(sim, watch, before, killed, 30) : FailureTimes{};
  const std::size_t view_bytes = watch.view_bytes.load();

  // A member that stops and whom nobody reports: only its silence tells.
  std::this_thread::sleep_for(milliseconds(1000));
  before = watch.epoch.load();
  sim.kill(3);
  const auto last_heard = at_ns(sim.agent(3).last_heartbeat_ns.load());
  const FailureTimes silent =
      all_viewed ? until_new_view(sim, watch, before, last_heard, 60) : FailureTimes{};

  const double due_rate = interval_ms > 0 ? 1000.0 * static_cast<double>(n) /
                                                static_cast<double>(interval_ms)
                                          : 0;
  std::printf(
      "| %zu | %zu | %.0f | %.2f | %lld | %.0f | %.0f | %.0f | %.0f | %.3f | %.3f | %.3f / %.3f | "
      "%.3f | %zu |\n",
      n, sim.workers(), static_cast<double>(n) / join_s, view_s,
      static_cast<long long>(interval_ms), due_rate, hb_rate, ack_rate, max_lag_ms, cores,
      sim_cores, reported.first, reported.last, silent.first, view_bytes);
  std::fflush(stdout);
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  ::unlink(ready.c_str());
  ::rmdir(dir);
}

std::optional<Options> parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--tributary") {
      o.tributary = value;
    } else if (flag == "--heartbeat-timeout-ms") {
      o.timeout_ms = value;
    } else if (flag == "--agents-per-worker") {
      o.agents_per_worker = std::max<std::size_t>(1, std::stoul(value));
    } else if (flag == "--joins-in-flight") {
      o.joins_in_flight = std::max<std::size_t>(1, std::stoul(value));
    } else if (flag == "--steady-s") {
      o.steady_s = std::stod(value);
    } else if (flag == "--runs") {
      o.runs = std::max<std::size_t>(1, std::stoul(value));
    } else if (flag == "--coordinator-flag") {
      o.extra.push_back(value);
    } else if (flag == "--sizes") {
      o.sizes.clear();
      std::stringstream list(value);
      for (std::string s; std::getline(list, s, ',');) o.sizes.push_back(std::stoul(s));
    } else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return std::nullopt;
    }
  }
  if (o.tributary.empty()) return std::nullopt;
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const auto options = parse(argc, argv);
  if (!options) {
    std::fprintf(stderr,
                 "usage: coordinator_scale_bench --tributary PATH [--sizes 64,512,4096] "
                 "[--runs 1] [--agents-per-worker 512] [--joins-in-flight 48] [--steady-s 10] "
                 "[--heartbeat-timeout-ms 1000] [--coordinator-flag FLAG=V]...\n");
    return 2;
  }
  std::printf(
      "| members | workers | joins/s | first view (s) | interval (ms) | hb due/s | hb sent/s | "
      "acks/s | max lag (ms) | coord cores | sim cores | reported -> view first / last (s) | "
      "silent -> view (s) | view bytes |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (std::size_t n : options->sizes) {
    for (std::size_t r = 0; r < options->runs; ++r) measure(*options, n);
  }
  return 0;
}
