// Internal to compression/: little-endian load/store, the payload header, and the
// per-codec entry points that codec.cc dispatches to. Not part of the public interface.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>

#include "compression/codec.h"
#include "compression/codec_registry.h"
#include "core/little_endian.h"
#include "core/status.h"

// Header fields go through core/little_endian.h; the value arrays (floats, packed codes)
// are copied as they lie in memory, so the wire being little-endian needs such a host.
static_assert(std::endian::native == std::endian::little, "codecs assume a little-endian host");

// ThreadSanitizer cannot run ifunc resolvers (core/reduce.cc): baseline clone alone.
#if defined(__SANITIZE_THREAD__) && !defined(TRIB_COMPRESSION_SINGLE_LEVEL)
#define TRIB_COMPRESSION_SINGLE_LEVEL 0
#endif

#if !defined(TRIB_COMPRESSION_SINGLE_LEVEL)
// Same approach as core/reduce.cc: one binary, the loader binds the best clone.
#define TRIB_CODEC_MULTIVERSION \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#elif TRIB_COMPRESSION_SINGLE_LEVEL == 4
// Test builds only (tests/compression/CMakeLists.txt): one level alone, so the golden
// test checks that every clone produces the same bytes.
#define TRIB_CODEC_MULTIVERSION __attribute__((target("arch=x86-64-v4")))
#elif TRIB_COMPRESSION_SINGLE_LEVEL == 3
#define TRIB_CODEC_MULTIVERSION __attribute__((target("arch=x86-64-v3")))
#else
#define TRIB_CODEC_MULTIVERSION
#endif

namespace tributary::compression::wire {

inline std::uint32_t load_u32(const std::byte* p) { return le::load<std::uint32_t>(p); }
inline void store_u32(std::byte* p, std::uint32_t v) { le::store(p, v); }
inline float load_f32(const std::byte* p) { return std::bit_cast<float>(load_u32(p)); }

void write_header(std::byte* out, const PayloadHeader& h);

inline Status bad_frame(CodecId id, const std::string& what) {
  return error(StatusCode::kBadFrame, std::string(to_string(id)) + " payload: " + what);
}

// Checks that payload size == expected (both sides bounded by the caller's arithmetic in
// 64 bits, so no overflow on a 32-bit count).
inline Status expect_size(CodecId id, std::size_t got, std::uint64_t expected) {
  if (got != expected) {
    return bad_frame(
        id, "size " + std::to_string(got) + " bytes, expected " + std::to_string(expected));
  }
  return Status::ok();
}

inline std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; }

// Finite and non-negative (rejects NaN, inf, negative and -0 is allowed).
inline bool valid_scale(float s) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(s);
  return u < 0x7f800000u || u == 0x80000000u;
}

// Per-codec decoders; header already read and its count checked against `count`.
Status decode_cast(const PayloadHeader& h, std::span<const std::byte> p, float* out,
                   std::size_t count, bool accumulate);
Status decode_qint(const PayloadHeader& h, std::span<const std::byte> p, float* out,
                   std::size_t count, bool accumulate);
Status decode_topk(const PayloadHeader& h, std::span<const std::byte> p, float* out,
                   std::size_t count, bool accumulate);
Status decode_sign(const PayloadHeader& h, std::span<const std::byte> p, float* out,
                   std::size_t count, bool accumulate);
Status decode_zstd(const PayloadHeader& h, std::span<const std::byte> p, float* out,
                   std::size_t count, bool accumulate);

// Factories (parameters already validated by make_codec).
std::unique_ptr<Codec> make_cast_codec(CodecId id);
std::unique_ptr<Codec> make_qint_codec(const CodecConfig& config);
std::unique_ptr<Codec> make_topk_codec(const CodecConfig& config);
std::unique_ptr<Codec> make_sign_codec(const CodecConfig& config);

// Error feedback before quantizing (feedback_kernels.cc). add_residual: r = x + r, so the
// residual span then holds what is compressed. accumulate_momentum (DGC momentum
// correction): u = m*u + x, then r = r + u, so the residual holds the velocity plus what
// earlier steps did not send.
void add_residual(float* r, const float* x, std::size_t n);
void accumulate_momentum(float* u, float* r, const float* x, std::size_t n, float m);

// Codec::decode(_accumulate): decode through the dispatcher, requiring codec `id`.
Status decode_as(CodecId id, std::span<const std::byte> payload, float* out, std::size_t count,
                 bool accumulate);

}  // namespace tributary::compression::wire
