#include "algorithms/scratch.h"

#include <utility>
#include <vector>

namespace tributary::algorithms {
namespace {

// Kept per thread, so ranks run as threads in tests do not share (or lock) anything.
constexpr std::size_t kMaxCachedBytes = 64u << 20;

struct Cached {
  std::unique_ptr<std::byte[]> buffer;
  std::size_t capacity = 0;
};

struct Cache {
  std::vector<Cached> buffers;  // oldest first
  std::size_t bytes = 0;
};

Cache& cache() {
  thread_local Cache c;
  return c;
}

}  // namespace

Scratch::Scratch(std::size_t bytes) {
  if (bytes == 0) return;
  Cache& c = cache();
  auto best = c.buffers.end();
  for (auto it = c.buffers.begin(); it != c.buffers.end(); ++it) {
    if (it->capacity >= bytes && (best == c.buffers.end() || it->capacity < best->capacity))
      best = it;
  }
  if (best == c.buffers.end()) {
    buffer_ = std::make_unique_for_overwrite<std::byte[]>(bytes);
    capacity_ = bytes;
    return;
  }
  buffer_ = std::move(best->buffer);
  capacity_ = best->capacity;
  c.bytes -= capacity_;
  c.buffers.erase(best);
}

Scratch::~Scratch() { give_back(); }

Scratch::Scratch(Scratch&& other) noexcept
    : buffer_(std::move(other.buffer_)), capacity_(std::exchange(other.capacity_, 0)) {}

Scratch& Scratch::operator=(Scratch&& other) noexcept {
  if (this != &other) {
    give_back();
    buffer_ = std::move(other.buffer_);
    capacity_ = std::exchange(other.capacity_, 0);
  }
  return *this;
}

void Scratch::give_back() {
  if (!buffer_) return;
  if (capacity_ <= kMaxCachedBytes) {
    Cache& c = cache();
    while (!c.buffers.empty() && c.bytes + capacity_ > kMaxCachedBytes) {
      c.bytes -= c.buffers.front().capacity;
      c.buffers.erase(c.buffers.begin());
    }
    c.bytes += capacity_;
    c.buffers.push_back({std::move(buffer_), capacity_});
  }
  buffer_.reset();
  capacity_ = 0;
}

}  // namespace tributary::algorithms
