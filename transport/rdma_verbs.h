// The narrow seam between the RDMA link's protocol (rdma_link.h) and libibverbs: what the
// link and its transport need from verbs, and nothing else, so that the protocol (chunks,
// credits, matching, errors, a dead peer) runs in unit tests over an in-memory fake
// (tests/transport/fake_verbs.h) on machines without an RDMA device. The libibverbs
// implementation is rdma_ibv.cc; this header includes no verbs header.
//
// Model (that of an RC queue pair, which the fake must keep):
// - A VerbsGroup is one link's resources: one completion queue, with a file descriptor
//   that becomes readable after arm() when a completion arrives, shared by one reliable
//   connected queue pair per peer. Each queue pair owns registered memory: `send_slots`
//   slots of `slot_bytes` it sends from and `recv_slots` slots it receives into.
// - post_send(peer, slot, bytes) sends the first `bytes` of a send slot as one message;
//   it lands in the slot of the oldest receive the peer posted, in order, exactly once.
//   A send to a peer with no receive posted is an error of the sender (the protocol's
//   credits make sure it never happens; the fake fails it, hardware would retry and
//   fail). A slot is the caller's again once its completion was polled.
// - poll() returns completions without blocking; a completion carries the wr_id given at
//   posting and, for a receive, the byte count. A failed completion (peer gone, queue pair
//   in error, flushed) has a non-ok status; after one, that queue pair is dead.
// - Threading: none. The link calls a group from one thread at a time (under its lock).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"

namespace tributary::transport {

// Registered memory per queue pair. Receive slots are the credits a peer starts with.
struct RdmaSlots {
  std::uint32_t send_slots = 16;
  std::uint32_t recv_slots = 32;        // at least 4 (credits are returned at half)
  std::uint32_t slot_bytes = 64 << 10;  // at least 64
};

// What one end of a pair tells the other to connect its queue pair to it.
struct QpAddress {
  std::uint32_t qpn = 0;
  std::uint32_t psn = 0;  // 24 bits
  std::uint16_t lid = 0;
  std::uint8_t mtu = 0;                // enum ibv_mtu: 1 (256 bytes) .. 5 (4096)
  std::array<std::uint8_t, 16> gid{};  // all zero: none (InfiniBand within a subnet, LID)
};

struct VerbsCompletion {
  std::uint64_t wr_id = 0;
  std::uint32_t byte_len = 0;  // receives: the bytes that arrived
  Status status;               // non-ok: the work request failed (its text says why)
};

class VerbsGroup {
 public:
  virtual ~VerbsGroup() = default;

  // This end of the queue pair to `peer`, in INIT, ready to be sent to the peer.
  virtual QpAddress local_address(int peer) const = 0;
  // INIT -> RTR -> RTS against the peer's address. Post receives before the peer may send.
  virtual Status connect(int peer, const QpAddress& remote) = 0;

  virtual std::span<std::byte> send_slot(int peer, std::uint32_t slot) = 0;
  virtual std::span<const std::byte> recv_slot(int peer, std::uint32_t slot) const = 0;
  virtual Status post_send(int peer, std::uint32_t slot, std::uint32_t bytes,
                           std::uint64_t wr_id) = 0;
  virtual Status post_recv(int peer, std::uint32_t slot, std::uint64_t wr_id) = 0;
  // Up to out.size() completions, without blocking; how many were written.
  virtual std::size_t poll(std::span<VerbsCompletion> out) = 0;

  // Asks for wake_fd() to become readable at the next completion. Poll once more after
  // arming before sleeping: a completion that came in between raises no event.
  virtual Status arm() = 0;
  virtual int wake_fd() const = 0;
  // After wake_fd() was readable: consumes (acknowledges) the events.
  virtual void clear_wakeups() = 0;
};

class VerbsDevice {
 public:
  virtual ~VerbsDevice() = default;
  // "<device>/<port>/<gid or lid>": the parameter of this member's "rdma:" advert.
  virtual std::string advert() const = 0;
  // A completion queue and one queue pair per rank in `peers`, each in INIT with `slots`
  // registered. kUnavailable (or kInternal) with the library's reason when refused.
  virtual Result<std::unique_ptr<VerbsGroup>> open_group(const std::vector<int>& peers,
                                                         const RdmaSlots& slots) = 0;
};

// The RDMA device this build can use: the first port in the active state (or `device`'s,
// when named), opened. kUnavailable with the reason otherwise: "built without
// libibverbs", "no RDMA device: ibv_get_device_list found none", "no active port on ...".
// Implemented by rdma_ibv.cc (libibverbs found at build time) or rdma_ibv_absent.cc.
Result<std::shared_ptr<VerbsDevice>> open_rdma_device(const std::string& device = "");
// Whether this build has the libibverbs implementation.
bool rdma_verbs_built();

}  // namespace tributary::transport
