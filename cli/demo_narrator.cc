#include "cli/demo_narrator.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace tributary::cli {
namespace {

constexpr const char* kFaultMark = ">> ";   // a fault, as it happens
constexpr const char* kAnswerMark = "   .. ";  // what the cluster did about it

std::string printf_string(const char* format, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof(buf), format, args...);
  return buf;
}

std::string kib(std::uint64_t bytes) {
  return printf_string("%.1f KiB", static_cast<double>(bytes) / 1024.0);
}

bool is_removal(FaultKind kind) { return kind != FaultKind::kJoin; }

std::string workers(std::uint64_t n) {
  return std::to_string(n) + (n == 1 ? " worker" : " workers");
}

}  // namespace

std::string to_string(FaultKind kind) {
  switch (kind) {
    case FaultKind::kKill: return "kill -9";
    case FaultKind::kStop: return "SIGSTOP";
    case FaultKind::kJoin: return "join";
    case FaultKind::kDrain: return "drain";
  }
  return "?";
}

std::string format_duration_us(std::int64_t us) {
  if (us >= 1'000'000) return printf_string("%.2f s", static_cast<double>(us) / 1e6);
  return printf_string("%lld ms", static_cast<long long>((us + 500) / 1000));
}

int pid_of_member_name(const std::string& name) {
  const auto colon = name.rfind(':');
  if (colon == std::string::npos || colon + 1 >= name.size()) return 0;
  const std::string digits = name.substr(colon + 1);
  if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 9) return 0;
  return std::atoi(digits.c_str());
}

bool FaultRecord::handled() const {
  switch (kind) {
    case FaultKind::kKill: return view && pause_us;
    case FaultKind::kStop:
      // Removed, the rest went on, and it came back with verified state; or continued
      // before any deadline ran out, and nobody had to remove it.
      if (!view) return continued_mono_us.has_value() && resumed_step > 0;
      return pause_us && rejoin_view && state;
    case FaultKind::kJoin: return view && state;
    case FaultKind::kDrain: return view && reason == "left" && exited_cleanly;
  }
  return false;
}

DemoNarrator::DemoNarrator(int print_every, std::int64_t start_mono_us)
    : print_every_(std::max(1, print_every)), start_mono_us_(start_mono_us) {}

std::string DemoNarrator::worker_name(int pid) const {
  auto it = worker_of_pid_.find(pid);
  if (it == worker_of_pid_.end()) return "pid " + std::to_string(pid);
  return "worker " + std::to_string(it->second);
}

std::string DemoNarrator::table_header() {
  return printf_string("%6s %5s %9s %9s %6s %5s %8s", "step", "epoch", "loss", "test_acc",
                       "world", "view", "ms/step");
}

FaultRecord& DemoNarrator::record(FaultKind kind, int worker, int pid, long step,
                                  std::int64_t mono_us, std::int64_t unix_ms) {
  FaultRecord& f = faults_.emplace_back();
  f.kind = kind;
  f.worker = worker;
  f.pid = pid;
  f.step = step;
  f.mono_us = mono_us;
  f.unix_ms = unix_ms;
  return f;
}

std::vector<std::string> DemoNarrator::worker_started(int worker, int pid, bool joiner, long step,
                                                      std::int64_t mono_us, std::int64_t unix_ms) {
  worker_of_pid_[pid] = worker;
  if (!joiner) return {};
  record(FaultKind::kJoin, worker, pid, step, mono_us, unix_ms);
  return {printf_string("%sstep %ld  worker %d starts (pid %d): it asks to join, and is "
                        "admitted at the next step boundary",
                        kFaultMark, step, worker, pid)};
}

std::vector<std::string> DemoNarrator::fault(FaultKind kind, int worker, int pid,
                                             std::int64_t mono_us, std::int64_t unix_ms) {
  const FaultRecord& f = record(kind, worker, pid, latest_step_, mono_us, unix_ms);
  switch (kind) {
    case FaultKind::kKill:
      return {printf_string("%sstep %ld  kill -9 worker %d (pid %d): it dies without a word",
                            kFaultMark, f.step, worker, pid)};
    case FaultKind::kStop:
      return {printf_string("%sstep %ld  SIGSTOP worker %d (pid %d): frozen, like a hung VM",
                            kFaultMark, f.step, worker, pid)};
    case FaultKind::kDrain:
      return {printf_string("%sstep %ld  SIGTERM worker %d (pid %d): a preemption notice; it "
                            "finishes its step and leaves",
                            kFaultMark, f.step, worker, pid)};
    case FaultKind::kJoin: break;
  }
  return {};
}

std::vector<std::string> DemoNarrator::continued(int worker, std::int64_t mono_us) {
  for (auto& f : faults_) {
    if (f.kind != FaultKind::kStop || f.worker != worker || f.continued_mono_us) continue;
    f.continued_mono_us = mono_us;
    const std::string frozen = format_duration_us(mono_us - f.mono_us);
    if (f.view) {
      return {printf_string("%sSIGCONT worker %d after %s frozen: it learns it was removed "
                            "and joins again",
                            kAnswerMark, worker, frozen.c_str())};
    }
    return {printf_string("%sSIGCONT worker %d after %s frozen", kAnswerMark, worker,
                          frozen.c_str())};
  }
  return {};
}

std::vector<std::string> DemoNarrator::exited(int worker, int status) {
  for (auto& f : faults_) {
    if (f.worker != worker) continue;
    if (f.kind == FaultKind::kKill) return {};
    if (f.kind == FaultKind::kDrain) {
      f.exited_cleanly = status == 0;
      if (status == 0) {
        return {printf_string("%sworker %d left the cluster and exited cleanly (status 0)",
                              kAnswerMark, worker)};
      }
      return {printf_string("%sworker %d was draining but exited with status %d", kAnswerMark,
                            worker, status)};
    }
  }
  if (status == 0) return {};
  return {printf_string("!! worker %d exited with status %d", worker, status)};
}

std::vector<std::string> DemoNarrator::event(int worker, const DemoEvent& event) {
  std::vector<std::string> lines;
  if (const auto* s = std::get_if<StepEvent>(&event)) {
    latest_step_ = std::max(latest_step_, s->step);
    steps_.try_emplace(s->step, StepRecord{s->step, s->data_epoch, s->view, s->world, s->loss,
                                           s->mono_us, std::nullopt});
    return resolve_pauses();
  }
  if (const auto* e = std::get_if<EvalEvent>(&event)) {
    auto it = steps_.find(e->step);
    if (it == steps_.end()) return {};
    StepRecord& r = it->second;
    r.accuracy = e->accuracy;
    auto before = steps_.find(e->step - print_every_);
    const std::string ms_per_step =
        before == steps_.end()
            ? "-"
            : printf_string("%.1f", static_cast<double>(r.mono_us - before->second.mono_us) /
                                        1000.0 / print_every_);
    lines.push_back(printf_string("%6ld %5ld %9.4f %8.2f%% %6d %5llu %8s", r.step, r.data_epoch,
                                  r.loss, 100.0 * e->accuracy, r.world,
                                  static_cast<unsigned long long>(r.view), ms_per_step.c_str()));
    return lines;
  }
  // A worker's own fault time: the controller passes it to fault() (demo.cc).
  if (std::holds_alternative<FaultEvent>(event)) return lines;
  const auto& st = std::get<StateEvent>(event);
  for (auto& f : faults_) {
    if (f.worker != worker || f.state) continue;
    if (f.kind != FaultKind::kJoin && f.kind != FaultKind::kStop) continue;
    f.state = st;
    lines.push_back(printf_string(
        "%sworker %d received %s of training state (parameters, momentum, progress) from "
        "rank %d at step %ld, SHA-256 verified (%.12s...)",
        kAnswerMark, worker, kib(st.bytes).c_str(), st.source_rank, st.step,
        st.sha256.c_str()));
    break;
  }
  return lines;
}

FaultRecord* DemoNarrator::open_fault(int worker, bool removal) {
  for (auto& f : faults_) {
    if (f.worker != worker) continue;
    if (removal && is_removal(f.kind) && !f.view) return &f;
    if (!removal && f.kind == FaultKind::kJoin && !f.view) return &f;
    if (!removal && f.kind == FaultKind::kStop && f.view && !f.rejoin_view) return &f;
  }
  return nullptr;
}

std::vector<std::string> DemoNarrator::view_change(const membership::ViewChange& change) {
  if (change.epoch <= last_view_) return {};
  last_view_ = change.epoch;
  std::vector<std::string> lines;
  const auto head = printf_string("%sview %llu (%s): ", kAnswerMark,
                                  static_cast<unsigned long long>(change.epoch),
                                  change.cause.c_str());
  if (change.cause == "initial") {
    lines.push_back(head + workers(change.size) + " in the first view");
    return lines;
  }
  int ended = 0;  // workers that left because training is over: not news
  for (const auto& ref : change.removed) {
    const int pid = pid_of_member_name(ref.name);
    const auto who = worker_of_pid_.find(pid);
    FaultRecord* f = who == worker_of_pid_.end() ? nullptr : open_fault(who->second, true);
    if (!f && finished_ && ref.reason == "left") {
      ++ended;
      continue;
    }
    std::string noticed;
    if (!ref.noticed_by.empty()) {
      noticed = worker_name(pid_of_member_name(ref.noticed_by));
      if (noticed.rfind("pid ", 0) == 0) noticed = ref.noticed_by;
    } else if (ref.reason == "heartbeat_timeout") {
      noticed = "the coordinator (heartbeats stopped)";
    } else if (ref.reason != "left") {
      noticed = "the coordinator (" + ref.reason + ")";
    }
    std::string line = head + worker_name(pid) + " removed (" + ref.reason + ")";
    if (!noticed.empty()) line += ", noticed by " + noticed;
    if (f) {
      f->view = change.epoch;
      f->view_unix_ms = change.unix_ms;
      f->reason = ref.reason;
      f->noticed_by = noticed;
      if (f->kind != FaultKind::kDrain) {
        line += printf_string(", %s after the %s",
                              format_duration_us((change.unix_ms - f->unix_ms) * 1000).c_str(),
                              to_string(f->kind).c_str());
      } else if (ref.reason == "left") {
        line += " at a step boundary: nobody saw a failure";
      }
    }
    lines.push_back(line + "; " + workers(change.size));
  }
  for (const auto& ref : change.joined) {
    const int pid = pid_of_member_name(ref.name);
    const auto who = worker_of_pid_.find(pid);
    FaultRecord* f = who == worker_of_pid_.end() ? nullptr : open_fault(who->second, false);
    std::string what = " admitted";
    if (f && f->kind == FaultKind::kStop) {
      f->rejoin_view = change.epoch;
      what = " back as a new member";
    } else if (f) {
      f->view = change.epoch;
      f->view_unix_ms = change.unix_ms;
    }
    lines.push_back(head + worker_name(pid) + what +
                    (change.cause == "boundary" ? " at a step boundary" : "") + "; " +
                    workers(change.size));
  }
  if (ended > 0 && lines.empty()) return {};
  if (change.removed.empty() && change.joined.empty()) {
    lines.push_back(head + "the same " + workers(change.size) + ", links rebuilt");
  }
  auto more = resolve_pauses();
  lines.insert(lines.end(), more.begin(), more.end());
  return lines;
}

std::int64_t DemoNarrator::typical_step_us(long before_step) const {
  std::vector<std::int64_t> gaps;
  for (long s = before_step; s > before_step - 20 && s > 1; --s) {
    auto a = steps_.find(s);
    auto b = steps_.find(s - 1);
    if (a != steps_.end() && b != steps_.end()) gaps.push_back(a->second.mono_us - b->second.mono_us);
  }
  if (gaps.empty()) return 0;
  std::nth_element(gaps.begin(), gaps.begin() + gaps.size() / 2, gaps.end());
  return gaps[gaps.size() / 2];
}

// The first step committed in `view` or later, once the step before it is known too:
// the largest gap between consecutive steps from the fault's step to it is the pause.
std::vector<std::string> DemoNarrator::resolve_pauses() {
  std::vector<std::string> lines;
  auto gap_until = [&](long from, std::uint64_t view, long* resumed,
                       int* world) -> std::optional<std::int64_t> {
    auto first = std::find_if(steps_.lower_bound(from + 1), steps_.end(),
                              [&](const auto& e) { return e.second.view >= view; });
    if (first == steps_.end()) return std::nullopt;
    std::int64_t widest = 0;
    for (long s = std::max(from, 1L); s < first->first; ++s) {
      auto a = steps_.find(s);
      auto b = steps_.find(s + 1);
      if (a == steps_.end() || b == steps_.end()) return std::nullopt;
      widest = std::max(widest, b->second.mono_us - a->second.mono_us);
    }
    *resumed = first->first;
    *world = first->second.world;
    return widest;
  };
  for (auto& f : faults_) {
    if (f.view && !f.pause_us) {
      long resumed = 0;
      int world = 0;
      if (auto gap = gap_until(f.step, *f.view, &resumed, &world)) {
        f.pause_us = *gap;
        f.resumed_step = resumed;
        f.world_after = world;
        f.typical_step_us = typical_step_us(f.step);
        const char* who = f.kind == FaultKind::kJoin ? "the cluster" : "the survivors";
        lines.push_back(printf_string(
            "%s%s paused %s (a step takes %s); training goes on at step %ld with %s",
            kAnswerMark, who, format_duration_us(f.pause_us.value()).c_str(),
            format_duration_us(f.typical_step_us).c_str(), resumed, workers(world).c_str()));
      }
    }
    if (f.rejoin_view && !f.rejoin_pause_us) {
      long resumed = 0;
      int world = 0;
      const long from = f.resumed_step > 0 ? f.resumed_step : f.step;
      if (auto gap = gap_until(from, *f.rejoin_view, &resumed, &world)) {
        f.rejoin_pause_us = *gap;
        lines.push_back(printf_string("%sworker %d contributes again from step %ld; %s",
                                      kAnswerMark, f.worker, resumed, workers(world).c_str()));
      }
    }
    if (f.kind == FaultKind::kStop && !f.view && f.continued_mono_us && f.resumed_step == 0) {
      // Continued before anybody removed it: training went on in the same view.
      auto after = std::find_if(steps_.begin(), steps_.end(), [&](const auto& e) {
        return e.second.mono_us > *f.continued_mono_us;
      });
      if (after != steps_.end()) {
        f.resumed_step = after->first;
        f.world_after = after->second.world;
        lines.push_back(printf_string(
            "%sworker %d resumed before any deadline ran out: nobody was removed, training "
            "goes on at step %ld",
            kAnswerMark, f.worker, after->first));
      }
    }
  }
  return lines;
}

bool DemoNarrator::all_handled() const {
  return std::all_of(faults_.begin(), faults_.end(), [](const auto& f) { return f.handled(); });
}

std::vector<std::string> DemoNarrator::summary() const {
  std::vector<std::string> lines;
  if (faults_.empty()) return lines;
  lines.push_back("recovery summary:");
  lines.push_back(printf_string("  %-18s %5s %5s  %-38s %9s %9s  %s", "FAULT", "STEP", "VIEW",
                                "NOTICED BY", "DETECTED", "PAUSED", "OUTCOME"));
  int handled = 0;
  for (const auto& f : faults_) {
    handled += f.handled();
    const std::string what = to_string(f.kind) + " worker " + std::to_string(f.worker);
    const std::string view = f.view ? std::to_string(*f.view) : "-";
    const std::string detected = f.view && f.kind != FaultKind::kJoin && f.kind != FaultKind::kDrain
                                     ? format_duration_us((f.view_unix_ms - f.unix_ms) * 1000)
                                     : "-";
    const std::string paused = f.pause_us ? format_duration_us(*f.pause_us) : "-";
    std::string outcome;
    switch (f.kind) {
      case FaultKind::kKill:
        outcome = f.handled() ? "removed; " + workers(f.world_after) + " went on"
                              : "NOT HANDLED: " + std::string(f.view ? "training did not go on"
                                                                     : "never removed");
        break;
      case FaultKind::kStop:
        if (!f.view && f.handled()) {
          outcome = "resumed in time; nobody removed";
        } else if (f.handled()) {
          outcome = "removed; back in view " + std::to_string(*f.rejoin_view) + " with " +
                    kib(f.state->bytes) + " of state, verified";
        } else {
          outcome = "NOT HANDLED: " + std::string(!f.view           ? "never removed"
                                                  : !f.rejoin_view ? "never came back"
                                                  : !f.state       ? "no state received"
                                                                   : "training did not go on");
        }
        break;
      case FaultKind::kJoin:
        outcome = f.handled() ? "admitted; " + kib(f.state->bytes) + " of state from rank " +
                                    std::to_string(f.state->source_rank) + ", verified"
                              : "NOT HANDLED: " + std::string(f.view ? "no state received"
                                                                     : "never admitted");
        break;
      case FaultKind::kDrain:
        outcome = f.handled() ? "left at a boundary; no failure seen"
                              : "NOT HANDLED: " + std::string(!f.view ? "never left"
                                                              : f.reason != "left"
                                                                  ? "removed as " + f.reason
                                                                  : "did not exit cleanly");
        break;
    }
    lines.push_back(printf_string("  %-18s %5ld %5s  %-38s %9s %9s  %s", what.c_str(), f.step,
                                  view.c_str(), f.noticed_by.empty() ? "-" : f.noticed_by.c_str(),
                                  detected.c_str(), paused.c_str(), outcome.c_str()));
  }
  lines.push_back(printf_string("  %d of %zu faults handled", handled, faults_.size()));
  return lines;
}

}  // namespace tributary::cli
