#include "cli/status_command.h"

#include <cstdio>

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
}

int run_status(const StatusFlags& f) {
  const Logger log("status");
  if (f.secret.empty()) {
    log.error("no cluster secret: set TRIBUTARY_SECRET (or pass --secret)");
    return 1;
  }
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
