// The `tributary` command line: coordinator, agent, bench, check, demo and status. Flags and
// environment variables are parsed here, once, into typed config structs that the rest of
// the code receives; nothing below reads the environment.
#include <CLI/CLI.hpp>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <thread>

#include "agent/worker.h"
#include "cli/coordinator_command.h"
#include "cli/demo.h"
#include "cli/launcher.h"
#include "cli/federated_check_workload.h"
#include "cli/soak_workload.h"
#include "cli/status_command.h"
#include "cli/federated_workload.h"
#include "cli/train_workload.h"
#include "cli/transport_flags.h"
#include "cli/workloads.h"
#include "compression/collectives/compression_plan.h"
#include "compression/collectives/convergence_advice.h"

namespace tributary::cli {
namespace {

std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop = true; }

// Logs why the subcommand `what` gives up; the exit status.
int report(const Status& s, const std::string& what) {
  Logger(what).error(s.to_string());
  return 1;
}

// --- logging: every subcommand ------------------------------------------------------

struct LogFlags {
  std::string level = "info";
  std::string format = "text";
};

void add_log_flags(CLI::App& cmd, LogFlags& f) {
  cmd.add_option("--log-level", f.level, "least severe log lines written: debug, info, warn, error")
      ->capture_default_str()
      ->check(CLI::IsMember({"debug", "info", "warn", "error"}));
  cmd.add_option("--log-format", f.format,
                 "log lines on stderr: text, or json (one object per line, for log shippers)")
      ->capture_default_str()
      ->check(CLI::IsMember({"text", "json"}));
}

// The same flags for the processes a local cluster starts (coordinator and agents).
std::vector<std::string> log_args(const LogFlags& f) {
  return {"--log-level", f.level, "--log-format", f.format};
}

// --- agent --------------------------------------------------------------------------

struct AgentFlags {
  agent::WorkerConfig worker;
  std::string workload = "train";
  BenchSpec bench;
  std::string bench_ops = "all_reduce";
  std::string dtype = "float32";
  std::string redop = "sum";
  std::string algorithm = "auto";
  double wan_mbps = 1000;
  double wan_latency_ms = 1;
  long join_timeout_ms = 30000;
  long timeout_ms = 30000;
  long deadline_floor_ms = 5000;
  long recovery_timeout_ms = 60000;
  bool no_agreement = false;
  bool no_measure_links = false;
  std::string mismatch = "count";
  TrainSpec train;
  FederatedSpec federated;
  long round_deadline_ms = 1000;
  long late_by_ms = 0;
  SoakSpec soak;
  FederatedCheckSpec federated_check;
};

void add_worker_flags(CLI::App& cmd, AgentFlags& f) {
  cmd.add_option("--coordinator", f.worker.coordinator,
                 "coordinator endpoint; replicated coordinators: every endpoint, comma-separated")
      ->envname("TRIBUTARY_COORDINATOR")
      ->capture_default_str();
  cmd.add_option("--secret", f.worker.secret, "cluster secret")->envname("TRIBUTARY_SECRET");
  cmd.add_option("--host", f.worker.host, "host label (default: hostname)");
  cmd.add_option("--name", f.worker.name,
                 "member name in views, logs and status (default: HOST/tributary:PID; in a "
                 "container, the pod's name)")
      ->check([](const std::string& n) {
        return n.empty() || n.size() > 256 ? std::string("1 to 256 bytes") : std::string();
      });
  cmd.add_option("--zone", f.worker.zone, "zone label");
  cmd.add_option("--bind-host", f.worker.bind_host, "data-plane address")->capture_default_str();
  cmd.add_option("--data-port", f.worker.data_port, "data-plane port (0: ephemeral)");
  cmd.add_option("--advertise-host", f.worker.advertise_host,
                 "data-plane address peers dial (default: --bind-host)");
  add_data_path_flags(cmd, f.worker);
  cmd.add_option("--join-timeout-ms", f.join_timeout_ms, "deadline to join and connect")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd.add_option("--timeout-ms", f.timeout_ms,
                 "cap on each attempt of a collective (a late one is recovered and re-run)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd.add_option("--chunk-bytes", f.worker.chunk_bytes, "pipeline chunk size")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  cmd.add_option("--algorithm", f.algorithm,
                 "all-reduce algorithm: auto, ring, tree, double_tree, halving_doubling, direct, "
                 "hierarchical (by --zone)")
      ->capture_default_str();
  cmd.add_option("--wan-mbps", f.wan_mbps,
                 "bandwidth between zones, Mbit/s per direction (the cost model's flat vs "
                 "hierarchical choice; the same on every member)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd.add_option("--wan-latency-ms", f.wan_latency_ms, "latency between zones (cost model)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd.add_option("--metrics", f.worker.metrics_bind,
                 "serve Prometheus /metrics on HOST:PORT (port 0: ephemeral)");
  cmd.add_option("--min-world-size", f.worker.min_world_size,
                 "quorum: below this many members, wait instead of training")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd.add_option("--deadline-floor-ms", f.deadline_floor_ms,
                 "data-plane progress deadline floor (plus 8x the measured transfer time)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd.add_option("--recovery-timeout-ms", f.recovery_timeout_ms,
                 "bound on recovering from a failure (new view, reconnect)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd.add_flag("--no-agreement", f.no_agreement,
               "skip the commit round after each collective (not all-or-nothing; benchmarks)");
  cmd.add_option("--speculative-max-bytes", f.worker.speculative_max_bytes,
                 "all-reduces up to this size return without the commit round and keep a copy "
                 "of the result instead (still all-or-nothing; 0: always the round)")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  cmd.add_flag("--no-measure-links", f.no_measure_links,
               "keep the cost model's default link constants and the rank order of the ring "
               "instead of measuring each view's links when they come up and refitting them "
               "to the all-reduces at step boundaries");
}

void add_bench_flags(CLI::App& cmd, AgentFlags& f) {
  cmd.add_option("-b,--min-bytes", f.bench.min_bytes, "smallest size")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  cmd.add_option("-e,--max-bytes", f.bench.max_bytes, "largest size")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  cmd.add_option("-f,--factor", f.bench.factor, "size multiplication factor")
      ->capture_default_str()
      ->check(CLI::Range(1.01, 1e6));
  cmd.add_option("--iters", f.bench.iters, "timed iterations")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd.add_option("--warmup", f.bench.warmup, "warm-up iterations")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd.add_option("--op", f.bench_ops,
                 "collectives, comma-separated, or 'all' (all_reduce, reduce_scatter, "
                 "all_gather, broadcast, reduce, gather, scatter, all_to_all, barrier)")
      ->capture_default_str();
  cmd.add_option("--dtype", f.dtype, "element type")->capture_default_str();
  cmd.add_option("--redop", f.redop, "reduction: sum, prod, min, max, avg")->capture_default_str();
}

void add_train_flags(CLI::App& cmd, TrainSpec& t) {
  cmd.add_option("--epochs", t.recipe.epochs, "passes over the training shards")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd.add_option("--batch", t.recipe.batch_size, "minibatch per worker")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd.add_option("--lr", t.recipe.learning_rate,
                 "learning rate at the start (cosine-decayed to 0 over the epochs)")
      ->capture_default_str();
  cmd.add_flag("--label-sorted", t.label_sorted, "non-IID shards, sorted by label");
  cmd.add_option("--seed", t.seed, "seed of the model and the batches")->capture_default_str();
  cmd.add_option("--data", t.data_path, "digits.csv(.gz) path (default: the project's copy)");
  cmd.add_option("--print-every", t.print_every, "steps between progress lines")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd.add_option("--step-delay-ms", t.step_delay_ms, "extra compute time per step")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
}

void add_federated_flags(CLI::App& cmd, AgentFlags& f) {
  FederatedSpec& s = f.federated;
  cmd.add_option("--rounds", s.rounds, "federated: rounds of local training and averaging")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd.add_option("--local-passes", s.local_passes,
                 "federated: passes over a member's shard per round")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd.add_option("--round-deadline-ms", f.round_deadline_ms,
                 "federated: a round closes this long after its first contribution")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd.add_option("--min-participants", s.min_participants,
                 "federated: fewer contributors by the deadline fail the round")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd.add_option("--late-fraction", s.late_fraction,
                 "federated: share of members made late in each round, drawn at random "
                 "(fault injection)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  cmd.add_option("--late-by-ms", f.late_by_ms,
                 "federated: how long a late member sleeps before it contributes (0: 1.5 x "
                 "the deadline)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
}

void add_codec_flag(CLI::App& cmd, agent::WorkerConfig& w) {
  cmd.add_option("--codec", w.codec,
                 "gradient compression: float32, float16, bfloat16, qint8[:bucket=512], qint4, "
                 "sign, topk[:density=0.01], powersgd[:rank=2] (see docs/compression.md)")
      ->capture_default_str();
  cmd.add_option("--wan-codec", w.wan_codec,
                 "codec across zones when the all-reduce is hierarchical (--codec float32 "
                 "inside), e.g. qint8 (docs/zones.md)");
}

void add_injection_flags(CLI::App& cmd, TrainSpec& t) {
  cmd.add_option("--slow-ms", t.slow_ms, "make this worker a straggler: extra ms per step")
      ->check(CLI::NonNegativeNumber);
  cmd.add_option("--kill-at", t.kill_at, "raise SIGKILL in this process at this global step");
  cmd.add_option("--stop-at", t.stop_at, "raise SIGSTOP in this process at this global step");
  cmd.add_option("--rejoin-after-ms", t.rejoin_after_ms, "after an eviction, wait before rejoining")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd.add_flag("--events", t.events,
               "train: machine-readable progress lines (@step, @eval, @state) instead of the "
               "table, for the demo's controller");
}

// The codec as the training recipe meets it: momentum placement, clipping, and what the
// convergence evidence says about it. A codec known to diverge is refused here, before
// any process starts; one known to lose accuracy trains with a warning in its header.
Status check_training_codec(AgentFlags& f) {
  auto plan = compression::collectives::CompressionPlan::parse(f.worker.codec);
  if (!plan) return error(StatusCode::kInvalidArgument, "--codec: " + plan.status().message());
  f.train.codec.applies_momentum = plan->codec && plan->codec->wants_momentum();
  f.train.codec.sparse = plan->kind == compression::collectives::CompressionPlan::Kind::kSparse;
  if (f.workload != "train") return Status::ok();
  if (!f.worker.wan_codec.empty()) {
    // The recipe adapts to one codec (momentum, clipping); across zones it takes those that
    // need neither, and the convergence evidence is for those.
    auto wan = compression::collectives::CompressionPlan::parse(f.worker.wan_codec);
    if (!wan) return error(StatusCode::kInvalidArgument, "--wan-codec: " + wan.status().message());
    if (wan->kind != compression::collectives::CompressionPlan::Kind::kQuantized ||
        (wan->codec && wan->codec->wants_momentum())) {
      return error(StatusCode::kInvalidArgument,
                   "--wan-codec " + f.worker.wan_codec +
                       ": training takes float16, bfloat16, qint8 or qint4 across zones");
    }
  }
  const compression::collectives::ConvergenceAdvice advice =
      compression::collectives::advise_training(*plan);
  using Verdict = compression::collectives::ConvergenceAdvice::Verdict;
  if (advice.verdict == Verdict::kDiverges) {
    return error(StatusCode::kInvalidArgument, "--codec " + f.worker.codec + ": " + advice.message);
  }
  if (advice.verdict == Verdict::kLosesAccuracy) {
    f.train.codec_warning = "--codec " + f.worker.codec + ": " + advice.message;
  }
  return Status::ok();
}

// Turns the string flags into the typed spec; kInvalidArgument names the bad flag.
Status finish_agent_flags(AgentFlags& f) {
  f.worker.join_timeout = std::chrono::milliseconds(f.join_timeout_ms);
  f.worker.collective_timeout = std::chrono::milliseconds(f.timeout_ms);
  f.worker.deadline_floor = std::chrono::milliseconds(f.deadline_floor_ms);
  f.worker.recovery_timeout = std::chrono::milliseconds(f.recovery_timeout_ms);
  f.worker.agreement = !f.no_agreement;
  f.worker.measure_links = !f.no_measure_links;
  f.worker.wan_bandwidth_bps = f.wan_mbps * 1e6;
  f.worker.wan_latency = std::chrono::microseconds(static_cast<long>(f.wan_latency_ms * 1000));
  f.train.compressed = f.worker.codec != "float32" || !f.worker.wan_codec.empty();
  TRIB_RETURN_IF_ERROR(check_training_codec(f));
  TRIB_RETURN_IF_ERROR(transport::validate_tls_config(f.worker.tls));
  // The federated workload shares the data flags of training.
  f.federated.seed = f.train.seed;
  f.federated.data_path = f.train.data_path;
  f.federated.label_sorted = f.train.label_sorted;
  f.federated.batch_size = f.train.recipe.batch_size;
  f.federated.deadline = std::chrono::milliseconds(f.round_deadline_ms);
  f.federated.late_by = std::chrono::milliseconds(f.late_by_ms);
  if (!algorithms::parse_all_reduce_algorithm(f.algorithm, &f.worker.algorithm)) {
    return error(StatusCode::kInvalidArgument,
                 "--algorithm: unknown algorithm '" + f.algorithm + "'");
  }
  auto dtype = parse_dtype(f.dtype);
  if (!dtype) return error(StatusCode::kInvalidArgument, "--dtype: unknown type '" + f.dtype + "'");
  f.bench.dtype = *dtype;
  auto op = parse_reduce_op(f.redop);
  if (!op) return error(StatusCode::kInvalidArgument, "--redop: unknown op '" + f.redop + "'");
  f.bench.op = *op;
  f.bench.kinds.clear();
  if (f.bench_ops == "all") {
    f.bench.kinds = all_collective_kinds();
  } else {
    std::size_t start = 0;
    while (start <= f.bench_ops.size()) {
      const std::size_t comma = std::min(f.bench_ops.find(',', start), f.bench_ops.size());
      const std::string name = f.bench_ops.substr(start, comma - start);
      auto kind = parse_collective_kind(name);
      if (!kind)
        return error(StatusCode::kInvalidArgument, "--op: unknown collective '" + name + "'");
      f.bench.kinds.push_back(*kind);
      start = comma + 1;
    }
  }
  if (f.bench.min_bytes > f.bench.max_bytes) {
    return error(StatusCode::kInvalidArgument, "-b must not exceed -e");
  }
  return Status::ok();
}

int run_train_agent(AgentFlags& f) {
  auto summary = run_training(
      [&]() -> Result<std::unique_ptr<agent::Worker>> { return agent::Worker::start(f.worker); },
      f.train, stdout);
  if (!summary) return report(summary.status(), "agent");
  if (!summary->drained && summary->rank == 0) {
    std::printf(
        "summary: %ld steps in %.2f s, final loss %.4f, test accuracy %.2f%%, %d workers at the "
        "end, view epoch %llu, mean all-reduce %.1f us, %d collectives recovered, wire ratio "
        "%.1fx\n",
        summary->steps, summary->seconds, summary->final_loss, 100.0 * summary->test_accuracy,
        summary->world_size, static_cast<unsigned long long>(summary->epoch),
        summary->mean_allreduce_us, summary->recoveries, summary->wire_ratio);
  }
  std::printf("final: params sha256 %s steps %ld%s\n", summary->params_sha256.c_str(),
              summary->steps, summary->drained ? " drained" : "");
  return 0;
}

int run_federated_agent(AgentFlags& f) {
  auto summary = run_federated(
      [&]() -> Result<std::unique_ptr<agent::Worker>> { return agent::Worker::start(f.worker); },
      f.federated, stdout);
  if (!summary) return report(summary.status(), "agent");
  if (summary->rank == 0) {
    std::printf(
        "summary: %d rounds in %.2f s, test accuracy %.2f%%, %d members, rank 0 made %d rounds, "
        "missed %d, %d rounds failed\n",
        summary->rounds, summary->seconds, 100.0 * summary->test_accuracy, summary->world_size,
        summary->contributed, summary->late, summary->failed);
  }
  std::printf("final: params sha256 %s rounds %d contributed %d late %d\n",
              summary->params_sha256.c_str(), summary->rounds, summary->contributed,
              summary->late);
  return 0;
}

int run_agent(AgentFlags& f) {
  if (Status s = finish_agent_flags(f); !s) return report(s, "agent");
  if (f.workload != "train" && f.workload != "bench" && f.workload != "check" &&
      f.workload != "mismatch" && f.workload != "soak" && f.workload != "federated" &&
      f.workload != "federated-check") {
    return report(error(StatusCode::kInvalidArgument,
                        "--workload: train, federated, bench, check, mismatch, soak or "
                        "federated-check"),
                  "agent");
  }
  if (f.workload == "train") return run_train_agent(f);
  if (f.workload == "federated") return run_federated_agent(f);
  if (f.workload == "soak") {
    Status s = run_soak(
        [&]() -> Result<std::unique_ptr<agent::Worker>> { return agent::Worker::start(f.worker); },
        f.soak, stdout);
    if (!s) return report(s, "soak");
    return 0;
  }
  auto worker = agent::Worker::start(f.worker);
  if (!worker) return report(worker.status(), "agent");
  agent::Worker& w = **worker;
  // The rank these workloads run as, for their error lines: by the time a collective has
  // failed, the members that saw the failure first may have left, and w.rank() already
  // answers for a smaller view.
  const int rank = w.rank();
  Status status;
  if (f.workload == "bench") {
    status = run_bench(w, f.bench, stdout);
  } else if (f.workload == "check") {
    status = run_check(w, CheckSpec{}, stdout);
  } else if (f.workload == "federated-check") {
    status = run_federated_check(w, f.federated_check, stdout);
  } else {
    status = run_mismatch(w, f.mismatch == "dtype" ? MismatchKind::kDType : MismatchKind::kCount,
                          stdout);
    if (!status) {
      // The expected outcome: report it and exit 3 so tests can tell it from a crash.
      std::printf("rank %d: %s\n", rank, status.to_string().c_str());
      std::fflush(stdout);
      return 3;
    }
  }
  if (!status) {
    return report(
        error(status.code(), "rank " + std::to_string(rank) + ": " + status.message()),
        "agent");
  }
  if (Status s = w.leave(); !s) return report(s, "agent");
  return 0;
}

// --- bench / demo: a local cluster ------------------------------------------------------

struct LocalFlags {
  int processes = 4;
  long timeout_s = 900;
  int zones = 1;
};

// Forwards the agent flags that were given, so the agents parse them themselves.
std::vector<std::string> forwarded_args(const CLI::App& cmd,
                                        const std::vector<std::string>& names) {
  std::vector<std::string> args;
  for (const auto& name : names) {
    const CLI::Option* opt = cmd.get_option_no_throw(name);
    if (opt == nullptr || opt->count() == 0) continue;
    if (opt->get_expected_max() == 0) {  // a flag: no value
      args.push_back(name);
    } else {
      args.push_back(name);
      args.push_back(opt->as<std::string>());
    }
  }
  return args;
}

void add_zones_flag(CLI::App& cmd, int& zones) {
  cmd.add_option("--zones", zones,
                 "split the agents into this many zones (--zone zone-0, zone-1, ...; contiguous, "
                 "near-equal sizes)")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
}

int run_local_cluster(const CLI::App& cmd, const LocalFlags& local, const LogFlags& log,
                      const std::string& workload, const std::vector<std::string>& names) {
  // The secret reaches the children through the environment, never their command line.
  const std::string secret = random_secret();
  ::setenv("TRIBUTARY_SECRET", secret.c_str(), 1);
  std::string endpoint;
  auto coordinator = start_coordinator_process(
      local.processes, &endpoint, Deadline::after(std::chrono::seconds(20)), log_args(log));
  if (!coordinator) return report(coordinator.status(), workload);
  std::vector<std::string> args = {"--workload", workload};
  auto more = forwarded_args(cmd, names);
  args.insert(args.end(), more.begin(), more.end());
  more = log_args(log);
  args.insert(args.end(), more.begin(), more.end());
  auto agents = start_agents(local.processes, endpoint, args, local.zones);
  if (!agents) return report(agents.status(), workload);
  const int rc = wait_all(*agents, Deadline::after(std::chrono::seconds(local.timeout_s)));
  coordinator->signal(SIGTERM);
  if (!coordinator->wait(Deadline::after(std::chrono::seconds(10)))) coordinator->signal(SIGKILL);
  return rc;
}

const std::vector<std::string> kWorkerFlagNames = {"--chunk-bytes", "--algorithm", "--timeout-ms",
                                                   "--join-timeout-ms", "--metrics"};
const std::vector<std::string> kBenchFlagNames = {
    "--min-bytes", "--max-bytes", "--factor", "--iters", "--warmup", "--op", "--dtype", "--redop"};
const std::vector<std::string> kFederatedFlagNames = {
    "--rounds", "--local-passes", "--round-deadline-ms", "--min-participants", "--late-fraction",
    "--late-by-ms"};
const std::vector<std::string> kTrainFlagNames = {
    "--epochs", "--batch", "--lr", "--label-sorted", "--seed", "--data", "--print-every"};

}  // namespace
}  // namespace tributary::cli

int main(int argc, char** argv) {
  using namespace tributary;
  using namespace tributary::cli;
  CLI::App app{"Tributary: elastic, fault-tolerant gradient aggregation"};
  app.require_subcommand(1);
  LogFlags log_flags;  // one set: exactly one subcommand runs

  CoordinatorFlags coordinator_flags;
  auto* coordinator_cmd = app.add_subcommand("coordinator", "run the membership coordinator");
  add_coordinator_flags(*coordinator_cmd, coordinator_flags);

  AgentFlags agent_flags;
  auto* agent = app.add_subcommand("agent", "join a cluster and run a workload");
  add_worker_flags(*agent, agent_flags);
  agent
      ->add_option("--workload", agent_flags.workload,
                   "train, federated, bench, check, mismatch, soak or federated-check")
      ->capture_default_str();
  agent
      ->add_option("--fed-rounds", agent_flags.federated_check.rounds,
                   "federated-check: rounds to run")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  agent
      ->add_option("--fed-deadline-ms", agent_flags.federated_check.deadline_ms,
                   "federated-check: each round's deadline")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  agent
      ->add_option("--fed-slow-ms", agent_flags.federated_check.slow_ms,
                   "federated-check: the last rank's compute time in odd rounds (late when "
                   "above the deadline)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  agent->add_option("--soak-count", agent_flags.soak.count, "soak: float32 elements per all-reduce")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  agent
      ->add_option("--soak-steps", agent_flags.soak.steps,
                   "soak: committed steps (-1: use duration)")
      ->capture_default_str();
  agent
      ->add_option("--soak-duration-ms", agent_flags.soak.duration_ms, "soak: stop after this long")
      ->capture_default_str();
  agent
      ->add_option("--soak-delay-ms", agent_flags.soak.step_delay_ms, "soak: compute time per step")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  agent
      ->add_option_function<int>(
          "--soak-slow-ms", [&](int ms) { agent_flags.soak.step_delay_ms += ms; },
          "soak: make this agent a straggler: this much more compute per step")
      ->check(CLI::NonNegativeNumber);
  add_bench_flags(*agent, agent_flags);
  add_train_flags(*agent, agent_flags.train);
  add_federated_flags(*agent, agent_flags);
  add_injection_flags(*agent, agent_flags.train);
  add_codec_flag(*agent, agent_flags.worker);
  agent
      ->add_option("--mismatch", agent_flags.mismatch,
                   "with --workload mismatch: what the last rank gets wrong (count, dtype)")
      ->capture_default_str()
      ->check(CLI::IsMember({"count", "dtype"}));

  AgentFlags bench_flags;
  LocalFlags bench_local;
  auto* bench = app.add_subcommand("bench", "benchmark collectives among N local agent processes");
  bench->add_option("--np", bench_local.processes, "number of agent processes")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  bench->add_option("--timeout-s", bench_local.timeout_s, "bound on the whole run")
      ->capture_default_str();
  add_bench_flags(*bench, bench_flags);
  add_zones_flag(*bench, bench_local.zones);
  bench->add_option("--chunk-bytes", bench_flags.worker.chunk_bytes, "pipeline chunk size")
      ->transform(CLI::AsSizeValue(false));
  bench->add_option("--algorithm", bench_flags.algorithm,
                    "all-reduce algorithm (auto: cost model)");
  bench->add_option("--timeout-ms", bench_flags.timeout_ms,
                    "cap on each attempt of a collective (a late one is recovered and re-run)");
  bench->add_flag("--no-agreement", bench_flags.no_agreement,
                  "skip the commit round after each collective (measures the data phase alone)");
  bench->add_option("--speculative-max-bytes", bench_flags.worker.speculative_max_bytes,
                    "all-reduces up to this size return without the commit round, keeping a "
                    "copy of the result (0: always the round)")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  bench->add_flag("--no-measure-links", bench_flags.no_measure_links,
                  "the cost model keeps its default link constants (no measurement per view)");
  add_transport_flag(*bench, bench_flags.worker);
  add_failover_flags(*bench, bench_flags.worker);
  add_tls_flags(*bench, bench_flags.worker);

  AgentFlags check_flags;
  LocalFlags check_local;
  auto* check = app.add_subcommand(
      "check", "run every collective x dtype among N local agent processes and verify results");
  check->add_option("--np", check_local.processes, "number of agent processes")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  check->add_option("--timeout-s", check_local.timeout_s, "bound on the whole run")
      ->capture_default_str();
  add_zones_flag(*check, check_local.zones);
  check->add_option("--chunk-bytes", check_flags.worker.chunk_bytes, "pipeline chunk size")
      ->transform(CLI::AsSizeValue(false));
  check->add_option("--algorithm", check_flags.algorithm,
                    "all-reduce algorithm (auto: cost model)");
  add_transport_flag(*check, check_flags.worker);
  add_failover_flags(*check, check_flags.worker);
  add_tls_flags(*check, check_flags.worker);

  AgentFlags demo_flags;
  DemoSpec demo_spec;
  auto* demo = app.add_subcommand(
      "demo", "train an MLP on the digits data with a local coordinator and N worker processes");
  demo->add_option("--workers", demo_spec.workers, "number of worker processes")
      ->capture_default_str()
      ->check(CLI::Range(1, 16));
  demo->add_option("--timeout-s", demo_spec.timeout_s, "bound on the whole run")
      ->capture_default_str();
  add_zones_flag(*demo, demo_spec.zones);
  add_train_flags(*demo, demo_flags.train);
  demo->add_flag("--federated", demo_spec.federated,
                 "federated averaging in rounds with a deadline instead of data-parallel steps "
                 "(with --late-fraction: members made late at random)");
  add_federated_flags(*demo, demo_flags);
  add_codec_flag(*demo, demo_flags.worker);
  demo->add_option("--algorithm", demo_flags.algorithm, "all-reduce algorithm (auto: cost model)");
  demo->add_option("--metrics", demo_flags.worker.metrics_bind,
                   "each worker serves /metrics on HOST:PORT (use port 0)");
  demo->add_option_function<std::string>(
      "--coordinator-metrics",
      [&](const std::string& bind) {
        demo_spec.coordinator_args = {"--metrics", bind};
      },
      "the coordinator serves /metrics on HOST:PORT (use port 0; it prints the port)");
  demo->add_option("--kill-at", demo_spec.kill_at, "kill -9 one worker at this step");
  demo->add_option("--stop-at", demo_spec.stop_at, "SIGSTOP one worker at this step ...");
  demo->add_option("--stop-for-ms", demo_spec.stop_for_ms, "... and SIGCONT it this much later")
      ->capture_default_str();
  demo->add_option("--join-at", demo_spec.join_at, "start one more worker at this step");
  demo->add_option("--drain-at", demo_spec.drain_at, "SIGTERM (drain) one worker at this step");
  demo->add_option("--straggler-ms", demo_spec.straggler_ms,
                   "one worker computes this many ms slower per step");
  add_transport_flag(*demo, demo_flags.worker);
  add_failover_flags(*demo, demo_flags.worker);
  add_tls_flags(*demo, demo_flags.worker);
  bool no_faults = false;
  demo->add_flag("--no-faults", no_faults,
                 "a plain run: none of the default faults (kill -9, SIGSTOP, a join, a drain)");
  demo->add_flag("--verbose", demo_spec.verbose,
                 "the coordinator's and workers' logs on the terminal too (they always go to "
                 "the run directory)");
  demo->add_option("--run-dir", demo_spec.run_dir,
                   "where logs, the transcript, steps.csv and training.png go (default: a new "
                   "tributary-demo-* directory under $TMPDIR or /tmp)");
  demo->add_flag("--ha", demo_spec.ha, "a local etcd and three replicated coordinators");
  demo->add_option("--kill-leader-at", demo_spec.kill_leader_at,
                   "--ha: kill -9 the leading coordinator at this step")
      ->capture_default_str();

  StatusFlags status_flags;
  auto* status = app.add_subcommand("status", "show what a running coordinator knows");
  add_status_flags(*status, status_flags);

  for (CLI::App* cmd : {coordinator_cmd, agent, bench, check, demo, status})
    add_log_flags(*cmd, log_flags);

  CLI11_PARSE(app, argc, argv);
  // Read once, here: every Logger of this process writes at this level and in this format.
  configure_logging(*parse_log_level(log_flags.level), *parse_log_format(log_flags.format));

  if (coordinator_cmd->parsed()) {
    std::signal(SIGTERM, on_signal);
    std::signal(SIGINT, on_signal);
    return run_coordinator(coordinator_flags, g_stop);
  }
  if (agent->parsed()) {
    // Flags the federated workload shares with training, where they were given.
    if (agent->get_option("--lr")->count() > 0) {
      agent_flags.federated.learning_rate = agent_flags.train.recipe.learning_rate;
    }
    if (agent->get_option("--print-every")->count() > 0) {
      agent_flags.federated.print_every = agent_flags.train.print_every;
    }
    return run_agent(agent_flags);
  }
  if (status->parsed()) return run_status(status_flags);
  if (bench->parsed()) {
    if (Status s = finish_agent_flags(bench_flags); !s) return report(s, "bench");
    return run_local_cluster(*bench, bench_local, log_flags, "bench", [] {
      auto names = kBenchFlagNames;
      names.insert(names.end(), {"--chunk-bytes", "--algorithm", "--timeout-ms", "--no-agreement",
                                 "--speculative-max-bytes", "--no-measure-links"});
      names.insert(names.end(), kTransportFlagNames.begin(), kTransportFlagNames.end());
      names.insert(names.end(), kFailoverFlagNames.begin(), kFailoverFlagNames.end());
      names.insert(names.end(), kTlsFlagNames.begin(), kTlsFlagNames.end());
      return names;
    }());
  }
  if (check->parsed()) {
    if (Status s = finish_agent_flags(check_flags); !s) return report(s, "check");
    std::vector<std::string> names = {"--chunk-bytes", "--algorithm"};
    names.insert(names.end(), kTransportFlagNames.begin(), kTransportFlagNames.end());
    names.insert(names.end(), kFailoverFlagNames.begin(), kFailoverFlagNames.end());
    names.insert(names.end(), kTlsFlagNames.begin(), kTlsFlagNames.end());
    return run_local_cluster(*check, check_local, log_flags, "check", names);
  }
  if (demo->parsed()) {
    if (Status st = finish_agent_flags(demo_flags); !st) return report(st, "demo");
    auto names = kTrainFlagNames;
    names.insert(names.end(), {"--algorithm", "--metrics", "--step-delay-ms", "--codec",
                               "--wan-codec"});
    names.insert(names.end(), kTransportFlagNames.begin(), kTransportFlagNames.end());
    names.insert(names.end(), kFederatedFlagNames.begin(), kFederatedFlagNames.end());
    names.insert(names.end(), kFailoverFlagNames.begin(), kFailoverFlagNames.end());
    names.insert(names.end(), kTlsFlagNames.begin(), kTlsFlagNames.end());
    demo_spec.agent_args = forwarded_args(*demo, names);
    for (const auto& a : log_args(log_flags)) {
      demo_spec.coordinator_args.push_back(a);
      demo_spec.agent_args.push_back(a);
    }
    if (demo_spec.federated && has_faults(demo_spec)) {
      return report(error(StatusCode::kInvalidArgument,
                          "--federated: the fault flags are driven by training steps; use "
                          "--late-fraction for late members"),
                    "demo");
    }
    if (no_faults && has_faults(demo_spec)) {
      return report(error(StatusCode::kInvalidArgument,
                          "--no-faults: and a fault flag too; pick one or the other"),
                    "demo");
    }
    if (!no_faults && !has_faults(demo_spec) && !demo_spec.federated) {
      demo_spec.plan = schedule_default_faults(demo_spec, demo_flags.train);
    }
    const bool faults = has_faults(demo_spec);
    if (faults && demo->get_option("--step-delay-ms")->count() == 0) {
      // Give injected faults something to interrupt, and the viewer time to follow:
      // ~30 ms of "compute" per step.
      demo_spec.agent_args.insert(demo_spec.agent_args.end(), {"--step-delay-ms", "30"});
    }
    demo_spec.print_every = demo_flags.train.print_every;
    if (faults && demo->get_option("--print-every")->count() == 0) {
      demo_spec.print_every = 20;
      demo_spec.agent_args.insert(demo_spec.agent_args.end(), {"--print-every", "20"});
    }
    return run_demo(demo_spec);
  }
  return 0;
}
