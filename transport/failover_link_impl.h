// The FailoverLink behind make_failover_link (failover_link.h): its records and its
// parts, the Link operations (failover_link.cc), the pair protocol that numbers,
// acknowledges, and moves a pair between paths (failover_pair.cc; which path, and when to
// move, is decided by the pure PairPaths of pair_paths.h), that protocol's
// fast stint before a pair's first move (failover_fast.cc), and the new connections of
// failed paths (failover_reconnect.cc). Internal to transport/.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "algorithms/seq_space.h"
#include "core/check.h"
#include "transport/failover_link.h"
#include "transport/link_ops.h"
#include "transport/pair_paths.h"
#include "transport/path_peers.h"
#include "transport/payload_pool.h"

namespace tributary::transport {

using Handle = algorithms::Link::Handle;
inline constexpr Handle kNoHandle = 0;

// Control messages travel on the paths themselves, under tags no collective uses.
inline constexpr std::uint64_t kControlSeq = ~std::uint64_t{0};
static_assert(kControlSeq >> algorithms::kSeqSpaceShift ==
              static_cast<std::uint8_t>(algorithms::SeqSpace::kFailoverControl));
enum class Control : std::uint32_t {
  kDescriptor = 1,
  kAck = 2,
  kResume = 3,
  kProbe = 4,     // "does this path work again?", on a path left by a stall
  kProbeAck = 5,  // the answer, on the same path
};
// Until a pair's first move (its fast stint, generation 0 on path 0, where that path
// carries stamps) a message goes under the caller's own tag with its index as the stamp,
// and a receive is posted on the path as the caller posted it: no descriptor, no copy.
// After a move, payloads travel under a tag of their own, {index (in the failover payload
// seq space), generation}, never the caller's: a payload left on a path by an earlier stint
// (sent before a move, read after a move back) can then never be taken for a later message
// with the caller's tag; nor can a caller's message of the fast stint be taken for one.
inline constexpr std::uint32_t kPayloadCheck = 0x46504c44;  // "FPLD"
inline constexpr std::size_t kDescriptorBytes = 40;  // index, seq, slot, check, length, generation
inline constexpr std::size_t kAckBytes = 8;          // lowest index not yet received
inline constexpr std::size_t kResumeBytes = 16;      // path, generation, lowest index not received
inline constexpr std::size_t kProbeBytes = 8;        // generation
// Fast stint: a message this large is acknowledged as soon as it is in (or has arrived
// before its receive), and its send completes only with that acknowledgement: the
// caller's buffer is what a resend would read until then, so nothing is copied. Smaller
// ones are copied if they outlive their wait() unacknowledged. Where the path polls
// memory an acknowledgement is a look away and waiting for it beats a copy from 64 KiB;
// over a socket it is a system call and a wake-up on each side, dearer than copying
// anything under 256 KiB: with 1 MiB, the 256 KiB-1 MiB pieces of halving-doubling and
// double trees were copied, and the failover link took 1.15-1.31x the plain link's time at
// 512 KiB-2 MiB; with 256 KiB 1.00-1.21x (bench/results/failover_acked_send_2026-11-28.md;
// 1 MiB was chosen on an earlier VM, bench/results/failover_cost_2026-11-28.md). Both ends
// of a pair use the same path, so they agree.
inline constexpr std::size_t kAckedSendBytesMemory = 64 * 1024;
// A wait() whose own look finished its operation skips the round over every pair and path
// (FailoverLink::poll_own) only this long after the last one: what the look moved for
// other pairs (an early arrival whose sender waits for its acknowledgement), and the pairs
// on other paths (a mixed group's TCP pairs), wait at most this long for a round.
inline constexpr Duration kOwnLookWindow = std::chrono::microseconds(100);
inline constexpr std::size_t kAckedSendBytesSocket = 256 * 1024;

// A fast-stint message's stamp: its index + 1 in the low 40 bits (so that 0, a plain
// send's, is never one), and the low 24 bits of the sender's own `low` above them: the
// acknowledgement of what came the other way, for free.
inline constexpr unsigned kStampIndexBits = 40;
inline constexpr std::uint64_t kStampIndexMask = (std::uint64_t{1} << kStampIndexBits) - 1;
inline constexpr std::uint64_t kStampAckMask = (std::uint64_t{1} << (64 - kStampIndexBits)) - 1;
inline std::uint64_t make_stamp(std::uint64_t index, std::uint64_t low) {
  TRIB_CHECK(index + 1 <= kStampIndexMask) << "a failover link numbered 2^40 messages";
  return (index + 1) | ((low & kStampAckMask) << kStampIndexBits);
}
inline std::uint64_t stamp_index1(std::uint64_t stamp) { return stamp & kStampIndexMask; }
inline std::uint64_t stamp_ack(std::uint64_t stamp) { return stamp >> kStampIndexBits; }

// A message of this rank to a peer, from send() until the peer acknowledges it.
struct Outgoing {
  std::uint64_t index = 0;
  algorithms::Tag tag;
  const std::byte* data = nullptr;  // the caller's buffer, then `copy`
  std::size_t size = 0;
  PayloadPool::Buffer copy;  // empty until taken
  std::array<std::byte, kDescriptorBytes> descriptor{};
  int path = -1;  // where it was last posted; -1: waits to be (re)sent
  std::uint32_t generation = 0;  // the pair's generation when it was last posted
  Handle descriptor_h = kNoHandle;  // none in the fast stint
  Handle data_h = kNoHandle;
  Handle op = kNoHandle;  // the caller's send, until its wait() returns
};

// A message from a peer whose descriptor arrived: being received, or received and
// waiting for its receive to be posted. In the fast stint: a caller's receive posted on
// the path as it is (`fast`), whose index is known only from its stamp once it is in.
struct Arrival {
  bool fast = false;
  std::uint64_t index = 0;
  algorithms::Tag tag;
  std::uint64_t length = 0;
  Handle under = kNoHandle;  // the path's receive while in progress
  bool complete = false;
  bool discard = false;        // a resent duplicate of something received already
  Handle target = kNoHandle;   // the caller's receive; kNoHandle: into `buffer`
  // Empty when the payload goes to `target` directly; a combining target's payload comes
  // here first unless the path combines it in place.
  PayloadPool::Buffer buffer;
};

// A caller's operation.
struct CallerOp {
  bool is_send = false;
  int peer = -1;
  algorithms::Tag tag;
  std::byte* data = nullptr;
  std::size_t size = 0;
  std::optional<algorithms::Combine> combine;  // recv_combine
  std::uint64_t order = 0;  // receives: post order
  bool attached = false;    // a receive that an Arrival will fill
  bool done = false;
  Status status;
};

// The callers' operations by handle: slots reused through a free list (no allocation per
// operation once warm), a handle naming its slot and the slot's use, so a stale one is
// caught. Entries stay where they are while others come and go.
class CallerOps {
 public:
  Handle open() {
    std::uint32_t i;
    if (!free_.empty()) {
      i = free_.back();
      free_.pop_back();
    } else {
      i = static_cast<std::uint32_t>(slots_.size());
      slots_.emplace_back();
    }
    Slot& s = slots_[i];
    s.live = true;  // its op was reset by erase()
    return (static_cast<Handle>(s.use) << 32) | (i + 1);
  }
  // nullptr unless `h` names a live operation.
  CallerOp* find(Handle h) {
    const std::uint64_t i = (h & 0xffffffffu) - 1;
    if ((h & 0xffffffffu) == 0 || i >= slots_.size()) return nullptr;
    Slot& s = slots_[i];
    return s.live && s.use == (h >> 32) ? &s.op : nullptr;
  }
  CallerOp& at(Handle h) {
    CallerOp* op = find(h);
    TRIB_CHECK(op != nullptr) << "unknown or finished operation " << h;
    return *op;
  }
  void erase(Handle h) {
    TRIB_CHECK(find(h) != nullptr) << "unknown or finished operation " << h;
    const auto i = static_cast<std::uint32_t>((h & 0xffffffffu) - 1);
    Slot& s = slots_[i];
    s.live = false;
    s.op = CallerOp{};  // nothing of the caller's kept
    ++s.use;
    free_.push_back(i);
  }

 private:
  struct Slot {
    std::uint32_t use = 0;
    bool live = false;
    CallerOp op;
  };
  std::deque<Slot> slots_;
  std::vector<std::uint32_t> free_;
};

// Fast stint: a message that arrived whole on the pair's path before its receive was
// posted (PollableLink::report_early), counted as received and acknowledged; it waits in
// the path for that receive, or is read back from it if the pair moves first.
struct EarlyNote {
  std::uint64_t index = 0;
  algorithms::Tag tag;
  std::uint64_t length = 0;
};

// A receive posted only to read and drop a payload of an earlier stint on a path.
struct Discard {
  int path = -1;
  Handle h = kNoHandle;
};

// One peer: which path carries it and the protocol state of both directions.
struct Pair {
  int peer = -1;
  // The pair's path, its generation and every path's state; the rules that move it.
  PairPaths route;
  // The fast stint: no move yet and path 0 carries stamps (header comment above).
  bool fast = false;
  Status lost;                   // every path failed: the pair's operations fail with this
  // Every path failed with an error and the pair waits for a new connection of one until
  // then (FailoverParams::stranded_grace), its operations held; unset otherwise.
  std::optional<TimePoint> stranded_until;
  Status stranded_why;  // the last path's error: the loss, should the wait end so
  std::vector<Handle> resume_h;
  std::vector<std::array<std::byte, kResumeBytes>> resume_in;
  std::array<std::byte, kResumeBytes> resume_out{};
  Handle resume_send_h = kNoHandle;
  int resume_send_path = -1;
  // Probing stalled paths: a listener for probes and one for answers on every path that
  // is not down; one probe in flight at a time; one answer per path.
  std::vector<Handle> probe_h;
  std::vector<std::array<std::byte, kProbeBytes>> probe_in;
  std::vector<Handle> probe_ack_h;
  std::vector<std::array<std::byte, kProbeBytes>> probe_ack_in;
  std::vector<Handle> probe_answer_h;
  std::vector<std::array<std::byte, kProbeBytes>> probe_answer_out;
  std::vector<Handle> probe_send_h;
  std::vector<std::array<std::byte, kProbeBytes>> probe_out;
  std::vector<Discard> discards;
  // Sending.
  std::uint64_t next_index = 0;
  std::uint64_t acked = 0;  // the peer has everything below
  std::deque<Outgoing> out;
  bool awaiting_resume = false;  // moved: hold sends until the peer says where to resume
  TimePoint progress_at{};       // last acknowledgement, resume or arrival (stall clock)
  // Receiving.
  std::uint64_t low = 0;          // lowest index not received
  std::set<std::uint64_t> above;  // received indexes above `low`
  std::deque<Arrival> arrivals;   // index order per path change
  std::vector<Handle> posted;     // caller receives not attached, post order
  Handle descriptor_h = kNoHandle;
  std::array<std::byte, kDescriptorBytes> descriptor_in{};
  Handle ack_h = kNoHandle;
  std::array<std::byte, kAckBytes> ack_in{};
  Handle ack_send_h = kNoHandle;
  std::array<std::byte, kAckBytes> ack_out{};
  std::uint64_t ack_sent = 0;     // the peer knows of everything below (an ack or a stamp)
  bool ack_due = false;           // low > ack_sent since ack_due_since
  bool ack_urgent = false;        // wanted at once while the last one was still going out
  TimePoint ack_due_since{};
  std::deque<EarlyNote> notes;    // fast stint, index order
  Status read_back;               // a note that could not be read back at the move
};

class FailoverLink final : public algorithms::Link {
 public:
  FailoverLink(FailoverParams params, std::vector<std::unique_ptr<algorithms::PollableLink>> paths,
               int wake_fd);
  ~FailoverLink() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Handle send(int peer, algorithms::Tag tag, std::span<const std::byte> data) override;
  Handle recv(int peer, algorithms::Tag tag, std::span<std::byte> data) override;
  // As the first path: its receives combine in place in the fast stint; after a move, or
  // on a pair whose path is another that does not combine (path_peers), the payload is
  // received into a buffer and combined from there.
  bool combines() const override { return paths_.front()->combines(); }
  Handle recv_combine(int peer, algorithms::Tag tag, std::span<std::byte> data,
                      const algorithms::Combine& c) override;
  Status wait(Handle handle, Deadline deadline) override;
  void abort(const Status& reason) override;
  Status drain(Deadline deadline);

 private:
  // ---- operations (failover_link.cc) ----
  void check_peer(int peer) const;
  // A new caller operation, already failed when the link was aborted or the pair lost.
  Handle open_op(bool is_send, int peer, algorithms::Tag tag, std::byte* data, std::size_t size);
  Status give_up(Handle h, CallerOp& op);
  void finish(Handle h, Status st);
  Handle receive(int peer, algorithms::Tag tag, std::span<std::byte> data,
                 const std::optional<algorithms::Combine>& combine);
  // A receive just posted: the earliest unclaimed arrival with its tag, if any.
  void match_posted(Pair& p, Handle h);
  // A receive on a lost pair: what arrived whole before the loss, or the loss.
  void match_or_fail(Pair& p, Handle h);
  // wait()'s first look in the fast stint: the waited operation's own path operation,
  // after a look at its path (*looked: that path, or -1); true when that finished it.
  // Otherwise a whole round (service()) follows, as it does once a kOwnLookWindow anyway.
  bool poll_own(Handle h, const CallerOp& op, std::chrono::steady_clock::time_point now,
                int* looked);

  // One path operation of the pair looked at: still in flight, over (and handled), or
  // its path failed (and the pair moved or was lost).
  enum class Step { kPending, kDone, kPathFailed };

  // ---- the fast stint (failover_fast.cc) ----
  // The caller's receive `h` posted on the path as it is.
  void post_fast(Pair& p, Handle h);
  // A fast receive's path operation finished with `st` and `stamp`: it is over.
  void finish_fast(Pair& p, Arrival& a, const Status& st, std::uint64_t stamp);
  // Counts and acknowledges what arrived before its receive was posted (`acknowledge`:
  // a large one's acknowledgement goes out at once; not while the pair leaves its path).
  void collect_early(Pair& p, bool acknowledge = true);
  // An acknowledgement that came in a stamp (its low 24 bits).
  void on_stamped_ack(Pair& p, std::uint64_t low24);
  // The fast receive p.arrivals[i] (erased when over).
  Step step_fast(Pair& p, std::size_t i);
  // The fast stint ends: what its receives took counts, the rest are posted again, and
  // what arrived early is read back from the path into arrivals.
  void end_fast(Pair& p);

  // ---- the pair protocol (failover_pair.cc) ----
  // One round: moves bytes on every path without blocking, then looks at every pair.
  // `now`: the steady clock's reading, taken by the caller just before; `looked`: a path
  // the caller has just looked at (poll_own), not looked at again, or -1.
  void service(std::chrono::steady_clock::time_point now, int looked = -1);
  // ---- new connections of failed paths (failover_reconnect.cc) ----
  // Puts in the new connections of failed paths that arrived (FailoverParams::on_down),
  // and acts on gone notices.
  void take_reconnections();
  // Whether a pair whose every path failed waits for a new connection (stranded_grace,
  // paths re-dialled, the link not aborted).
  bool may_strand() const;
  // The pair waits so (its current path left): operations held, on_stranded told.
  void strand(Pair& p, const Status& why);
  // A stranded pair whose grace has passed on the link's clock fails.
  void expire_stranded(Pair& p);
  void service_pair(Pair& p);
  void service_controls(Pair& p);
  void service_arrivals(Pair& p);
  void service_sends(Pair& p);
  // The send of `o` on the pair's current path.
  Step step_out(Pair& p, Outgoing& o);
  void check_stall(Pair& p);
  // A path-level operation finished: collect it (nullopt while in flight), and the
  // stamp of what a receive took into *stamp.
  std::optional<Status> collect(int path, Handle& h, std::uint64_t* stamp = nullptr);
  void cancel(int path, Handle& h);
  void post_controls(Pair& p);
  void post_resume_listener(Pair& p, int path);
  void post_probe_listeners(Pair& p, int path);
  void cancel_listeners(Pair& p, int path);
  // Probes, their answers, and the drops of stale payloads, on every path not down.
  void service_probes(Pair& p);
  void maybe_probe(Pair& p);
  void post_out(Pair& p, Outgoing& o);
  // From now on `o` goes from a copy of its own (recycled buffers: no page faults).
  void keep_copy(Outgoing& o);
  void on_descriptor(Pair& p);
  void on_arrival(Arrival& a);  // delivers a finished arrival to its receive
  void drop_acknowledged(Pair& p);
  void on_ack(Pair& p, std::uint64_t low);
  // Finishes the sends of acknowledged messages that no path reads any more; drops them.
  void release_acknowledged(Pair& p);
  void on_resume(Pair& p, int path, std::uint32_t generation, std::uint64_t low);
  void mark_received(Pair& p, std::uint64_t index);
  // `now`: whatever the fast stint's policy, as the end of the link's use wants.
  void maybe_ack(Pair& p, bool now = false);
  // Path `path` of `p` failed with `why`: the pair moves to its next path, or fails.
  void fail_path(Pair& p, int path, const Status& why, bool stall);
  void leave_current(Pair& p);
  // Moves the pair to `path` in `generation` (this side's move: the next one; following
  // the peer: the peer's).
  void move_to(Pair& p, int path, std::uint32_t generation, const std::string& reason,
               bool stall, bool by_peer, bool recovery = false);
  void lose_pair(Pair& p, const Status& last);
  std::string pair_name(const Pair& p) const;
  std::string name_of(int rank) const;  // FailoverParams::rank_names, or "rank r"
  // Something is under way with the peer (a peer that leaves when done closes every path:
  // worth a warning only when this holds).
  bool busy(const Pair& p) const;
  // In the fast stint with nothing under way either way and nothing owed: a polling round
  // between two full looks looks only for its early arrivals (service()).
  bool quiet(const Pair& p) const;

  FailoverParams params_;
  std::vector<std::unique_ptr<algorithms::PollableLink>> paths_;
  int rank_ = 0;
  int size_ = 1;
  std::vector<Pair> pairs_;  // by rank; pairs_[rank_] unused
  CallerOps ops_;
  PayloadPool pool_;
  std::uint64_t next_order_ = 0;
  std::chrono::steady_clock::time_point last_full_look_{};
  std::chrono::steady_clock::time_point last_service_{};  // the last whole round
  TimePoint now_{};  // the stall clock at the start of the current service() round
  TimePoint last_round_{};  // ... and of the one before
  bool full_look_ = true;  // this round looks at every path (once a slice)
  std::uint64_t completions_ = 0;  // path operations collected so far (progress, for wait())
  bool moved_ = false;  // a look of this service() round moved bytes (progress, for wait())
  std::vector<std::size_t> acked_send_bytes_;  // per path: kAckedSendBytesMemory or ...Socket
  AbortState abort_;
  std::vector<algorithms::EarlyArrival> early_;  // collect_early's scratch
};

}  // namespace tributary::transport
