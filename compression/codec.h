// Gradient codecs: the type-erased interface every compressed collective talks to.
//
// A Codec turns `count` elements of a float tensor (float32, or float16/bfloat16 which
// are widened to float32 first) into a self-describing little-endian payload, and back.
// The wire format of every codec is fixed byte by byte in docs/compression.md; the CUDA
// codecs (gpu/) produce and accept the same bytes, and the golden tests in
// tests/compression/ pin them.
//
// Guarantees:
//  - Buffers: the caller owns every buffer. encode() writes only into `out` (at most
//    max_encoded_bytes(count) bytes) and into the error-feedback spans it is given;
//    decode() writes only `out[0..count)`; decode_accumulate() only `accum[0..count)`.
//    Nothing is retained after a call returns.
//  - Thread-safety: a Codec is immutable after construction. encode/decode may run
//    concurrently on one Codec object from many threads, provided the calls do not share
//    output or error-feedback buffers.
//  - Determinism: the bytes produced depend only on (input bits, codec parameters,
//    EncodeOptions). Stochastic rounding and top-k sampling draw from a counter-based
//    RNG (compression/counter_rng.h) keyed by (seed, stream, step, rank) and indexed by
//    the element's position in the whole tensor, so any slicing of a tensor into chunks
//    gives the same bits, on any CPU clone (AVX-512/AVX2/baseline) and on the GPU.
//  - Bad input: decoders validate everything (magic, version, codec id, count, sizes,
//    indices < count, finite non-negative scales) before touching `out`, and return
//    kBadFrame with a message on garbage. They never read past the payload span.
//    (decode_accumulate may have added nothing or everything: validation completes
//    before the first write.)
//  - Encoding a non-finite input (inf/NaN) with a scaled codec (qint*, sign) returns
//    kInvalidArgument: a scale cannot represent it. Casts and top-k pass such values on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "core/dtype.h"
#include "core/status.h"

namespace tributary::compression {

// Codec ids as they appear on the wire (byte 2 of the header). Never renumber.
enum class CodecId : std::uint8_t {
  kFloat32 = 1,   // raw float32 (the uncompressed path through the same interface)
  kFloat16 = 2,   // IEEE binary16, round to nearest even
  kBFloat16 = 3,  // bfloat16, round to nearest even
  kQInt8 = 4,     // int8 codes in [-127, 127], one float32 scale per bucket
  kQInt4 = 5,     // 4-bit codes in [-7, 7], one float32 scale per bucket
  kTopK = 6,      // sparse: indices (delta-varint or bitmap) + 16-bit values
  kSign = 7,      // 1 bit per element + one float32 scale (mean |x|) per bucket
  kZstd = 8,      // zstd stage wrapping another codec's payload
};
inline constexpr std::uint8_t kMaxCodecId = 8;
std::string_view to_string(CodecId id);

inline constexpr std::uint16_t kPayloadMagic = 0x4354;  // "TC" little-endian
inline constexpr std::uint8_t kPayloadVersion = 1;
inline constexpr std::size_t kHeaderBytes = 16;
// A payload carries at most 2^32-1 elements; chunk larger tensors.
inline constexpr std::size_t kMaxPayloadElements = 0xffffffffu;

// The fixed 16-byte header at the start of every payload (docs/compression.md).
struct PayloadHeader {
  CodecId codec = CodecId::kFloat32;
  std::uint8_t version = kPayloadVersion;
  std::uint32_t count = 0;  // elements in the tensor slice
  std::uint32_t param = 0;  // bucket size (qint*, sign), nnz (top-k), inner bytes (zstd)
  std::uint32_t flags = 0;  // codec-specific (docs/compression.md)
};

// Reads and checks magic, version and codec id; does not check the body.
Result<PayloadHeader> read_header(std::span<const std::byte> payload);

// Per-call inputs that are not codec parameters.
struct EncodeOptions {
  // RNG key. `seed` is cluster-wide; `stream` names the tensor (or tensor x stage);
  // `rank` decorrelates the rounding noise of different ranks (leave 0 where every rank
  // must produce identical bytes); `step` is the training step, which also drives the
  // top-k density warm-up.
  std::uint64_t seed = 0;
  std::uint64_t stream = 0;
  std::uint64_t step = 0;
  std::uint32_t rank = 0;
  // Position of element 0 of this slice in the whole tensor: the RNG counter base, so
  // chunking does not change the bits.
  std::uint64_t element_offset = 0;
  // Error feedback (empty = off): exactly `count` floats, this slice's residual. encode()
  // compresses x + residual and leaves residual = (x + residual) - decode(payload).
  // Typically ErrorFeedback::residual(id, tensor_count).subspan(offset, count).
  std::span<float> residual = {};
  // Momentum correction for sign and top-k (empty, or a codec with momentum 0 = off):
  // exactly `count` floats of velocity, updated u = m*u + g (top-k: zeroed where sent).
  std::span<float> momentum = {};
};

class Codec {
 public:
  virtual ~Codec() = default;
  Codec(const Codec&) = delete;
  Codec& operator=(const Codec&) = delete;

  virtual CodecId id() const = 0;
  // The spec this codec was made from, e.g. "qint8:bucket=512" (codec_registry.h).
  virtual std::string spec() const = 0;

  // Upper bound on encode()'s output size for `count` elements; size `out` with it.
  virtual std::size_t max_encoded_bytes(std::size_t count) const = 0;

  // Encodes count elements at `data` (dtype kFloat32, kFloat16 or kBFloat16) into `out`.
  // Returns the number of bytes written. kInvalidArgument for an unsupported dtype,
  // count > kMaxPayloadElements, `out` too small, mis-sized error-feedback spans, or
  // non-finite input to a scaled codec (then `out` and the residual are unspecified).
  Result<std::size_t> encode(const void* data, DType dtype, std::size_t count,
                             std::span<std::byte> out, const EncodeOptions& options) const;

  // out[i] = decoded value, i < count. The payload must be this codec's id and hold
  // exactly `count` elements; its parameters (bucket size, index format, ...) are read
  // from the payload, so any instance of the codec decodes any payload of that codec.
  // (A payload of another codec id is kBadFrame.)
  Status decode(std::span<const std::byte> payload, float* out, std::size_t count) const;

  // accum[i] += decoded value, fused (one pass; top-k touches only its indices).
  Status decode_accumulate(std::span<const std::byte> payload, float* accum,
                           std::size_t count) const;

  // True when the codec is biased or lossy enough that it should run with error feedback
  // (top-k, sign); the caller decides and passes EncodeOptions::residual.
  virtual bool wants_error_feedback() const { return false; }
  // True when the codec applies momentum correction (sign or top-k with momentum > 0):
  // the optimizer must then not apply momentum a second time.
  virtual bool wants_momentum() const { return false; }

 protected:
  Codec() = default;
  // The float32 kernel behind encode(); sizes and spans already checked.
  virtual Result<std::size_t> encode_f32(const float* data, std::size_t count,
                                         std::span<std::byte> out,
                                         const EncodeOptions& options) const = 0;
};

// Decode any payload by its header's codec id (no Codec object needed): the receiver's
// path when it validates and decodes frames from peers.
Status decode_payload(std::span<const std::byte> payload, float* out, std::size_t count);
Status decode_accumulate_payload(std::span<const std::byte> payload, float* accum,
                                 std::size_t count);

}  // namespace tributary::compression
