// Rate limiting for log lines that a peer can cause at will (refused connections, bad
// handshakes, malformed messages): without it, every hostile connection is a log line and
// an attacker can fill a disk or bury the lines that matter.
//
// Lines are grouped by a key chosen by the caller (the kind of refusal, not the peer, so
// that a flood from many addresses is one group). Per key, the first `burst` lines of a
// window of `window` pass; the rest are counted, and the first line let through after
// them says how many were suppressed ("(37 similar lines suppressed)"); flush(), called
// periodically, reports counts whose window ended without another line. At most
// `max_keys` keys are tracked (the least recently used is forgotten), so a peer cannot
// grow memory by varying keys. Time is passed in. Not thread-safe: one per thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/clock.h"
#include "core/log.h"

namespace tributary {

class LogLimiter {
 public:
  explicit LogLimiter(std::size_t burst = 5, Duration window = std::chrono::seconds(10),
                      std::size_t max_keys = 256);

  // nullopt: suppress this line. Otherwise the line may be written, followed by the
  // returned suffix (empty, or " (N similar lines suppressed)").
  std::optional<std::string> admit(std::string_view key, TimePoint now);

  // Writes `message` at `level` unless suppressed; true when written.
  bool log(const Logger& logger, LogLevel level, std::string_view key, std::string_view message,
           TimePoint now);

  // For every key whose window has ended with lines suppressed: one line at `level`,
  // "<N> similar lines suppressed in <window> s; the last: <line>", and the count reset.
  void flush(const Logger& logger, LogLevel level, TimePoint now);

  std::uint64_t suppressed_total() const { return suppressed_total_; }

 private:
  struct Group {
    TimePoint window_start{};
    std::size_t passed = 0;
    std::uint64_t suppressed = 0;
    std::string last_suppressed;
    std::list<std::string>::iterator lru;
  };
  std::size_t burst_;
  Duration window_;
  std::size_t max_keys_;
  std::unordered_map<std::string, Group> groups_;
  std::list<std::string> lru_;  // most recently used first
  std::uint64_t suppressed_total_ = 0;
};

}  // namespace tributary
