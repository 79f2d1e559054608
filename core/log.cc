#include "core/log.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <ctime>

namespace tributary {
namespace {

std::atomic<LogLevel> g_min_level{LogLevel::kInfo};
std::atomic<LogFormat> g_format{LogFormat::kText};

void stderr_sink(const LogRecord& record) {
  // Build the whole line first: one fwrite keeps lines from threads unbroken.
  std::string line = format_log_line(record, g_format.load());
  line.push_back('\n');
  std::fwrite(line.data(), 1, line.size(), stderr);
}

std::string iso_time(std::chrono::system_clock::time_point t) {
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
  const std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  ::gmtime_r(&secs, &tm);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(ms % 1000));
  return buf;
}

}  // namespace

void append_json_string(std::string& out, std::string_view text) {
  out.push_back('"');
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    switch (ch) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out.push_back(ch);
        }
    }
  }
  out.push_back('"');
}

std::string_view to_string(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return "debug";
    case LogLevel::kInfo: return "info";
    case LogLevel::kWarn: return "warn";
    case LogLevel::kError: return "error";
  }
  return "?";
}

std::optional<LogLevel> parse_log_level(std::string_view text) {
  for (LogLevel l : {LogLevel::kDebug, LogLevel::kInfo, LogLevel::kWarn, LogLevel::kError}) {
    if (text == to_string(l)) return l;
  }
  return std::nullopt;
}

std::optional<LogFormat> parse_log_format(std::string_view text) {
  if (text == "text") return LogFormat::kText;
  if (text == "json") return LogFormat::kJson;
  return std::nullopt;
}

void LogContext::set_member(std::string name) {
  std::lock_guard lock(mu_);
  member_ = std::move(name);
}
void LogContext::set_epoch(std::uint64_t epoch) {
  std::lock_guard lock(mu_);
  epoch_ = epoch;
}
std::string LogContext::member() const {
  std::lock_guard lock(mu_);
  return member_;
}
std::uint64_t LogContext::epoch() const {
  std::lock_guard lock(mu_);
  return epoch_;
}

std::string escape_log_text(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (ch == '\\') {
      out += "\\\\";
    } else if (ch == '\n') {
      out += "\\n";
    } else if (ch == '\r') {
      out += "\\r";
    } else if (ch == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else {
      out.push_back(ch);
    }
  }
  return out;
}

std::string format_log_line(const LogRecord& r, LogFormat format) {
  std::string out;
  const std::string time = iso_time(r.time);
  if (format == LogFormat::kJson) {
    out = "{\"time\":\"" + time + "\",\"level\":\"" + std::string(to_string(r.level)) +
          "\",\"component\":";
    append_json_string(out, r.component);
    if (!r.member.empty()) {
      out += ",\"member\":";
      append_json_string(out, r.member);
    }
    if (r.epoch != 0) out += ",\"epoch\":" + std::to_string(r.epoch);
    out += ",\"msg\":";
    append_json_string(out, r.message);
    out.push_back('}');
    return out;
  }
  out = time + " " + std::string(to_string(r.level)) + " tributary[" +
        escape_log_text(r.component) + "]";
  if (!r.member.empty()) out += " member=" + escape_log_text(r.member);
  if (r.epoch != 0) out += " epoch=" + std::to_string(r.epoch);
  out += ": ";
  out += escape_log_text(r.message);
  return out;
}

void configure_logging(LogLevel min_level, LogFormat format) {
  g_min_level = min_level;
  g_format = format;
}

Logger::Logger() : Logger("tributary") {}

Logger::Logger(std::string component, LogSink sink, std::shared_ptr<LogContext> context)
    : component_(std::move(component)),
      sink_(std::move(sink)),
      context_(context ? std::move(context) : std::make_shared<LogContext>()) {}

Logger Logger::child(std::string component) const {
  return Logger(std::move(component), sink_, context_);
}

bool Logger::enabled(LogLevel level) const {
  // An injected sink sees everything (tests assert on debug lines too).
  return sink_ || level >= g_min_level.load();
}

void Logger::log(LogLevel level, std::string_view message) const {
  if (!enabled(level)) return;
  const std::string member = context_->member();
  LogRecord record{
      std::chrono::system_clock::now(), level, component_, member, context_->epoch(), message};
  if (sink_) {
    sink_(record);
  } else {
    stderr_sink(record);
  }
}

void Logger::logf(LogLevel level, const char* format, ...) const {
  if (!enabled(level)) return;
  char small[512];
  std::va_list args;
  va_start(args, format);
  std::va_list copy;
  va_copy(copy, args);
  const int n = std::vsnprintf(small, sizeof(small), format, args);
  va_end(args);
  if (n < 0) {
    va_end(copy);
    return;
  }
  if (static_cast<std::size_t>(n) < sizeof(small)) {
    va_end(copy);
    log(level, std::string_view(small, static_cast<std::size_t>(n)));
    return;
  }
  std::string big(static_cast<std::size_t>(n) + 1, '\0');
  std::vsnprintf(big.data(), big.size(), format, copy);
  va_end(copy);
  big.resize(static_cast<std::size_t>(n));
  log(level, big);
}

}  // namespace tributary
