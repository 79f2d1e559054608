// Failover of a pair's path, measured in one process: ranks as threads over real links
// (a TCP endpoint per rank and path on loopback, or a shared-memory segment per pair as
// the preferred path), a 64 MiB float32 sum all-reduce (the automatic algorithm). Three
// modes, interleaved per repetition:
//   plain     the all-reduce over a plain TCP link (no failover link)
//   failover  over the failover link (preferred + standby path), no fault
//   cut       the same, with rank 0's preferred link aborted mid-collective (an error
//             failover: every pair of rank 0 moves to the standby path)
// Per repetition: the all-reduce time (max over ranks) and, for `cut`, the time from the
// cut to the first receive completed on a standby path (the first bytes moving on the
// next path). Results are checked bit for bit against `plain`. Not a network-namespace
// test: a path is cut by aborting its link, not by downing an interface, and no stall
// deadline is involved (an error failover); a stall failover adds the stall deadline.
//
//   failover_path_bench [--n 2] [--mib 64] [--reps 5] [--preferred tcp|shm]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "transport/tcp/tcp_endpoint.h"
#include "algorithms/collectives.h"
#include "tests/support/fault_path.h"
#include "tests/support/rank_threads.h"
#include "tests/transport/shm_test_util.h"
#include "transport/failover_link.h"

namespace tributary {
namespace {

using SteadyTime = std::chrono::steady_clock::time_point;

// A standby path that notes when the first receive completes on it after `armed`.
class WatchedPath final : public algorithms::PollableLink {
 public:
  WatchedPath(std::unique_ptr<algorithms::PollableLink> inner, std::atomic<std::int64_t>* first_ns)
      : inner_(std::move(inner)), first_ns_(first_ns) {}
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  Handle send(int peer, algorithms::Tag tag, std::span<const std::byte> data) override {
    return inner_->send(peer, tag, data);
  }
  Handle recv(int peer, algorithms::Tag tag, std::span<std::byte> data) override {
    const Handle h = inner_->recv(peer, tag, data);
    recvs_.insert(h);
    return h;
  }
  Status wait(Handle h, Deadline deadline) override {
    recvs_.erase(h);
    return inner_->wait(h, deadline);
  }
  void abort(const Status& reason) override { inner_->abort(reason); }
  bool test(Handle h) override {
    const bool done = inner_->test(h);
    if (done && recvs_.count(h) > 0) {
      const std::int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
      std::int64_t seen = first_ns_->load();
      while (now < seen && !first_ns_->compare_exchange_weak(seen, now)) {
      }
    }
    return done;
  }
  void drive(Deadline until) override { inner_->drive(until); }

 private:
  std::unique_ptr<algorithms::PollableLink> inner_;
  std::atomic<std::int64_t>* first_ns_;
  std::set<Handle> recvs_;
};

struct Flags {
  int n = 2;
  std::size_t mib = 64;
  int reps = 5;
  bool shm = false;
};

std::vector<std::unique_ptr<algorithms::Link>> tcp_group(int n) {
  std::vector<std::unique_ptr<transport::TcpEndpoint>> endpoints;
  std::vector<std::string> addresses;
  for (int r = 0; r < n; ++r) {
    transport::TcpEndpointConfig config;
    config.secret = "bench-secret";
    auto ep = transport::TcpEndpoint::listen(config);
    if (!ep.is_ok()) return {};
    addresses.push_back((*ep)->address());
    endpoints.push_back(std::move(*ep));
  }
  std::vector<std::unique_ptr<algorithms::Link>> links(static_cast<std::size_t>(n));
  const Deadline deadline = Deadline::after(std::chrono::seconds(20));
  const auto statuses = testing::run_ranks(n, [&](int r) -> Status {
    TRIB_ASSIGN_OR_RETURN(links[r], endpoints[r]->connect_group(1, r, addresses, deadline));
    return Status();
  });
  for (const Status& st : statuses) {
    if (!st.is_ok()) return {};
  }
  return links;
}

struct Run {
  double seconds = 0;           // the all-reduce, max over ranks
  double to_next_path_ms = -1;  // cut -> first receive completed on a standby path
  bool ok = false;
};

enum class Mode { kPlain, kFailover, kCut };

Run run_once(const Flags& f, Mode mode, std::vector<std::vector<float>>& out) {
  const std::size_t count = f.mib * (1 << 20) / sizeof(float);
  std::vector<std::unique_ptr<algorithms::Link>> preferred, standby;
  if (mode == Mode::kPlain || !f.shm) {
    preferred = tcp_group(f.n);
  } else {
    preferred = testing::make_shm_group(f.n, 4 << 20).links;
  }
  if (mode != Mode::kPlain) standby = tcp_group(f.n);
  if (preferred.size() != static_cast<std::size_t>(f.n)) return {};
  std::atomic<std::int64_t> cut_ns{0};
  std::atomic<std::int64_t> first_ns{INT64_MAX};
  std::vector<double> seconds(static_cast<std::size_t>(f.n));
  std::atomic<int> drained{0};
  const auto statuses = testing::run_ranks(f.n, [&](int r) -> Status {
    const auto i = static_cast<std::size_t>(r);
    std::unique_ptr<algorithms::Link> link;
    if (mode == Mode::kPlain) {
      link = std::move(preferred[i]);
    } else {
      TRIB_ASSIGN_OR_RETURN(auto first, transport::as_path(std::move(preferred[i])));
      TRIB_ASSIGN_OR_RETURN(auto second, transport::as_path(std::move(standby[i])));
      auto cut = std::make_unique<testing::FaultPath>(std::move(first));
      if (mode == Mode::kCut && r == 0) {
        testing::FaultPath* self = cut.get();
        // About a tenth of rank 0's sends on the preferred path: a descriptor or a chunk.
        const int at = static_cast<int>(count * sizeof(float) / (256 << 10)) / 2 + 2;
        cut->fire_at(at, [self, &cut_ns] {
          cut_ns = std::chrono::steady_clock::now().time_since_epoch().count();
          self->inner().abort(error(StatusCode::kPeerLost, "bench: preferred path cut"));
        });
      }
      std::vector<std::unique_ptr<algorithms::PollableLink>> paths;
      paths.push_back(std::move(cut));
      paths.push_back(std::make_unique<WatchedPath>(std::move(second), &first_ns));
      transport::FailoverParams params;
      params.epoch = 1;
      params.path_names = {f.shm ? "shm" : "tcp:a", "tcp:b"};
      params.log = Logger("link", [](const LogRecord&) {});
      TRIB_ASSIGN_OR_RETURN(link, transport::make_failover_link(params, std::move(paths)));
    }
    std::vector<float> in(count);
    for (std::size_t k = 0; k < count; ++k)
      in[k] = static_cast<float>((k * 7 + r * 13) % 101) / 7.0f;
    out[i].assign(count, 0.0f);
    algorithms::CollectiveOptions o;
    o.seq = 1;
    o.deadline = Deadline::after(std::chrono::seconds(60));
    const auto start = std::chrono::steady_clock::now();
    TRIB_RETURN_IF_ERROR(
        all_reduce(*link, in.data(), out[i].data(), count, DType::kFloat32, ReduceOp::kSum, o));
    seconds[i] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (mode == Mode::kPlain) return Status();
    o.seq = 2;
    TRIB_RETURN_IF_ERROR(barrier(*link, o));
    TRIB_RETURN_IF_ERROR(transport::drain(*link, Deadline::after(std::chrono::seconds(20))));
    ++drained;
    while (drained.load() < f.n) {
      std::this_thread::yield();
      TRIB_RETURN_IF_ERROR(transport::drain(*link, Deadline::after(std::chrono::milliseconds(1))));
    }
    return Status();
  });
  Run run;
  run.ok = std::all_of(statuses.begin(), statuses.end(), [](const Status& s) { return s.is_ok(); });
  for (const Status& st : statuses) {
    if (!st.is_ok()) std::fprintf(stderr, "error: %s\n", st.to_string().c_str());
  }
  run.seconds = *std::max_element(seconds.begin(), seconds.end());
  if (mode == Mode::kCut && cut_ns.load() != 0 && first_ns.load() != INT64_MAX) {
    run.to_next_path_ms = static_cast<double>(first_ns.load() - cut_ns.load()) / 1e6;
  }
  return run;
}

double median(std::vector<double> v) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int bench(const Flags& f) {
  std::printf("# failover_path_bench n=%d size=%zu MiB reps=%d preferred=%s\n", f.n, f.mib, f.reps,
              f.shm ? "shm" : "tcp");
  std::printf("%-4s %-10s %10s %10s %14s %s\n", "rep", "mode", "time_ms", "busbw_GB/s",
              "to_next_ms", "check");
  std::vector<double> times[3], next;
  const char* names[] = {"plain", "failover", "cut"};
  int wrong = 0;
  for (int rep = 0; rep < f.reps; ++rep) {
    std::vector<std::vector<float>> reference(static_cast<std::size_t>(f.n));
    for (Mode mode : {Mode::kPlain, Mode::kFailover, Mode::kCut}) {
      std::vector<std::vector<float>> out(static_cast<std::size_t>(f.n));
      const Run run = run_once(f, mode, mode == Mode::kPlain ? reference : out);
      bool same = run.ok;
      if (mode != Mode::kPlain) {
        for (int r = 0; r < f.n && same; ++r) {
          same =
              out[r].size() == reference[r].size() &&
              std::memcmp(out[r].data(), reference[r].data(), out[r].size() * sizeof(float)) == 0;
        }
      }
      if (!same) ++wrong;
      const auto m = static_cast<int>(mode);
      const double bytes = static_cast<double>(f.mib) * (1 << 20);
      const double busbw = bytes / run.seconds * 2.0 * (f.n - 1) / f.n / 1e9;
      std::printf("%-4d %-10s %10.1f %10.3f %14.2f %s\n", rep, names[m], run.seconds * 1e3, busbw,
                  run.to_next_path_ms, same ? "ok" : "WRONG");
      if (run.ok) times[m].push_back(run.seconds * 1e3);
      if (run.to_next_path_ms >= 0) next.push_back(run.to_next_path_ms);
    }
  }
  std::printf(
      "median: plain %.1f ms, failover %.1f ms, cut %.1f ms, cut -> next path %.2f ms, "
      "#wrong %d\n",
      median(times[0]), median(times[1]), median(times[2]), median(next), wrong);
  return wrong == 0 ? 0 : 1;
}

}  // namespace
}  // namespace tributary

int main(int argc, char** argv) {
  tributary::Flags f;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const std::string value = argv[i + 1];
    if (flag == "--n") {
      f.n = std::stoi(value);
    } else if (flag == "--mib") {
      f.mib = std::stoul(value);
    } else if (flag == "--reps") {
      f.reps = std::stoi(value);
    } else if (flag == "--preferred" && (value == "tcp" || value == "shm")) {
      f.shm = value == "shm";
    } else {
      std::fprintf(stderr, "usage: %s [--n N] [--mib M] [--reps R] [--preferred tcp|shm]\n",
                   argv[0]);
      return 2;
    }
  }
  if (f.n < 2 || f.mib < 1 || f.reps < 1) {
    std::fprintf(stderr, "need --n >= 2, --mib >= 1, --reps >= 1\n");
    return 2;
  }
  return tributary::bench(f);
}
