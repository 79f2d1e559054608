#include "tests/agent/runtime/schedule_explorer.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <random>
#include <set>

#include "agent/runtime/epoch_machine.h"
#include "membership/membership.h"

namespace tributary::agent::runtime {
namespace {

using membership::View;
using std::chrono::milliseconds;

constexpr std::size_t kResultBytes = 8;
constexpr std::size_t kSmall = 64;    // a small all-reduce: returns without the commit round
constexpr std::size_t kLarge = 4096;  // a large one: always the round
constexpr Duration kCollectiveDeadline = milliseconds(3000);
constexpr Duration kHeartbeatEvery = milliseconds(100);
constexpr Duration kTickEvery = milliseconds(50);
constexpr Duration kGiveUp = std::chrono::seconds(600);  // simulated: a survivor not done is hung

std::uint64_t mix(std::uint64_t x) {  // splitmix64
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// A member's input to collective `seq`: the same on every attempt (restore_input).
std::uint64_t input_of(MemberId id, std::uint64_t seq) { return mix(id * 1000003ULL + seq); }

std::vector<std::byte> bytes_of(std::uint64_t v) {
  std::vector<std::byte> b(kResultBytes);
  std::memcpy(b.data(), &v, kResultBytes);
  return b;
}
// Every third seq is a step boundary: a small all-reduce of the members' votes (bit 0: the
// coordinator has joiners waiting, bit 1: this member drains), the max the members agree on
// carried in the result's low bits (agent/boundary_vote.h).
bool is_boundary(std::uint64_t seq) { return seq % 3 == 0; }
constexpr std::uint64_t kVoteJoiners = 1, kVoteLeave = 2;

std::uint64_t value_of(std::span<const std::byte> b) {
  std::uint64_t v = 0;
  if (b.size() == kResultBytes) std::memcpy(&v, b.data(), kResultBytes);
  return v;
}

enum class Phase : std::uint8_t { kConnect, kFit, kVote, kBroadcast, kData, kAgree };

struct Key {
  Epoch epoch = 0;
  Phase phase = Phase::kConnect;
  std::uint64_t seq = 0;
  auto operator<=>(const Key&) const = default;
};

// One collective of one epoch's links: every member of the epoch must join it.
struct Collective {
  std::map<MemberId, std::uint64_t> tokens;  // who joined, with its wait's token
  std::map<MemberId, std::array<std::int64_t, 3>> votes;
  std::vector<std::byte> blob;  // the broadcast root's
  int root = -1;
  bool complete = false;
  std::set<MemberId> delivered;
};

struct Returned {
  std::uint64_t value = 0;
  bool speculative = false;
  bool repaired = false;
  Epoch epoch = 0;
  std::vector<MemberId> contributors;
  int job = 0;
};

struct Agent {
  MemberId id = 0;
  EpochMachine machine{MachineConfig{}};
  bool alive = true;
  bool removed = false;
  bool left = false;      // drained: left at a step boundary
  bool drain = false;     // asked to drain: votes to leave at the next boundary
  bool admitted = false;  // adopted a view it is a member of
  int job = -1;           // the job it runs (a new one when no member with its state is left)
  // Holds the training state: a member of the first view, or a joiner once it ran a
  // collective with a holder (the state sync of its first boundary).
  bool has_state = false;
  TimePoint frozen_until = TimePoint::min();
  std::vector<std::function<void()>> deferred;  // what arrived while frozen
  // What the agent's watcher learned (synced into the machine before it decides).
  Epoch newest = 0;
  bool knows_evicted = false;
  // The outstanding wait and its token (a resolution carries the token it was posted for).
  Action wait;
  bool waiting = false;
  std::uint64_t token = 0;
  Epoch link_epoch = 0;
  // The program.
  int calls_done = 0;
  bool in_call = false;
  bool moving = false;  // an idle move (between calls)
  bool started = false;
  bool failed = false;
  std::vector<std::byte> result = std::vector<std::byte>(kResultBytes);
  TimePoint last_ack{};
  std::uint64_t restarts_seen = 0;            // the coordinator generation it resumed into
  std::map<std::uint64_t, Returned> returns;  // seq -> what it returned
  std::uint64_t last_returned = 0;
};

class World {
 public:
  World(std::uint64_t seed, const ExplorerOptions& options) : rng_(seed), options_(options) {
    result_.seed = seed;
  }

  ScheduleResult run();

 private:
  // --- the event queue
  struct Event {
    TimePoint at;
    std::uint64_t order;
    std::function<void()> fn;
    bool operator>(const Event& o) const { return at != o.at ? at > o.at : order > o.order; }
  };
  void at(TimePoint t, std::function<void()> fn) { queue_.push({t, order_++, std::move(fn)}); }
  void after(Duration d, std::function<void()> fn) { at(now_ + d, std::move(fn)); }
  Duration jitter(int max_ms) {
    return std::chrono::microseconds(std::uniform_int_distribution<int>(0, max_ms * 1000)(rng_));
  }
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }

  void note(const std::string& line) {
    if (!options_.trace) return;
    const auto ms = std::chrono::duration_cast<milliseconds>(now_ - origin_).count();
    result_.trace.push_back("+" + std::to_string(ms) + "ms " + line);
  }
  void violation(const std::string& what) {
    result_.ok = false;
    result_.violations.push_back(what);
    note("VIOLATION " + what);
  }

  Agent& agent(MemberId id) { return agents_.at(id - 1); }
  bool frozen(const Agent& a) const { return now_ < a.frozen_until; }

  // --- agents
  void start_agent(Agent& a);
  void sync(Agent& a);
  // Posts an answer to agent `id`'s wait `token`, `delay` from now.
  void post(MemberId id, std::uint64_t token, Duration delay,
            std::function<Actions(Agent&)> answer);
  void deliver(MemberId id, std::uint64_t token, const std::function<Actions(Agent&)>& answer);
  void handle(Agent& a, Actions actions);
  void apply(Agent& a, const Action& effect);
  void begin_wait(Agent& a, const Action& w);
  void ended(Agent& a, const Action& end);
  void next_call(Agent& a);
  void idle_check(Agent& a);
  void heartbeat(Agent& a);

  // --- the data plane
  void join(Agent& a, const Key& key, std::uint64_t token);
  void complete(const Key& key, Collective& c);
  void break_epoch(Epoch epoch, StatusCode code);
  Actions answer_collective(Agent& a, const Key& key, const Collective& c);
  std::uint64_t data_result(const Key& key, const Collective& c) const;
  bool done(const Agent& a) const {
    return a.admitted && a.machine.next_seq() > static_cast<std::uint64_t>(options_.calls);
  }
  void boundary(Agent& a, std::uint64_t agreed);
  Actions fail_collective(Agent& a, Phase phase, const Status& s);

  // --- the coordinator
  void decided(const membership::Decisions& d);
  void issue(const View& v);
  void restart_coordinator();
  void resume(Agent& a, std::uint64_t generation);

  // --- faults and checks
  void schedule_faults();
  void check();

  std::mt19937_64 rng_;
  ExplorerOptions options_;
  ScheduleResult result_;
  TimePoint origin_{std::chrono::hours(1)};
  TimePoint now_ = origin_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> queue_;
  std::uint64_t order_ = 0;

  membership::MembershipConfig coord_config_;
  std::unique_ptr<membership::Membership> coord_;
  std::uint64_t generation_ = 0;  // coordinator restarts so far
  std::map<Epoch, View> views_;
  Epoch latest_ = 0;
  int job_ = 0;
  std::vector<std::pair<MemberId, membership::MemberLabels>> journal_members_;
  std::vector<MemberId> journal_with_state_;
  Epoch journal_last_epoch_ = 0;

  std::vector<Agent> agents_;
  std::map<Key, Collective> collectives_;
  std::map<Epoch, StatusCode> broken_;
  // Every real data phase: its result bits -> (seq, epoch, contributors).
  struct Real {
    std::uint64_t seq;
    Epoch epoch;
    std::vector<MemberId> contributors;
  };
  std::map<std::uint64_t, Real> real_;
};

// ---------------------------------------------------------------- agents

void World::sync(Agent& a) {
  a.machine.saw_epoch(a.newest);
  if (a.knows_evicted) {
    a.machine.evicted(error(StatusCode::kEvicted, "the coordinator removed this member"));
  }
}

void World::start_agent(Agent& a) {
  membership::MemberLabels labels{"agent" + std::to_string(a.id), "host", "", "addr", {}};
  auto joined = coord_->join(labels, now_);
  if (!joined || joined->id != a.id) {
    violation("join of agent " + std::to_string(a.id) + " refused or renumbered");
    return;
  }
  a.started = true;
  a.last_ack = now_;
  decided(joined->decisions);
  MachineConfig mc;
  mc.self = a.id;
  mc.recovery_timeout = std::chrono::seconds(60);
  mc.connect_timeout = std::chrono::seconds(5);
  mc.view_nudge = std::chrono::seconds(1);
  mc.agreement = true;
  mc.speculative_max_bytes = 1024;
  a.machine = EpochMachine(mc);
  a.moving = true;
  sync(a);
  handle(a, a.machine.move(now_, now_ + std::chrono::seconds(60)));
  after(kHeartbeatEvery, [this, id = a.id] { heartbeat(agent(id)); });
}

void World::post(MemberId id, std::uint64_t token, Duration delay,
                 std::function<Actions(Agent&)> answer) {
  after(delay, [this, id, token, answer = std::move(answer)] { deliver(id, token, answer); });
}

void World::deliver(MemberId id, std::uint64_t token,
                    const std::function<Actions(Agent&)>& answer) {
  Agent& a = agent(id);
  if (!a.alive) return;
  if (frozen(a)) {
    a.deferred.push_back([this, id, token, answer] { deliver(id, token, answer); });
    return;
  }
  if (!a.waiting || token != a.token) return;  // stale: that wait was answered already
  a.waiting = false;
  ++a.token;
  sync(a);
  handle(a, answer(a));
}

void World::handle(Agent& a, Actions actions) {
  for (const Action& x : actions) {
    note("agent " + std::to_string(a.id) + ": " + describe(x, origin_));
    if (x.is_end()) return ended(a, x);
    if (x.is_wait()) return begin_wait(a, x);
    apply(a, x);
  }
  violation("agent " + std::to_string(a.id) + ": actions without a wait or an end");
}

void World::apply(Agent& a, const Action& x) {
  switch (x.kind) {
    case ActionKind::kDropLink:
      if (a.link_epoch != 0) break_epoch(a.link_epoch, StatusCode::kPeerLost);
      a.link_epoch = 0;
      break;
    case ActionKind::kReportFailure: decided(coord_->failure_report(a.id, x.epoch, 0, now_)); break;
    case ActionKind::kAdoptView:
      if (a.machine.rank() >= 0 && !a.admitted) {
        a.admitted = true;
        a.job = job_;
        a.has_state = !a.machine.needs_state();
      }
      break;
    case ActionKind::kInstallLink: a.link_epoch = a.machine.view().epoch; break;
    case ActionKind::kDiscardLink:
      break_epoch(a.machine.view().epoch, StatusCode::kPeerLost);
      break;
    case ActionKind::kWriteResult: a.result = x.blob; break;
    case ActionKind::kRecordRepair:
      if (x.text == "received") ++result_.repaired;
      break;
    default: break;
  }
}

void World::begin_wait(Agent& a, const Action& w) {
  a.wait = w;
  a.waiting = true;
  const std::uint64_t token = a.token;
  const MemberId id = a.id;
  switch (w.kind) {
    case ActionKind::kWaitView: {
      if (a.knows_evicted) {
        post(id, token, jitter(2), [this](Agent& g) {
          return g.machine.view_wait_failed(error(StatusCode::kEvicted, "removed"), now_);
        });
        break;
      }
      if (latest_ >= w.epoch && views_.at(latest_).contains(id)) {
        post(id, token, jitter(3),
             [this, e = latest_](Agent& g) { return g.machine.view_arrived(views_.at(e), now_); });
      }
      at(w.until, [this, id, token] {
        deliver(id, token, [this](Agent& g) {
          return g.machine.view_wait_failed(error(StatusCode::kTimedOut, "no view"), now_);
        });
      });
      break;
    }
    case ActionKind::kSendReady: {
      if (w.ready.epoch < latest_) {
        post(id, token, jitter(2), [this](Agent& g) {
          return g.machine.go_failed(error(StatusCode::kAborted, "superseded"), now_);
        });
        break;
      }
      at(w.until, [this, id, token] {
        deliver(id, token, [this](Agent& g) {
          return g.machine.go_failed(error(StatusCode::kTimedOut, "no Go"), now_);
        });
      });
      // A member that has not resumed into a restarted coordinator yet reaches nobody: its
      // Ready waits, and the restarted coordinator's first view supersedes it.
      if (generation_ == a.restarts_seen) decided(coord_->ready(id, w.ready, now_));
      break;
    }
    case ActionKind::kConnect:
      join(a, {w.epoch, Phase::kConnect, 0}, token);
      at(w.until, [this, id, token] {
        deliver(id, token, [this](Agent& g) {
          return g.machine.connect_failed(error(StatusCode::kTimedOut, "connect"), now_);
        });
      });
      break;
    case ActionKind::kFitLinks: join(a, {a.machine.view().epoch, Phase::kFit, 0}, token); break;
    case ActionKind::kRepairVote: {
      const Key key{a.machine.view().epoch, Phase::kVote, 0};
      collectives_[key].votes[id] = w.vote;
      join(a, key, token);
      break;
    }
    case ActionKind::kRepairBroadcast: {
      const Key key{a.machine.view().epoch, Phase::kBroadcast, 0};
      Collective& c = collectives_[key];
      if (w.root == a.machine.rank()) {
        c.blob = w.blob;
        c.root = w.root;
      }
      join(a, key, token);
      break;
    }
    case ActionKind::kRunAttempt: {
      // One epoch, one seq at a time: another seq's data phase that not every member has
      // joined yet, on links that still work, means the members disagree on the seq.
      if (!broken_.count(w.epoch)) {
        for (const auto& [k, c] : collectives_) {
          if (k.epoch == w.epoch && k.phase == Phase::kData && k.seq != w.seq && !c.complete) {
            violation("agent " + std::to_string(id) + " runs seq " + std::to_string(w.seq) +
                      " in epoch " + std::to_string(w.epoch) + " while seq " +
                      std::to_string(k.seq) + " waits for members there");
          }
        }
      }
      if (is_boundary(w.seq)) {
        // The vote: what this member's client knows of the coordinator, and its drain.
        const std::int64_t vote =
            (coord_->joiners_pending() && a.restarts_seen == generation_ ? kVoteJoiners : 0) |
            (a.drain ? kVoteLeave : 0);
        collectives_[{w.epoch, Phase::kData, w.seq}].votes[id] = {vote, 0, 0};
      }
      join(a, {w.epoch, Phase::kData, w.seq}, token);
      break;
    }
    case ActionKind::kRunAgreement:
      join(a, {a.machine.view().epoch, Phase::kAgree, w.seq}, token);
      break;
    default: violation("unknown wait " + std::string(to_string(w.kind)));
  }
}

void World::ended(Agent& a, const Action& end) {
  a.waiting = false;
  if (end.kind == ActionKind::kMoved) {
    a.moving = false;
    if (!a.in_call) after(jitter(20), [this, id = a.id] { next_call(agent(id)); });
    return;
  }
  if (end.kind == ActionKind::kFail) {
    a.moving = false;
    a.in_call = false;
    a.failed = true;
    note("agent " + std::to_string(a.id) + " gives up: " + end.status.to_string());
    return;
  }
  // kReturn
  a.in_call = false;
  const CallOutcome& o = end.outcome;
  ++result_.returns;
  if (o.speculative) ++result_.speculative;
  if (o.attempts > 1) ++result_.reruns;
  if (o.seq != a.last_returned + 1 && a.last_returned != 0) {
    violation("agent " + std::to_string(a.id) + " returned seq " + std::to_string(o.seq) +
              " after seq " + std::to_string(a.last_returned));
  }
  if (a.returns.count(o.seq)) {
    violation("agent " + std::to_string(a.id) + " returned seq " + std::to_string(o.seq) +
              " twice");
  }
  a.last_returned = o.seq;
  const std::uint64_t v = value_of(a.result);
  a.returns[o.seq] = {v, o.speculative, o.repaired, o.epoch, o.contributors, a.job};
  for (MemberId c : o.contributors) {
    if (c != a.id && agent(c).has_state) a.has_state = true;
  }
  auto real = real_.find(v);
  if (real == real_.end() || real->second.seq != o.seq) {
    violation("agent " + std::to_string(a.id) + " returned seq " + std::to_string(o.seq) +
              " with bits no data phase produced");
  } else if (real->second.contributors != o.contributors || real->second.epoch != o.epoch) {
    violation("agent " + std::to_string(a.id) + " returned seq " + std::to_string(o.seq) +
              " naming epoch " + std::to_string(o.epoch) + " but its bits are epoch " +
              std::to_string(real->second.epoch) + "'s");
  }
  ++a.calls_done;
  if (is_boundary(o.seq) && (v & 3) != 0) return boundary(a, v & 3);
  after(jitter(30), [this, id = a.id] { next_call(agent(id)); });
}

// Worker::step_boundary after the vote: a member leaves or joiners wait, so every member
// asks the coordinator for the boundary view; a drainer then leaves, the others move.
void World::boundary(Agent& a, std::uint64_t agreed) {
  (void)agreed;
  ++result_.boundaries;
  note("agent " + std::to_string(a.id) + " at a step boundary" + (a.drain ? ", leaving" : ""));
  if (a.restarts_seen == generation_) {
    decided(coord_->boundary(a.id, a.machine.view().epoch, a.drain, now_));
  }
  if (a.drain) {
    a.left = true;
    if (a.restarts_seen == generation_) decided(coord_->leave(a.id, now_));
    return;
  }
  a.moving = true;
  sync(a);
  handle(a, a.machine.move(now_, now_ + std::chrono::seconds(60)));
}

void World::next_call(Agent& a) {
  if (!a.alive || a.left || a.failed || a.in_call || a.moving || a.waiting) return;
  if (frozen(a)) {
    a.deferred.push_back([this, id = a.id] { next_call(agent(id)); });
    return;
  }
  if (done(a)) return idle_check(a);
  // Between calls the idle recovery may move first (Worker::Impl::run_idle_recovery).
  if (a.newest > a.machine.view().epoch && chance(0.5)) return idle_check(a);
  a.in_call = true;
  CallSpec spec;
  // Every member makes the same call for the same seq (a program's collectives line up).
  spec.bytes = is_boundary(a.machine.next_seq()) || (mix(a.machine.next_seq() ^ result_.seed) & 1)
                   ? kSmall
                   : kLarge;
  spec.result_bytes = kResultBytes;
  sync(a);
  handle(a, a.machine.call(spec, now_));
}

void World::idle_check(Agent& a) {
  if (!a.alive || a.left || a.failed || a.in_call || a.moving || a.waiting) return;
  if (frozen(a)) {
    a.deferred.push_back([this, id = a.id] { idle_check(agent(id)); });
    return;
  }
  sync(a);
  if (a.knows_evicted || a.newest <= a.machine.view().epoch) {
    if (!done(a)) after(jitter(5), [this, id = a.id] { next_call(agent(id)); });
    return;
  }
  a.moving = true;
  handle(a, a.machine.move(now_, now_ + std::chrono::seconds(60)));
}

void World::heartbeat(Agent& a) {
  if (!a.alive || a.left) return;
  if (!frozen(a) && a.restarts_seen == generation_ && !a.removed) {
    auto hb = coord_->heartbeat(a.id, a.machine.view().epoch,
                                static_cast<std::uint64_t>(a.calls_done), now_);
    if (!hb.known) {
      a.knows_evicted = true;
    } else {
      a.last_ack = now_;
    }
  }
  after(kHeartbeatEvery, [this, id = a.id] { heartbeat(agent(id)); });
}

// ---------------------------------------------------------------- the data plane

void World::join(Agent& a, const Key& key, std::uint64_t token) {
  const MemberId id = a.id;
  const Phase phase = key.phase;
  if (auto b = broken_.find(key.epoch); b != broken_.end()) {
    const Status s = error(b->second, "the links of epoch " + std::to_string(key.epoch) + " broke");
    post(id, token, jitter(2), [this, phase, s](Agent& g) { return fail_collective(g, phase, s); });
    return;
  }
  if (key.phase != Phase::kConnect) {
    at(now_ + kCollectiveDeadline, [this, id, token, phase] {
      deliver(id, token, [this, phase](Agent& g) {
        return fail_collective(g, phase, error(StatusCode::kTimedOut, "collective deadline"));
      });
    });
  }
  Collective& c = collectives_[key];
  c.tokens[id] = token;
  const View& v = views_.at(key.epoch);
  for (const auto& m : v.members) {
    if (!c.tokens.count(m.id)) return;
  }
  complete(key, c);
}

std::uint64_t World::data_result(const Key& key, const Collective& c) const {
  std::uint64_t sum = 0;
  for (const auto& m : views_.at(key.epoch).members) sum += input_of(m.id, key.seq);
  std::uint64_t value = mix(sum ^ key.seq);
  if (is_boundary(key.seq)) {
    std::uint64_t agreed = 0;
    for (const auto& [id, v] : c.votes) agreed |= static_cast<std::uint64_t>(v[0]);
    value = (value & ~std::uint64_t{3}) | agreed;
  }
  return value;
}

void World::complete(const Key& key, Collective& c) {
  c.complete = true;
  if (key.phase == Phase::kData) {
    std::vector<MemberId> ids;
    for (const auto& m : views_.at(key.epoch).members) ids.push_back(m.id);
    real_[data_result(key, c)] = {key.seq, key.epoch, ids};
  }
  for (const auto& [id, token] : c.tokens) {
    post(id, token, jitter(4), [this, key, id = id](Agent& g) {
      Collective& col = collectives_.at(key);
      if (auto b = broken_.find(key.epoch); b != broken_.end() && !col.delivered.count(id)) {
        // Broken after the last member joined but before this one finished.
        return fail_collective(g, key.phase, error(b->second, "broken mid-collective"));
      }
      col.delivered.insert(id);
      return answer_collective(g, key, col);
    });
  }
}

Actions World::answer_collective(Agent& a, const Key& key, const Collective& c) {
  switch (key.phase) {
    case Phase::kConnect: return a.machine.connected(now_);
    case Phase::kFit: return a.machine.links_fitted(Status::ok(), now_);
    case Phase::kVote: {
      std::array<std::int64_t, 3> min{std::numeric_limits<std::int64_t>::max(),
                                      std::numeric_limits<std::int64_t>::max(),
                                      std::numeric_limits<std::int64_t>::max()};
      for (const auto& [id, v] : c.votes) {
        for (int i = 0; i < 3; ++i) min[i] = std::min(min[i], v[i]);
      }
      return a.machine.repair_voted(min, now_);
    }
    case Phase::kBroadcast:
      if (c.root < 0) {
        violation("a repair broadcast without its root's copy");
        return a.machine.repair_failed(error(StatusCode::kInternal, "no root"), now_);
      }
      return a.machine.repair_received(c.blob, now_);
    case Phase::kData: {
      a.result = bytes_of(data_result(key, c));
      const bool heard = now_ - a.last_ack <= kHeartbeatEvery * 3 / 2;
      return a.machine.data_phase_done(Status::ok(), heard, a.result, now_);
    }
    case Phase::kAgree: return a.machine.agreement_done(Status::ok(), now_);
  }
  return {};
}

Actions World::fail_collective(Agent& a, Phase phase, const Status& s) {
  switch (phase) {
    case Phase::kConnect: return a.machine.connect_failed(s, now_);
    case Phase::kFit: return a.machine.links_fitted(s, now_);
    case Phase::kVote:
    case Phase::kBroadcast: return a.machine.repair_failed(s, now_);
    case Phase::kData: return a.machine.data_phase_done(s, false, {}, now_);
    case Phase::kAgree: return a.machine.agreement_done(s, now_);
  }
  return {};
}

void World::break_epoch(Epoch epoch, StatusCode code) {
  if (epoch == 0 || broken_.count(epoch)) return;
  broken_[epoch] = code;
  note("epoch " + std::to_string(epoch) + " links broken");
  for (auto& [key, c] : collectives_) {
    if (key.epoch != epoch || c.complete) continue;  // complete ones: their deliveries check
    for (const auto& [id, token] : c.tokens) {
      const Phase phase = key.phase;
      const Status s = error(code, "the links of epoch " + std::to_string(epoch) + " broke");
      post(id, token, jitter(3),
           [this, phase, s](Agent& g) { return fail_collective(g, phase, s); });
    }
  }
}

// ---------------------------------------------------------------- the coordinator

void World::decided(const membership::Decisions& d) {
  for (const auto& r : d.removed) {
    Agent& a = agent(r.id);
    a.removed = true;
    note("coordinator removes agent " + std::to_string(r.id) + " (" +
         std::string(membership::to_string(r.reason)) + ")");
    if (a.alive) {
      // Its watcher learns it and aborts its link (the peers see the abort notice).
      after(jitter(5), [this, id = r.id] {
        Agent& g = agent(id);
        if (!g.alive) return;
        if (frozen(g)) {
          g.deferred.push_back([this, id] {
            Agent& h = agent(id);
            h.knows_evicted = true;
            if (h.link_epoch) break_epoch(h.link_epoch, StatusCode::kAborted);
          });
          return;
        }
        g.knows_evicted = true;
        if (g.link_epoch) break_epoch(g.link_epoch, StatusCode::kAborted);
        if (g.waiting && g.wait.kind == ActionKind::kWaitView) {
          post(id, g.token, jitter(2), [this](Agent& h) {
            return h.machine.view_wait_failed(error(StatusCode::kEvicted, "removed"), now_);
          });
        }
      });
    }
  }
  if (d.new_view) {
    // What the coordinator journals with every view (coordinator/coordinator.cc): its
    // members and those of them that hold the training state.
    journal_members_.clear();
    for (const auto& m : d.new_view->members) {
      journal_members_.push_back({m.id, coord_->find(m.id)->labels});
    }
    journal_with_state_ = coord_->with_state(*d.new_view);
    journal_last_epoch_ = std::max(journal_last_epoch_, d.new_view->epoch);
    issue(*d.new_view);
  }
  if (d.go) {
    const membership::GoDecision go = *d.go;
    for (MemberId id : go.recipients) {
      Agent& a = agent(id);
      if (a.waiting && a.wait.kind == ActionKind::kSendReady && a.wait.ready.epoch == go.epoch) {
        post(id, a.token, jitter(3), [this, go](Agent& g) {
          return g.machine.go_arrived({go.commit_through, go.joiners, go.state_source}, now_);
        });
      }
    }
  }
  if (d.probe) {
    for (Agent& a : agents_) {
      if (a.alive && a.started && !a.left && !frozen(a) && !a.removed &&
          a.restarts_seen == generation_) {
        auto hb = coord_->heartbeat(a.id, a.machine.view().epoch,
                                    static_cast<std::uint64_t>(a.calls_done), now_);
        if (hb.known) a.last_ack = now_;
      }
    }
  }
}

void World::issue(const View& v) {
  // A world left without a member that holds the training state (an empty view, or joiners
  // only) starts over: its members run a new job from seq 1 (the real Worker's state sync
  // fails there, "no member holds the training state"), and the invariants compare the
  // members of one job.
  if (latest_ != 0) {
    bool carried = false;
    for (const auto& m : v.members) carried = carried || agent(m.id).has_state;
    if (!carried) {
      ++job_;
      for (const auto& m : v.members) agent(m.id).job = job_;
    }
  }
  views_[v.epoch] = v;
  latest_ = v.epoch;
  ++result_.views;
  note("view " + std::to_string(v.epoch) + " with " + std::to_string(v.size()) + " members");
  // Every member's watcher aborts the links of older views and cancels their connects; a
  // view that only lets leavers go lets the previous view's collective finish.
  after(jitter(5), [this, e = v.epoch, keep = v.leaves_only ? v.epoch - 1 : 0] {
    for (Epoch old = 1; old < e; ++old) {
      if (old != keep) break_epoch(old, StatusCode::kAborted);
    }
  });
  for (Agent& a : agents_) {
    if (!a.alive || a.removed || a.left || !v.contains(a.id)) continue;
    a.newest = std::max(a.newest, v.epoch);
    if (a.waiting && a.wait.kind == ActionKind::kWaitView && a.wait.epoch <= v.epoch) {
      post(a.id, a.token, jitter(3),
           [this, e = v.epoch](Agent& g) { return g.machine.view_arrived(views_.at(e), now_); });
    } else if (a.waiting && a.wait.kind == ActionKind::kSendReady && a.wait.ready.epoch < v.epoch) {
      post(a.id, a.token, jitter(3), [this](Agent& g) {
        return g.machine.go_failed(error(StatusCode::kAborted, "superseded"), now_);
      });
    } else if (!a.in_call && !a.moving && !a.waiting) {
      after(jitter(50), [this, id = a.id] { idle_check(agent(id)); });
    }
  }
}

void World::restart_coordinator() {
  ++result_.restarts;
  ++generation_;
  note("coordinator restarts");
  membership::MembershipConfig cfg = coord_config_;
  // The journal's counters, not the membership's: one restarted before its first view knows
  // no epoch of its own.
  cfg.last_epoch = journal_last_epoch_;
  cfg.last_member_id = std::max<MemberId>(coord_->last_member_id(), agents_.size());
  // As coordinator/leadership.cc restores from the journal.
  coord_ = std::make_unique<membership::Membership>(cfg);
  coord_->restore(journal_members_, now_, journal_with_state_);
  // Readies in flight to the old coordinator are lost; the client answers them aborted.
  for (Agent& a : agents_) {
    if (!a.alive) continue;
    if (a.waiting && a.wait.kind == ActionKind::kSendReady) {
      post(a.id, a.token, jitter(2), [this](Agent& g) {
        return g.machine.go_failed(error(StatusCode::kAborted, "coordinator restarted"), now_);
      });
    }
    after(milliseconds(10) + jitter(200),
          [this, id = a.id, g = generation_] { resume(agent(id), g); });
  }
}

void World::resume(Agent& a, std::uint64_t generation) {
  if (!a.alive || a.removed || a.left || generation != generation_) return;
  if (frozen(a)) {
    a.deferred.push_back([this, id = a.id, generation] { resume(agent(id), generation); });
    return;
  }
  membership::MemberLabels labels{"agent" + std::to_string(a.id), "host", "", "addr", {}};
  auto r = coord_->resume(a.id, labels, now_);
  a.restarts_seen = generation;
  if (!r) {
    a.removed = true;
    a.knows_evicted = true;
    return;
  }
  a.last_ack = now_;
  decided(r->decisions);
}

// ---------------------------------------------------------------- faults, checks, run

void World::schedule_faults() {
  const int faults = std::uniform_int_distribution<int>(0, options_.max_faults)(rng_);
  std::vector<int> kinds;
  if (options_.kills) kinds.push_back(0);
  if (options_.freezes) kinds.push_back(1);
  if (options_.link_failures) kinds.push_back(2);
  if (options_.coordinator_restarts) kinds.push_back(3);
  if (options_.joins) kinds.push_back(4);
  if (options_.drains) kinds.push_back(5);
  if (kinds.empty()) return;
  for (int f = 0; f < faults; ++f) {
    const int kind = kinds[std::uniform_int_distribution<std::size_t>(0, kinds.size() - 1)(rng_)];
    // Most faults land while the programs run (a few hundred ms of calls), the rest during
    // the recoveries that follow.
    const Duration when =
        milliseconds(chance(0.7) ? std::uniform_int_distribution<int>(5, 300)(rng_)
                                 : std::uniform_int_distribution<int>(300, 2500)(rng_));
    const MemberId victim = std::uniform_int_distribution<MemberId>(1, agents_.size())(rng_);
    switch (kind) {
      case 0:
        at(origin_ + when, [this, victim] {
          int alive = 0;
          for (const Agent& a : agents_) alive += a.alive && !a.removed && !a.left && a.admitted;
          Agent& a = agent(victim);
          if (!a.alive || alive <= 1) return;  // keep a survivor
          a.alive = false;
          ++result_.kills;
          note("kill -9 agent " + std::to_string(victim));
          for (const auto& [e, v] : views_) {
            if (v.contains(victim)) break_epoch(e, StatusCode::kPeerLost);
          }
          decided(coord_->connection_closed(victim, now_));
        });
        break;
      case 1: {
        const Duration length = milliseconds(std::uniform_int_distribution<int>(100, 3000)(rng_));
        at(origin_ + when, [this, victim, length] {
          Agent& a = agent(victim);
          if (!a.alive || frozen(a)) return;
          ++result_.freezes;
          a.frozen_until = now_ + length;
          note("SIGSTOP agent " + std::to_string(victim) + " for " +
               std::to_string(std::chrono::duration_cast<milliseconds>(length).count()) + "ms");
          after(length, [this, victim] {
            Agent& g = agent(victim);
            note("SIGCONT agent " + std::to_string(victim));
            auto pending = std::move(g.deferred);
            g.deferred.clear();
            for (auto& fn : pending) fn();
          });
        });
        break;
      }
      case 2:
        at(origin_ + when, [this] {
          if (latest_ == 0) return;
          ++result_.link_failures;
          note("link failure in epoch " + std::to_string(latest_));
          break_epoch(latest_, StatusCode::kPeerLost);
        });
        break;
      case 3: at(origin_ + when, [this] { restart_coordinator(); }); break;
      case 4:
        at(origin_ + when, [this] {
          if (agents_.size() == agents_.capacity()) return;
          ++result_.joins;
          agents_.emplace_back();
          agents_.back().id = static_cast<MemberId>(agents_.size());
          note("agent " + std::to_string(agents_.size()) + " joins");
          start_agent(agents_.back());
        });
        break;
      case 5:
        at(origin_ + when, [this, victim] {
          Agent& a = agent(victim);
          if (!a.alive || a.drain) return;
          int staying = 0;
          for (const Agent& g : agents_) staying += g.alive && !g.removed && !g.drain && g.admitted;
          if (staying <= 1) return;  // keep a survivor
          ++result_.drains;
          a.drain = true;
          note("agent " + std::to_string(victim) + " drains");
        });
        break;
    }
  }
}

void World::check() {
  if (!result_.ok) return;  // the run stopped at the first violation: the rest is moot
  // Survivors: alive, never removed, never left, admitted into a view (a joiner that no
  // boundary admitted never ran a collective).
  auto survivor = [](const Agent& a) { return a.alive && !a.removed && !a.left && a.admitted; };
  std::map<std::pair<int, std::uint64_t>, std::pair<MemberId, Returned>> survivor_value;
  for (const Agent& a : agents_) {
    if (!survivor(a)) continue;
    if (a.failed) violation("survivor agent " + std::to_string(a.id) + " had a call fail");
    if (!done(a) && !a.failed) {
      violation("survivor agent " + std::to_string(a.id) + " hung at seq " +
                std::to_string(a.machine.next_seq()) + " (waiting on " +
                (a.waiting ? std::string(to_string(a.wait.kind)) : std::string("nothing")) + ")");
    }
    for (const auto& [seq, r] : a.returns) {
      auto [it, fresh] =
          survivor_value.emplace(std::make_pair(r.job, seq), std::make_pair(a.id, r));
      if (!fresh && it->second.second.value != r.value) {
        violation("survivors " + std::to_string(it->second.first) + " and " + std::to_string(a.id) +
                  " returned different bits for seq " + std::to_string(seq));
      }
    }
  }
  for (const Agent& a : agents_) {
    for (const auto& [seq, r] : a.returns) {
      // A result returned without the commit round (speculatively, or received in the
      // repair step) may be lost when every member that returned it is gone (killed,
      // removed, drained) before a survivor did: the survivors run the seq again without
      // them. The survivors' agreement above is what holds then.
      if (r.speculative || r.repaired) continue;
      auto it = survivor_value.find({r.job, seq});
      if (it != survivor_value.end() && it->second.second.value != r.value) {
        violation("agent " + std::to_string(a.id) + " returned seq " + std::to_string(seq) +
                  " after its commit, but survivor " + std::to_string(it->second.first) +
                  " returned other bits");
      }
    }
  }
}

ScheduleResult World::run() {
  const int n =
      std::uniform_int_distribution<int>(options_.min_members, options_.max_members)(rng_);
  result_.members = n;
  coord_config_.initial_world_size = static_cast<std::size_t>(n);
  coord_config_.heartbeat_timeout = milliseconds(1000);
  coord_config_.confirm_silence = milliseconds(300);
  coord_config_.ready_timeout = milliseconds(2000);
  coord_config_.boundary_timeout = milliseconds(2000);
  coord_config_.resume_timeout = milliseconds(3000);
  coord_ = std::make_unique<membership::Membership>(coord_config_);
  // Joiners are appended: no reallocation may move an agent under a reference.
  agents_.reserve(static_cast<std::size_t>(n + options_.max_faults));
  agents_.resize(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    agents_[i].id = static_cast<MemberId>(i + 1);
    at(origin_ + milliseconds(i), [this, i] { start_agent(agents_[i]); });  // ids in order
  }
  std::function<void()> tick = [this, &tick] {
    decided(coord_->tick(now_));
    after(kTickEvery, tick);
  };
  after(kTickEvery, tick);
  schedule_faults();
  while (!queue_.empty()) {
    Event e = queue_.top();
    queue_.pop();
    now_ = e.at;
    ++result_.events;
    e.fn();
    if (!result_.ok && !options_.trace) break;
    bool all_done = true;
    for (const Agent& a : agents_) {
      const bool survivor = a.alive && !a.removed && !a.left && a.admitted;
      if (survivor && !a.failed && !done(a)) all_done = false;
      if (survivor && (a.in_call || a.moving)) all_done = false;
    }
    if (all_done && now_ > origin_ + milliseconds(3000)) break;  // after the faults
    if (now_ - origin_ > kGiveUp) break;
  }
  check();
  return result_;
}

}  // namespace

void ExplorerTotals::add(const ScheduleResult& r) {
  ++schedules;
  violated += !r.ok;
  events += r.events;
  kills += r.kills;
  freezes += r.freezes;
  link_failures += r.link_failures;
  restarts += r.restarts;
  joins += r.joins;
  drains += r.drains;
  views += r.views;
  boundaries += r.boundaries;
  speculative += r.speculative;
  reruns += r.reruns;
  repaired += r.repaired;
}

std::string ExplorerTotals::summary() const {
  auto n = [](std::uint64_t v) { return std::to_string(v); };
  return n(violated) + " violated; " + n(events) + " events; faults: " + n(kills) + " kills, " +
         n(freezes) + " freezes, " + n(link_failures) + " link failures, " + n(restarts) +
         " coordinator restarts, " + n(joins) + " joins, " + n(drains) + " drains; " + n(views) +
         " views, " + n(boundaries) + " boundary moves, " + n(speculative) +
         " speculative returns, " + n(reruns) + " re-run calls, " + n(repaired) + " repairs";
}

ScheduleResult explore(std::uint64_t seed, const ExplorerOptions& options) {
  World world(seed, options);
  return world.run();
}

}  // namespace tributary::agent::runtime
