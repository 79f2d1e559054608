// Invariant checks: a failed TRIB_CHECK is a bug in Tributary, never a cluster event.
// It prints file, line, the condition and an optional message, then aborts.
#pragma once

#include <sstream>

namespace tributary::detail {

[[noreturn]] void check_failed(const char* file, int line, const char* condition,
                               const std::string& message);

class CheckMessage {
 public:
  CheckMessage(const char* file, int line, const char* condition)
      : file_(file), line_(line), condition_(condition) {}
  template <typename T>
  CheckMessage& operator<<(const T& value) {
    stream_ << value;
    return *this;
  }
  ~CheckMessage() { check_failed(file_, line_, condition_, stream_.str()); }

 private:
  const char* file_;
  int line_;
  const char* condition_;
  std::ostringstream stream_;
};

}  // namespace tributary::detail

// TRIB_CHECK(n > 0) << "n=" << n;
#define TRIB_CHECK(cond) \
  if (cond) {            \
  } else                 \
    ::tributary::detail::CheckMessage(__FILE__, __LINE__, #cond)
