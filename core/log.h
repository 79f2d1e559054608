// The project's one log facility.
//
// A Logger writes records (time, level, component, member, epoch, message) to a sink. By
// default records go to stderr, one write per line, in the process-wide format chosen
// once at the edge (configure_logging: text or JSON for log shippers, and the minimum
// level). Tests inject a sink to capture records.
//
// Every line names the member and epoch when they are known: the Loggers of one agent
// share a LogContext that the worker updates as it joins and adopts views, so the lines
// its links and its control-plane client write carry them too.
//
// Messages often hold text from the network (member names, peer addresses): both formats
// escape control characters, so no message can end a line early and forge another.
//
// Hand-written rather than spdlog: what is needed is the shared context, JSON with
// escaping, and injected capture; spdlog's pattern formatter escapes nothing and its
// fmt-heavy headers would slow every translation unit that logs.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace tributary {

enum class LogLevel : std::uint8_t { kDebug, kInfo, kWarn, kError };
enum class LogFormat : std::uint8_t { kText, kJson };

std::string_view to_string(LogLevel level);
std::optional<LogLevel> parse_log_level(std::string_view text);    // debug|info|warn|error
std::optional<LogFormat> parse_log_format(std::string_view text);  // text|json

// Who is logging: shared by the Loggers of one agent (thread-safe).
class LogContext {
 public:
  void set_member(std::string name);
  void set_epoch(std::uint64_t epoch);
  std::string member() const;
  std::uint64_t epoch() const;

 private:
  mutable std::mutex mu_;
  std::string member_;
  std::uint64_t epoch_ = 0;
};

struct LogRecord {
  std::chrono::system_clock::time_point time;
  LogLevel level = LogLevel::kInfo;
  std::string_view component;
  std::string_view member;  // empty: not known (yet)
  std::uint64_t epoch = 0;  // 0: no view yet
  std::string_view message;
};

// One line, without the newline:
//   text: 2026-11-23T05:40:36.123Z info tributary[agent] member=w3 epoch=5: message
//   json: {"time":"2026-11-23T05:40:36.123Z","level":"info","component":"agent",
//          "member":"w3","epoch":5,"msg":"message"}
// (member= / epoch= and their JSON fields are left out while unknown.)
std::string format_log_line(const LogRecord& record, LogFormat format);

// Escapes control characters and backslashes (\n, \t, \xNN, \\) so that text from a peer
// stays on its line. format_log_line applies it to messages and member names.
std::string escape_log_text(std::string_view text);
// Appends `text` as a JSON string literal (quotes included): quotes, backslashes and
// control characters (and DEL) escaped. The JSON log format's writer; other JSON output
// (`tributary status --json`) uses it too.
void append_json_string(std::string& out, std::string_view text);

using LogSink = std::function<void(const LogRecord&)>;

// The process-wide default output: minimum level and format of the stderr sink. Called
// once by main() from its flags; the defaults are info and text.
void configure_logging(LogLevel min_level, LogFormat format);

class Logger {
 public:
  // Component "tributary", stderr, no context.
  Logger();
  // `sink` empty: stderr in the configured format. `context` empty: a fresh one.
  explicit Logger(std::string component, LogSink sink = {},
                  std::shared_ptr<LogContext> context = nullptr);

  // The same sink and context under another component name.
  Logger child(std::string component) const;
  const std::shared_ptr<LogContext>& context() const { return context_; }

  bool enabled(LogLevel level) const;
  void log(LogLevel level, std::string_view message) const;
  void logf(LogLevel level, const char* format, ...) const __attribute__((format(printf, 3, 4)));
  void debug(std::string_view message) const { log(LogLevel::kDebug, message); }
  void info(std::string_view message) const { log(LogLevel::kInfo, message); }
  void warn(std::string_view message) const { log(LogLevel::kWarn, message); }
  void error(std::string_view message) const { log(LogLevel::kError, message); }

 private:
  std::string component_;
  LogSink sink_;
  std::shared_ptr<LogContext> context_;
};

}  // namespace tributary
