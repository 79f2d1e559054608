// Following the leader among replicated coordinators (docs/fault-tolerance.md,
// "Replicated coordinators"): the agent knows every coordinator's endpoint; when the one
// it talks to falls silent, or answers NotLeader, it moves on and resumes with whoever
// leads, exactly as it resumes after a restart of a single coordinator.
#include "control_client/client_impl.h"

#include <algorithm>

namespace tributary::control_client {

using std::chrono::duration_cast;
using std::chrono::milliseconds;

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
  dealer.connect(at);
  std::lock_guard lock(mu);
  endpoint = at;
}

void CoordinatorClient::Impl::follow(const std::string& hint, TimePoint now, std::string_view why) {
  if (endpoints.size() < 2) return;
  const auto current = std::find(endpoints.begin(), endpoints.end(), endpoint);
  std::string next;
  if (hint != endpoint && hint != abandoned &&
      std::find(endpoints.begin(), endpoints.end(), hint) != endpoints.end()) {
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
  if (!hint.empty() && hint != endpoint && hint != abandoned &&
      std::find(endpoints.begin(), endpoints.end(), hint) != endpoints.end()) {
    return follow(hint, now, "not the leader; it names " + hint);
  }
  // No usable hint (the leader it names is the one that fell silent: its lease has not
  // expired yet). This standby may be the next leader: ask it again next interval.
  if (!resume) start_resume(now, "coordinator " + endpoint + " is not the leader");
  if (resume) resume->refused = true;
}

bool CoordinatorClient::Impl::check_failover(TimePoint now, TimePoint last_heard) {
  if (resume) {
    const bool unanswered = now - resume->started >= 2 * interval + milliseconds(500);
    if (unanswered && endpoints.size() > 1) {
      abandoned = endpoint;
      follow("", now, "no answer to the resume");
    } else if (unanswered) {
      resume.reset();
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
    abandoned = endpoint;
    follow("", now,
           "silent for " + std::to_string(duration_cast<milliseconds>(now - last_heard).count()) +
               " ms");
    return true;
  }
  return false;
}

}  // namespace tributary::control_client
