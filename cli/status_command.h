// `tributary status --coordinator ADDR [--json]`: asks a coordinator what it knows (the
// view, each member's timings, heartbeats, straggler score and links, joiners waiting,
// recent view changes) over the authenticated control plane and prints it
// (cli/status_format.h). Read-only: the command never joins or disturbs the cluster.
// Exit status: 0 with a report; 1 when there is none (no secret, wrong secret, no answer
// within --timeout-ms, a malformed reply), with the reason on stderr.
//
// --watch: the report again every --interval-ms, redrawn in place on a terminal (like
// top) until Ctrl-C or SIGTERM; on a pipe, one report after another (one JSON object per
// line with --json). A coordinator that does not answer (restarting, say) shows as such
// and is asked again; a wrong secret or a bad endpoint ends the watch, with status 1.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace tributary::cli {

struct StatusFlags {
  std::string coordinator;
  std::string secret;
  bool json = false;
  long timeout_ms = 5000;
  bool watch = false;
  long interval_ms = 1000;
};

void add_status_flags(CLI::App& cmd, StatusFlags& flags);
int run_status(const StatusFlags& flags);

}  // namespace tributary::cli
