// Scratch memory for collectives (staging slots, partial pools), recycled per thread.
//
// A fresh multi-megabyte buffer costs a page fault per 4 KiB the first time it is
// touched, on every call; at 16 MiB and up that showed up as several percent of a
// large all-reduce. A Scratch takes a buffer of at least the asked size from this
// thread's cache and gives it back when destroyed. Contents are unspecified (not zeroed).
//
// Callers must not destroy a Scratch while a link operation may still write into it:
// every collective waits for its receives or aborts the link first (in_flight.h).
#pragma once

#include <cstddef>
#include <memory>

namespace tributary::algorithms {

class Scratch {
 public:
  Scratch() = default;
  explicit Scratch(std::size_t bytes);
  ~Scratch();
  Scratch(Scratch&& other) noexcept;
  Scratch& operator=(Scratch&& other) noexcept;

  std::byte* data() const { return buffer_.get(); }
  explicit operator bool() const { return buffer_ != nullptr; }

 private:
  void give_back();

  std::unique_ptr<std::byte[]> buffer_;
  std::size_t capacity_ = 0;
};

}  // namespace tributary::algorithms
