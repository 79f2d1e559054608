// The Worker's federated rounds (docs/federated.md): asks the coordinator for the round's
// decision, runs the contributors' weighted sum over a sub-link of their ranks, commits it
// through the coordinator, and recovers from a failure mid-round like any collective
// (report, new view, ask again in the new epoch, where the round is decided again with its
// surviving contributors).
#include <cmath>
#include <cstring>

#include "agent/recovery.h"
#include "agent/worker.h"
#include "agent/worker_impl.h"
#include "algorithms/seq_space.h"
#include "algorithms/sub_link.h"

namespace tributary::agent {
namespace {

Status validate(const FederatedRound& r, const float* data, std::size_t count) {
  const std::string what = "federated round " + std::to_string(r.round) + ": ";
  if (!(std::isfinite(r.weight) && r.weight > 0 && r.weight <= membership::kMaxRoundWeight)) {
    return error(StatusCode::kInvalidArgument,
                 what + "weight " + std::to_string(r.weight) + " is not finite, > 0 and <= 1e15");
  }
  if (r.deadline <= std::chrono::milliseconds::zero() || r.deadline > membership::kMaxRoundDeadline)
    return error(StatusCode::kInvalidArgument, what + "deadline is not in (0, 24 h]");
  if (r.min_participants < 1 ||
      static_cast<std::uint32_t>(r.min_participants) > membership::kMaxMinParticipants)
    return error(StatusCode::kInvalidArgument, what + "min_participants is not in 1..65536");
  if (r.round >= membership::kSeqLimit)
    return error(StatusCode::kInvalidArgument, what + "round number at or beyond 2^56");
  if (count > 0 && data == nullptr)
    return error(StatusCode::kInvalidArgument, what + "no data for " + std::to_string(count) +
                                                   " floats");
  return Status::ok();
}

FederatedOutcome outcome_of(const membership::RoundDecision& d, bool contributed, int attempts) {
  FederatedOutcome out;
  out.round = d.round;
  out.epoch = d.epoch;
  out.contributed = contributed;
  for (const auto& c : d.contributors) out.contributors.push_back({c.id, c.weight});
  out.total_weight = d.total_weight();
  out.attempts = attempts;
  return out;
}

}  // namespace

Result<FederatedOutcome> Worker::federated_round(float* data, std::size_t count,
                                                 const FederatedRound& round) {
  return impl_->federated_round(data, count, round);
}

Result<FederatedOutcome> Worker::Impl::federated_round(float* data, std::size_t count,
                                                       const FederatedRound& fr) {
  std::lock_guard call(call_mu);
  TRIB_RETURN_IF_ERROR(validate(fr, data, count));
  const std::string what = "round " + std::to_string(fr.round);
  auto residual = federated_residuals.find(fr.tensor_id);
  if (residual != federated_residuals.end() && residual->second.size() != count) {
    return error(StatusCode::kInvalidArgument,
                 "federated " + what + ": the residual of tensor " + std::to_string(fr.tensor_id) +
                     " holds " + std::to_string(residual->second.size()) + " floats, not " +
                     std::to_string(count));
  }
  step_federated = true;
  step_compute_seconds = std::max(step_compute_seconds, seconds_since_last_collective());
  const Deadline overall = Deadline::after(config.recovery_timeout + fr.deadline);
  // The weighted contribution, then (after a data phase in epoch `held`) the weighted sum.
  std::vector<float> work;
  membership::Epoch held = 0;

  // The result is this member's: `data` = the sum / the total weight, the residual spent.
  auto commit = [&](const membership::RoundDecision& d, int attempt) {
    const double total = d.total_weight();
    for (std::size_t i = 0; i < count; ++i) {
      data[i] = static_cast<float>(static_cast<double>(work[i]) / total);
    }
    federated_residuals.erase(fr.tensor_id);
    last_collective_end = clock->now();
    if (metrics) metrics->record_federated_round("contributed");
    return outcome_of(d, true, attempt);
  };
  // The round closed without this member: it is told (outcome, log, metric); `data` stays.
  auto late = [&](const membership::RoundDecision& d, int attempt) {
    const bool fold = fr.late == LatePolicy::kFoldIntoResidual;
    if (fold && count > 0) {
      std::vector<float>& r = federated_residuals[fr.tensor_id];
      r.resize(count, 0.0f);
      for (std::size_t i = 0; i < count; ++i) r[i] += data[i];
    }
    log.logf(LogLevel::kWarn,
             "late for federated %s (epoch %llu): it closed with %zu of %u members; this "
             "member's update is %s",
             what.c_str(), static_cast<unsigned long long>(d.epoch), d.contributors.size(),
             d.members,
             fold ? ("folded into the residual of tensor " + std::to_string(fr.tensor_id) +
                     " for its next round")
                        .c_str()
                  : "dropped");
    last_collective_end = clock->now();
    if (metrics) metrics->record_federated_round("late");
    return outcome_of(d, false, attempt);
  };

  int attempt = 1;  // 1 + the data phases run before this one
  for (int runs = 0;;) {
    if (evicted) return evicted_status();
    if (!ctx->link || newest_epoch.load() > ctx->epoch()) TRIB_RETURN_IF_ERROR(transition(overall));
    const membership::Epoch epoch = ctx->epoch();
    const membership::RoundReady ready{client->member_id(),
                                       epoch,
                                       fr.round,
                                       fr.weight,
                                       fr.deadline,
                                       static_cast<std::uint32_t>(fr.min_participants)};
    auto decided = client->await_round(ready, overall);
    if (!decided) {
      const Status& s = decided.status();
      if (s.code() == StatusCode::kAborted && !evicted) {
        // A newer view (the listener may not have told of it yet): adopt it, ask there.
        TRIB_RETURN_IF_ERROR(transition(overall));
        continue;
      }
      if (s.code() == StatusCode::kTimedOut) {
        return error(StatusCode::kUnavailable, "federated " + what +
                                                   ": no decision from the coordinator before "
                                                   "the recovery deadline (" +
                                                   s.message() + ")");
      }
      return s;
    }
    const membership::RoundDecision& d = *decided;
    if (d.failed) {
      log.logf(LogLevel::kWarn, "federated %s failed: %s", what.c_str(), d.reason.c_str());
      if (metrics) metrics->record_federated_round("failed");
      return error(StatusCode::kRoundFailed, d.reason);
    }
    if (!d.contributed(client->member_id())) return late(d, attempt);
    if (d.committed) {
      // Committed while this member recovered (its commit was lost): it held the result.
      if (held == d.epoch) return commit(d, attempt);
      return error(StatusCode::kInternal, "the coordinator committed federated " + what +
                                              " of epoch " + std::to_string(d.epoch) +
                                              " but this member does not hold its result");
    }
    // A contributor in this epoch: the weighted sum among the contributors, then the commit.
    std::vector<int> ranks;
    for (const auto& c : d.contributors) {
      const membership::ViewMember* m = ctx->view.find(c.id);
      if (m == nullptr) {
        return error(StatusCode::kInternal, "federated " + what + ": contributor " +
                                                std::to_string(c.id) + " is not in view " +
                                                std::to_string(epoch));
      }
      ranks.push_back(static_cast<int>(m->rank));
    }
    attempt = ++runs;
    held = 0;
    work.assign(data, data + count);
    if (residual != federated_residuals.end()) {
      for (std::size_t i = 0; i < count; ++i) work[i] += residual->second[i];
    }
    const auto weight = static_cast<float>(fr.weight);
    for (float& v : work) v *= weight;
    const std::size_t bytes = count * sizeof(float);
    const AttemptDeadline deadline = collective_deadline(bytes);
    algorithms::CollectiveOptions options;
    options.seq = algorithms::seq_in(algorithms::SeqSpace::kFederated, fr.round);
    options.deadline = deadline.deadline;
    options.chunk_bytes = config.chunk_bytes;
    options.cost_model = &cost_model;  // flat: no zones
    const auto t0 = std::chrono::steady_clock::now();
    Status status;
    if (ranks.size() > 1) {
      algorithms::SubLink group(*ctx->link, ranks);
      status = algorithms::all_reduce(group, work.data(), work.data(), count, DType::kFloat32,
                                      ReduceOp::kSum, options);
    }
    if (status.is_ok()) {
      held = epoch;
      // The coordinator commits once every contributor holds the result: the same
      // all-or-nothing as the agreement round, decided where the round is.
      status = client->commit_round(epoch, fr.round, options.deadline);
    }
    const auto t1 = std::chrono::steady_clock::now();
    status = attempt_status(status, deadline, t1, config.collective_timeout, "federated_round",
                            fr.round);
    record_attempt("federated_round", "fixed", status,
                   std::chrono::duration<double>(t1 - t0).count());
    if (status.is_ok()) return commit(d, attempt);
    attempt_failed("federated_round", what, epoch, status);
    if (evicted) return evicted_status();
    // Not fixed by a new epoch (kMismatch: the contributors' counts differ): fail.
    if (!retryable(status)) return status;
    if (overall.passed()) {
      return error(StatusCode::kUnavailable, "federated " + what +
                                                 " did not complete before the recovery "
                                                 "deadline: " +
                                                 status.to_string());
    }
  }
}

}  // namespace tributary::agent
