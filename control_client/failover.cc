// Following the leader among replicated coordinators (docs/fault-tolerance.md,
// "Replicated coordinators"): the agent knows every coordinator's endpoint; when the one
// it talks to falls silent, or answers NotLeader, it moves on and resumes with whoever
// leads, exactly as it resumes after a restart of a single coordinator.
#include "control_client/client_impl.h"
#include "control_client/curve_dealer.h"

#include <algorithm>

namespace tributary::control_client {

using std::chrono::duration_cast;
using std::chrono::milliseconds;

// How long a hint naming the coordinator we left for silence is ignored: long enough for
// a dead leader's lease to run out in most cases, short enough that a leader that was only
// slow (etcd unreachable for a moment) is found again at once.
constexpr milliseconds kDistrustSilent{1000};

std::vector<std::string> split_endpoints(const std::string& list) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= list.size()) {
    const std::size_t comma = std::min(list.find(',', start), list.size());
    std::string e = list.substr(start, comma - start);
    e.erase(0, e.find_first_not_of(' '));
    e.erase(e.find_last_not_of(' ') + 1);
    if (!e.empty() && std::find(out.begin(), out.end(), e) == out.end()) out.push_back(e);
    start = comma + 1;
  }
  return out;
}

void CoordinatorClient::Impl::connect(const std::string& at) {
  dealer = zmq::socket_t(context, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::linger, 0);
  dealer.set(zmq::sockopt::maxmsgsize, static_cast<std::int64_t>(control::kMaxControlMessageBytes));
  use_cluster_client_keys(dealer, curve);
  dealer.connect(at);
  std::lock_guard lock(mu);
  endpoint = at;
}

bool CoordinatorClient::Impl::usable_hint(const std::string& hint, TimePoint now) const {
  if (hint.empty() || hint == endpoint) return false;
  if (hint == abandoned && now - abandoned_at < kDistrustSilent) return false;
  return std::find(endpoints.begin(), endpoints.end(), hint) != endpoints.end();
}

void CoordinatorClient::Impl::abandon(TimePoint now) {
  abandoned = endpoint;
  abandoned_at = now;
}

void CoordinatorClient::Impl::follow(const std::string& hint, TimePoint now, std::string_view why) {
  if (endpoints.size() < 2) return;
  const auto current = std::find(endpoints.begin(), endpoints.end(), endpoint);
  std::string next;
  if (usable_hint(hint, now)) {
    next = hint;
  } else {
    const std::size_t i = current == endpoints.end() ? 0 : current - endpoints.begin();
    next = endpoints[(i + 1) % endpoints.size()];
  }
  log.info("leaving coordinator " + endpoint + " (" + std::string(why) + ") for " + next);
  connect(next);
  resume.reset();
  start_resume(now, "following the leader");
}

void CoordinatorClient::Impl::on_not_leader(const control::NotLeader& nl, TimePoint now) {
  const std::string& hint = nl.leader();
  if (usable_hint(hint, now)) return follow(hint, now, "not the leader; it names " + hint);
  // No usable hint (none, or the one that just fell silent: dead, its lease not expired
  // yet, or only slow). This standby may be the next leader: ask it again next interval.
  if (!resume) start_resume(now, "coordinator " + endpoint + " is not the leader");
  if (resume) resume->refused = true;
}

bool CoordinatorClient::Impl::check_failover(TimePoint now, TimePoint last_heard) {
  if (resume) {
    const bool unanswered = now - resume->started >= 2 * interval + milliseconds(500);
    if (unanswered && endpoints.size() > 1) {
      abandon(now);
      follow("", now, "no answer to the resume");
    } else if (unanswered) {
      // The same handshake again: a slow coordinator that answers the first request
      // late still accepts its proof (tests/control_client/resume_race_test.cc).
      start_resume(now, "previous resume attempt unanswered");
    } else if (resume->refused) {
      // Quietly, every interval, until this standby leads or names the leader.
      resume->refused = false;
      resume->started = now;
      send_envelope(dealer, resume->handshake.request(join_request()));
    }
    return true;
  }
  // Several coordinators: silence for 3 intervals means this one is gone (kill -9, a
  // frozen machine): its successor is elsewhere. One coordinator: wait for its restart.
  if (endpoints.size() > 1 && now - last_heard > 3 * interval) {
    abandon(now);
    follow("", now,
           "silent for " + std::to_string(duration_cast<milliseconds>(now - last_heard).count()) +
               " ms");
    return true;
  }
  return false;
}

}  // namespace tributary::control_client
