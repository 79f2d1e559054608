// A Link over several paths per pair (shared memory, then each TCP address of the peer),
// that moves a pair to its next path when the current one fails, without losing or
// repeating a message and without the collective noticing (docs/transports.md, "Runtime
// fallback per pair").
//
// Guarantees, on top of algorithms/link.h:
// - Every message of a pair is numbered (per direction). Until the pair's first move, on a
//   first path that carries stamps (PollableLink::send_stamped), a message goes under the
//   caller's tag with its number in the stamp, the caller's receives are posted on the
//   path as they are, and acknowledgements (cumulative: the lowest index not fully
//   received) ride in the stamps going back, with one of their own only after
//   FailoverParams::ack_every messages or ack_delay. After a move, before each payload the
//   sender sends, on the same path, a descriptor {index, tag, length, generation}; the
//   receiver matches payloads to its receives from the descriptors, and acknowledges
//   whenever that advances.
// - A sent message is kept until it is acknowledged: while the caller's wait() has not
//   returned, in the caller's buffer; afterwards, in a private copy taken when wait()
//   returns. So a path change can always resend. In the fast stint a send of 64 KiB or
//   more (256 KiB or more over sockets) completes only when acknowledged (the receiver
//   acknowledges such a message as soon as it is in, or its path reports it arrived early:
//   PollableLink::report_early), so it is never copied.
// - A pair's path fails when an operation on it fails (kPeerLost, kBadFrame, ...) or,
//   unless it is the pair's last path, when a message has stayed unacknowledged for the
//   stall deadline. The pair then moves to its next path: each side sends, on it, a resume
//   {path, lowest index not received}, and on the other side's resume resends every kept
//   message from that index, in order. A partly received message is received again; a
//   duplicate (resent but already received) is read and dropped. The caller sees nothing:
//   same bytes, same order per tag, no view change.
// - A side that did not notice the failure follows as soon as the other's resume arrives
//   (every path of every pair has a resume receive posted).
// - A path whose connection failed with an error is down until a new connection is put
//   in (FailoverParams::on_down and reconnects): it is then probed, and the pair moves back
//   up to it when a probe is answered, as after a stall.
// - Paths per pair: a path may carry only some pairs (FailoverParams::path_peers: shared
//   memory to the members on this host, TCP to the others); each pair's path list is the
//   paths that carry it, in order, and it starts on the first.
// - Only when every path of a pair has failed does the pair fail (what arrived whole
//   before is still delivered, to a receive posted before or after), as a plain link's pair
//   fails today: its operations end with the last path's error, naming the peer. Where
//   paths are re-dialled, a pair whose every path failed with an error first waits up to
//   FailoverParams::stranded_grace for a new connection of one and goes on there, unless
//   its peer is found gone (FailoverParams::on_stranded, Reconnection::gone).
// - The resume travels over the new path's own link, which is authenticated like the first
//   (the same handshake, the same epoch): nothing here weakens the paths' checks.
// - Threading: one thread issues operations and drives the paths inside wait(); abort()
//   from any thread. Path links are owned.
//
// Costs: until a move, 8 bytes of stamp in each message's header, an acknowledgement per
// 16 messages or 2 ms where nothing goes back, one per message of 64 KiB (sockets: 256 KiB)
// or more (whose send completes with it: no copy), and a copy of each smaller message whose
// wait() returns before its acknowledgement; after one, one 40-byte descriptor per message,
// one 8-byte acknowledgement per advance, and a copy of each message whose wait() returns
// before its acknowledgement arrived.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "algorithms/pollable_link.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/status.h"

namespace tributary::transport {

// One move of a pair from a path to another, as logged and counted.
struct PathChange {
  int peer = -1;
  int from = -1;  // path indexes into FailoverParams::path_names
  int to = -1;    // -1: no path left, the pair failed
  std::string reason;
  bool stall = false;    // no acknowledgement within the stall deadline (else an error)
  bool by_peer = false;  // the peer's resume arrived first
  // Back up to a path left earlier by a stall (`to` < `from`): a probe on it was answered.
  bool recovered = false;
  // Every path failed with an error and the pair waits for a new connection (`to` = -1
  // for now; FailoverParams::stranded_grace). It then goes on (a change with `recovered`)
  // or fails (`to` = -1 again).
  bool stranded = false;
};

// A new connection for a path whose connection failed (FailoverParams::on_down), from
// whoever re-dialled it.
struct Reconnection {
  int path = -1;
  int peer = -1;
  // Puts the connection into the path's link (e.g. agent::replace_peer_socket). The link
  // runs it once, on its own thread, when the pair still wants it (the path still down,
  // the pair not lost, the link not aborted); otherwise it is destroyed unrun, and must
  // then let go of what it holds.
  std::function<Status(algorithms::PollableLink&)> install;
  // Instead of a connection: the peer is gone (its addresses refuse connections), as found
  // after FailoverParams::on_stranded; a pair waiting for a new connection to it fails now
  // with this. OK for a connection.
  Status gone;
};

// Where reconnections reach a link: any thread posts, the link's thread takes them at
// its next round (a relaxed look at a flag while there are none).
class ReconnectInbox {
 public:
  void post(Reconnection r);
  std::vector<Reconnection> take();
  bool pending() const { return pending_.load(std::memory_order_acquire); }

 private:
  std::mutex mu_;
  std::vector<Reconnection> items_;
  std::atomic<bool> pending_{false};
};

struct FailoverParams {
  std::uint64_t epoch = 0;
  // Names of the paths (for logs and metrics), most preferred first; one per path link.
  std::vector<std::string> path_names;
  // Which pairs each path carries: path_peers[k][r] is false where path k has no
  // connection to rank r and never will (its transport cannot reach that member: shared
  // memory to one on another host). For that pair the path does not exist: nothing is
  // posted, probed or re-dialled on it, and the pair starts on the first path that carries
  // it (its fast stint there, when that path carries stamps). Empty, or path k's entry
  // empty: path k carries every pair. Both ends of a pair must agree (the view decides).
  std::vector<std::vector<bool>> path_peers;
  // What logs call each rank (e.g. "rank 2 (member 7)"); "rank r" where empty.
  std::vector<std::string> rank_names;
  // How long a message may stay unacknowledged before its path is given up (not for a
  // pair's last path, where the caller's deadline decides).
  Duration stall_deadline = std::chrono::seconds(2);
  // How long one wait() blocks in one path before it looks at the others.
  Duration slice = std::chrono::milliseconds(1);
  // How often the paths no pair is on are looked at (for a resume, a probe or its answer)
  // while waiting: each look at a TCP path is a poll(2), which ranks that outnumber the
  // cores pay for in context switches. A peer's move is followed within this.
  Duration standby_look = std::chrono::milliseconds(4);
  // How often a pair on a later path probes each better path it left by a stall; when a
  // probe is answered on it, the pair moves back up (at a message boundary of the
  // resume protocol: the peer resumes at the first message not fully received).
  Duration probe_interval = std::chrono::milliseconds(250);
  // How long a wait() polls the paths in use without blocking before it sleeps in one (as
  // the stream links do: a sleep costs every small message a scheduler wake-up, and over
  // shared memory a doorbell through the peer's socket): `busy_poll` on a socket path,
  // `memory_busy_poll` after the last bytes moved on one that polls best (shared memory,
  // RDMA). The second is longer than the links' own 50 us: a polling round here services
  // every pair, so with more ranks than cores fewer rounds fit in a window, and a wait
  // that gave up after one or two yields slept, cost its peer a doorbell and its own
  // wake-up 2-4x the time of a 4-64 KiB all-reduce over shared memory at N = 8 on 2 cores
  // (bench/results/failover_cost_2026-11-28.md).
  Duration busy_poll = std::chrono::microseconds(50);
  Duration memory_busy_poll = std::chrono::microseconds(200);
  // Where this host runs no more of the group's ranks than it has cores
  // (transport/receive_paths.h, core_per_rank): a wait polls socket paths too until
  // `core_per_rank_busy_poll` has passed since the last progress, and does not yield
  // between looks, as the TCP link's own wait does there
  // (bench/results/tcp_wait_2026-11-28.md).
  bool core_per_rank = false;
  Duration core_per_rank_busy_poll = std::chrono::microseconds(500);
  // Until a pair's first move its acknowledgements ride on the messages going back (the
  // stamp's top 24 bits); one of its own goes out only when this many messages, or this
  // long, went unacknowledged (the retained copies and the peer's stall clock need it).
  Duration ack_delay = std::chrono::milliseconds(2);
  std::uint64_t ack_every = 16;
  const Clock* clock = &SteadyClock::instance();  // for the stall deadline only
  // A descriptor announcing more is a broken path (kBadFrame), never an allocation; the
  // paths' own frame bound (StreamLinkParams::max_frame_bytes) by default.
  std::uint64_t max_message_bytes = std::uint64_t{1} << 30;
  std::function<void(const PathChange&)> on_change;  // after the log line; may be empty
  // Reconnecting: called on the link's thread when a path's connection to `peer` fails
  // with an error (a reset, a close, a corrupt frame: not a stall, and not when the link
  // itself is aborted). Whoever made the paths may re-dial it in the background and post
  // the new connection to `reconnects`; the link then puts it in (the path is stalled
  // again: probed, and moved back up to when a probe is answered, which takes both ends'
  // new connection) or, if it is a standby, up again. Empty: a failed path stays down
  // for the link's life.
  std::function<void(int path, int peer)> on_down;
  std::shared_ptr<ReconnectInbox> reconnects;
  // Waiting out a pair whose every path failed with an error (each connection reset or
  // closed: an operator's `ss -K`, a middlebox that dropped its state, a corrupt frame on
  // the last path), where paths are re-dialled (on_down and reconnects set): for up to this
  // long the pair keeps its operations and waits for a new connection of any of its paths,
  // then resumes on it as after a move (nothing lost, nothing twice, no view change).
  // Past it, or when the peer is found gone, the pair fails as it would at once without it.
  // Zero: it fails at once. A silent pair never waits here: its last path has no stall
  // deadline (the caller's deadline decides).
  Duration stranded_grace{0};
  // Called on the link's thread when a pair starts waiting so: whoever re-dials may find
  // out sooner that the peer is gone (transport/tcp/knock.h) and post a Reconnection with
  // `gone` set, which ends the wait. May be empty.
  std::function<void(int peer)> on_stranded;
  Logger log{"link"};
};

// Drives `link` (made by make_failover_link) until the peers have acknowledged every
// message it sent, or a pair has no path left (its error), or `deadline` (kTimedOut). A
// rank whose own operations are all over does not drive its paths, so a resume that
// arrives then is answered only at its next wait(): the runtime's next collective (the
// commit round follows every one), or this at the end of the link's use. Any other link
// keeps nothing to resend: OK at once.
Status drain(algorithms::Link& link, Deadline deadline);

// A link the table built, as a path: kInternal when its transport cannot be polled.
Result<std::unique_ptr<algorithms::PollableLink>> as_path(std::unique_ptr<algorithms::Link> link);

// `paths[k]` is path k's link of the same group (same rank and size, same epoch), most
// preferred first; at least one. kInvalidArgument when FailoverParams::path_peers leaves
// a pair without a path; kInternal when the OS refuses an eventfd.
Result<std::unique_ptr<algorithms::Link>> make_failover_link(
    FailoverParams params, std::vector<std::unique_ptr<algorithms::PollableLink>> paths);

}  // namespace tributary::transport
