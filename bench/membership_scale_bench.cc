// The membership state machine at scale (issue 19's "Membership at scale"): the pure
// membership::Membership with a fake clock, no sockets, at 64, 512 and 4096 members (or
// the sizes given). Per size:
//   joins/s             N joins into an empty membership (the N-th issues the initial view)
//   heartbeat (ns)      one heartbeat() call, averaged over 20 rounds of N heartbeats
//                       (each round 100 ms of fake time, tick() after every round)
//   heartbeat load      messages/s the coordinator receives at a 100 ms interval: N x 10
//   core share          heartbeat handling alone at that load: N x 10 x cost / 1 s
//   Ready round (ms)    N ready() calls after the initial view, until the Go
//   failure -> view     one member falls silent; tick() at heartbeat_timeout: the time of
//                       that tick(), which removes it and computes the new view (ms)
//   view bytes          the new view encoded as the coordinator sends it (control codec)
// Wall time of the calls on this machine (steady_clock), one thread.
//
// Usage: membership_scale_bench [--sizes 64,512,4096]
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "control/codec.h"
#include "membership/membership.h"

namespace {

using tributary::Duration;
using tributary::FakeClock;
using tributary::TimePoint;
using namespace tributary::membership;
using std::chrono::milliseconds;
using Wall = std::chrono::steady_clock;

double seconds_since(Wall::time_point t) {
  return std::chrono::duration<double>(Wall::now() - t).count();
}

// Appended, not "x" + to_string(i): GCC 12's false -Wrestrict (PR105651).
std::string numbered(const char* prefix, std::size_t i) {
  std::string s = prefix;
  s += std::to_string(i);
  return s;
}

// 8 members per host, 512 per zone: the ring sorts by zone and host as in a real cluster.
MemberLabels labels(std::size_t i) {
  std::string address = numbered("10.0.", i / 256);
  address += numbered(".", i % 256);
  address += ":29500";
  return {numbered("member-", i),
          numbered("host-", i / 8),
          numbered("zone-", i / 512),
          address,
          {"tcp"}};
}

struct Row {
  std::size_t n = 0;
  double joins_per_s = 0;
  double heartbeat_ns = 0;
  double ready_round_ms = 0;
  double failure_view_ms = 0;
  std::size_t view_bytes = 0;
};

Row measure(std::size_t n) {
  MembershipConfig config;
  config.initial_world_size = n;
  config.max_members = n;
  config.heartbeat_timeout = std::chrono::seconds(1);
  config.straggler.enabled = false;
  Membership m(config);
  FakeClock clock(TimePoint{} + std::chrono::seconds(1));
  Row row;
  row.n = n;

  std::vector<MemberId> ids;
  const auto joins = Wall::now();
  for (std::size_t i = 0; i < n; ++i) {
    auto joined = m.join(labels(i), clock.now());
    if (!joined) {
      std::fprintf(stderr, "join %zu failed: %s\n", i, joined.status().to_string().c_str());
      std::exit(1);
    }
    ids.push_back(joined->id);
  }
  row.joins_per_s = static_cast<double>(n) / seconds_since(joins);
  const Epoch first = m.epoch();

  const auto ready = Wall::now();
  bool go = false;
  for (MemberId id : ids) go |= m.ready(id, {first, 0, 0, 0}, clock.now()).go.has_value();
  row.ready_round_ms = seconds_since(ready) * 1e3;
  if (!go) {
    std::fprintf(stderr, "no Go after every member was Ready\n");
    std::exit(1);
  }

  constexpr int kRounds = 20;
  double heartbeat_seconds = 0;
  for (int round = 0; round < kRounds; ++round) {
    clock.advance(milliseconds(100));
    const auto t = Wall::now();
    for (MemberId id : ids)
      (void)m.heartbeat(id, first, static_cast<std::uint64_t>(round), clock.now());
    heartbeat_seconds += seconds_since(t);
    (void)m.tick(clock.now());
  }
  row.heartbeat_ns = heartbeat_seconds * 1e9 / (static_cast<double>(n) * kRounds);

  // The last member falls silent; everyone else heartbeats on until the timeout.
  Decisions removed;
  const MemberId silent = ids.back();
  for (int round = 0; round < 11 && !removed.new_view; ++round) {
    clock.advance(milliseconds(100));
    for (MemberId id : ids) {
      if (id != silent) (void)m.heartbeat(id, first, 100, clock.now());
    }
    const auto t = Wall::now();
    removed = m.tick(clock.now());
    row.failure_view_ms = seconds_since(t) * 1e3;
  }
  if (!removed.new_view || removed.new_view->size() != n - 1) {
    std::fprintf(stderr, "the silent member was not removed\n");
    std::exit(1);
  }
  tributary::control::Envelope env;
  tributary::control::view_to_proto(*removed.new_view, env.mutable_view());
  row.view_bytes = tributary::control::encode_envelope(env).size();
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::size_t> sizes = {64, 512, 4096};
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--sizes") == 0 && i + 1 < argc) {
      sizes.clear();
      std::string list = argv[++i];
      for (std::size_t start = 0; start < list.size();) {
        const std::size_t comma = std::min(list.find(',', start), list.size());
        const long v = std::strtol(list.substr(start, comma - start).c_str(), nullptr, 10);
        if (v < 2) {
          std::fprintf(stderr, "--sizes: '%s' is not a size >= 2\n",
                       list.substr(start, comma - start).c_str());
          return 2;
        }
        sizes.push_back(static_cast<std::size_t>(v));
        start = comma + 1;
      }
    } else {
      std::fprintf(stderr, "usage: membership_scale_bench [--sizes 64,512,4096]\n");
      return 2;
    }
  }
  std::printf(
      "| members | joins/s | heartbeat (ns) | heartbeats/s at 100 ms | core share of heartbeats | "
      "Ready round (ms) | failure -> new view (ms) | view bytes |\n"
      "|---|---|---|---|---|---|---|---|\n");
  for (std::size_t n : sizes) {
    const Row r = measure(n);
    const double load = static_cast<double>(n) * 10;
    std::printf("| %zu | %.0f | %.0f | %.0f | %.2f%% | %.2f | %.3f | %zu |\n", r.n, r.joins_per_s,
                r.heartbeat_ns, load, load * r.heartbeat_ns / 1e9 * 100, r.ready_round_ms,
                r.failure_view_ms, r.view_bytes);
  }
  return 0;
}
