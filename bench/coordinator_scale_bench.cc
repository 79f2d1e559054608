// The real coordinator at scale (issue 19's "Membership at scale"): `tributary coordinator`
// as a process, and N simulated agents in this process that speak only the control
// protocol (one ZeroMQ DEALER each, the real join handshake, heartbeats every 100 ms; no
// data plane, no Ready/Go). Per N:
//   joins/s              N joins (at most 256 handshakes in flight) until all are accepted
//   first view (s)       start -> every agent holds the initial view
//   acks/s               HeartbeatAcks received per second in 5 s of steady heartbeats
//   coordinator cores    the coordinator process's CPU time over those 5 s / 5 s
//   failure -> view (s)  one agent stops heartbeating: its last heartbeat -> the new view at
//                        another agent (the heartbeat timeout, 1 s, is most of it)
//   view bytes           that view's encoded size
// The simulated agents share this machine's cores with the coordinator.
//
// Usage: coordinator_scale_bench --tributary PATH [--sizes 64,512,4096]
//                                [--heartbeat-timeout-ms 1000]
// (a longer timeout keeps members whose heartbeats this one-threaded simulator sends late
// at large N: the rate stays one per 100 ms per agent when it keeps up)
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "control/codec.h"
#include "control_client/handshake.h"

extern char** environ;

namespace {

using namespace tributary;
using Wall = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr const char* kSecret = "coordinator-scale-bench";
constexpr std::size_t kInFlight = 256;
constexpr auto kInterval = milliseconds(100);

double since(Wall::time_point t) { return std::chrono::duration<double>(Wall::now() - t).count(); }

struct Agent {
  zmq::socket_t socket;
  std::optional<control_client::Handshake> handshake;
  membership::MemberId id = 0;
  membership::Epoch epoch = 0;
  std::size_t view_bytes = 0;
  Wall::time_point next_heartbeat{};
  bool silent = false;
  Wall::time_point last_heartbeat{};
};

double cpu_seconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::istringstream fields(stat.substr(stat.rfind(')') + 2));
  std::string f;
  long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> f; ++i) {
    if (i == 14) utime = std::stol(f);
    if (i == 15) stime = std::stol(f);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
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

void send(Agent& a, const control::Envelope& e) {
  const std::string bytes = control::encode_envelope(e);
  (void)a.socket.send(zmq::buffer(bytes), zmq::send_flags::dontwait);
}

// Reads everything pending on every agent; returns the number of HeartbeatAcks.
std::size_t receive(std::vector<Agent>& agents, std::vector<zmq::pollitem_t>& items, long ms) {
  zmq::poll(items.data(), items.size(), milliseconds(ms));
  std::size_t acks = 0;
  for (std::size_t i = 0; i < agents.size(); ++i) {
    if (!(items[i].revents & ZMQ_POLLIN)) continue;
    Agent& a = agents[i];
    zmq::message_t msg;
    while (a.socket.recv(msg, zmq::recv_flags::dontwait)) {
      auto env = control::decode_envelope(msg.to_string_view());
      if (!env) continue;
      if (env->has_challenge()) {
        if (auto proof = a.handshake->answer(env->challenge())) send(a, *proof);
      } else if (env->has_join_accepted()) {
        if (a.handshake->verify(env->join_accepted())) a.id = env->join_accepted().member_id();
        if (env->join_accepted().has_view()) a.epoch = env->join_accepted().view().epoch();
      } else if (env->has_view()) {
        a.epoch = std::max<membership::Epoch>(a.epoch, env->view().epoch());
        a.view_bytes = msg.size();
      } else if (env->has_heartbeat_ack()) {
        ++acks;
      } else if (env->has_join_rejected()) {
        std::fprintf(stderr, "join rejected: %s\n", env->join_rejected().reason().c_str());
        std::exit(1);
      }
    }
  }
  return acks;
}

void heartbeat_due(std::vector<Agent>& agents) {
  const auto now = Wall::now();
  for (Agent& a : agents) {
    if (a.id == 0 || a.silent || now < a.next_heartbeat) continue;
    control::Envelope e;
    e.mutable_heartbeat()->set_member_id(a.id);
    e.mutable_heartbeat()->set_epoch(a.epoch);
    send(a, e);
    a.last_heartbeat = now;
    a.next_heartbeat = now + kInterval;
  }
}

void measure(const std::string& tributary, std::size_t n, const std::string& timeout_ms) {
  char dir[] = "/tmp/coordinator-scale-XXXXXX";
  if (::mkdtemp(dir) == nullptr) std::exit(1);
  const std::string ready = std::string(dir) + "/endpoint";
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
  std::vector<char*> argv;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0) std::exit(1);
  std::string endpoint;
  for (auto start = Wall::now(); endpoint.empty() && since(start) < 20;) {
    std::ifstream in(ready);
    std::getline(in, endpoint);
    if (endpoint.empty()) std::this_thread::sleep_for(milliseconds(10));  // bounded: 20 s
  }
  if (endpoint.empty()) std::exit(1);

  zmq::context_t context(1);
  context.set(zmq::ctxopt::max_sockets, static_cast<int>(n + 64));
  std::vector<Agent> agents(n);
  std::vector<zmq::pollitem_t> items;
  for (auto& a : agents) {
    a.socket = zmq::socket_t(context, zmq::socket_type::dealer);
    a.socket.set(zmq::sockopt::linger, 0);
    a.socket.connect(endpoint);
    items.push_back({a.socket.handle(), 0, ZMQ_POLLIN, 0});
  }
  const auto start = Wall::now();
  std::size_t started = 0, joined = 0;
  while (joined < n && since(start) < 90) {
    for (; started < n && started - joined < kInFlight; ++started) {
      agents[started].handshake = control_client::Handshake::join(kSecret, request(started).name());
      send(agents[started], agents[started].handshake->request(request(started)));
    }
    receive(agents, items, 5);
    heartbeat_due(agents);
    joined = 0;
    for (auto& a : agents) joined += a.id != 0;
  }
  const double join_s = since(start);
  auto all_viewed = [&] {
    for (auto& a : agents)
      if (a.epoch < 1) return false;
    return true;
  };
  while (!all_viewed() && since(start) < 90) {
    receive(agents, items, 5);
    heartbeat_due(agents);
  }
  const double view_s = since(start);

  const auto steady = Wall::now();
  const double cpu0 = cpu_seconds(pid);
  std::size_t acks = 0;
  while (since(steady) < 5) {
    acks += receive(agents, items, 2);
    heartbeat_due(agents);
  }
  const double window = since(steady);
  const double cores = (cpu_seconds(pid) - cpu0) / window;

  agents[0].silent = true;
  const membership::Epoch before = agents[1].epoch;
  while (agents[1].epoch == before && since(steady) < 30) {
    receive(agents, items, 2);
    heartbeat_due(agents);
  }
  const double failure_s =
      std::chrono::duration<double>(Wall::now() - agents[0].last_heartbeat).count();
  std::printf("| %zu | %.0f | %.2f | %.0f | %.2f | %.3f | %zu |\n", n,
              static_cast<double>(n) / join_s, view_s, static_cast<double>(acks) / window, cores,
              agents[1].epoch == before ? -1.0 : failure_s, agents[1].view_bytes);
  std::fflush(stdout);
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  ::unlink(ready.c_str());
  ::rmdir(dir);
}

}  // namespace

int main(int argc, char** argv) {
  std::string tributary;
  std::string timeout_ms = "1000";
  std::vector<std::size_t> sizes = {64, 512, 4096};
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--tributary") == 0) {
      tributary = argv[i + 1];
    } else if (std::strcmp(argv[i], "--heartbeat-timeout-ms") == 0) {
      timeout_ms = argv[i + 1];
    } else if (std::strcmp(argv[i], "--sizes") == 0) {
      sizes.clear();
      std::stringstream list(argv[i + 1]);
      for (std::string s; std::getline(list, s, ',');) sizes.push_back(std::stoul(s));
    }
  }
  if (tributary.empty()) {
    std::fprintf(stderr, "usage: coordinator_scale_bench --tributary PATH [--sizes 64,512,4096]\n");
    return 2;
  }
  std::printf(
      "| members | joins/s | first view (s) | acks/s | coordinator cores | failure -> view (s) | "
      "view bytes |\n|---|---|---|---|---|---|---|\n");
  for (std::size_t n : sizes) measure(tributary, n, timeout_ms);
  return 0;
}
