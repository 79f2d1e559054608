#include "core/log_limiter.h"

#include "core/check.h"

namespace tributary {

LogLimiter::LogLimiter(std::size_t burst, Duration window, std::size_t max_keys)
    : burst_(burst), window_(window), max_keys_(max_keys) {
  TRIB_CHECK(burst_ >= 1 && max_keys_ >= 1 && window_ > Duration::zero())
      << "LogLimiter needs burst >= 1, max_keys >= 1 and a positive window";
}

std::optional<std::string> LogLimiter::admit(std::string_view key, TimePoint now) {
  auto it = groups_.find(std::string(key));
  if (it == groups_.end()) {
    if (groups_.size() >= max_keys_) {
      groups_.erase(lru_.back());
      lru_.pop_back();
    }
    lru_.emplace_front(key);
    it = groups_.emplace(lru_.front(), Group{now, 0, 0, {}, lru_.begin()}).first;
  } else {
    lru_.splice(lru_.begin(), lru_, it->second.lru);
  }
  Group& g = it->second;
  if (now - g.window_start >= window_) {
    g.window_start = now;
    g.passed = 0;
  }
  if (g.passed >= burst_) {
    ++g.suppressed;
    ++suppressed_total_;
    return std::nullopt;
  }
  ++g.passed;
  std::string suffix;
  if (g.suppressed > 0) {
    suffix = " (" + std::to_string(g.suppressed) + " similar line" +
             (g.suppressed == 1 ? "" : "s") + " suppressed)";
    g.suppressed = 0;
  }
  return suffix;
}

bool LogLimiter::log(const Logger& logger, LogLevel level, std::string_view key,
                     std::string_view message, TimePoint now) {
  auto suffix = admit(key, now);
  if (!suffix) {
    groups_.at(std::string(key)).last_suppressed = std::string(message.substr(0, 512));
    return false;
  }
  if (suffix->empty()) {
    logger.log(level, message);
  } else {
    logger.log(level, std::string(message) + *suffix);
  }
  return true;
}

void LogLimiter::flush(const Logger& logger, LogLevel level, TimePoint now) {
  for (auto& [key, g] : groups_) {
    if (g.suppressed == 0 || now - g.window_start < window_) continue;
    logger.log(level, std::to_string(g.suppressed) + " similar line" +
                          (g.suppressed == 1 ? "" : "s") + " suppressed in " +
                          std::to_string(
                              std::chrono::duration_cast<std::chrono::seconds>(window_).count()) +
                          " s; the last: " + g.last_suppressed);
    g.suppressed = 0;
    g.last_suppressed.clear();
  }
}

}  // namespace tributary
