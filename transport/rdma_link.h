// The Link of one epoch over RDMA verbs: one reliable connected (RC) queue pair per peer
// (rdma_verbs.h), built by RdmaTransport (rdma_transport.h); tests build one directly
// over fake verbs.
//
// Guarantees, on top of algorithms/link.h (the same as ShmLink's, shm_link.h):
// - Per peer and direction, a byte stream of messages (a 32-byte header, then the
//   payload) cut into chunks that are RDMA sends from registered send slots into the
//   peer's registered receive slots. A chunk starts with 8 bytes: the credits it returns
//   and how many stream bytes follow. A message of any size (up to max_frame_bytes) moves
//   through slots of any size, several small messages share a chunk, and the receiver
//   copies each chunk out as it arrives.
// - Credit-based flow control: a sender starts with as many credits as the peer has
//   receive slots posted and spends one per chunk, so a send always finds a receive
//   posted. A receiver reposts a slot as soon as it copied it out, and returns the
//   credits with its next chunk, or in a chunk of its own once it owes half its slots.
//   Data keeps the last credit back for such a chunk, so two peers that both send never
//   both run out of credits (no deadlock).
// - No thread of its own: the thread in wait() polls the completion queue, copies
//   arrivals out and queued sends in. A payload whose recv is posted goes straight into
//   the caller's buffer, one that arrives first is buffered and copied once when matched.
// - Waits spin for `busy_poll`, then arm the completion queue and sleep in poll(2) on its
//   completion channel, every peer's TCP connection and an eventfd. The connection is the
//   peer's pulse: when the peer process dies the kernel closes it and the sleeper wakes at
//   once; chunks already in this side's completion queue are still delivered, later
//   operations fail with kPeerLost naming the rank. A failed completion (the queue pair's
//   retries exhausted) fails that peer with kPeerLost too. A peer that is alive but silent
//   runs into the caller's deadline (kTimedOut).
// - A chunk or header that does not parse fails that peer with kBadFrame.
// - abort(): as ShmLink: an error reason is first sent to every peer as an abort notice
//   when the credits allow it without blocking (and waited for up to 100 ms, so it lands
//   before the connection closes), the connections are shut down, and abort() returns
//   only once no caller buffer is being touched.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "algorithms/link.h"
#include "transport/link_ops.h"
#include "transport/rdma_verbs.h"
#include "transport/shm_link.h"  // TrafficCounters

namespace tributary::transport {

struct RdmaPeer {
  int rank = -1;
  int fd = -1;  // the pair's authenticated TCP connection: the pulse; owned
  std::string address;
  std::uint32_t peer_recv_slots = 0;  // the credits this side starts with
  std::uint32_t chunk_bytes = 0;      // min(own, peer's slot_bytes): one send's most bytes
};

struct RdmaLinkParams : StreamLinkParams {
  RdmaSlots slots;  // this side's; the group's queue pairs were opened with them
  std::shared_ptr<TrafficCounters> counters;  // required
};

// Posts every receive slot of the queue pair to `peer`: before this side tells the peer
// it is ready, so the peer's first chunks find receives posted.
Status post_initial_receives(VerbsGroup& group, int peer, const RdmaSlots& slots);

// Takes ownership of the connections (closed on failure too) and of `group`, whose queue
// pairs to `peers` are connected (RTS) with their receives posted.
Result<std::unique_ptr<algorithms::Link>> make_rdma_link(RdmaLinkParams params,
                                                         std::unique_ptr<VerbsGroup> group,
                                                         std::vector<RdmaPeer> peers);

}  // namespace tributary::transport
