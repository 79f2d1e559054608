// CoordinatorClient's state, shared by its three parts: the public API
// (coordinator_client.cc), admission by join or resume (admission.cc) and the client's
// thread that heartbeats and receives (client_thread.cc). Private to control_client/.
//
// Locking: `mu` guards the fields below it up to the worker-thread section; API threads
// wait on `cv`. The worker-thread section is touched by join() before the thread starts
// and by the thread afterwards, never by both.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>
#include <zmq.hpp>

#include "control/codec.h"
#include "control/curve_keys.h"
#include "control_client/coordinator_client.h"
#include "control_client/curve_dealer.h"
#include "control_client/handshake.h"

namespace prometheus {
class Gauge;
}

namespace tributary::control_client {

// Non-blocking: when the coordinator is gone the pipe fills and we drop, rather than
// block the heartbeat thread.
bool send_envelope(zmq::socket_t& socket, const control::Envelope& envelope);

// The client's ZeroMQ calls, with EINTR retried or treated as an early wake-up. A process
// that installs a signal handler (the agent drains on SIGTERM) can have the signal land on
// any of its threads, and cppzmq throws zmq::error_t on EINTR: uncaught on the client's
// thread, that would end the process.
// zmq::poll for at most `timeout`; an interrupted poll returns 0 with no revents set.
int poll_items(zmq::pollitem_t* items, std::size_t count, std::chrono::milliseconds timeout);
// Non-blocking receive: false when nothing is queued.
bool recv_now(zmq::socket_t& socket, zmq::message_t& message);
// Send; with send_flags::dontwait, false when the pipe is full.
bool send_bytes(zmq::socket_t& socket, zmq::const_buffer bytes, zmq::send_flags flags);
// "tcp://a:1,tcp://b:2" -> its endpoints, trimmed, without empties and duplicates.
std::vector<std::string> split_endpoints(const std::string& list);

// The slowest heartbeat pace a coordinator may ask for (HeartbeatAck::heartbeat_interval_ms).
constexpr Duration kMaxPacedInterval = std::chrono::seconds(10);

// Milliseconds to poll until `until` (rounded up, at most 1000).
long poll_timeout_ms(TimePoint now, TimePoint until);

struct CoordinatorClient::Impl {
  explicit Impl(Logger logger) : log(std::move(logger)) {}
  ~Impl() {
    if (worker.joinable()) {
      wake('q');
      worker.join();
    }
  }

  Logger log;
  prometheus::Gauge* size_gauge = nullptr;
  prometheus::Gauge* epoch_gauge = nullptr;

  zmq::context_t context{1};
  zmq::socket_t dealer;
  HandshakeWatch handshakes;        // the DEALER's CURVE handshakes, during join() only
  control::ClusterCurveKeys curve;  // derived from config.secret by join()
  zmq::socket_t wake_rx;            // owned by the worker thread
  zmq::socket_t wake_tx;            // any API thread, under wake_mu
  std::mutex wake_mu;
  std::thread worker;
  std::string endpoint;  // the coordinator we talk to now (written under `mu`)

  mutable std::mutex mu;
  std::condition_variable cv;
  membership::MemberId id = 0;
  membership::View view;
  Duration interval{std::chrono::seconds(1)};
  TimePoint last_ack{};
  bool evicted = false;
  std::string evicted_reason;
  bool leaving = false;
  bool left = false;
  membership::LeaveTerms leave_terms;  // what the Leave being sent says
  std::string leave_must_wait;         // the coordinator's answer to it: not let go, why
  std::atomic<std::uint64_t> step{0};
  std::atomic<bool> joiners_pending{false};
  // Ready/Go: the Ready being waited on (resent each interval until its Go arrives).
  std::optional<membership::ReadyReport> pending_ready;
  std::optional<Go> last_go;
  // The boundary request of the current epoch (resent each interval until a newer view
  // arrives: one lost around a coordinator restart must not stall the step boundary).
  struct PendingBoundary {
    membership::Epoch epoch = 0;
    bool leaving = false;
  };
  std::optional<PendingBoundary> pending_boundary;
  // Federated rounds: the RoundReady and RoundDone being waited on (resent each interval
  // until answered or a newer view arrives), and the decisions and commits received (the
  // last kRoundsKept), kept while the member computes so that a late member is told at once.
  std::optional<membership::RoundReady> pending_round;
  std::optional<std::pair<membership::Epoch, std::uint64_t>> pending_done;
  std::map<std::uint64_t, membership::RoundDecision> rounds;
  std::set<std::pair<membership::Epoch, std::uint64_t>> commits;
  const membership::RoundDecision* round_answer(const membership::RoundReady& r) const {
    auto it = rounds.find(r.round);
    return it != rounds.end() && it->second.answers(id, r.epoch) ? &it->second : nullptr;
  }
  // Why a round's wait (mu held) ended without its answer: the deadline (`missing` names
  // what did not come), an eviction, a leave, or a newer view (`superseded`: what it
  // arrived before). coordinator_client.cc.
  Status round_unanswered(bool answered, const std::string& missing,
                          const std::string& superseded) const;
  // Fire-and-forget messages from API threads; the worker thread sends them.
  std::vector<control::Envelope> outbox;

  // Worker-thread state (no lock needed): what a resume after a coordinator restart needs.
  ClientConfig config;
  std::string name;
  std::uint64_t instance_id = 0;  // the coordinator instance we are a member of
  struct Resume {
    TimePoint started{};
    Handshake handshake;
    bool refused = false;  // a standby answered NotLeader: ask again next interval
  };
  std::optional<Resume> resume;
  // A ViewDelta could not be applied: the next heartbeat asks for the whole view.
  bool want_view = false;
  // The member's links (report_links; under mu): sent when changed, and every
  // kLinksResendEvery heartbeats after, for a coordinator that restarted.
  static constexpr int kLinksResendEvery = 20;
  membership::Epoch links_epoch = 0;
  std::vector<membership::LinkPath> links;
  bool links_changed = false;
  int heartbeats_since_links = 0;
  // Replicated coordinators (failover.cc): every endpoint given, and the one we left
  // because it fell silent, and when (a standby still names it as leader until its lease
  // expires; but it may only have been slow: it is trusted again after a while).
  std::vector<std::string> endpoints;
  std::string abandoned;
  TimePoint abandoned_at{};

  void wake(char command) {
    std::lock_guard lock(wake_mu);
    send_bytes(wake_tx, zmq::buffer(&command, 1), zmq::send_flags::none);
  }

  // admission.cc
  Result<Joined> join(const ClientConfig& config, Deadline deadline);
  // The first view (when the coordinator admitted us into one), the heartbeat interval
  // and the coordinator instance, from its JoinAccepted; then the worker thread starts.
  Result<Joined> admitted(const control::JoinAccepted& accepted, TimePoint now);
  void start_resume(TimePoint now, std::string_view why);
  void handle_resume(const control::Envelope& envelope, TimePoint now);
  control::JoinRequest join_request() const;
  // One join attempt with the coordinator at `at`; `*leader` gets a NotLeader's hint;
  // `*move_on` is set when another coordinator should be tried (silence, NotLeader).
  Result<Joined> join_at(const std::string& at, const control::JoinRequest& request,
                         Deadline deadline, std::string* leader, bool* move_on);

  // failover.cc
  // A fresh DEALER with the cluster's CURVE keys connected to `at`; `endpoint` names it.
  void connect(const std::string& at);
  // Moves to `hint` when it is one of our endpoints (other than the current and the
  // abandoned one), else to the next endpoint, and resumes there. No-op with one endpoint.
  void follow(const std::string& hint, TimePoint now, std::string_view why);
  // A standby answered NotLeader: follow its hint, or ask it again next interval.
  void on_not_leader(const control::NotLeader& not_leader, TimePoint now);
  // A hint we may follow: one of our endpoints, not the current one, and not the one we
  // just left for silence.
  bool usable_hint(const std::string& hint, TimePoint now) const;
  void abandon(TimePoint now);
  // Called each heartbeat interval: a silent coordinator (several endpoints) is left; a
  // resume that got no answer or was refused is repeated or moved. True when it sent
  // something in place of the heartbeat.
  bool check_failover(TimePoint now, TimePoint last_heard);

  // client_thread.cc
  void run();
  void handle(const control::Envelope& envelope, TimePoint now);
  // `alone`: only the Heartbeat, at once (in answer to a Probe, or asking for a view).
  void send_heartbeat(TimePoint now, bool alone = false);
  // Applies an incremental view to the view held (membership/view_delta.h); one that does
  // not apply (another base, a digest mismatch) is dropped and the whole view asked for.
  void on_view_delta(const control::ViewDelta& delta, TimePoint now);
  // The interval a HeartbeatAck asks for, bounded by the configured one and
  // kMaxPacedInterval.
  Duration paced_interval(std::uint32_t asked_ms) const;
  // Holds a newer view (and tells the listener); an older or equal one is dropped.
  void publish_view(membership::View v);
  // Queues a message for the worker thread and wakes it.
  void post(control::Envelope envelope);
  void mark_evicted(const std::string& reason);

  // ControlPlane::set_view_listener's listener: called outside `mu`, under listener_mu,
  // which set_view_listener() takes to replace it.
  std::mutex listener_mu;
  ControlPlane::ViewListener listener;  // guarded by listener_mu
  void tell_listener(const Result<membership::View>& news) {
    std::lock_guard lock(listener_mu);
    if (listener) listener(news);
  }
};

}  // namespace tributary::control_client
