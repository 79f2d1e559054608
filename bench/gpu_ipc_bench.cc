// The CUDA IPC all-reduce (gpu/ipc_all_reduce.h) across real processes on one host, over
// real TCP for the host link: busbw of the IPC path, of the staged path (device -> host ->
// the group's TCP all-reduce -> device) and of one device-to-device copy of the same size,
// interleaved per round, medians; then an injected IPC failure mid-collective that must
// complete on the staged path with the exact result on every rank.
//
//   gpu_ipc_bench [--ranks 2] [--memory cuda|host] [--device 0] [-b 4K] [-e 256M] [-f 4]
//                 [--rounds 5] [--iters 5] [--buffer 64M] [--no-inject] [--timeout-s 120]
//
// --memory host runs the same protocol over shared host memory (HostDeviceMemory): no GPU
// needed; ctest gpu_ipc_processes_test runs it so (correctness and the fallback; its
// timings say nothing about a GPU). The parent forks the ranks before any thread exists;
// each listens on an ephemeral loopback port, the ports go round through pipes, and
// rank 0 prints the table. Exit status: 0 when every check held on every rank.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "algorithms/collectives.h"
#include "core/status.h"
#include "gpu/fault_injecting_memory.h"
#include "gpu/host_device_memory.h"
#include "gpu/ipc_all_reduce.h"
#include "transport/tcp/tcp_endpoint.h"
#ifdef TRIBUTARY_WITH_CUDA
#include <cuda_runtime_api.h>

#include "gpu/cuda_device_memory.h"
#endif

namespace tributary {
namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  int ranks = 2;
  std::string memory = "cuda";
  int device = 0;
  std::size_t begin = 4 << 10;
  std::size_t end = 256 << 20;
  std::size_t factor = 4;
  int rounds = 5;
  int iters = 5;
  std::size_t buffer = 64 << 20;
  bool inject = true;
  int timeout_s = 120;
};

std::size_t parse_size(const char* s) {
  char* rest = nullptr;
  const double v = std::strtod(s, &rest);
  std::size_t mult = 1;
  if (*rest == 'K' || *rest == 'k') mult = 1 << 10;
  if (*rest == 'M' || *rest == 'm') mult = 1 << 20;
  if (*rest == 'G' || *rest == 'g') mult = std::size_t{1} << 30;
  if (v <= 0 || (*rest != '\0' && mult == 1)) {
    std::fprintf(stderr, "gpu_ipc_bench: bad size %s\n", s);
    std::exit(2);
  }
  return static_cast<std::size_t>(v * static_cast<double>(mult));
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "gpu_ipc_bench: %s needs a value\n", k.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (k == "--ranks")
      a.ranks = std::atoi(value());
    else if (k == "--memory")
      a.memory = value();
    else if (k == "--device")
      a.device = std::atoi(value());
    else if (k == "-b")
      a.begin = parse_size(value());
    else if (k == "-e")
      a.end = parse_size(value());
    else if (k == "-f")
      a.factor = static_cast<std::size_t>(std::atoi(value()));
    else if (k == "--rounds")
      a.rounds = std::atoi(value());
    else if (k == "--iters")
      a.iters = std::atoi(value());
    else if (k == "--buffer")
      a.buffer = parse_size(value());
    else if (k == "--no-inject")
      a.inject = false;
    else if (k == "--timeout-s")
      a.timeout_s = std::atoi(value());
    else {
      std::fprintf(stderr,
                   "gpu_ipc_bench: unknown flag %s (see the header of bench/gpu_ipc_bench.cc)\n",
                   k.c_str());
      std::exit(2);
    }
  }
  if (a.ranks < 1 || a.ranks > 64 || a.factor < 2 || a.rounds < 1 || a.iters < 1 ||
      a.begin > a.end || (a.memory != "cuda" && a.memory != "host")) {
    std::fprintf(stderr,
                 "gpu_ipc_bench: bad arguments (ranks 1..64, -f >= 2, --memory cuda|host)\n");
    std::exit(2);
  }
  return a;
}

[[noreturn]] void die(int rank, const char* what, const Status& st) {
  std::fprintf(stderr, "gpu_ipc_bench rank %d: %s: %s\n", rank, what, st.to_string().c_str());
  std::_Exit(1);
}

// Host memory the staged path copies through (pinned on a GPU).
struct HostBuffer {
  explicit HostBuffer(std::size_t bytes, bool pin) : data(bytes) {
#ifdef TRIBUTARY_WITH_CUDA
    pinned = pin && cudaHostRegister(data.data(), bytes, cudaHostRegisterDefault) == cudaSuccess;
#else
    (void)pin;
#endif
  }
  ~HostBuffer() {
#ifdef TRIBUTARY_WITH_CUDA
    if (pinned) cudaHostUnregister(data.data());
#endif
  }
  std::vector<std::byte> data;
  bool pinned = false;
};

// Integer-valued inputs: the sum is exact in any order, so every path can be checked.
std::vector<float> input_of(int rank, std::size_t count) {
  std::vector<float> v(count);
  for (std::size_t i = 0; i < count; ++i) v[i] = static_cast<float>((rank + 1) * 16 + i % 13);
  return v;
}

bool exact_sum(const std::vector<float>& got, int ranks) {
  for (std::size_t i = 0; i < got.size(); ++i) {
    float want = 0;
    for (int r = 0; r < ranks; ++r) want += static_cast<float>((r + 1) * 16 + i % 13);
    if (got[i] != want) return false;
  }
  return true;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int run_rank(const Args& a, int rank, int port_out, int addrs_in) {
  const auto deadline = [&] { return Deadline::after(std::chrono::seconds(a.timeout_s)); };
  std::unique_ptr<gpu::DeviceMemory> memory;
  if (a.memory == "host") {
    memory = std::make_unique<gpu::HostDeviceMemory>();
  } else {
#ifdef TRIBUTARY_WITH_CUDA
    auto m = gpu::CudaDeviceMemory::create(a.device);
    if (!m.is_ok()) die(rank, "CUDA device", m.status());
    memory = std::move(*m);
#else
    die(rank, "--memory cuda", error(StatusCode::kUnavailable, "built without CUDA"));
#endif
  }
  transport::TcpEndpointConfig config;
  config.secret = "gpu-ipc-bench";
  auto endpoint = transport::TcpEndpoint::listen(config);
  if (!endpoint.is_ok()) die(rank, "listen", endpoint.status());
  const std::uint16_t port = (*endpoint)->port();
  if (::write(port_out, &port, sizeof port) != sizeof port)
    die(rank, "pipe", error(StatusCode::kInternal, "write"));
  std::vector<std::uint16_t> ports(static_cast<std::size_t>(a.ranks));
  const auto want = static_cast<ssize_t>(ports.size() * sizeof(std::uint16_t));
  if (::read(addrs_in, ports.data(), static_cast<std::size_t>(want)) != want)
    die(rank, "pipe", error(StatusCode::kInternal, "read"));
  std::vector<std::string> addrs;
  for (std::uint16_t p : ports) addrs.push_back("127.0.0.1:" + std::to_string(p));
  auto link_or = (*endpoint)->connect_group(1, rank, addrs, deadline());
  if (!link_or.is_ok()) die(rank, "connect_group", link_or.status());
  algorithms::Link& link = **link_or;
  std::uint64_t seq = 1;

  auto ipc_or = gpu::IpcAllReduce::open(link, *memory, a.buffer, seq++, deadline());
  if (!ipc_or.is_ok()) die(rank, "opening the IPC path", ipc_or.status());
  std::unique_ptr<gpu::IpcAllReduce> ipc = std::move(*ipc_or);

  // Room for the sweep and for the injected failure's five chunks of 1 MiB.
  constexpr std::size_t kInjectChunk = 1 << 20;
  constexpr std::size_t kInjectCount = 4 * kInjectChunk / sizeof(float) + 1000;
  const std::size_t max_bytes = std::max(a.end, kInjectCount * sizeof(float));
  auto dev_or = memory->allocate(2 * max_bytes);
  if (!dev_or.is_ok()) die(rank, "device buffer", dev_or.status());
  auto* send = static_cast<std::byte*>(*dev_or);
  std::byte* recv = send + max_bytes;
  HostBuffer host(max_bytes, a.memory == "cuda");

  auto staged = [&](const void* s, void* r, std::size_t count) -> Status {
    const std::size_t bytes = count * sizeof(float);
    TRIB_RETURN_IF_ERROR(memory->copy(host.data.data(), s, bytes));
    TRIB_RETURN_IF_ERROR(memory->synchronize(deadline()));
    algorithms::CollectiveOptions o;
    o.seq = seq++;
    o.deadline = deadline();
    TRIB_RETURN_IF_ERROR(algorithms::all_reduce(link, host.data.data(), host.data.data(), count,
                                                DType::kFloat32, ReduceOp::kSum, o));
    TRIB_RETURN_IF_ERROR(memory->copy(r, host.data.data(), bytes));
    return memory->synchronize(deadline());
  };
  auto barrier = [&] {
    algorithms::CollectiveOptions o;
    o.seq = seq++;
    o.deadline = deadline();
    if (Status st = algorithms::barrier(link, o); !st.is_ok()) die(rank, "barrier", st);
  };
  auto load_input = [&](std::size_t count) {
    const std::vector<float> in = input_of(rank, count);
    if (Status st = memory->copy(send, in.data(), count * sizeof(float)); !st.is_ok())
      die(rank, "input", st);
    if (Status st = memory->synchronize(deadline()); !st.is_ok()) die(rank, "input", st);
  };
  auto result_ok = [&](std::size_t count) {
    std::vector<float> out(count);
    if (Status st = memory->copy(out.data(), recv, count * sizeof(float)); !st.is_ok())
      die(rank, "result", st);
    if (Status st = memory->synchronize(deadline()); !st.is_ok()) die(rank, "result", st);
    return exact_sum(out, a.ranks);
  };
  // The time of `iters` runs of `fn`, from a barrier, the slowest rank's (nccl-tests style:
  // each rank measures its own; rank 0 reports its own, which ends last or near it).
  auto timed = [&](const std::function<Status()>& fn) {
    barrier();
    const auto t0 = Clock::now();
    for (int i = 0; i < a.iters; ++i) {
      if (Status st = fn(); !st.is_ok()) die(rank, "timed run", st);
    }
    return std::chrono::duration<double>(Clock::now() - t0).count() / a.iters;
  };

  bool all_ok = true;
  if (rank == 0) {
    std::printf(
        "# gpu_ipc_bench: %d ranks, %s, exchange buffer %zu bytes (chunks of %zu), %d rounds x %d "
        "iters, medians\n",
        a.ranks, memory->describe().c_str(), a.buffer, ipc->chunk_bytes(), a.rounds, a.iters);
    std::printf(
        "# busbw = bytes * 2(n-1)/n / time (all-reduce); copy: one device-to-device copy of the "
        "size, bytes / time\n");
    std::printf("#%11s %11s %11s %10s %11s %10s %10s %9s %9s %5s\n", "size(B)", "count", "ipc(us)",
                "ipc(GB/s)", "staged(us)", "stg(GB/s)", "copy(GB/s)", "ipc/copy", "ipc/stg",
                "check");
  }
  for (std::size_t bytes = a.begin; bytes <= a.end; bytes *= a.factor) {
    const std::size_t count = bytes / sizeof(float);
    if (count == 0) continue;
    // Correctness first: both paths, exact.
    load_input(count);
    auto o = ipc->all_reduce(send, recv, count, DType::kFloat32, ReduceOp::kSum, seq++, deadline());
    if (!o.status.is_ok()) die(rank, "IPC all-reduce", o.status);
    bool ok = result_ok(count);
    if (Status st = staged(send, recv, count); !st.is_ok()) die(rank, "staged all-reduce", st);
    ok = ok && result_ok(count);
    all_ok = all_ok && ok;
    std::vector<double> t_ipc;
    std::vector<double> t_staged;
    std::vector<double> t_copy;
    for (int round = 0; round < a.rounds; ++round) {
      t_ipc.push_back(timed([&] {
        return ipc
            ->all_reduce(send, recv, count, DType::kFloat32, ReduceOp::kSum, seq++, deadline())
            .status;
      }));
      t_staged.push_back(timed([&] { return staged(send, recv, count); }));
      t_copy.push_back(timed([&]() -> Status {
        TRIB_RETURN_IF_ERROR(memory->copy(recv, send, bytes));
        return memory->synchronize(deadline());
      }));
    }
    const double n = a.ranks;
    const double factor = n > 1 ? 2 * (n - 1) / n : 1;
    const double ipc_s = median(t_ipc), staged_s = median(t_staged), copy_s = median(t_copy);
    const double bw_ipc = static_cast<double>(bytes) * factor / ipc_s / 1e9;
    const double bw_staged = static_cast<double>(bytes) * factor / staged_s / 1e9;
    const double bw_copy = static_cast<double>(bytes) / copy_s / 1e9;
    if (rank == 0) {
      std::printf(" %11zu %11zu %11.1f %10.2f %11.1f %10.2f %10.2f %9.2f %9.2f %5s\n", bytes, count,
                  ipc_s * 1e6, bw_ipc, staged_s * 1e6, bw_staged, bw_copy, bw_ipc / bw_copy,
                  bw_ipc / bw_staged, ok ? "ok" : "WRONG");
      std::fflush(stdout);
    }
  }

  if (a.inject && a.ranks > 1) {
    // A fresh group path whose rank 1 fails its 7th device operation: mid second chunk.
    gpu::FaultInjectingMemory faulty(*memory);
    if (rank == 1) faulty.fail_op = 7;
    auto inj_or = gpu::IpcAllReduce::open(link, faulty, 2 * kInjectChunk, seq++, deadline());
    if (!inj_or.is_ok()) die(rank, "opening the IPC path to inject", inj_or.status());
    const std::size_t count = kInjectCount;  // five chunks
    load_input(count);
    const auto t0 = Clock::now();
    const std::uint64_t s = seq++;
    std::size_t done = 0;
    bool fell_back = false;
    const Status st = gpu::all_reduce_with_fallback(
        inj_or->get(), send, recv, count, DType::kFloat32, ReduceOp::kSum, s, deadline(),
        [&](const void* sp, void* rp, std::size_t c) {
          fell_back = true;
          done = count - c;
          return staged(sp, rp, c);
        },
        Logger());
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    const bool ok = st.is_ok() && fell_back && result_ok(count) && !(*inj_or)->usable();
    all_ok = all_ok && ok;
    std::printf(
        "# injected IPC failure (rank 1, device operation 7) on rank %d: %s; IPC part ended at "
        "element %zu of %zu, the rest staged; %.1f ms; result %s\n",
        rank, st.to_string().c_str(), done, count, ms, ok ? "exact" : "WRONG");
  }
  memory->free(send);
  ipc.reset();
  barrier();
  std::fflush(stdout);
  return all_ok ? 0 : 3;
}

}  // namespace
}  // namespace tributary

int main(int argc, char** argv) {
  using namespace tributary;
  const Args a = parse(argc, argv);
  std::vector<int> port_read(static_cast<std::size_t>(a.ranks));
  std::vector<int> addr_write(static_cast<std::size_t>(a.ranks));
  std::vector<pid_t> pids;
  for (int r = 0; r < a.ranks; ++r) {
    int up[2];
    int down[2];
    if (::pipe(up) != 0 || ::pipe(down) != 0) {
      std::perror("pipe");
      return 1;
    }
    const pid_t pid = ::fork();
    if (pid < 0) {
      std::perror("fork");
      return 1;
    }
    if (pid == 0) {
      ::close(up[0]);
      ::close(down[1]);
      for (int e = 0; e < r; ++e) {  // the earlier ranks' ends, inherited
        ::close(port_read[static_cast<std::size_t>(e)]);
        ::close(addr_write[static_cast<std::size_t>(e)]);
      }
      std::fflush(stdout);
      std::_Exit(run_rank(a, r, up[1], down[0]));
    }
    ::close(up[1]);
    ::close(down[0]);
    port_read[static_cast<std::size_t>(r)] = up[0];
    addr_write[static_cast<std::size_t>(r)] = down[1];
    pids.push_back(pid);
  }
  std::vector<std::uint16_t> ports(static_cast<std::size_t>(a.ranks), 0);
  bool gathered = true;
  for (int r = 0; r < a.ranks; ++r) {
    gathered = gathered &&
               ::read(port_read[static_cast<std::size_t>(r)], &ports[static_cast<std::size_t>(r)],
                      sizeof(std::uint16_t)) == sizeof(std::uint16_t);
  }
  for (int r = 0; r < a.ranks && gathered; ++r) {
    const auto bytes = ports.size() * sizeof(std::uint16_t);
    gathered = ::write(addr_write[static_cast<std::size_t>(r)], ports.data(), bytes) ==
               static_cast<ssize_t>(bytes);
  }
  for (int r = 0; r < a.ranks; ++r) {
    ::close(port_read[static_cast<std::size_t>(r)]);
    ::close(addr_write[static_cast<std::size_t>(r)]);
  }
  int worst = gathered ? 0 : 1;
  for (pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    const int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    worst = std::max(worst, rc);
  }
  if (worst != 0) std::fprintf(stderr, "gpu_ipc_bench: a rank failed (exit %d)\n", worst);
  return worst;
}
