#include "gpu/ipc_all_reduce.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <string>

#include "algorithms/partition.h"
#include "algorithms/tags.h"
#include "core/little_endian.h"

namespace tributary::gpu {
namespace {

using algorithms::Link;
using algorithms::Tag;

constexpr std::size_t kVoteBytes = 8;  // {u32 status code (0: fine), u32 rank}
// The widest element: a chunk holds whole elements of any dtype.
constexpr std::size_t kMaxElement = 8;

// The steps of a chunk, as tag slots (slot 0 is the handle exchange of open()).
enum Step : std::uint64_t { kInputs = 0, kReduced = 1, kGathered = 2, kSteps = 3 };

std::uint32_t check_of(std::size_t count, DType dtype, ReduceOp op) {
  algorithms::Descriptor d;
  d.kind = algorithms::Collective::kAllReduce;
  d.count = count;
  d.dtype = dtype;
  d.op = op;
  d.algorithm = kIpcAllReduceAlgorithm;
  return algorithms::descriptor_check(d);
}

// Waits for every handle; the first error wins, and the link is aborted then (collectives.h).
Status wait_all(Link& link, const std::vector<Link::Handle>& handles, Deadline deadline) {
  Status first;
  for (Link::Handle h : handles) {
    Status st = link.wait(h, deadline);
    if (!st.is_ok() && first.is_ok()) {
      first = st;
      link.abort(st);
    }
  }
  return first;
}

// Sends `mine` to every peer and receives every peer's (`out[rank]`, this rank's own too).
template <std::size_t N>
Status exchange(Link& link, const Tag& tag, const std::array<std::byte, N>& mine,
                std::vector<std::array<std::byte, N>>& out, Deadline deadline) {
  const int n = link.size();
  out.assign(static_cast<std::size_t>(n), {});
  out[static_cast<std::size_t>(link.rank())] = mine;
  std::vector<Link::Handle> handles;
  handles.reserve(2 * static_cast<std::size_t>(n));
  for (int p = 0; p < n; ++p) {
    if (p != link.rank()) handles.push_back(link.recv(p, tag, out[static_cast<std::size_t>(p)]));
  }
  for (int p = 0; p < n; ++p) {
    if (p != link.rank()) handles.push_back(link.send(p, tag, mine));
  }
  return wait_all(link, handles, deadline);
}

std::array<std::byte, kVoteBytes> vote_bytes(const Status& st, int rank) {
  std::array<std::byte, kVoteBytes> v{};
  le::store<std::uint32_t>(v.data(), st.is_ok() ? 0u : static_cast<std::uint32_t>(st.code()));
  le::store<std::uint32_t>(v.data() + 4, static_cast<std::uint32_t>(rank));
  return v;
}

// The first failure among the votes (lowest rank), as the IPC path's failure.
Status verdict(const std::vector<std::array<std::byte, kVoteBytes>>& votes, const Status& mine,
               int rank, const char* what) {
  for (std::size_t r = 0; r < votes.size(); ++r) {
    const auto code = le::load<std::uint32_t>(votes[r].data());
    if (code == 0) continue;
    const std::string why =
        static_cast<int>(r) == rank
            ? mine.to_string()
            : std::string(to_string(static_cast<StatusCode>(code))) + " (its log says why)";
    return error(StatusCode::kUnavailable, std::string("the CUDA IPC path failed on rank ") +
                                               std::to_string(r) + " " + what + ": " + why);
  }
  return Status::ok();
}

}  // namespace

IpcAllReduce::IpcAllReduce(Link& link, DeviceMemory& memory, std::size_t buffer_bytes, Logger log)
    : link_(link), memory_(memory), log_(std::move(log)) {
  // Two halves of whole elements of any dtype.
  half_ = buffer_bytes / 2 / kMaxElement * kMaxElement;
}

IpcAllReduce::~IpcAllReduce() {
  for (std::size_t r = 0; r < buffers_.size(); ++r) {
    if (buffers_[r] != nullptr && static_cast<int>(r) != link_.rank())
      memory_.close_peer(buffers_[r]);
  }
  if (own_ != nullptr) memory_.free(own_);
}

Result<std::unique_ptr<IpcAllReduce>> IpcAllReduce::open(Link& link, DeviceMemory& memory,
                                                         std::size_t buffer_bytes,
                                                         std::uint64_t seq, Deadline deadline,
                                                         Logger log) {
  const int n = link.size();
  const int rank = link.rank();
  std::unique_ptr<IpcAllReduce> ipc(new IpcAllReduce(link, memory, buffer_bytes, std::move(log)));
  if (ipc->half_ < kMaxElement * static_cast<std::size_t>(n)) {
    return error(StatusCode::kInvalidArgument,
                 "a CUDA IPC exchange buffer of " + std::to_string(buffer_bytes) +
                     " bytes is too small for " + std::to_string(n) + " ranks");
  }
  // This rank's buffer and its handle; a failure is voted, not returned at once, so that
  // every rank comes to the same answer.
  Status mine;
  IpcHandle handle{};
  if (auto buffer = memory.allocate(2 * ipc->half_); !buffer.is_ok()) {
    mine = buffer.status();
  } else {
    ipc->own_ = *buffer;
    if (auto h = memory.export_handle(ipc->own_); h.is_ok()) {
      handle = *h;
    } else {
      mine = h.status();
    }
  }
  // Round 1: {vote, handle}.
  std::array<std::byte, kVoteBytes + kIpcHandleBytes> offer{};
  const auto v = vote_bytes(mine, rank);
  std::memcpy(offer.data(), v.data(), kVoteBytes);
  std::memcpy(offer.data() + kVoteBytes, handle.data(), kIpcHandleBytes);
  std::vector<std::array<std::byte, kVoteBytes + kIpcHandleBytes>> offers;
  const algorithms::TagMaker tags(seq, check_of(ipc->half_, DType::kUInt8, ReduceOp::kSum));
  TRIB_RETURN_IF_ERROR(exchange(link, tags.at(0), offer, offers, deadline));
  std::vector<std::array<std::byte, kVoteBytes>> votes(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r)
    std::memcpy(votes[static_cast<std::size_t>(r)].data(),
                offers[static_cast<std::size_t>(r)].data(), kVoteBytes);
  if (Status st = verdict(votes, mine, rank, "making its exchange buffer"); !st.is_ok()) return st;
  // Round 2: every rank maps every peer's buffer.
  ipc->buffers_.assign(static_cast<std::size_t>(n), nullptr);
  ipc->buffers_[static_cast<std::size_t>(rank)] = static_cast<std::byte*>(ipc->own_);
  for (int r = 0; r < n && mine.is_ok(); ++r) {
    if (r == rank) continue;
    IpcHandle peer{};
    std::memcpy(peer.data(), offers[static_cast<std::size_t>(r)].data() + kVoteBytes,
                kIpcHandleBytes);
    auto mapped = memory.open_peer(peer);
    if (!mapped.is_ok()) {
      mine = error(mapped.status().code(),
                   "mapping rank " + std::to_string(r) + "'s buffer: " + mapped.status().message());
      break;
    }
    ipc->buffers_[static_cast<std::size_t>(r)] = static_cast<std::byte*>(*mapped);
  }
  TRIB_RETURN_IF_ERROR(ipc->vote(tags.at(1), mine, deadline));
  ipc->log_.debug("CUDA IPC path: " + std::to_string(n) + " ranks on " + memory.describe() + ", " +
                  std::to_string(ipc->half_) + "-byte chunks");
  return ipc;
}

Status IpcAllReduce::vote(const Tag& tag, const Status& mine, Deadline deadline) {
  std::vector<std::array<std::byte, kVoteBytes>> votes;
  TRIB_RETURN_IF_ERROR(exchange(link_, tag, vote_bytes(mine, link_.rank()), votes, deadline));
  const char* what = tag.slot == 1 ? "mapping its peers' buffers" : "in a chunk";
  return verdict(votes, mine, link_.rank(), what);
}

IpcAllReduce::Outcome IpcAllReduce::all_reduce(const void* send, void* recv, std::size_t count,
                                               DType dtype, ReduceOp op, std::uint64_t seq,
                                               Deadline deadline) {
  Outcome out;
  if (!usable_) {
    out.status = error(StatusCode::kUnavailable, "the CUDA IPC path of this group failed before");
    return out;
  }
  const int n = link_.size();
  const int rank = link_.rank();
  const std::size_t elem = dtype_size(dtype);
  const std::size_t per_chunk = half_ / elem;
  const algorithms::TagMaker tags(seq, check_of(count, dtype, op));
  const auto* in = static_cast<const std::byte*>(send);
  auto* res = static_cast<std::byte*>(recv);
  const bool in_place = send == recv;
  std::byte* own_in = buffers_[static_cast<std::size_t>(rank)];
  const std::size_t chunks = std::max<std::size_t>(1, algorithms::num_chunks(count, per_chunk));
  for (std::size_t c = 0; c < chunks && count > 0; ++c) {
    const algorithms::Range chunk = algorithms::chunk_of({0, count}, per_chunk, c);
    const std::size_t bytes = chunk.count * elem;
    const std::size_t offset = chunk.begin * elem;
    // 1. This rank's input in place.
    Status mine = memory_.copy(own_in, in + offset, bytes);
    if (mine.is_ok()) mine = memory_.synchronize(deadline);
    Status st = vote(tags.at(2 + c * kSteps + kInputs), mine, deadline);
    // 2. This rank's slice, over every rank's input, in rank order.
    const algorithms::Range slice = algorithms::balanced_part(chunk.count, n, rank);
    if (st.is_ok()) {
      std::byte* dst = own_in + half_ + slice.begin * elem;
      if (slice.count > 0) {
        // Folded kMaxSources at a time, the partial result first in the next batch.
        std::vector<const void*> srcs;
        int next = 0;
        while (next < n && mine.is_ok()) {
          srcs.clear();
          if (next > 0) srcs.push_back(dst);
          while (next < n && static_cast<int>(srcs.size()) < DeviceMemory::kMaxSources) {
            srcs.push_back(buffers_[static_cast<std::size_t>(next++)] + slice.begin * elem);
          }
          const int divide = next == n && op == ReduceOp::kAvg ? n : 0;
          mine = memory_.reduce_sources(dst, srcs, slice.count, dtype, op, divide);
        }
      }
      if (mine.is_ok()) mine = memory_.synchronize(deadline);
      st = vote(tags.at(2 + c * kSteps + kReduced), mine, deadline);
    }
    // 3. Every rank's slice into recv.
    bool wrote = false;
    if (st.is_ok()) {
      wrote = true;
      for (int r = 0; r < n && mine.is_ok(); ++r) {
        const algorithms::Range s = algorithms::balanced_part(chunk.count, n, r);
        if (s.count == 0) continue;
        mine = memory_.copy(res + offset + s.begin * elem,
                            buffers_[static_cast<std::size_t>(r)] + half_ + s.begin * elem,
                            s.count * elem);
      }
      if (mine.is_ok()) mine = memory_.synchronize(deadline);
      st = vote(tags.at(2 + c * kSteps + kGathered), mine, deadline);
    }
    if (st.is_ok()) {
      out.done = chunk.end();
      continue;
    }
    if (st.code() != StatusCode::kUnavailable) {
      out.status = st;  // the host link: a member failure, not the IPC path's
      return out;
    }
    usable_ = false;
    if (!mine.is_ok())
      log_.warn("CUDA IPC path on rank " + std::to_string(rank) + ": " + mine.to_string());
    if (wrote && in_place) {
      // recv is send here: put back this chunk's input (only this rank writes its input
      // half) so that the staged path finds it.
      Status back = memory_.copy(res + offset, own_in, bytes);
      if (back.is_ok()) back = memory_.synchronize(deadline);
      if (!back.is_ok()) {
        out.status =
            error(StatusCode::kInternal,
                  "cannot restore the input of a chunk the CUDA IPC path left half done: " +
                      back.to_string());
        link_.abort(out.status);
        return out;
      }
    }
    out.status = st;
    return out;
  }
  return out;
}

Status all_reduce_with_fallback(IpcAllReduce* ipc, const void* send, void* recv, std::size_t count,
                                DType dtype, ReduceOp op, std::uint64_t seq, Deadline deadline,
                                const StagedAllReduce& staged, const Logger& log) {
  std::size_t done = 0;
  if (ipc != nullptr && ipc->usable()) {
    const IpcAllReduce::Outcome o = ipc->all_reduce(send, recv, count, dtype, op, seq, deadline);
    if (o.status.is_ok()) return o.status;
    if (o.status.code() != StatusCode::kUnavailable) return o.status;
    done = o.done;
    log.warn(o.status.to_string() + "; elements " + std::to_string(done) + ".." +
             std::to_string(count) +
             " of this all-reduce go on the staged path, and so does the "
             "rest of this group's");
  }
  if (done == count) return Status::ok();
  const std::size_t skip = done * dtype_size(dtype);
  return staged(static_cast<const std::byte*>(send) + skip, static_cast<std::byte*>(recv) + skip,
                count - done);
}

}  // namespace tributary::gpu
