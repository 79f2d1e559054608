// The data-plane path flags of `tributary agent` and of the local launchers (bench,
// check, demo), which forward --transport, --failover and --tls to their agents.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "agent/worker.h"

namespace tributary::cli {

inline void add_transport_flag(CLI::App& cmd, agent::WorkerConfig& w) {
  cmd.add_option("--transport", w.transport,
                 "data-plane transport: auto (shared memory with members on this host, RDMA "
                 "verbs where every member has a device, TCP otherwise), shm, rdma, tcp "
                 "(docs/transports.md)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "shm", "rdma", "tcp"}));
  auto choice = [](transport::PathChoice& out) {
    return [&out](const std::string& text) {
      if (auto c = transport::parse_path_choice(text); c.is_ok()) out = *c;
    };
  };
  cmd.add_option_function<std::string>(
         "--fused-receive", choice(w.fused_receive),
         "receives that reduce as the bytes arrive (one pass over memory instead of three): "
         "auto (where this host runs more of the group's ranks than it has cores), on, off "
         "(docs/transports.md)")
      ->check(CLI::IsMember({"auto", "on", "off"}));
  cmd.add_option_function<std::string>(
         "--shm-single-copy", choice(w.shm_single_copy),
         "shared-memory messages of 64 KiB and more read straight from the sender's memory "
         "(one copy instead of two, where the OS allows it): auto (where this host runs at "
         "least twice as many of the group's ranks as it has cores), on, off")
      ->check(CLI::IsMember({"auto", "on", "off"}));
}

// The names the local launchers forward to their agents.
inline const std::vector<std::string> kTransportFlagNames = {"--transport", "--fused-receive",
                                                             "--shm-single-copy"};

inline void add_failover_flags(CLI::App& cmd, agent::WorkerConfig& w) {
  CLI::Option* on = cmd.add_flag_callback(
      "--failover", [&w] { w.failover = transport::PathChoice::kOn; },
      "keep standby TCP paths per peer (a listener per --data-address but the first, or one "
      "over the only address): a failed or stalled path moves to the next mid-collective, "
      "without a view change, and back when a stalled one returns. Default: on where there "
      "is another network to fall back to (two or more --data-address, or an RDMA device) "
      "and the group is not on shared memory");
  CLI::Option* off = cmd.add_flag_callback(
      "--no-failover", [&w] { w.failover = transport::PathChoice::kOff; },
      "no standby paths, even with several --data-address (a path that fails costs the "
      "group a view change)");
  on->excludes(off);
  cmd.add_option_function<long>(
         "--stall-timeout-ms",
         [&w](long ms) { w.stall_timeout = std::chrono::milliseconds(ms); },
         "with --failover: no acknowledgement on a pair's path for this long moves the pair "
         "to its standby path (default 2000)")
      ->check(CLI::PositiveNumber);
}

// The names the local launchers forward to their agents.
inline const std::vector<std::string> kFailoverFlagNames = {"--failover", "--no-failover",
                                                            "--stall-timeout-ms"};

inline void add_tls_flags(CLI::App& cmd, agent::WorkerConfig& w) {
  cmd.add_option_function<std::string>(
         "--tls",
         [&w](const std::string& mode) {
           if (auto m = transport::parse_tls_mode(mode); m.is_ok()) w.tls.mode = *m;
         },
         "TLS 1.3 on data-plane TCP links: off, cross-zone (pairs whose --zone differs), all "
         "(default off; docs/security.md)")
      ->check(CLI::IsMember({"off", "cross-zone", "all"}));
  cmd.add_option("--tls-cert", w.tls.cert_file,
                 "with --tls: this member's certificate (PEM); with --tls-key and --tls-ca, "
                 "peers verify each other's certificates instead of the key derived from "
                 "the cluster secret")
      ->check(CLI::ExistingFile);
  cmd.add_option("--tls-key", w.tls.key_file, "with --tls-cert: its private key (PEM)")
      ->check(CLI::ExistingFile);
  cmd.add_option("--tls-ca", w.tls.ca_file,
                 "with --tls-cert: the CA (PEM) every peer's certificate must chain to")
      ->check(CLI::ExistingFile);
}

inline const std::vector<std::string> kTlsFlagNames = {"--tls", "--tls-cert", "--tls-key",
                                                       "--tls-ca"};

inline void add_data_path_flags(CLI::App& cmd, agent::WorkerConfig& w) {
  add_transport_flag(cmd, w);
  add_failover_flags(cmd, w);
  add_tls_flags(cmd, w);
  cmd.add_option("--data-address", w.data_addresses,
                 "address peers dial, host[:port] (port: the listener's); repeat it for more "
                 "paths, most preferred first (default: --advertise-host or --bind-host)");
  cmd.add_option("--shm-ring-bytes", w.shm_ring_bytes,
                 "shared-memory ring per pair and direction (a power of two)")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  cmd.add_option_function<long>(
         "--connect-attempt-ms",
         [&w](long ms) { w.connect_attempt_timeout = std::chrono::milliseconds(ms); },
         "one connection attempt to one data address, before the next is tried (default 1000)")
      ->check(CLI::PositiveNumber);
}

}  // namespace tributary::cli
