// The receiving side of a message stream, shared by the links that carry their messages
// as one byte stream per peer of {header, payload} (shared memory's rings, RDMA's
// chunks): what a header starts (a payload straight into a posted receive, one buffered
// until its receive is posted, one read and dropped, or an abort notice) and what its end
// finishes; the receive posted for a message that arrived first; a peer's failure. The
// links keep their own headers, framing and errors; their `Peer` derives from StreamPeer.
// Internal to transport/.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "algorithms/link.h"
#include "algorithms/pollable_link.h"
#include "core/status.h"
#include "transport/link_ops.h"
#include "transport/payload_pool.h"

namespace tributary::transport {

// kSingleCopy: the shared-memory link's descriptor of a message read from the sender's
// memory (shm_link.h); the other links never enter it.
enum class Inbound : std::uint8_t { kHeader, kDirect, kUnexpected, kDiscard, kNotice, kSingleCopy };

// What such a link keeps of one peer's stream, whatever carries it: the connection that is
// the peer's pulse, the send queue, and the receiving state the functions below move. The
// links' own Peer derives from it with what their medium needs (rings, credits, slots).
template <typename Header>
struct StreamPeer {
  int rank = -1;
  int fd = -1;  // the peer's connection: its pulse, and the notices' way when the medium fails
  std::string address;
  Status failed;
  // Sending: the stream's queue.
  std::deque<std::uint32_t> sendq;  // wire order; the head may be partly written
  std::size_t head_written = 0;     // of the head's header + payload
  // Receiving: receives posted ahead of their message, messages that arrived ahead of
  // their receive, and the message arriving now (its header, then its payload to `dst`).
  std::vector<std::uint32_t> posted;
  std::deque<EarlyMessage> arrived;  // back() may still be arriving
  Inbound state = Inbound::kHeader;
  Header header;
  std::size_t header_got = 0;
  std::byte* dst = nullptr;
  std::uint64_t length = 0;
  std::uint64_t remaining = 0;
  std::uint32_t direct_op = 0;
  std::vector<std::byte> notice;
};

// Receive `i` is posted on peer `p`: the early message it matches, which the link then
// copies (what arrived of it) and hands over with take_early(); or `arrived.end()`, and
// the receive waits among the posted ones, or fails at once when the link was aborted or
// the peer has failed.
template <typename Peer, typename Ops>
std::deque<EarlyMessage>::iterator match_early(Peer& p, Ops& ops, std::uint32_t i,
                                               const AbortState& abort) {
  auto& op = ops[i];
  const auto match = std::find_if(p.arrived.begin(), p.arrived.end(),
                                  [&](const EarlyMessage& a) { return a.tag == op.tag; });
  if (match != p.arrived.end() && (!abort.raised() || match->deliverable_after_abort())) {
    return match;
  }
  if (abort.raised() || !p.failed.is_ok()) {
    op.finish(abort.raised() ? abort.status() : p.failed);
  } else {
    p.posted.push_back(i);
  }
  return p.arrived.end();
}

// Early message `m`, copied into receive `i` as far as it arrived (`st`: whether it
// matched the receive), is done with: the rest of one still arriving goes straight to the
// receive's buffer (or nowhere, when it did not match), the receive ends now when the
// message was whole or did not match, and its buffer goes back to the pool.
template <typename Peer, typename Ops>
void take_early(Peer& p, Ops& ops, PayloadPool& pool, std::deque<EarlyMessage>::iterator m,
                std::uint32_t i, Status st) {
  auto& op = ops[i];
  if (!m->complete) {
    p.state = st.is_ok() ? Inbound::kDirect : Inbound::kDiscard;
    p.dst = st.is_ok() ? op.data : nullptr;
    p.direct_op = i;
  }
  if (m->complete || !st.is_ok()) op.finish(std::move(st));
  pool.give_back(std::move(m->bytes));
  p.arrived.erase(m);
}

// Peer `p` failed with `st`: the receive it was filling, the posted receives and the
// queued sends fail with it, a half-arrived early message is dropped, its connection is
// closed and the stream starts over at a header (nothing more comes). The link logs and
// fails what else it keeps per peer.
template <typename Peer, typename Ops>
void fail_stream_peer(Peer& p, Ops& ops, PayloadPool& pool, Status st) {
  if (p.state == Inbound::kDirect) p.posted.push_back(p.direct_op);
  if (p.state == Inbound::kUnexpected) {
    pool.give_back(std::move(p.arrived.back().bytes));
    p.arrived.pop_back();
  }
  ops.fail_queued(p.posted, p.sendq, st);
  ::close(p.fd);
  p.fd = -1;
  p.failed = std::move(st);
  p.state = Inbound::kHeader;
  p.dst = nullptr;
  p.head_written = 0;
}

// A header has arrived, checked by the link: sets where its `length` payload bytes go;
// its `stamp` goes with it (PendingOp::stamp, EarlyMessage::stamp).
// The caller ends the payload at once when `length` is 0. `peer_name()` names the peer in
// a mismatch's error (only then: it builds a string).
template <typename Peer, typename Ops, typename PeerName>
void start_inbound(Peer& p, Ops& ops, PayloadPool& pool, const PeerName& peer_name,
                   const algorithms::Tag& tag, std::uint64_t length, std::uint64_t stamp,
                   bool notice) {
  p.length = p.remaining = length;
  const std::optional<std::uint32_t> posted =
      notice ? std::nullopt : ops.take_posted(p.posted, tag);
  if (notice) {
    p.notice.resize(length);
    p.state = Inbound::kNotice;
    p.dst = p.notice.data();
  } else if (!posted) {  // early: buffered until its receive is posted
    EarlyMessage& a = p.arrived.emplace_back();
    a.tag = tag;
    a.length = length;
    a.stamp = stamp;
    a.bytes = pool.take(length);
    p.state = Inbound::kUnexpected;
    p.dst = a.bytes.get();
  } else {
    ops[*posted].stamp = stamp;
    Status st = fits(ops[*posted], length, tag.check)
                    ? Status()
                    : match_status(peer_name(), ops[*posted], length, tag.check);
    p.state = st.is_ok() ? Inbound::kDirect : Inbound::kDiscard;
    p.dst = st.is_ok() ? ops[*posted].data : nullptr;
    p.direct_op = *posted;
    if (!st.is_ok()) ops[*posted].finish(std::move(st));
  }
}

// The payload is complete: finishes its receive or marks it arrived. True when it was an
// abort notice, which the link then reads (parse_notice).
template <typename Peer, typename Ops>
bool finish_inbound(Peer& p, Ops& ops) {
  const Inbound finished = std::exchange(p.state, Inbound::kHeader);
  p.dst = nullptr;
  switch (finished) {
    case Inbound::kDirect: ops[p.direct_op].finish(Status()); return false;
    case Inbound::kUnexpected: p.arrived.back().complete = true; return false;
    case Inbound::kNotice: return true;
    default: return false;
  }
}

// PollableLink::report_early over a peer's early messages: the whole, stamped ones not yet
// reported (a single-copy one is not whole until read: its sender's send is not over).
inline void report_early_messages(std::deque<EarlyMessage>& early,
                                  std::vector<algorithms::EarlyArrival>& out) {
  for (EarlyMessage& m : early) {
    if (!m.complete || m.single_copy || m.reported || m.stamp == 0) continue;
    m.reported = true;
    out.push_back({m.tag, m.length, m.stamp});
  }
}

// An abort notice's payload {code, origin rank, reason}; nullopt when it is not one.
struct StreamNotice {
  Status status;  // "rank R aborted: reason", with the origin's code
  std::uint32_t origin = 0;
  std::string reason;
};
// The longest notice payload a link sends: code, origin, and the reason cut to fit.
inline constexpr std::size_t kMaxNoticeBytes = 8 + 1024;

// The payload of the notice this link sends its peers when it aborts with `reason`: a
// notice it received (`received`) with that very status is relayed in its origin's words
// (origin rank, reason), instead of wrapped again as this rank's; otherwise this `rank`'s.
inline std::vector<std::byte> encode_notice(const Status& reason,
                                            const std::vector<StreamNotice>& received,
                                            std::uint32_t rank) {
  std::string text = reason.message();
  std::uint32_t origin = rank;
  for (const StreamNotice& r : received) {
    if (r.status.code() == reason.code() && r.status.message() == reason.message()) {
      origin = r.origin;
      text = r.reason;
      break;
    }
  }
  text.resize(std::min(text.size(), kMaxNoticeBytes - 8));
  std::vector<std::byte> payload(8 + text.size());
  const auto code = static_cast<std::uint32_t>(reason.code());
  std::memcpy(payload.data(), &code, 4);
  std::memcpy(payload.data() + 4, &origin, 4);
  std::memcpy(payload.data() + 8, text.data(), text.size());
  return payload;
}

inline std::optional<StreamNotice> parse_notice(const std::vector<std::byte>& notice) {
  std::uint32_t code = 0;
  std::uint32_t origin = 0;
  if (notice.size() >= 8) {
    std::memcpy(&code, notice.data(), 4);
    std::memcpy(&origin, notice.data() + 4, 4);
  }
  if (code == 0 || code > static_cast<std::uint32_t>(StatusCode::kInternal)) return std::nullopt;
  std::string reason(reinterpret_cast<const char*>(notice.data() + 8), notice.size() - 8);
  Status st(static_cast<StatusCode>(code), "rank " + std::to_string(origin) + " aborted: " + reason);
  return StreamNotice{std::move(st), origin, std::move(reason)};
}

}  // namespace tributary::transport
