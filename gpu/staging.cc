// StagingPipeline (gpu/staging.h): host code over the CUDA runtime API; the kernels are
// gpu/qint.cu's.
#include "gpu/staging.h"

#include <chrono>
#include <string>

#include "gpu/cuda_status.h"

namespace tributary::gpu {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

constexpr std::size_t kFlagOffset(std::size_t bytes) { return (bytes + 15) & ~std::size_t{15}; }

}  // namespace

StagingPipeline::StagingPipeline(const StagingConfig& config, cudaStream_t stream)
    : config_(config), stream_(stream) {}

Result<std::unique_ptr<StagingPipeline>> StagingPipeline::create(const StagingConfig& config,
                                                                 cudaStream_t stream) {
  const QIntParams& c = config.codec;
  if ((c.bits != 8 && c.bits != 4) || c.bucket == 0 || c.bucket > (1u << 24) ||
      (c.bits == 4 && c.bucket % 2 != 0)) {
    return error(StatusCode::kInvalidArgument, "staging: bad qint parameters");
  }
  if (config.chunk_elements == 0 || config.chunk_elements > compression::kMaxPayloadElements) {
    return error(StatusCode::kInvalidArgument, "staging: chunk_elements must be in [1, 2^32-1]");
  }
  if (config.depth < 2 || config.depth > 8) {
    return error(StatusCode::kInvalidArgument, "staging: depth must be 2..8");
  }
  std::unique_ptr<StagingPipeline> p(new StagingPipeline(config, stream));
  TRIB_RETURN_IF_ERROR(p->init());
  return p;
}

Status StagingPipeline::init() {
  chunk_bytes_ = qint_payload_bytes(config_.codec, config_.chunk_elements);
  const std::size_t alloc = kFlagOffset(chunk_bytes_) + 16;
  TRIB_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking),
                            "staging: copy stream");
  slots_.resize(static_cast<std::size_t>(config_.depth));
  for (Slot& s : slots_) {
    void* host = nullptr;
    void* device = nullptr;
    TRIB_CUDA_RETURN_IF_ERROR(cudaMallocHost(&host, alloc), "staging: pinned buffer");
    s.host = static_cast<std::byte*>(host);
    s.h_flag = reinterpret_cast<std::uint32_t*>(s.host + kFlagOffset(chunk_bytes_));
    TRIB_CUDA_RETURN_IF_ERROR(cudaMalloc(&device, alloc), "staging: device buffer");
    s.device = static_cast<std::byte*>(device);
    s.d_flag = reinterpret_cast<std::uint32_t*>(s.device + kFlagOffset(chunk_bytes_));
    for (cudaEvent_t* e : {&s.codec_begin, &s.codec_end, &s.copy_begin, &s.copy_end}) {
      TRIB_CUDA_RETURN_IF_ERROR(cudaEventCreate(e), "staging: event");
    }
  }
  return Status::ok();
}

StagingPipeline::~StagingPipeline() {
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  if (copy_stream_ != nullptr) cudaStreamSynchronize(copy_stream_);
  for (Slot& s : slots_) {
    for (cudaEvent_t e : {s.codec_begin, s.codec_end, s.copy_begin, s.copy_end}) {
      if (e != nullptr) cudaEventDestroy(e);
    }
    if (s.host != nullptr) cudaFreeHost(s.host);
    if (s.device != nullptr) cudaFree(s.device);
  }
  if (copy_stream_ != nullptr) cudaStreamDestroy(copy_stream_);
}

Status StagingPipeline::drain(Status status) {
  const cudaError_t a = cudaStreamSynchronize(stream_);
  const cudaError_t b = cudaStreamSynchronize(copy_stream_);
  if (!status.is_ok()) return status;
  TRIB_CUDA_RETURN_IF_ERROR(a, "staging: compute stream");
  return detail::cuda_status(b, "staging: copy stream");
}

// Adds one slot's last codec and copy durations (its events have completed).
void StagingPipeline::add_event_times(std::size_t slot) {
  float ms = 0;
  Slot& s = slots_[slot];
  if (cudaEventElapsedTime(&ms, s.codec_begin, s.codec_end) == cudaSuccess) stats_.codec_ms += ms;
  if (cudaEventElapsedTime(&ms, s.copy_begin, s.copy_end) == cudaSuccess) stats_.copy_ms += ms;
}

Status StagingPipeline::enqueue_send(std::size_t chunk, Slot& s, const float* d_x,
                                     std::size_t count, const DeviceEncodeOptions& options) {
  const std::size_t begin = chunk * config_.chunk_elements;
  const std::size_t n = std::min(config_.chunk_elements, count - begin);
  DeviceEncodeOptions o = options;
  o.element_offset += begin;
  if (o.residual != nullptr) o.residual += begin;
  TRIB_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(s.d_flag, 0, 4, stream_), "staging: flag");
  TRIB_CUDA_RETURN_IF_ERROR(cudaEventRecord(s.codec_begin, stream_), "staging: event");
  TRIB_RETURN_IF_ERROR(qint_encode(d_x + begin, n, config_.codec, o, s.device, s.d_flag, stream_));
  TRIB_CUDA_RETURN_IF_ERROR(cudaEventRecord(s.codec_end, stream_), "staging: event");
  TRIB_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(copy_stream_, s.codec_end, 0), "staging: wait");
  TRIB_CUDA_RETURN_IF_ERROR(cudaEventRecord(s.copy_begin, copy_stream_), "staging: event");
  TRIB_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(s.host, s.device, qint_payload_bytes(config_.codec, n),
                                            cudaMemcpyDeviceToHost, copy_stream_),
                            "staging: D2H");
  TRIB_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(s.h_flag, s.d_flag, 4, cudaMemcpyDeviceToHost, copy_stream_),
      "staging: D2H flag");
  return detail::cuda_status(cudaEventRecord(s.copy_end, copy_stream_), "staging: event");
}

Status StagingPipeline::send(const float* d_x, std::size_t count,
                             const DeviceEncodeOptions& options, const SendBytes& send_bytes) {
  stats_ = {};
  const auto t0 = Clock::now();
  const std::size_t chunks = (count + config_.chunk_elements - 1) / config_.chunk_elements;
  const std::size_t depth = slots_.size();
  for (std::size_t i = 0; i < chunks && i < depth; ++i) {
    const Status st = enqueue_send(i, slots_[i], d_x, count, options);
    if (!st.is_ok()) return drain(st);
  }
  for (std::size_t i = 0; i < chunks; ++i) {
    Slot& s = slots_[i % depth];
    const Status synced = detail::cuda_status(cudaEventSynchronize(s.copy_end), "staging: chunk");
    if (!synced.is_ok()) return drain(synced);
    add_event_times(i % depth);
    if (*s.h_flag != 0) {
      return drain(error(StatusCode::kInvalidArgument, "staging: non-finite value in chunk " +
                                                           std::to_string(i) +
                                                           " (a qint scale cannot represent it)"));
    }
    const std::size_t n = std::min(config_.chunk_elements, count - i * config_.chunk_elements);
    const std::size_t bytes = qint_payload_bytes(config_.codec, n);
    const auto tb = Clock::now();
    const Status sent = send_bytes(std::span<const std::byte>(s.host, bytes));
    stats_.callback_ms += ms_since(tb);
    if (!sent.is_ok()) return drain(sent);
    stats_.wire_bytes += bytes;
    if (i + depth < chunks) {
      const Status st = enqueue_send(i + depth, s, d_x, count, options);
      if (!st.is_ok()) return drain(st);
    }
  }
  stats_.chunks = chunks;
  stats_.total_ms = ms_since(t0);
  return Status::ok();
}

Status StagingPipeline::receive_accumulate(float* d_accum, std::size_t count,
                                           const RecvBytes& recv_bytes) {
  stats_ = {};
  const auto t0 = Clock::now();
  const std::size_t chunks = (count + config_.chunk_elements - 1) / config_.chunk_elements;
  const std::size_t depth = slots_.size();
  for (std::size_t i = 0; i < chunks; ++i) {
    Slot& s = slots_[i % depth];
    if (i >= depth) {  // the slot's previous chunk must be decoded before its buffers are reused
      const Status synced =
          detail::cuda_status(cudaEventSynchronize(s.codec_end), "staging: chunk");
      if (!synced.is_ok()) return drain(synced);
      add_event_times(i % depth);
    }
    const auto tb = Clock::now();
    auto got = recv_bytes(std::span<std::byte>(s.host, chunk_bytes_));
    stats_.callback_ms += ms_since(tb);
    if (!got) return drain(got.status());
    if (*got > chunk_bytes_)
      return drain(error(StatusCode::kInvalidArgument, "staging: receive overran the buffer"));
    const std::size_t begin = i * config_.chunk_elements;
    const std::size_t n = std::min(config_.chunk_elements, count - begin);
    auto header = check_payload(std::span<const std::byte>(s.host, *got), n);
    if (!header) return drain(header.status());
    stats_.wire_bytes += *got;
    Status st = detail::cuda_status(cudaEventRecord(s.copy_begin, copy_stream_), "staging: event");
    if (st.is_ok()) {
      st = detail::cuda_status(
          cudaMemcpyAsync(s.device, s.host, *got, cudaMemcpyHostToDevice, copy_stream_),
          "staging: H2D");
    }
    if (st.is_ok())
      st = detail::cuda_status(cudaEventRecord(s.copy_end, copy_stream_), "staging: event");
    if (st.is_ok())
      st = detail::cuda_status(cudaStreamWaitEvent(stream_, s.copy_end, 0), "staging: wait");
    if (st.is_ok())
      st = detail::cuda_status(cudaEventRecord(s.codec_begin, stream_), "staging: event");
    if (st.is_ok()) st = qint_decode(*header, s.device, d_accum + begin, n, true, stream_);
    if (st.is_ok())
      st = detail::cuda_status(cudaEventRecord(s.codec_end, stream_), "staging: event");
    if (!st.is_ok()) return drain(st);
  }
  const Status done = drain(Status::ok());
  if (!done.is_ok()) return done;
  for (std::size_t i = chunks > depth ? chunks - depth : 0; i < chunks; ++i)
    add_event_times(i % depth);
  stats_.chunks = chunks;
  stats_.total_ms = ms_since(t0);
  return Status::ok();
}

}  // namespace tributary::gpu
