#include "cli/coordinator_command.h"

#include <cstdio>
#include <fstream>

#include "core/log.h"

namespace tributary::cli {
namespace {

int report_failure(const Status& s) {
  Logger("coordinator").error(s.to_string());
  return 1;
}

}  // namespace

void add_coordinator_flags(CLI::App& cmd, CoordinatorFlags& f) {
  f.config.bind_address = "tcp://127.0.0.1:7070";
  f.config.metrics_address = "";
  cmd.add_option("--bind", f.config.bind_address, "ZeroMQ endpoint to bind (port 0: ephemeral)")
      ->capture_default_str();
  cmd.add_option("--secret", f.config.secret, "cluster secret")->envname("TRIBUTARY_SECRET");
  cmd.add_option("--world-size", f.config.initial_world_size,
                 "members to gather before the first view")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd.add_flag("--no-confirm-on-close", f.no_confirm_on_close,
               "do not confirm a reported member at once when its control connection closes "
               "(a proxy between agents and coordinator that closes connections on its own); "
               "failures are then confirmed by silence alone");
  cmd.add_flag("--serve-jobs", f.config.serve_jobs,
               "when every member has left, form the next world from --world-size new members, "
               "as the first (one job after another); without it, joiners into an emptied "
               "world are admitted one at a time");
  cmd.add_option("--heartbeat-timeout-ms", f.heartbeat_timeout_ms,
                 "silence after which a member is removed")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd.add_option("--heartbeat-interval-ms", f.heartbeat_interval_ms, "how often agents heartbeat")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd.add_option("--max-heartbeat-rate", f.config.max_heartbeat_rate,
                 "heartbeats per second the coordinator accepts: beyond it, members are asked "
                 "for a longer interval (0: never)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd.add_option("--ready-timeout-ms", f.ready_timeout_ms,
                 "a member that does not confirm a new view this long is removed")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd.add_option("--journal", f.config.journal_path,
                 "journal file (fsynced) that lets a restarted coordinator resume");
  auto& st = f.config.straggler;
  cmd.add_flag("--no-straggler-eviction", f.no_straggler_eviction, "never evict stragglers");
  cmd.add_option("--straggler-k", st.k, "straggler: compute time above k x the step's median")
      ->capture_default_str();
  cmd.add_option("--straggler-floor-ms", f.straggler_floor_ms,
                 "straggler: never below this compute time")
      ->capture_default_str();
  cmd.add_option("--straggler-m", st.m, "straggler: in M ...")->capture_default_str();
  cmd.add_option("--straggler-w", st.w, "... of the last W steps")->capture_default_str();
  cmd.add_option("--straggler-cooldown-s", f.straggler_cooldown_s,
                 "an evicted straggler may rejoin after this")
      ->capture_default_str();
  cmd.add_option("--min-world-size", st.min_world_size, "never evict below this many members")
      ->capture_default_str();
  cmd.add_option("--metrics", f.config.metrics_address,
                 "serve Prometheus /metrics on HOST:PORT (port 0: ephemeral; empty: off)");
  cmd.add_option("--ready-file", f.ready_file,
                 "write the bound endpoint to this file once listening");
  cmd.add_option("--etcd", f.config.etcd_endpoints,
                 "replicated coordinators: etcd client URLs, comma-separated (default: the "
                 "local journal, if any)")
      ->delimiter(',');
  cmd.add_option("--etcd-prefix", f.config.etcd_prefix,
                 "etcd key prefix shared by the coordinators of one cluster")
      ->capture_default_str();
  cmd.add_option("--lease-s", f.lease_s,
                 "etcd leader lease: a dead leader is replaced after this many seconds")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd.add_option("--advertise", f.config.advertise,
                 "endpoint agents dial for this coordinator (default: the bound one)");
}

int run_coordinator(CoordinatorFlags& f, const std::atomic<bool>& stop) {
  if (f.config.secret.empty()) {
    return report_failure(error(StatusCode::kInvalidArgument,
                                "no cluster secret: pass --secret or set TRIBUTARY_SECRET"));
  }
  f.config.heartbeat_timeout = std::chrono::milliseconds(f.heartbeat_timeout_ms);
  f.config.heartbeat_interval = std::chrono::milliseconds(f.heartbeat_interval_ms);
  f.config.ready_timeout = std::chrono::milliseconds(f.ready_timeout_ms);
  f.config.straggler.enabled = !f.no_straggler_eviction;
  f.config.confirm_on_close = !f.no_confirm_on_close;
  f.config.straggler.floor_seconds = static_cast<double>(f.straggler_floor_ms) / 1000.0;
  f.config.straggler.cooldown = std::chrono::seconds(f.straggler_cooldown_s);
  f.config.lease_ttl = std::chrono::seconds(f.lease_s);
  coordinator::Coordinator coordinator(f.config);
  if (Status s = coordinator.bind(); !s) return report_failure(s);
  if (!f.ready_file.empty()) {
    const std::string tmp = f.ready_file + ".tmp";
    std::ofstream(tmp) << coordinator.endpoint() << "\n";
    std::rename(tmp.c_str(), f.ready_file.c_str());
  }
  coordinator.run_until(stop);
  return 0;
}

}  // namespace tributary::cli
