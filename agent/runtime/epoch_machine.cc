#include "agent/runtime/epoch_machine.h"

#include <algorithm>
#include <chrono>
#include <limits>

#include "agent/recovery.h"

namespace tributary::agent::runtime {
namespace {

constexpr std::int64_t kNoHolder = std::numeric_limits<std::int64_t>::max();

Action make(ActionKind kind) {
  Action a;
  a.kind = kind;
  return a;
}

enum class Level : bool { kInfo, kWarning };

Action log_line(std::string text, Level level = Level::kInfo) {
  Action a = make(ActionKind::kLog);
  a.text = std::move(text);
  a.warning = level == Level::kWarning;
  return a;
}


std::string ms_after(TimePoint t, TimePoint origin) {
  if (t == TimePoint::max()) return "never";
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t - origin).count();
  return (ms >= 0 ? "+" : "") + std::to_string(ms) + "ms";
}

std::string ids_text(const std::vector<MemberId>& ids) {
  std::string s = "[";
  for (std::size_t i = 0; i < ids.size(); ++i) s += (i ? "," : "") + std::to_string(ids[i]);
  return s + "]";
}

}  // namespace

std::string_view to_string(ActionKind kind) {
  switch (kind) {
    case ActionKind::kDropLink: return "drop_link";
    case ActionKind::kReportFailure: return "report_failure";
    case ActionKind::kRestoreInput: return "restore_input";
    case ActionKind::kAdoptView: return "adopt_view";
    case ActionKind::kInstallLink: return "install_link";
    case ActionKind::kDiscardLink: return "discard_link";
    case ActionKind::kWriteResult: return "write_result";
    case ActionKind::kRecordRepair: return "record_repair";
    case ActionKind::kViewStarted: return "view_started";
    case ActionKind::kLog: return "log";
    case ActionKind::kWaitView: return "wait_view";
    case ActionKind::kSendReady: return "send_ready";
    case ActionKind::kConnect: return "connect";
    case ActionKind::kFitLinks: return "fit_links";
    case ActionKind::kRepairVote: return "repair_vote";
    case ActionKind::kRepairBroadcast: return "repair_broadcast";
    case ActionKind::kRunAttempt: return "run_attempt";
    case ActionKind::kRunAgreement: return "run_agreement";
    case ActionKind::kReturn: return "return";
    case ActionKind::kFail: return "fail";
    case ActionKind::kMoved: return "moved";
  }
  return "unknown";
}

std::string describe(const Action& a, TimePoint origin) {
  std::string s(to_string(a.kind));
  switch (a.kind) {
    case ActionKind::kDropLink:
    case ActionKind::kFail: s += " (" + a.status.to_string() + ")"; break;
    case ActionKind::kReportFailure:
      s += " epoch=" + std::to_string(a.epoch) + ": " + a.text;
      break;
    case ActionKind::kAdoptView: s += " epoch=" + std::to_string(a.epoch); break;
    case ActionKind::kWriteResult: s += " bytes=" + std::to_string(a.blob.size()); break;
    case ActionKind::kRecordRepair: s += " " + a.text; break;
    case ActionKind::kLog: s += (a.warning ? " warn: " : " info: ") + a.text; break;
    case ActionKind::kWaitView:
      s += " epoch>=" + std::to_string(a.epoch) + " until=" + ms_after(a.until, origin);
      break;
    case ActionKind::kSendReady:
      s += " epoch=" + std::to_string(a.ready.epoch) +
           " previous=" + std::to_string(a.ready.previous_epoch) +
           " committed=" + std::to_string(a.ready.committed_seq) +
           " held=" + std::to_string(a.ready.held_seq) + " until=" + ms_after(a.until, origin);
      break;
    case ActionKind::kConnect:
      s += " epoch=" + std::to_string(a.epoch) + " until=" + ms_after(a.until, origin);
      break;
    case ActionKind::kRepairVote: {
      auto field = [](std::int64_t v) {
        return v == kNoHolder ? std::string("none") : std::to_string(v);
      };
      s += " holder=" + field(a.vote[0]) + " lack=" + std::to_string(a.vote[1]) +
           " size=" + std::to_string(-a.vote[2]);
      break;
    }
    case ActionKind::kRepairBroadcast:
      s += " root=" + std::to_string(a.root) + " size=" + std::to_string(a.size);
      break;
    case ActionKind::kRunAttempt:
      s += " seq=" + std::to_string(a.seq) + " epoch=" + std::to_string(a.epoch) +
           " attempt=" + std::to_string(a.attempt);
      break;
    case ActionKind::kRunAgreement: s += " seq=" + std::to_string(a.seq); break;
    case ActionKind::kReturn:
      s += " seq=" + std::to_string(a.outcome.seq) + " epoch=" + std::to_string(a.outcome.epoch) +
           " contributors=" + ids_text(a.outcome.contributors) +
           " attempts=" + std::to_string(a.outcome.attempts) +
           (a.outcome.repaired ? " repaired" : "") + (a.outcome.speculative ? " speculative" : "");
      break;
    case ActionKind::kMoved:
      s += " epoch=" + std::to_string(a.epoch) + " next_seq=" + std::to_string(a.seq);
      break;
    default: break;
  }
  return s;
}

std::vector<MemberId> EpochMachine::member_ids() const {
  std::vector<MemberId> ids(view_.size());
  for (const auto& m : view_.members) ids.at(m.rank) = m.id;
  return ids;
}

Actions EpochMachine::wait(Action action, Actions out) {
  wait_ = action.kind;
  out.push_back(std::move(action));
  return out;
}

Actions EpochMachine::end(Action action, Actions out) {
  wait_ = ActionKind::kFail;
  call_.active = false;
  out.push_back(std::move(action));
  return out;
}

Actions EpochMachine::protocol_error(std::string_view answer) {
  Action a = make(ActionKind::kFail);
  a.status = error(
      StatusCode::kInternal,
      "epoch machine: " + std::string(answer) +
          (wait_ == ActionKind::kFail ? std::string(" with nothing outstanding")
                                      : " while waiting on " + std::string(to_string(wait_))));
  return end(std::move(a), {});
}

Actions EpochMachine::call(const CallSpec& spec, TimePoint now) {
  if (busy()) return protocol_error("call");
  call_ = Call{};
  call_.active = true;
  call_.spec = spec;
  call_.deadline = now + config_.recovery_timeout;
  return begin_attempt(now);
}

Actions EpochMachine::move(TimePoint now, TimePoint deadline) {
  if (busy()) return protocol_error("move");
  return start_move(0, deadline, AfterMove::kReturnMoved, now);
}

Actions EpochMachine::begin_attempt(TimePoint now) {
  if (!stop_.is_ok()) {
    Action f = make(ActionKind::kFail);
    f.status = stop_;
    return end(std::move(f), {});
  }
  ++call_.attempt;
  call_.seq = next_seq_;
  call_.held = false;
  call_.speculative = false;
  call_.repaired = false;
  if (!links_up_ || newest_epoch_ > view_.epoch) {
    return start_move(0, call_.deadline, AfterMove::kAttempt, now);
  }
  return run_attempt({});
}

Actions EpochMachine::run_attempt(Actions out) {
  // The seq after the move, if there was one: its Go may have moved it.
  call_.seq = next_seq_;
  Action run = make(ActionKind::kRunAttempt);
  run.seq = call_.seq;
  run.epoch = view_.epoch;
  run.attempt = call_.attempt;
  return wait(std::move(run), std::move(out));
}

Actions EpochMachine::data_phase_done(const Status& status, bool heard_recently,
                                      std::span<const std::byte> result, TimePoint now) {
  if (wait_ != ActionKind::kRunAttempt) return protocol_error("data_phase_done");
  const std::size_t n = view_.size();
  const bool reduces = call_.spec.result_bytes > 0;
  call_.held = status.is_ok();
  // Completing an all-reduce's data phase proves that every member started this
  // collective, so returned every earlier one (lemma 1): an earlier copy is moot.
  if (call_.held && reduces) copy_.drop_before(call_.seq);
  // Decided once the data phase is done: a member frozen in it (SIGSTOP) may finish it
  // after the others gave up on it and the coordinator removed it; one the coordinator
  // has not heard from lately takes the round, which then fails, instead of returning a
  // result the survivors discard (docs/fault-tolerance.md, "A member that was frozen").
  call_.speculative = reduces && config_.agreement && n > 1 &&
                      call_.spec.bytes <= config_.speculative_max_bytes && status.is_ok() &&
                      heard_recently;
  if (status.is_ok() && config_.agreement && n > 1 && !call_.speculative) {
    Action agree = make(ActionKind::kRunAgreement);
    agree.seq = call_.seq;
    return wait(std::move(agree), {});
  }
  if (status.is_ok() && call_.speculative) {
    copy_.keep(call_.seq, view_.epoch, member_ids(), result);
  }
  return finish_attempt(status, now);
}

Actions EpochMachine::agreement_done(const Status& status, TimePoint now) {
  if (wait_ != ActionKind::kRunAgreement) return protocol_error("agreement_done");
  // Any commit round proves every member started the collective (lemma 1).
  if (status.is_ok()) copy_.drop_before(call_.seq);
  return finish_attempt(status, now);
}

Actions EpochMachine::finish_attempt(const Status& status, TimePoint now) {
  if (status.is_ok()) {
    ++next_seq_;
    Action r = make(ActionKind::kReturn);
    r.outcome = {call_.seq, view_.epoch, member_ids(), call_.attempt, false, call_.speculative};
    return end(std::move(r), {});
  }
  // The epoch's links are done for (link.h): drop them and ask for the next view, unless a
  // newer view already overtook this one.
  Actions out;
  Action drop = make(ActionKind::kDropLink);
  drop.status = status;
  out.push_back(std::move(drop));
  links_up_ = false;
  const std::string what = "seq " + std::to_string(call_.seq);
  if (stop_.code() != StatusCode::kEvicted && newest_epoch_ <= view_.epoch) {
    Action report = make(ActionKind::kReportFailure);
    report.epoch = view_.epoch;
    report.seq = call_.seq;
    report.text = what + ": " + status.to_string();
    out.push_back(std::move(report));
  }
  out.push_back(log_line(what + " in view " + std::to_string(view_.epoch) +
                             " failed: " + status.to_string() + "; recovering",
                         Level::kWarning));
  out.back().seq = call_.seq;  // about the call's attempt: the driver names the call
  if (!stop_.is_ok()) {
    Action f = make(ActionKind::kFail);
    f.status = stop_;
    return end(std::move(f), std::move(out));
  }
  call_.failure = status;
  call_.failed_epoch = view_.epoch;
  call_.failed_ids = member_ids();  // the move replaces the view
  return start_move(call_.held ? call_.seq : 0, call_.deadline, AfterMove::kJudge, now,
                    std::move(out));
}

Actions EpochMachine::start_move(std::uint64_t held_seq, TimePoint deadline, AfterMove then,
                                 TimePoint now, Actions out) {
  Action drop = make(ActionKind::kDropLink);
  drop.status = error(StatusCode::kAborted, "moving to a new view");
  out.push_back(std::move(drop));
  links_up_ = false;
  move_ = Move{};
  move_.then = then;
  move_.deadline = deadline;
  move_.held_seq = held_seq;
  move_.previous = view_.epoch;
  move_.committed = next_seq_ - 1;
  return wait_view(now, std::move(out));
}

Actions EpochMachine::wait_view(TimePoint now, Actions out) {
  if (!stop_.is_ok()) return move_failed(stop_, now, std::move(out));
  if (!leaving_.is_ok()) return move_failed(leaving_, now, std::move(out));
  Action w = make(ActionKind::kWaitView);
  w.epoch = std::max<Epoch>(view_.epoch + 1, 1);
  w.until = std::min(move_.deadline, now + config_.view_nudge);
  return wait(std::move(w), std::move(out));
}

Actions EpochMachine::view_wait_failed(const Status& status, TimePoint now) {
  if (wait_ != ActionKind::kWaitView) return protocol_error("view_wait_failed");
  if (status.code() != StatusCode::kTimedOut) return move_failed(status, now);
  if (now < move_.deadline) {
    // Nobody may have asked for the view we wait for (a report lost around a coordinator
    // restart, a failure only this member saw): ask again. A report the coordinator
    // cannot confirm still earns a new view with the same members (fresh links).
    Actions out;
    if (view_.epoch != 0) {
      Action report = make(ActionKind::kReportFailure);
      report.epoch = view_.epoch;
      report.text = "waiting for a view after " + std::to_string(view_.epoch);
      out.push_back(std::move(report));
    }
    return wait_view(now, std::move(out));
  }
  return move_failed(
      error(StatusCode::kUnavailable,
            with_last_connect("no new view from the coordinator before the recovery deadline (" +
                              status.message() + ")")),
      now);
}

Actions EpochMachine::view_arrived(const membership::View& view, TimePoint now) {
  (void)now;
  if (wait_ != ActionKind::kWaitView) return protocol_error("view_arrived");
  saw_epoch(view.epoch);
  move_.candidate = view;
  Action ready = make(ActionKind::kSendReady);
  ready.ready = {view.epoch, move_.previous, move_.committed, move_.held_seq};
  ready.until = move_.deadline;
  return wait(std::move(ready), {});
}

Actions EpochMachine::go_failed(const Status& status, TimePoint now) {
  if (wait_ != ActionKind::kSendReady) return protocol_error("go_failed");
  if (status.code() == StatusCode::kAborted) return wait_view(now, {});  // a newer view
  return move_failed(error(status.code(), with_last_connect(status.message())), now);
}

std::string EpochMachine::with_last_connect(std::string why) const {
  // Why the views before did not do: often the reason the move failed (a peer nobody
  // reaches).
  if (!move_.connect_failure.is_ok()) {
    why += "; connecting the last one failed: " + move_.connect_failure.to_string();
  }
  return why;
}

Actions EpochMachine::go_arrived(const GoInfo& go, TimePoint now) {
  if (wait_ != ActionKind::kSendReady) return protocol_error("go_arrived");
  if (go.commit_through < move_.committed) {
    // Lemma 2 of docs/fault-tolerance.md: never. Following it would re-run a collective
    // whose result this member already returned, and the members would diverge.
    return move_failed(
        error(StatusCode::kInternal,
              "the coordinator's Go for view " + std::to_string(move_.candidate.epoch) +
                  " commits through seq " + std::to_string(go.commit_through) +
                  ", but this member already returned seq " + std::to_string(move_.committed)),
        now);
  }
  // The Go of this view, not the larger of it and an earlier one: a move whose repair step
  // failed never acted on its Go, and whoever did (finished that move) reported the seq it
  // returned in Ready, so this Go covers it (lemma 2 above holds it to that).
  commit_through_ = go.commit_through;
  view_ = std::move(move_.candidate);
  move_.candidate = {};
  const membership::ViewMember* me = view_.find(config_.self);
  rank_ = me ? static_cast<int>(me->rank) : -1;
  Actions out;
  Action adopt = make(ActionKind::kAdoptView);
  adopt.epoch = view_.epoch;
  out.push_back(std::move(adopt));
  if (me == nullptr) {
    return move_failed(
        error(StatusCode::kEvicted, "not a member of view " + std::to_string(view_.epoch)), now,
        std::move(out));
  }
  for (MemberId j : go.joiners) {
    if (j == config_.self && go.state_source != 0) needs_state_ = true;
  }
  Action connect = make(ActionKind::kConnect);
  connect.epoch = view_.epoch;
  connect.until = std::min(move_.deadline, now + config_.connect_timeout);
  return wait(std::move(connect), std::move(out));
}

Actions EpochMachine::connect_failed(const Status& status, TimePoint now) {
  if (wait_ != ActionKind::kConnect) return protocol_error("connect_failed");
  // A member vanished between Go and connecting (or a newer view superseded this one):
  // report it unless a newer view is already here, and wait for the next view. Either way
  // it is the latest word on connecting, for the error if no view ever connects (what a
  // superseded connect still lacked is often why).
  Actions out;
  move_.connect_failure = status;
  if (status.code() != StatusCode::kAborted) {
    out.push_back(log_line("cannot connect the links of view " + std::to_string(view_.epoch) +
                               ": " + status.to_string(),
                           Level::kWarning));
    Action report = make(ActionKind::kReportFailure);
    report.epoch = view_.epoch;
    report.text = status.to_string();
    out.push_back(std::move(report));
  }
  return wait_view(now, std::move(out));
}

Actions EpochMachine::connected(TimePoint now) {
  if (wait_ != ActionKind::kConnect) return protocol_error("connected");
  Actions out;
  if (static_cast<int>(view_.size()) < config_.min_world_size) {
    out.push_back(log_line("view " + std::to_string(view_.epoch) + " has " +
                           std::to_string(view_.size()) + " members, below the quorum of " +
                           std::to_string(config_.min_world_size) + "; waiting"));
    out.push_back(make(ActionKind::kDiscardLink));
    move_.held_seq = 0;
    return wait_view(now, std::move(out));
  }
  out.push_back(make(ActionKind::kInstallLink));
  links_up_ = true;
  return wait(make(ActionKind::kFitLinks), std::move(out));
}

Actions EpochMachine::new_links_failed(const Status& why, const char* during, Actions out) {
  // The new links failed (under the measurement or the repair step, as they would under a
  // collective): drop them, report it unless a newer view overtook them, next view.
  Action drop = make(ActionKind::kDropLink);
  drop.status = why;
  out.push_back(std::move(drop));
  links_up_ = false;
  if (why.code() != StatusCode::kAborted) {
    move_.connect_failure = why;
    out.push_back(log_line("the links of view " + std::to_string(view_.epoch) + " failed " +
                               during + ": " + why.to_string(),
                           Level::kWarning));
    Action report = make(ActionKind::kReportFailure);
    report.epoch = view_.epoch;
    report.text = why.to_string();
    out.push_back(std::move(report));
  }
  return out;
}

Actions EpochMachine::links_fitted(const Status& status, TimePoint now) {
  if (wait_ != ActionKind::kFitLinks) return protocol_error("links_fitted");
  if (!status.is_ok()) {
    return wait_view(now, new_links_failed(status, "while being measured"));
  }
  return start_repair(now, {});
}

// The repair step (docs/fault-tolerance.md, "Small all-reduces: speculative return"): a
// member that returned a small all-reduce without the commit round may leave survivors
// behind that lack its result; the Go then commits it, and before anything else runs in
// the new view, the members that lack it receive a member's private copy, bit for bit.
Actions EpochMachine::start_repair(TimePoint now, Actions out) {
  const std::uint64_t through = commit_through_;
  move_.through = through;
  if (through == 0) return repair_done(through, now, std::move(out));
  move_.hold = copy_.held && copy_.seq == through;
  // Lemma 3: a survivor that lacks a result another survivor returned is inside that very
  // call (it returned every earlier one) and has not finished its data phase.
  move_.lack = call_.active && !call_.held && call_.seq == through;
  if (view_.size() <= 1) {
    // Alone: whoever returned it is gone (the repair of an earlier view died with it).
    if (!move_.lack || move_.hold) return repair_done(through, now, std::move(out));
    Action record = make(ActionKind::kRecordRepair);
    record.text = "re-run";
    out.push_back(std::move(record));
    out.push_back(log_line("view " + std::to_string(view_.epoch) + ": seq " +
                               std::to_string(through) +
                               " was committed, but its only holder is gone; it runs again",
                           Level::kWarning));
    return repair_done(through - 1, now, std::move(out));
  }
  // One tiny all-reduce (min): the lowest rank holding a copy, whether any member lacks
  // it, and the copy's size.
  Action vote = make(ActionKind::kRepairVote);
  if (move_.hold) vote.blob = encode_result_copy(copy_);
  vote.vote = {move_.hold ? rank_ : kNoHolder, move_.lack ? -1 : 0,
               move_.hold ? -static_cast<std::int64_t>(vote.blob.size()) : 0};
  vote.blob.clear();
  return wait(std::move(vote), std::move(out));
}

Actions EpochMachine::repair_voted(const std::array<std::int64_t, 3>& found, TimePoint now) {
  if (wait_ != ActionKind::kRepairVote) return protocol_error("repair_voted");
  const std::uint64_t through = move_.through;
  if (found[1] == 0) return repair_done(through, now);  // nobody lacks it: the common case
  Actions out;
  if (found[0] == kNoHolder) {
    // Lemma 3 of the doc: a member that returned `through` keeps its copy until every
    // member returned it. So no member of this view returned it: its returner died after
    // its Ready (or claimed a seq it never returned). Every member runs it again.
    out.push_back(log_line("view " + std::to_string(view_.epoch) +
                               ": the coordinator committed seq " + std::to_string(through) +
                               ", but no member of the view holds its result; it runs again",
                           Level::kWarning));
    if (move_.lack) {
      Action record = make(ActionKind::kRecordRepair);
      record.text = "re-run";
      out.push_back(std::move(record));
    }
    return repair_done(through - 1, now, std::move(out));
  }
  Action broadcast = make(ActionKind::kRepairBroadcast);
  broadcast.root = static_cast<int>(found[0]);
  broadcast.size = static_cast<std::size_t>(-found[2]);
  if (move_.hold) broadcast.blob = encode_result_copy(copy_);
  return wait(std::move(broadcast), std::move(out));
}

Actions EpochMachine::repair_received(std::span<const std::byte> blob, TimePoint now) {
  if (wait_ != ActionKind::kRepairBroadcast) return protocol_error("repair_received");
  const std::uint64_t through = move_.through;
  if (move_.hold) return repair_done(through, now);
  ResultCopy received;
  if (Status s = decode_result_copy(blob, through, received); !s.is_ok()) {
    return repair_failed(s, now);
  }
  Actions out;
  if (move_.lack) {
    if (received.bytes.size() != call_.spec.result_bytes) {
      return repair_failed(
          error(StatusCode::kMismatch,
                "seq " + std::to_string(through) + ": the copy's result has " +
                    std::to_string(received.bytes.size()) + " bytes, this member's call " +
                    std::to_string(call_.spec.result_bytes) +
                    " (not the same all-reduce on every member)"),
          now);
    }
    Action write = make(ActionKind::kWriteResult);
    write.seq = through;
    write.blob = received.bytes;
    out.push_back(std::move(write));
    call_.repaired = true;
    call_.repaired_epoch = received.epoch;
    call_.repaired_ids = received.contributors;
    Action record = make(ActionKind::kRecordRepair);
    record.text = "received";
    out.push_back(std::move(record));
    out.push_back(log_line("seq " + std::to_string(through) +
                           ": another member returned it before the failure; received its "
                           "result (" +
                           std::to_string(received.bytes.size()) + " bytes, view " +
                           std::to_string(received.epoch) + ")"));
  }
  // Now this member holds it too: a later failure may need this copy to repair another.
  copy_ = std::move(received);
  return repair_done(through, now, std::move(out));
}

Actions EpochMachine::repair_failed(const Status& status, TimePoint now) {
  if (wait_ != ActionKind::kRepairVote && wait_ != ActionKind::kRepairBroadcast) {
    return protocol_error("repair_failed");
  }
  if (!retryable(status)) {  // mismatched calls: no view mends them
    Action drop = make(ActionKind::kDropLink);
    drop.status = status;
    links_up_ = false;
    return move_failed(status, now, {std::move(drop)});
  }
  return wait_view(now, new_links_failed(status, "in the repair step"));
}

Actions EpochMachine::repair_done(std::uint64_t through, TimePoint now, Actions out) {
  commit_through_ = through;
  next_seq_ = through + 1;
  Action started = make(ActionKind::kViewStarted);
  started.epoch = view_.epoch;
  out.push_back(std::move(started));
  switch (move_.then) {
    case AfterMove::kReturnMoved: {
      Action moved = make(ActionKind::kMoved);
      moved.epoch = view_.epoch;
      moved.seq = next_seq_;
      return end(std::move(moved), std::move(out));
    }
    case AfterMove::kJudge: return judge(Status::ok(), now, std::move(out));
    case AfterMove::kAttempt:
      if (call_.repaired) {
        // Lemma 3 says a member outside its data phase never lacks a result, so the move
        // before an attempt cannot repair one; if it did, the call has its result.
        Action r = make(ActionKind::kReturn);
        r.outcome = repaired_outcome();
        return end(std::move(r), std::move(out));
      }
      return run_attempt(std::move(out));
  }
  return out;
}

// The call's outcome when the repair step gave it another member's copy: that copy's epoch
// and contributors.
CallOutcome EpochMachine::repaired_outcome() const {
  return {call_.seq, call_.repaired_epoch, call_.repaired_ids, call_.attempt, true, false};
}

Actions EpochMachine::move_failed(const Status& status, TimePoint now, Actions out) {
  if (move_.then == AfterMove::kJudge) return judge(status, now, std::move(out));
  Action f = make(ActionKind::kFail);
  f.status = status;
  return end(std::move(f), std::move(out));
}

Actions EpochMachine::judge(const Status& moved, TimePoint now, Actions out) {
  // The repair step of the move may have given this member the result it lacked.
  const AttemptFailure judged{call_.seq, call_.held || call_.repaired, call_.failure,
                              call_.spec.retry};
  const RecoveryDecision decision =
      decide_recovery(judged, moved.is_ok() ? Result<std::uint64_t>(commit_through_) : moved);
  switch (decision.verdict) {
    case Verdict::kCommit: {
      Action r = make(ActionKind::kReturn);
      if (call_.repaired) {
        r.outcome = repaired_outcome();
      } else {
        r.outcome = {call_.seq, call_.failed_epoch, call_.failed_ids, call_.attempt, false, false};
      }
      return end(std::move(r), std::move(out));
    }
    case Verdict::kFail: {
      Action f = make(ActionKind::kFail);
      f.status = decision.status;
      return end(std::move(f), std::move(out));
    }
    case Verdict::kReRun: break;
  }
  out.push_back(make(ActionKind::kRestoreInput));
  wait_ = ActionKind::kFail;
  Actions next = begin_attempt(now);
  out.insert(out.end(), std::make_move_iterator(next.begin()), std::make_move_iterator(next.end()));
  return out;
}

}  // namespace tributary::agent::runtime
