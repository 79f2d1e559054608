// The driver of the epoch machine (agent/runtime/epoch_machine.h): a collective call and a
// move to a newer view are decided by the machine; this file carries its actions out
// against the control plane, the data plane and the link, and feeds back what happened.
// Everything here is I/O and bookkeeping (metrics, logs, the cost model's refit); no
// decision of the protocol is made here.
#include <cstring>
#include <limits>
#include <string>

#include "agent/worker_impl.h"
#include "algorithms/agreement.h"
#include "algorithms/seq_space.h"

namespace tributary::agent {
namespace {

// What the driver ends with when the machine asks for something it never asks for.
runtime::Action broken(const std::string& why) {
  runtime::Action a;
  a.kind = runtime::ActionKind::kFail;
  a.status = error(StatusCode::kInternal, "the epoch machine " + why);
  return a;
}

}  // namespace

// The call run() is driving: what the attempts need and what they measured.
struct Worker::Impl::CallContext {
  std::string_view op;
  AlgorithmChoice choice = AlgorithmChoice::kNone;
  std::size_t bytes = 0;
  std::span<std::byte> input;
  std::vector<std::byte> stash;  // the input as the caller gave it, for re-runs
  std::span<std::byte> reduced;
  const CollectiveFn* fn = nullptr;
  algorithms::AllReduceAlgorithm algorithm = algorithms::AllReduceAlgorithm::kAuto;
  // The attempt in progress.
  algorithms::CollectiveOptions options;
  AttemptDeadline deadline;
  std::chrono::steady_clock::time_point t0, t_data;
};

Deadline Worker::Impl::real_deadline(TimePoint machine_until) const {
  if (machine_until == TimePoint::max()) return Deadline{};
  return Deadline{std::chrono::steady_clock::now() + (machine_until - machine_now())};
}

TimePoint Worker::Impl::machine_deadline(Deadline real) const {
  if (real.at == TimePoint::max()) return TimePoint::max();
  return machine_now() + (real.at - std::chrono::steady_clock::now());
}

void Worker::Impl::sync_machine() {
  // The link is replaced only on this thread (on_control_news() aborts it, never resets it).
  if (!ctx->link) machine.links_lost();
  machine.saw_epoch(newest_epoch.load());
  if (evicted.load()) {
    machine.evicted(evicted_status());
  } else if (aborted.load()) {
    machine.aborted(aborted_status());
  }
  if (stopping.load()) machine.leaving(error(StatusCode::kAborted, "the worker is leaving"));
}

void Worker::Impl::apply(const runtime::Action& a, CallContext* call) {
  using runtime::ActionKind;
  // What the call's own attempt reports and logs names the call ("all_reduce seq 7 ...").
  const std::string prefix = call != nullptr && a.seq != 0 ? std::string(call->op) + " " : "";
  switch (a.kind) {
    case ActionKind::kDropLink: drop_link(a.status); break;
    case ActionKind::kReportFailure: client->report_failure(a.epoch, 0, prefix + a.text); break;
    case ActionKind::kRestoreInput:
      if (call != nullptr && !call->input.empty()) {
        std::memcpy(call->input.data(), call->stash.data(), call->input.size());
      }
      break;
    case ActionKind::kAdoptView:
      adopt_view(machine.view(), machine.rank());
      adopted_epoch = ctx->epoch();
      log.context()->set_epoch(ctx->epoch());
      note_newest_epoch(ctx->epoch());
      publish_position();
      break;
    case ActionKind::kInstallLink:
      install_link(std::move(connecting));
      if (!connect_links) report_links();
      break;
    case ActionKind::kDiscardLink: connecting.reset(); break;
    case ActionKind::kWriteResult:
      if (call != nullptr && call->reduced.size() == a.blob.size()) {
        std::memcpy(call->reduced.data(), a.blob.data(), a.blob.size());
      }
      break;
    case ActionKind::kRecordRepair:
      if (metrics) metrics->record_result_repair(a.text);
      break;
    case ActionKind::kViewStarted:
      // The model in use starts as the view's fitted one, with no refit (what the last
      // view's links took says nothing of these).
      set_cost_model(ctx->fitted);
      refit.clear();
      compression_state.on_view_change(ctx->size(), ctx->rank);
      adopt_wan_tier();
      break;
    case ActionKind::kLog:
      log.log(a.warning ? LogLevel::kWarn : LogLevel::kInfo, prefix + a.text);
      break;
    default: break;
  }
}

runtime::Actions Worker::Impl::carry_out(const runtime::Action& a, CallContext* call) {
  using runtime::ActionKind;
  switch (a.kind) {
    case ActionKind::kWaitView: {
      auto v = client->wait_for_view(a.epoch, real_deadline(a.until));
      sync_machine();
      return v ? machine.view_arrived(*v, machine_now()) : machine.view_wait_failed(v.status(), machine_now());
    }
    case ActionKind::kSendReady: {
      auto go = client->ready(a.ready, real_deadline(a.until));
      sync_machine();
      if (!go) return machine.go_failed(go.status(), machine_now());
      return machine.go_arrived({go->commit_through, go->joiners, go->state_source}, machine_now());
    }
    case ActionKind::kConnect: {
      const ViewContext& here = *ctx;
      transport::GroupSpec spec{here.epoch(), here.rank,
                                std::vector<transport::MemberAdvert>(here.view.size())};
      for (const auto& m : here.view.members) {
        spec.members.at(m.rank) = {m.id, m.data_address, m.capabilities, m.zone};
      }
      auto l = connect_links ? connect_links(here.epoch(), here.rank, here.size())
                             : data_plane->connect(spec, real_deadline(a.until));
      sync_machine();
      if (!l) return machine.connect_failed(l.status(), machine_now());
      connecting = std::move(*l);
      return machine.connected(machine_now());
    }
    case ActionKind::kFitLinks: {
      const Status fitted = fit_links();
      sync_machine();
      return machine.links_fitted(fitted, machine_now());
    }
    case ActionKind::kRepairVote: {
      std::int64_t found[3] = {a.vote[0], a.vote[1], a.vote[2]};
      algorithms::CollectiveOptions options;
      options.seq = algorithms::seq_in(algorithms::SeqSpace::kRepair, 2 * ctx->epoch());
      options.deadline = collective_deadline(sizeof(found)).deadline;
      options.chunk_bytes = config.chunk_bytes;
      const Status s = algorithms::all_reduce(*ctx->link, found, found, 3, DType::kInt64,
                                              ReduceOp::kMin, options);
      sync_machine();
      if (!s.is_ok()) return machine.repair_failed(s, machine_now());
      return machine.repair_voted({found[0], found[1], found[2]}, machine_now());
    }
    case ActionKind::kRepairBroadcast: {
      std::vector<std::byte> blob = a.blob;
      blob.resize(a.size);
      algorithms::CollectiveOptions options;
      options.seq = algorithms::seq_in(algorithms::SeqSpace::kRepair, 2 * ctx->epoch() + 1);
      options.deadline = collective_deadline(a.size).deadline;
      options.chunk_bytes = config.chunk_bytes;
      const Status s = algorithms::broadcast(*ctx->link, blob.data(), blob.data(), a.size,
                                             DType::kUInt8, a.root, options);
      sync_machine();
      if (!s.is_ok()) return machine.repair_failed(s, machine_now());
      return machine.repair_received(blob, machine_now());
    }
    case ActionKind::kRunAttempt: return attempt(a, *call);
    case ActionKind::kRunAgreement: {
      algorithms::CollectiveOptions agree = call->options;
      agree.seq = algorithms::seq_in(algorithms::SeqSpace::kAgreement, a.seq);
      Status s = algorithms::agreement_round(*ctx->link, agree);
      const auto t1 = std::chrono::steady_clock::now();
      s = attempt_status(s, call->deadline, t1, config.collective_timeout, call->op, a.seq);
      attempt_ended(*call, s, t1);
      sync_machine();
      return machine.agreement_done(s, machine_now());
    }
    default: break;
  }
  return {broken("waits on " + std::string(to_string(a.kind)))};
}

runtime::Actions Worker::Impl::attempt(const runtime::Action& a, CallContext& call) {
  // An all-reduce's algorithm is chosen for the view this attempt runs in: the cost model's
  // choice depends on the group size, and members that chose for different views (one
  // before a transition, one after) fail each other's checks with kMismatch.
  if (call.choice == AlgorithmChoice::kPerAttempt) {
    call.algorithm = pick(call.bytes);
    note_algorithm(call.algorithm, call.bytes);
  }
  algorithms::CollectiveOptions& options = call.options;
  options = {};
  options.seq = a.seq;
  call.t0 = std::chrono::steady_clock::now();
  call.deadline = collective_deadline(call.bytes, call.t0);
  options.deadline = call.deadline.deadline;
  options.chunk_bytes = config.chunk_bytes;
  options.algorithm = call.algorithm;
  options.zones = ctx->zone_of_rank;
  options.cost_model = &cost_model;
  Status status = ctx->link
                      ? (*call.fn)(*ctx->link, options)
                      : error(StatusCode::kAborted, "no link for view " + std::to_string(a.epoch));
  call.t_data = std::chrono::steady_clock::now();
  // Whether the coordinator heard from this member lately matters only to a data phase that
  // completed an all-reduce (the speculative return, decided by the machine).
  const bool heard = status.is_ok() && !call.reduced.empty() && client->heard_recently();
  status =
      attempt_status(status, call.deadline, call.t_data, config.collective_timeout, call.op, a.seq);
  sync_machine();
  runtime::Actions next = machine.data_phase_done(status, heard, call.reduced, machine_now());
  if (next.empty() || next.back().kind != runtime::ActionKind::kRunAgreement) {
    attempt_ended(call, status, call.t_data);
  }
  return next;
}

void Worker::Impl::attempt_ended(CallContext& call, const Status& status,
                                 std::chrono::steady_clock::time_point t1) {
  const double seconds = std::chrono::duration<double>(t1 - call.t0).count();
  record_attempt(
      call.op,
      call.choice == AlgorithmChoice::kNone ? std::string_view("fixed") : to_string(call.algorithm),
      status, seconds);
  if (!status.is_ok()) return;
  if (call.bytes > 65536 && seconds > 0) {
    throughput = 0.8 * throughput + 0.2 * (static_cast<double>(call.bytes) / seconds);
  }
  // The user's all-reduces (those with an algorithm) feed the refit: their data phase,
  // without the commit round, which the model does not price.
  if (call.choice == AlgorithmChoice::kPerAttempt && !call.reduced.empty()) {
    refit.observe({call.algorithm, ctx->size(), call.bytes,
                   std::chrono::duration<double>(call.t_data - call.t0).count()});
  }
}

runtime::Action Worker::Impl::drive(runtime::Actions actions, CallContext* call) {
  for (;;) {
    const runtime::Action* wait = nullptr;
    for (const runtime::Action& a : actions) {
      if (a.is_wait() || a.is_end()) {
        wait = &a;
        break;
      }
      apply(a, call);
    }
    if (wait == nullptr) return broken("answered without a wait");
    if (wait->is_end()) return *wait;
    actions = carry_out(*wait, call);
  }
}

Status Worker::Impl::transition(Deadline deadline) {
  sync_machine();
  const runtime::Action end =
      drive(machine.move(machine_now(), machine_deadline(deadline)), nullptr);
  return end.kind == runtime::ActionKind::kMoved ? Status::ok() : end.status;
}

Result<Outcome> Worker::Impl::run(std::string_view op, AlgorithmChoice choice, std::size_t bytes,
                                  std::span<std::byte> input, const CollectiveFn& fn, bool retry,
                                  std::span<std::byte> reduced) {
  CallContext call;
  call.op = op;
  call.choice = choice;
  call.bytes = bytes;
  call.input = input;
  call.stash.assign(input.begin(), input.end());
  call.reduced = reduced;
  call.fn = &fn;
  step_compute_seconds = std::max(step_compute_seconds, seconds_since_last_collective());
  sync_machine();
  const runtime::Action end = drive(machine.call({bytes, reduced.size(), retry}, machine_now()), &call);
  if (end.kind != runtime::ActionKind::kReturn) return end.status;
  last_collective_end = clock->now();
  Outcome outcome;
  outcome.algorithm = call.algorithm;
  outcome.epoch = end.outcome.epoch;
  outcome.contributors = static_cast<int>(end.outcome.contributors.size());
  outcome.attempts = end.outcome.attempts;
  outcome.contributor_ids = end.outcome.contributors;
  return outcome;
}

}  // namespace tributary::agent
