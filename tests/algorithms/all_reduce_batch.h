// The all-reduce test harness shared by the sweeps: a batch of cases run one after
// another on every rank (ranks as threads over MemoryFabric, consecutive seqs on the same
// links), each checked for identical bits on every rank, the sequential reference (within
// a tolerance for random floats) and an untouched send buffer.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "algorithms/collectives.h"
#include "algorithms/memory_link.h"
#include "test_values.h"
#include "tests/support/rank_threads.h"

namespace tributary::testing {

struct Case {
  std::size_t count;
  DType dtype;
  ReduceOp op;
  bool in_place;
  std::size_t chunk_bytes;
  bool random = false;  // rounding floats: compared with a tolerance, not bitwise
};

inline std::string describe(algorithms::AllReduceAlgorithm a, int n, const Case& c) {
  std::ostringstream s;
  s << to_string(a) << " n=" << n << " count=" << c.count << " " << to_string(c.dtype) << " "
    << to_string(c.op) << (c.in_place ? " in-place" : " out-of-place") << " chunk=" << c.chunk_bytes
    << (c.random ? " random" : "");
  return s.str();
}

// Runs `cases` one after another on every rank and checks each result: identical bits on
// every rank, equal to the sequential reference (within a tolerance for random floats),
// send untouched out of place.
// `zones`: CollectiveOptions::zones for every case (empty: one zone). `combining`: the
// links reduce as they receive (Link::combines), so the algorithms' fused paths run.
inline void run_batch(algorithms::AllReduceAlgorithm algorithm, int n,
                      const std::vector<Case>& cases, const std::vector<int>& zones = {},
                      bool combining = false) {
  algorithms::MemoryFabric fabric(n);
  fabric.set_combining(combining);
  std::vector<std::vector<Bytes>> inputs(cases.size());
  std::vector<std::vector<Bytes>> send(cases.size()), recv(cases.size());
  for (std::size_t k = 0; k < cases.size(); ++k) {
    const Case& c = cases[k];
    for (int r = 0; r < n; ++r) {
      inputs[k].push_back(c.random
                              ? make_random_input(c.dtype, r, c.count, static_cast<unsigned>(k))
                              : make_input(c.dtype, c.op, r, c.count));
    }
    send[k] = inputs[k];
    recv[k].assign(static_cast<std::size_t>(n),
                   Bytes(c.count * dtype_size(c.dtype), std::byte{0xCD}));
    if (c.in_place) recv[k] = inputs[k];
  }
  const auto statuses = run_ranks(n, [&](int r) -> Status {
    const auto ur = static_cast<std::size_t>(r);
    for (std::size_t k = 0; k < cases.size(); ++k) {
      const Case& c = cases[k];
      algorithms::CollectiveOptions options;
      options.seq = k + 1;
      options.algorithm = algorithm;
      options.chunk_bytes = c.chunk_bytes;
      options.zones = zones;
      options.deadline = Deadline::after(std::chrono::seconds(20));
      void* out = recv[k][ur].data();
      const void* in = c.in_place ? out : send[k][ur].data();
      Status st = all_reduce(fabric.link(r), in, out, c.count, c.dtype, c.op, options);
      if (!st.is_ok()) return error(st.code(), describe(algorithm, n, c) + ": " + st.message());
    }
    return Status::ok();
  });
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(statuses[static_cast<std::size_t>(r)].is_ok())
        << "rank " << r << ": " << statuses[static_cast<std::size_t>(r)].to_string();
  }
  for (std::size_t k = 0; k < cases.size(); ++k) {
    const Case& c = cases[k];
    SCOPED_TRACE(describe(algorithm, n, c));
    const Bytes want = reference_reduce(inputs[k], c.count, c.dtype, c.op);
    for (int r = 0; r < n; ++r) {
      const auto ur = static_cast<std::size_t>(r);
      EXPECT_EQ(first_difference(recv[k][ur], recv[k][0], c.dtype), "")
          << "rank " << r << " differs from rank 0";
      if (!c.in_place) {
        EXPECT_EQ(send[k][ur], inputs[k][ur]) << "rank " << r << " send modified";
      }
    }
    if (!c.random) {
      EXPECT_EQ(first_difference(recv[k][0], want, c.dtype), "");
      continue;
    }
    const std::size_t es = dtype_size(c.dtype);
    double worst = 0;
    for (std::size_t i = 0; i < c.count; ++i) {
      worst = std::max(worst, std::abs(load_value(c.dtype, recv[k][0].data() + i * es) -
                                       load_value(c.dtype, want.data() + i * es)));
    }
    EXPECT_LE(worst, 1e-5 * n) << "largest deviation from the sequential reference";
  }
}

}  // namespace tributary::testing
