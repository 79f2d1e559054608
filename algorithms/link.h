// The narrow interface every collective algorithm is written against.
//
// A Link connects one rank to the other ranks of one epoch's group: it knows its rank,
// the group size, and how to move bytes to and from a peer. It knows nothing about
// sockets, shared memory or threads; the TCP link (agent/), the in-memory link
// (memory_link.h) and any later transport implement it.
//
// Matching: a send to `peer` with tag T is received by that peer's recv from this rank
// with tag T. Messages with the same (peer, tag) are matched in order. A receive must
// name the exact byte count; a message of another length, or whose Tag::check differs,
// fails the receive with kMismatch (ranks disagree about the collective).
//
// Buffers: a posted send's and receive's memory must stay valid until wait() returns for
// that handle, or until abort() returns. After abort() returns the link touches no caller
// buffer again.
//
// Errors are sticky and fatal to the link: once any wait() reports an error, the caller
// abandons the link (abort() it); a new epoch gets new links. This is what makes partial
// collectives safe to discard.
//
// Threading: one thread issues operations; abort() may be called from any thread and
// wakes every waiter.
//
// Combining receives (optional, combines()): recv_combine() receives like recv() but
// reduces the payload with an operand into the destination as the bytes arrive, so a
// reduction costs no extra pass over a received buffer (the shared-memory link reduces
// straight out of the peer's ring, the TCP link out of a cache-sized bounce it checksums
// there). The operand must stay valid and unchanged until wait() returns; it may alias the
// destination exactly (in place). Until wait() returns OK the destination's bytes are
// unspecified (part combined, or not at all); the result is bitwise what receiving and
// then reduce_to(dst, incoming, operand) (or operand, incoming) would give.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <span>

#include "core/clock.h"
#include "core/dtype.h"
#include "core/status.h"

namespace tributary::algorithms {

struct Tag {
  std::uint64_t seq = 0;    // the collective's sequence number, equal on every rank
  std::uint32_t slot = 0;   // step / chunk inside the collective
  std::uint32_t check = 0;  // descriptor of the collective (op, dtype, count); must agree
  bool operator==(const Tag& other) const { return seq == other.seq && slot == other.slot; }
  auto operator<=>(const Tag& other) const {
    if (auto c = seq <=> other.seq; c != 0) return c;
    return slot <=> other.slot;
  }
};

// How recv_combine() combines: dst[i] = incoming[i] (op) operand[i] when incoming_first,
// else operand[i] (op) incoming[i]; operand holds as many bytes as dst.
struct Combine {
  const std::byte* operand = nullptr;
  DType dtype = DType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  bool incoming_first = true;
};

class Link {
 public:
  using Handle = std::uint64_t;

  virtual ~Link() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Starts sending `data` to `peer` (peer != rank()).
  virtual Handle send(int peer, Tag tag, std::span<const std::byte> data) = 0;
  // Starts receiving exactly data.size() bytes from `peer` (peer != rank()).
  virtual Handle recv(int peer, Tag tag, std::span<std::byte> data) = 0;
  // Blocks until the operation completes, fails, the link is aborted, or `deadline`.
  // Returns kOk, kPeerLost, kTimedOut, kAborted, kMismatch or kBadFrame.
  virtual Status wait(Handle handle, Deadline deadline) = 0;
  // Fails every pending and future operation with `reason`. Idempotent, thread-safe.
  virtual void abort(const Status& reason) = 0;

  // Whether recv_combine() is supported (header comment). Callers that get false receive
  // into a buffer of their own and reduce after wait().
  virtual bool combines() const { return false; }
  // Starts receiving exactly dst.size() bytes from `peer`, combined with c.operand into dst
  // (dst.size() a multiple of c.dtype's size). Only when combines().
  virtual Handle recv_combine(int peer, Tag tag, std::span<std::byte> dst, const Combine& c);
};

}  // namespace tributary::algorithms
