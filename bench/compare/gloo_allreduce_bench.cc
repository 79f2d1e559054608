// Gloo all-reduce (float32, sum) over its TCP transport on loopback, measured
// the nccl-tests way, as a baseline for Tributary. One process per rank,
// launched by bench/compare.sh; ranks meet through a gloo FileStore in a fresh
// directory per launch.
//
// Algorithms (Debian libgloo 0.0~git20220518):
//   ring, ring_chunk, halving_dbl, bcube  the legacy algorithm classes
//                                         (AllreduceRing, ...RingChunked,
//                                         ...HalvingDoubling, ...Bcube); in-place.
//   api_ring, api_bcube                   gloo::allreduce() with RING / BCUBE,
//                                         the entry point PyTorch's
//                                         ProcessGroupGloo uses; out-of-place.
// Each algorithm object (or options struct) is built once per size, outside
// the timed loop, as a caller that reuses buffers would.
#include <gloo/allreduce.h>
#include <gloo/allreduce_bcube.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/barrier.h>
#include <gloo/config.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <limits>
#include <memory>
#include <sstream>
#include <vector>

#include "bench_common.h"

namespace {

using tributary::bench::SweepOptions;
using Ctx = std::shared_ptr<gloo::Context>;

// Tags for gloo::allreduce() calls; sequential calls may reuse a tag.
constexpr uint32_t kTagApiAlgo = 1;
constexpr uint32_t kTagScalar = 2;

// One benchmarkable all-reduce bound to a buffer: run() does one operation.
// For in-place algorithms `result` is `buffer`.
struct Instance {
  std::function<void()> run;
  std::vector<float>* input;
  std::vector<float>* result;
};

template <typename T>
T ReduceScalar(const Ctx& ctx, T value, void (*fn)(void*, const void*, const void*, size_t)) {
  gloo::AllreduceOptions opts(ctx);
  opts.setOutput(&value, 1);
  opts.setReduceFunction(fn);
  opts.setTag(kTagScalar);
  gloo::allreduce(opts);
  return value;
}

void Barrier(const Ctx& ctx) {
  gloo::BarrierOptions opts(ctx);
  gloo::barrier(opts);
}

// Buffers live in the caller so that an Instance never outlives them.
struct Buffers {
  std::vector<float> in, out;
  std::unique_ptr<gloo::Algorithm> legacy;
  std::unique_ptr<gloo::AllreduceOptions> api;
};

bool Make(const std::string& algo, const Ctx& ctx, Buffers& b, Instance& inst) {
  const int count = static_cast<int>(b.in.size());
  std::vector<float*> ptrs{b.in.data()};
  inst.input = &b.in;
  inst.result = &b.in;
  if (algo == "ring") {
    b.legacy = std::make_unique<gloo::AllreduceRing<float>>(ctx, ptrs, count);
  } else if (algo == "ring_chunk") {
    b.legacy = std::make_unique<gloo::AllreduceRingChunked<float>>(ctx, ptrs, count);
  } else if (algo == "halving_dbl") {
    b.legacy = std::make_unique<gloo::AllreduceHalvingDoubling<float>>(ctx, ptrs, count);
  } else if (algo == "bcube") {
    if (ctx->size % ctx->base != 0) return false;  // needs size % base == 0
    b.legacy = std::make_unique<gloo::AllreduceBcube<float>>(ctx, ptrs, count);
  } else if (algo == "api_ring" || algo == "api_bcube") {
    if (algo == "api_bcube" && ctx->size % ctx->base != 0) return false;
    b.out.assign(b.in.size(), 0.0f);
    b.api = std::make_unique<gloo::AllreduceOptions>(ctx);
    b.api->setAlgorithm(algo == "api_ring" ? gloo::AllreduceOptions::Algorithm::RING
                                           : gloo::AllreduceOptions::Algorithm::BCUBE);
    b.api->setInput(b.in.data(), b.in.size());
    b.api->setOutput(b.out.data(), b.out.size());
    b.api->setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
    b.api->setTag(kTagApiAlgo);
    inst.result = &b.out;
    inst.run = [opts = b.api.get()] { gloo::allreduce(*opts); };
    return true;
  } else {
    throw std::invalid_argument("unknown gloo algorithm: " + algo);
  }
  inst.run = [alg = b.legacy.get()] { alg->run(); };
  return true;
}

void RunOne(const std::string& algo, std::size_t bytes, const SweepOptions& o, const Ctx& ctx) {
  Buffers b;
  b.in.resize(bytes / sizeof(float));
  tributary::bench::FillPattern(b.in, ctx->rank);
  Instance inst;
  if (!Make(algo, ctx, b, inst)) {
    if (ctx->rank == 0)
      std::printf("# skipped %s at np=%d (needs np %% %d == 0)\n", algo.c_str(), ctx->size,
                  ctx->base);
    return;
  }

  // In-place algorithms grow the values by a factor np per call; with the
  // iteration counts used here that stays finite, and float adds cost the
  // same either way. Correctness is judged only by the check pass below.
  for (int i = 0; i < o.warmup; ++i) inst.run();
  Barrier(ctx);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < o.iters; ++i) inst.run();
  const auto t1 = std::chrono::steady_clock::now();
  const double mine = std::chrono::duration<double>(t1 - t0).count() / o.iters;
  const double slowest = ReduceScalar<double>(
      ctx, mine,
      static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::max<double>));

  tributary::bench::FillPattern(*inst.input, ctx->rank);
  if (inst.result != inst.input)
    std::fill(inst.result->begin(), inst.result->end(), std::numeric_limits<float>::quiet_NaN());
  inst.run();
  const int64_t wrong = ReduceScalar<int64_t>(
      ctx, tributary::bench::CountWrong(*inst.result, ctx->size),
      static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<int64_t>));

  if (ctx->rank == 0) tributary::bench::PrintRow(bytes, ctx->size, algo.c_str(), slowest, wrong);
}

std::vector<std::string> SplitAlgos(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s.empty() ? "ring,ring_chunk,halving_dbl,bcube,api_ring,api_bcube" : s);
  for (std::string a; std::getline(ss, a, ',');)
    if (!a.empty()) out.push_back(a);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const SweepOptions o = tributary::bench::ParseArgs(argc, argv);
  if (o.size < 1 || o.rank < 0 || o.rank >= o.size || o.store_dir.empty())
    tributary::bench::Usage(argv[0], "gloo needs --rank, --size and --store");
  if (static_cast<std::size_t>(std::numeric_limits<int>::max()) < o.max_bytes / sizeof(float))
    tributary::bench::Usage(argv[0], "max size too large for an int count");
  const std::vector<std::string> algos = SplitAlgos(o.algos);

  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  auto device = gloo::transport::tcp::CreateDevice(attr);
  auto context = std::make_shared<gloo::rendezvous::Context>(o.rank, o.size);
  context->setTimeout(std::chrono::seconds(o.timeout_s));
  gloo::rendezvous::FileStore store(o.store_dir);
  context->connectFullMesh(store, device);
  const Ctx ctx = context;

  if (o.rank == 0) {
    std::printf(
        "# gloo allreduce np=%d iters=%d warmup=%d transport=tcp(127.0.0.1) "
        "version=%d\n",
        o.size, o.iters, o.warmup, GLOO_VERSION);
    tributary::bench::PrintColumnHeader();
  }
  // Size-major, algorithm-minor: background load drifts over a run, and this
  // spreads it evenly over the algorithms being compared.
  for (std::size_t bytes : tributary::bench::SweepSizes(o))
    for (const std::string& algo : algos) RunOne(algo, bytes, o, ctx);
  Barrier(ctx);
  return 0;
}
