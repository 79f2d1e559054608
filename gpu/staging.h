// Staging of device tensors through pinned host memory, for collectives whose transport
// moves host bytes (TCP, shared memory): the narrow interface the agent calls when a
// collective is given device pointers.
//
// Send: the tensor is cut into chunks of `chunk_elements`; each chunk is compressed on the
// GPU into its own payload (a complete qint payload, element_offset advanced by the chunk
// start so the RNG bits are the unchunked ones), copied device->host into one of `depth`
// pinned buffers on a copy stream, and handed to the caller's SendBytes. While the host
// sends chunk i, the GPU encodes and copies chunks i+1 .. i+depth-1: the copies hide behind
// the network. Encode of chunk i+1 also overlaps the copy of chunk i (separate streams).
//
// Receive: each chunk's payload lands in a pinned buffer through RecvBytes, is validated
// there (check_payload: the CPU decoder's checks), copied host->device and decoded with
// accumulation into the destination on the GPU; the copy and decode of chunk i overlap the
// receive of chunk i+1.
//
// Ownership and failure: the pipeline owns its pinned and device buffers (sized once, for
// a chunk) and its copy stream. The callbacks run on the calling thread, in chunk order;
// a span passed to SendBytes is valid only during the call. When a callback fails, or a
// chunk holds a non-finite value (kInvalidArgument, as the CPU encoder), the call drains
// its in-flight GPU work and returns that Status; with error feedback the residual is then
// unspecified, so callers snapshot it (ErrorFeedback::snapshot on the CPU side) before a
// collective that may abort. receive_accumulate validates each chunk before any of its
// bytes reach the GPU, but chunks before a bad one have been accumulated: the caller's
// collective keeps its inputs until the outcome is known (DESIGN.md, all-or-nothing).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "core/status.h"
#include "gpu/device_codec.h"

namespace tributary::gpu {

struct StagingConfig {
  QIntParams codec;  // qint8 or qint4 on the wire
  std::size_t chunk_elements = std::size_t{1} << 22;
  int depth = 3;  // pinned buffers in flight: 2 double, 3 triple buffering
};

// "Send these host bytes": returns once the bytes may be reused.
using SendBytes = std::function<Status(std::span<const std::byte> payload)>;
// "Receive the next payload into these host bytes": returns the payload's length.
using RecvBytes = std::function<Result<std::size_t>(std::span<std::byte> buffer)>;

// Timings of the last send or receive (milliseconds), for the bench and metrics.
struct StagingStats {
  std::size_t chunks = 0;
  std::size_t wire_bytes = 0;
  double total_ms = 0;     // wall time of the whole call
  double callback_ms = 0;  // inside SendBytes / RecvBytes (the network)
  double copy_ms = 0;      // sum of the D2H (send) or H2D (receive) copy durations (events)
  double codec_ms = 0;     // sum of the encode or decode kernel durations (events)
};

class StagingPipeline {
 public:
  // `stream` is the caller's compute stream: encode/decode run on it, ordered after the
  // caller's earlier work (the gradient is ready), and the receive's result is ordered on it.
  static Result<std::unique_ptr<StagingPipeline>> create(const StagingConfig& config,
                                                         cudaStream_t stream);
  ~StagingPipeline();
  StagingPipeline(const StagingPipeline&) = delete;
  StagingPipeline& operator=(const StagingPipeline&) = delete;

  // Compresses d_x[0, count) chunk by chunk and sends each payload. options.residual, if
  // set, is the whole tensor's residual (count floats), chunked alongside.
  Status send(const float* d_x, std::size_t count, const DeviceEncodeOptions& options,
              const SendBytes& send_bytes);

  // Receives count elements' worth of chunks (the sender's chunking) and adds them into
  // d_accum on the GPU. Returns once every chunk is accumulated (the stream synchronised).
  Status receive_accumulate(float* d_accum, std::size_t count, const RecvBytes& recv_bytes);

  const StagingStats& last_stats() const { return stats_; }
  std::size_t chunk_payload_bytes() const { return chunk_bytes_; }

 private:
  struct Slot {
    std::byte* host = nullptr;        // pinned, chunk_bytes_
    std::byte* device = nullptr;      // chunk_bytes_
    std::uint32_t* d_flag = nullptr;  // non-finite flag of the chunk in this slot
    std::uint32_t* h_flag = nullptr;  // pinned copy of it
    cudaEvent_t codec_begin = nullptr, codec_end = nullptr;
    cudaEvent_t copy_begin = nullptr, copy_end = nullptr;
  };
  StagingPipeline(const StagingConfig& config, cudaStream_t stream);
  Status init();
  Status enqueue_send(std::size_t chunk, Slot& slot, const float* d_x, std::size_t count,
                      const DeviceEncodeOptions& options);
  Status drain(Status status);
  void add_event_times(std::size_t slots_used);

  StagingConfig config_;
  cudaStream_t stream_;
  cudaStream_t copy_stream_ = nullptr;
  std::size_t chunk_bytes_ = 0;
  std::vector<Slot> slots_;
  StagingStats stats_;
};

}  // namespace tributary::gpu
