#include "transport/payload_pool.h"

namespace tributary::transport {

PayloadPool::Buffer PayloadPool::take(std::size_t length) {
  auto best = spare_.end();
  for (auto it = spare_.begin(); it != spare_.end(); ++it) {
    if (it->capacity >= length && (best == spare_.end() || it->capacity < best->capacity))
      best = it;
  }
  if (best == spare_.end()) {
    return Buffer{std::make_unique_for_overwrite<std::byte[]>(length), length};
  }
  Buffer b = std::move(*best);
  spare_.erase(best);
  spare_bytes_ -= b.capacity;
  return b;
}

void PayloadPool::give_back(Buffer b) {
  if (b.capacity == 0 || b.capacity > kMaxSpareBytes) return;
  while (!spare_.empty() && spare_bytes_ + b.capacity > kMaxSpareBytes) {
    spare_bytes_ -= spare_.front().capacity;
    spare_.erase(spare_.begin());
  }
  spare_bytes_ += b.capacity;
  spare_.push_back(std::move(b));
}

}  // namespace tributary::transport
