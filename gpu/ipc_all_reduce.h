// All-reduce of device buffers between the ranks of one host over CUDA IPC: every rank
// maps every peer's exchange buffer and reduces its slice straight out of them, with the
// host link (TCP or shared memory, already authenticated) only carrying the handles and
// three small votes per chunk. When the IPC path fails on any rank (a handle that cannot be
// opened, a device copy or reduction that fails), every rank learns it from the next vote
// and the rest of the collective runs on the staged path (device -> pinned host -> the
// group's link -> device), in the same collective, with no view change: the per-pair
// fallback of docs/transports.md, for the NVLink/PCIe path of one host.
//
// Per chunk (at most half the exchange buffer; the other half holds the reduced slices):
//   1. copy this rank's input chunk into its exchange buffer's input half; synchronize.
//   vote "inputs in place"
//   2. reduce slice r of the chunk (balanced_part) over every rank's input half, in rank
//      order (a left fold: rank 0's (op) rank 1's (op) ...), one pass over the sources
//      (DeviceMemory::reduce_sources), into this rank's output half; kAvg divides once at
//      the end; synchronize.
//   vote "slices reduced"
//   3. gather every rank's reduced slice from its output half into recv; synchronize.
//   vote "chunk gathered": the chunk is done on every rank, and the buffers are free.
// Each slice is reduced once, by one rank, so every rank ends with the same bits.
//
// All or nothing per chunk: a vote that reports a failure on any rank ends the IPC part on
// every rank at that chunk: chunks before it are final in recv on every rank; from it on,
// recv holds nothing the collective wrote (an in-place chunk that step 3 had written is put
// back from the input half, which only this rank writes), so the staged path can take the
// rest from `send`. The group then stays on the staged path for the rest of its life
// (usable() is false): a path that failed is not retried within an epoch.
//
// Errors of the host link itself (a peer lost, a deadline) are not IPC failures: they are
// returned as the link reported them and the link is aborted, as every collective does
// (collectives.h), and the member-failure protocol takes over.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "algorithms/link.h"
#include "core/clock.h"
#include "core/dtype.h"
#include "core/log.h"
#include "core/status.h"
#include "gpu/device_memory.h"

namespace tributary::gpu {

// Descriptor::algorithm of the IPC all-reduce's tags: ranks that disagree on whether a
// collective runs over IPC fail with kMismatch instead of pairing wrong messages.
inline constexpr std::uint8_t kIpcAllReduceAlgorithm = 0xC1;

class IpcAllReduce {
 public:
  // Collective over `link`, whose ranks all run on this host: allocates this rank's
  // exchange buffer (`buffer_bytes`, at least 2 elements of the widest dtype per rank),
  // exchanges the handles under tag seq `seq`, and maps every peer's. When any rank could
  // not, every rank returns the same kUnavailable (naming the rank and why): the group has
  // no IPC path. Link errors as the link reported them.
  static Result<std::unique_ptr<IpcAllReduce>> open(algorithms::Link& link, DeviceMemory& memory,
                                                    std::size_t buffer_bytes, std::uint64_t seq,
                                                    Deadline deadline, Logger log = Logger());
  ~IpcAllReduce();  // unmaps the peers' buffers and frees this rank's (not collective)
  IpcAllReduce(const IpcAllReduce&) = delete;
  IpcAllReduce& operator=(const IpcAllReduce&) = delete;

  struct Outcome {
    // OK: recv holds the result. kUnavailable: the IPC path failed (every rank returns it
    // at the same chunk); recv[0, done) holds the result and [done, count) is for the staged
    // path to fill from send. Anything else: the host link failed.
    Status status;
    std::size_t done = 0;  // elements
  };
  // `send` and `recv`: `count` elements of `dtype` in device memory (the memory's), equal
  // or not overlapping. Tags under seq `seq` (every rank the same).
  Outcome all_reduce(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op,
                     std::uint64_t seq, Deadline deadline);

  // False once the IPC path failed: the caller goes staged for the rest of the group.
  bool usable() const { return usable_; }
  std::size_t chunk_bytes() const { return half_; }

 private:
  IpcAllReduce(algorithms::Link& link, DeviceMemory& memory, std::size_t buffer_bytes, Logger log);
  // Every rank tells every other its code (0: fine) for step `slot`; returns the first
  // failure (lowest rank) as kUnavailable, or a link error.
  Status vote(const algorithms::Tag& tag, const Status& mine, Deadline deadline);

  algorithms::Link& link_;
  DeviceMemory& memory_;
  Logger log_;
  std::size_t half_ = 0;  // bytes in each half of an exchange buffer
  void* own_ = nullptr;
  std::vector<std::byte*> buffers_;  // by rank: the peers' mapped, this rank's own
  bool usable_ = true;
};

// What the staged path does with the rest of a collective: all-reduce `count` elements
// from `send` into `recv` (device pointers, offsets into the caller's), on every rank.
using StagedAllReduce = std::function<Status(const void* send, void* recv, std::size_t count)>;

// The IPC all-reduce where the group has a usable IPC path (`ipc` not null), the staged
// path for whatever it left (all of it without one). The result is the same collective
// either way: every rank returns the same Status and holds the same bits.
Status all_reduce_with_fallback(IpcAllReduce* ipc, const void* send, void* recv, std::size_t count,
                                DType dtype, ReduceOp op, std::uint64_t seq, Deadline deadline,
                                const StagedAllReduce& staged, const Logger& log);

}  // namespace tributary::gpu
