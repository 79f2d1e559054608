// CUDA codecs: qint8/qint4 and top-k on device memory, producing and accepting the exact
// payload bytes of the CPU codecs (docs/compression.md). A payload encoded here decodes
// with compression::decode_payload() and the reverse, and for the same input bits,
// parameters and RNG key the bytes are identical to the CPU encoder's.
//
// Buffers: every d_* pointer is device memory owned by the caller; nothing is retained
// after a call returns except inside TopKEncoder, which keeps its scratch. d_out must be
// 4-byte aligned (cudaMalloc gives 256); other pointers may have any element alignment
// (aligned ones take the 16-byte vector paths).
//
// Asynchrony: qint_encode/qint_decode only enqueue work on `stream` and return; a Status
// they return covers arguments and launch errors. Top-k synchronises `stream`, because the
// payload's size depends on the data.
//
// Non-finite input: the CPU qint encoder returns kInvalidArgument. The asynchronous GPU
// encoder cannot, so it writes the bucket's scale as it comes out (inf or NaN, which every
// decoder rejects as a bad frame) and, when given `d_nonfinite`, sets that word to 1. The
// staging pipeline (gpu/staging.h) reads the flag with the chunk and fails the send.
//
// Decoding trusts its payload: validate the bytes first with check_payload() (on the host,
// where a receiver has them), exactly as the CPU decoder validates before it writes.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <span>

#include "compression/codec.h"
#include "compression/codec_registry.h"
#include "compression/counter_rng.h"
#include "core/status.h"

namespace tributary::gpu {

// compression::EncodeOptions with device pointers for the error-feedback state.
struct DeviceEncodeOptions {
  std::uint64_t seed = 0;
  std::uint64_t stream = 0;
  std::uint64_t step = 0;
  std::uint32_t rank = 0;
  std::uint64_t element_offset = 0;
  float* residual = nullptr;  // count floats on the device, or null (no error feedback)
  float* momentum = nullptr;  // top-k momentum correction: count floats, or null
};

struct QIntParams {
  int bits = 8;                // 8 (qint8) or 4 (qint4)
  std::uint32_t bucket = 512;  // 1..2^24, even for qint4
  bool stochastic = true;
};

// The qint parameters of a qint8/qint4 CodecConfig (kInvalidArgument for other codecs or
// a zstd stage, which the GPU does not run).
Result<QIntParams> qint_params(const compression::CodecConfig& config);

// Exact payload size (the CPU codec's max_encoded_bytes, which qint always fills).
std::size_t qint_payload_bytes(const QIntParams& params, std::size_t count);

// Encodes count floats at d_x into d_out[0 .. qint_payload_bytes). With options.residual,
// encodes x + r and leaves r = (x + r) - decoded, as the CPU codec does.
Status qint_encode(const float* d_x, std::size_t count, const QIntParams& params,
                   const DeviceEncodeOptions& options, std::byte* d_out, std::uint32_t* d_nonfinite,
                   cudaStream_t stream);

// Decodes a qint payload already validated by check_payload() (its header passed here)
// from d_payload into d_out: out[i] = q*scale, or out[i] = out[i] + q*scale when
// accumulate (the fused dequantize-and-accumulate of the receive path).
Status qint_decode(const compression::PayloadHeader& header, const std::byte* d_payload,
                   float* d_out, std::size_t count, bool accumulate, cudaStream_t stream);

// Validates a qint8/qint4 payload in host memory exactly as the CPU decoder does (header,
// count, bucket, flags, size, every scale finite and >= 0, the pad nibble), without
// decoding it. Returns the header. Other codec ids: kInvalidArgument (not a GPU codec).
Result<compression::PayloadHeader> check_payload(std::span<const std::byte> payload,
                                                 std::size_t count);

// Top-k (DGC) on the GPU: the CPU codec's selection, step for step (sampled quantile,
// counted, retried, cut to exactly k by (|v| desc, index asc) when above 1.5k), so the
// payload is byte-identical. Holds device scratch that grows to the largest tensor seen;
// one encoder per stream (not thread-safe).
class TopKEncoder {
 public:
  TopKEncoder() = default;
  ~TopKEncoder();
  TopKEncoder(const TopKEncoder&) = delete;
  TopKEncoder& operator=(const TopKEncoder&) = delete;

  // The CPU codec's max_encoded_bytes for this config: size d_out with it.
  static std::size_t max_payload_bytes(const compression::CodecConfig& config, std::size_t count);

  // Encodes; returns the payload size. Synchronises `stream`.
  Result<std::size_t> encode(const float* d_x, std::size_t count,
                             const compression::CodecConfig& config,
                             const DeviceEncodeOptions& options, std::byte* d_out,
                             std::size_t out_capacity, cudaStream_t stream);

  // The selection alone, on values d_v (no error feedback): the ascending indices the
  // encoder sends for target k and cap (the CPU's max_nnz), written to d_idx (capacity
  // `cap`). Returns their number. For tests and the bench.
  Result<std::size_t> select_sampled(const float* d_v, std::size_t count, std::size_t k,
                                     std::size_t cap, compression::RngKey key, std::uint32_t* d_idx,
                                     cudaStream_t stream);

  // Exact top-k reference: the k elements of largest |v| (ties to the lower index, exact
  // zeros never), ascending, by a full radix sort. Returns their number (<= k).
  Result<std::size_t> select_exact(const float* d_v, std::size_t count, std::size_t k,
                                   std::uint32_t* d_idx, cudaStream_t stream);

 private:
  // Grow-only device scratch.
  struct Buffer {
    void* ptr = nullptr;
    std::size_t bytes = 0;
  };
  Status reserve(Buffer& b, std::size_t bytes);
  // Runs a cub algorithm f(temp, temp_bytes) twice: size query, then the call in temp_.
  template <typename F>
  Status cub_run(F&& f, const char* what);
  // Candidates (|v| >= the sampled threshold) into cand_, sorted ascending, cut to k when
  // above cap; returns their number.
  Result<std::size_t> select_into_scratch(const float* d_v, std::size_t count, std::size_t k,
                                          std::size_t cap, compression::RngKey key,
                                          cudaStream_t stream);

  Buffer sample_, sample_sorted_, cand_, cand_alt_, keys_, keys_alt_, lens_, temp_, counter_;
};

}  // namespace tributary::gpu
