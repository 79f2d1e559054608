// Shared pieces of the collective tests: the sweep axes (world size, count, chunk size,
// dtype, root), deterministic byte patterns, and Link wrappers: one injects a fault at an
// exact point of one rank's progress, so "mid-collective" faults need no sleeps; one
// observes whether a relay forwards before it has received everything.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "algorithms/collectives.h"
#include "algorithms/link.h"
#include "core/dtype.h"
#include "core/status.h"
#include "tests/support/forwarding_link.h"

namespace tributary::testing {

inline constexpr int kMaxWorld = 16;

inline std::vector<DType> all_dtypes() {
  std::vector<DType> out;
  for (int d = 0; d < kNumDTypes; ++d) out.push_back(static_cast<DType>(d));
  return out;
}

inline std::vector<ReduceOp> all_ops() {
  std::vector<ReduceOp> out;
  for (int o = 0; o < kNumReduceOps; ++o) out.push_back(static_cast<ReduceOp>(o));
  return out;
}

// One point of the (count, chunk size) axis.
struct CountCase {
  std::size_t count;
  std::size_t chunk_bytes;
};

inline const std::size_t kDefaultChunk = algorithms::CollectiveOptions{}.chunk_bytes;

// Counts every collective must handle: empty, one, odd, around the world size, large,
// and two chunked shapes through tiny chunk sizes: many full chunks plus a ragged tail,
// and a chunk size that is not a multiple of the element size.
inline std::vector<CountCase> count_cases(int world, DType dtype, std::size_t large, bool chunked) {
  const std::size_t n = static_cast<std::size_t>(world);
  std::vector<CountCase> cases = {{0, kDefaultChunk},     {1, kDefaultChunk},
                                  {7, kDefaultChunk},     {n - 1, kDefaultChunk},
                                  {n + 1, kDefaultChunk}, {large, kDefaultChunk}};
  if (chunked) {
    const std::size_t esize = dtype_size(dtype);
    cases.push_back({20 * (64 / esize) + 3, 64});
    cases.push_back({10, 3 * esize + 1});
  }
  return cases;
}

inline std::vector<int> roots_for(int world) {
  std::vector<int> roots = {0};
  if (world - 1 != 0) roots.push_back(world - 1);
  if (world / 2 != 0 && world / 2 != world - 1) roots.push_back(world / 2);
  return roots;
}

// Bytes that differ by seed and position and are not all-zero, so a missed or misplaced
// block shows.
inline std::vector<std::byte> pattern(std::uint64_t seed, std::size_t bytes) {
  std::vector<std::byte> out(bytes);
  std::uint64_t x = seed * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull;
  for (std::size_t i = 0; i < bytes; i += 8) {
    x ^= x >> 29;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 32;
    std::memcpy(out.data() + i, &x, bytes - i < 8 ? bytes - i : 8);
  }
  return out;
}

inline Status annotate(const Status& s, const std::string& where) {
  return s.is_ok() ? s : Status(s.code(), where + ": " + s.message());
}

inline std::string world_name(int world) {
  std::string name = "n";
  name += std::to_string(world);
  return name;
}

inline std::string sweep_name(int world, DType dtype) {
  return world_name(world) + "_" + std::string(to_string(dtype));
}

// Forwards to `inner`; just before this rank's `after_waits`-th wait it runs `action`
// (kill or freeze this rank through the fabric), so the fault lands at an exact step.
class TriggerLink final : public ForwardingLink {
 public:
  TriggerLink(algorithms::Link& inner, int after_waits, std::function<void()> action)
      : ForwardingLink(inner), after_waits_(after_waits), action_(std::move(action)) {}

  Status wait(Handle handle, Deadline deadline) override {
    if (++waits_ == after_waits_) action_();
    return inner_.wait(handle, deadline);
  }

 private:
  int after_waits_;
  int waits_ = 0;
  std::function<void()> action_;
};

// Forwards to `inner` and remembers how many waits this rank had made when it posted its
// first send: 1 for a relay that forwards chunk 0 as soon as it lands (pipelined), the
// whole chunk count for one that stores the message before forwarding it.
class FirstSendProbe final : public ForwardingLink {
 public:
  explicit FirstSendProbe(algorithms::Link& inner) : ForwardingLink(inner) {}

  int waits_before_first_send() const { return waits_before_first_send_; }

  Handle send(int peer, algorithms::Tag tag, std::span<const std::byte> data) override {
    if (waits_before_first_send_ < 0) waits_before_first_send_ = waits_;
    return inner_.send(peer, tag, data);
  }
  Status wait(Handle handle, Deadline deadline) override {
    ++waits_;
    return inner_.wait(handle, deadline);
  }

 private:
  int waits_ = 0;
  int waits_before_first_send_ = -1;
};

}  // namespace tributary::testing
