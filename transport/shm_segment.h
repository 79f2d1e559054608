// The shared memory of one pair of ranks for one epoch: a header naming the pair and
// two single-producer/single-consumer byte rings, one per direction.
//
// Ring: `head` counts bytes ever written (producer only), `tail` bytes ever read
// (consumer only); both are monotonic, so head - tail is the fill level and nothing
// else is shared. The producer publishes bytes with a release store of head after
// copying them, the consumer frees space with a release store of tail after copying them
// out. Each side raises a `sleeping` flag before it blocks; the other side, after
// publishing, clears the flag and rings the doorbell (shm_link.h). The capacity is a
// power of two, so positions wrap with a mask.
//
// Lifetime: the lower rank creates the segment under an unguessable name (O_EXCL, mode
// 0600), sends the name over the authenticated TCP connection, and unlinks it once the
// peer has mapped it (or failed to): the name exists for one round trip, and only the
// two authenticated members know it. The mapping lives as long as the ShmSegment.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/clock.h"
#include "core/status.h"

namespace tributary::transport {

struct RingControl {
  alignas(64) std::atomic<std::uint64_t> head;
  std::atomic<std::uint32_t> consumer_sleeping;
  alignas(64) std::atomic<std::uint64_t> tail;
  std::atomic<std::uint32_t> producer_sleeping;
};

// One direction of a segment. Copies are bounded by what the ring holds (or has room
// for) at the time of the call; they never block.
class ShmRing {
 public:
  ShmRing() = default;
  ShmRing(RingControl* control, std::byte* data, std::uint64_t capacity)
      : control_(control), data_(data), capacity_(capacity) {}

  // Producer: copies up to n bytes from src, publishes them, returns how many.
  std::size_t write_some(const std::byte* src, std::size_t n);
  std::size_t free_bytes() const;
  // Consumer: copies up to n bytes into dst (nullptr: skips them), frees their space.
  std::size_t read_some(std::byte* dst, std::size_t n);
  // Consumer: up to n readable bytes where they lie, as one span and, where the ring
  // wraps, a second; nothing is freed until consume(). For reading without a copy.
  struct View {
    const std::byte* first = nullptr;
    std::size_t first_len = 0;
    const std::byte* second = nullptr;
    std::size_t second_len = 0;
    std::size_t size() const { return first_len + second_len; }
  };
  View peek(std::size_t n) const;
  void consume(std::size_t n);
  std::size_t readable() const;

  // After publishing: true when the other side was asleep (its flag is now cleared) and
  // needs the doorbell.
  bool consumer_needs_wake();
  bool producer_needs_wake();
  // Before sleeping: raise (true) or lower (false) this side's flag. Raising is
  // sequentially consistent, so a publish that follows sees it or was seen by the
  // re-check the sleeper does after raising it.
  void set_consumer_sleeping(bool on);
  void set_producer_sleeping(bool on);
  // Whether the consumer has raised its flag (is asleep or about to be): lets a test act
  // on a sleeping waiter instead of guessing how long falling asleep takes.
  bool consumer_sleeping() const;

 private:
  RingControl* control_ = nullptr;
  std::byte* data_ = nullptr;
  std::uint64_t capacity_ = 0;
};

class ShmSegment {
 public:
  ShmSegment() = default;
  ~ShmSegment();
  ShmSegment(ShmSegment&& other) noexcept;
  ShmSegment& operator=(ShmSegment&& other) noexcept;

  // A fresh name: "/tributary-" and 128 random bits in hex.
  static Result<std::string> random_name();
  // The lower rank: creates `name` (must not exist) with two rings of `ring_bytes` (a
  // power of two, at least 4 KiB). kUnavailable when the OS refuses.
  static Result<ShmSegment> create(const std::string& name, std::uint64_t epoch, int low_rank,
                                   int high_rank, std::uint64_t ring_bytes);
  // The higher rank: maps `name` and checks that it is the segment of this pair and
  // epoch (kMismatch otherwise).
  static Result<ShmSegment> open(const std::string& name, std::uint64_t epoch, int low_rank,
                                 int high_rank);
  static void unlink(const std::string& name);
  // Unlinks the segments in /dev/shm with names random_name() makes that were last
  // modified `older_than` before `now` or earlier: a name lives for one round trip of the
  // setup, bounded by its deadline, so such a one was left by a process killed in that
  // window (kill -9 of an agent while it connected a view) and holds its rings' memory
  // until the next boot. Returns how many it removed.
  static int sweep_stale(std::chrono::system_clock::time_point now, Duration older_than);

  std::uint64_t ring_bytes() const { return ring_bytes_; }
  // The ring this rank writes into, and the one it reads from.
  ShmRing outgoing(bool self_is_low) const { return ring(self_is_low ? 0 : 1); }
  ShmRing incoming(bool self_is_low) const { return ring(self_is_low ? 1 : 0); }
  // For tests: the whole mapping (to poison it).
  std::byte* base() const { return base_; }

 private:
  ShmRing ring(int which) const;

  std::byte* base_ = nullptr;
  std::size_t mapped_ = 0;
  std::uint64_t ring_bytes_ = 0;
};

}  // namespace tributary::transport
