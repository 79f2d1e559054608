// Buffers for payloads that arrive before their receive is posted (a TcpLink's
// "unexpected" messages), recycled: a fresh multi-megabyte buffer costs a page fault per
// 4 KiB on first touch, which dominated large pipelined collectives.
//
// Not thread-safe: one pool per link, used by the thread that drives it. At most
// kMaxSpareBytes are kept; a buffer larger than that is freed when given back.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

namespace tributary::transport {

class PayloadPool {
 public:
  static constexpr std::size_t kMaxSpareBytes = std::size_t{64} << 20;

  struct Buffer {
    std::unique_ptr<std::byte[]> data;
    std::size_t capacity = 0;
    std::byte* get() const { return data.get(); }
  };

  // A buffer of at least `length` bytes (contents unspecified): the smallest spare one
  // that fits, or a new one.
  Buffer take(std::size_t length);
  void give_back(Buffer buffer);

 private:
  std::vector<Buffer> spare_;  // oldest first
  std::size_t spare_bytes_ = 0;
};

}  // namespace tributary::transport
