#include "cli/status_command.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <thread>

#include "cli/status_format.h"
#include "control_client/status_client.h"
#include "core/log.h"

namespace tributary::cli {

void add_status_flags(CLI::App& cmd, StatusFlags& f) {
  cmd.add_option("--coordinator", f.coordinator, "coordinator endpoint, tcp://HOST:PORT")
      ->envname("TRIBUTARY_COORDINATOR")
      ->required();
  cmd.add_option("--secret", f.secret, "cluster secret")->envname("TRIBUTARY_SECRET");
  cmd.add_flag("--json", f.json, "one JSON object instead of tables (for scripts)");
  cmd.add_option("--timeout-ms", f.timeout_ms, "give up when the coordinator has not answered")
      ->capture_default_str()
      ->check(CLI::Range(1L, 3600000L));
  cmd.add_flag("--watch", f.watch,
               "ask again every --interval-ms and redraw in place, like top (Ctrl-C ends it)");
  cmd.add_option("--interval-ms", f.interval_ms, "--watch: time between reports")
      ->capture_default_str()
      ->check(CLI::Range(50L, 3600000L));
}

namespace {

std::atomic<bool> g_stop_watch{false};
void on_stop_signal(int) { g_stop_watch = true; }

std::string local_time_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::localtime_r(&now, &tm);
  char buf[16];
  std::strftime(buf, sizeof(buf), "%H:%M:%S", &tm);
  return buf;
}

// Errors a later ask cannot mend: the watch ends on them.
bool lasting(StatusCode code) {
  return code == StatusCode::kAuthFailed || code == StatusCode::kInvalidArgument;
}

int watch_status(const StatusFlags& f, const Logger& log) {
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  // On a terminal: home, the report, then clear what an older, longer one left below it.
  // On a pipe: one report after another.
  const bool screen = ::isatty(STDOUT_FILENO) && !f.json;
  const auto interval = std::chrono::milliseconds(f.interval_ms);
  if (screen) std::fputs("\x1b[?25l\x1b[2J", stdout);  // hide the cursor, clear once
  std::string last_error;
  std::string silent_since;
  int code = 0;
  while (!g_stop_watch) {
    const auto asked = std::chrono::steady_clock::now();
    auto status = control_client::fetch_status(f.coordinator, f.secret,
                                               std::chrono::milliseconds(f.timeout_ms));
    std::string text;
    if (status) {
      silent_since.clear();
      text = f.json ? format_status_json(*status, f.coordinator)
                    : format_status_table(*status, f.coordinator);
    } else if (lasting(status.status().code())) {
      log.error(status.status().to_string());
      code = 1;
      break;
    } else {
      if (silent_since.empty()) silent_since = local_time_now();
      last_error = status.status().to_string();
      text = f.json ? "{\"coordinator\":null,\"error\":\"no answer\"}\n"
                    : "coordinator " + f.coordinator + ": no answer since " + silent_since +
                          " (" + last_error + "); asking again\n";
    }
    if (screen) {
      // Every line erased to its end as it is written: a shorter line must not leave the
      // tail of the one it overwrites.
      std::string frame = "\x1b[Hevery " + std::to_string(f.interval_ms) +
                          " ms: tributary status " + f.coordinator + "    " + local_time_now() +
                          "    (Ctrl-C ends)\n\n" + text;
      for (auto nl = frame.find('\n'); nl != std::string::npos; nl = frame.find('\n', nl + 4)) {
        frame.insert(nl, "\x1b[K");
      }
      std::fputs(frame.c_str(), stdout);
      std::fputs("\x1b[J", stdout);
    } else {
      std::fputs(text.c_str(), stdout);
      if (!f.json) std::fputs("\n", stdout);
    }
    std::fflush(stdout);
    const auto next = asked + interval;
    while (!g_stop_watch && std::chrono::steady_clock::now() < next) {
      std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
          std::chrono::milliseconds(20), next - std::chrono::steady_clock::now()));
    }
  }
  if (screen) std::fputs("\x1b[?25h\n", stdout);  // the cursor back
  std::fflush(stdout);
  return code;
}

}  // namespace

int run_status(const StatusFlags& f) {
  const Logger log("status");
  if (f.secret.empty()) {
    log.error("no cluster secret: set TRIBUTARY_SECRET (or pass --secret)");
    return 1;
  }
  if (f.watch) return watch_status(f, log);
  auto status = control_client::fetch_status(f.coordinator, f.secret,
                                             std::chrono::milliseconds(f.timeout_ms));
  if (!status) {
    log.error(status.status().to_string());
    return 1;
  }
  const std::string text = f.json ? format_status_json(*status, f.coordinator)
                                  : format_status_table(*status, f.coordinator);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
  return 0;
}

}  // namespace tributary::cli
