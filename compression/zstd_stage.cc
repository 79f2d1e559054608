// The zstd stage (zstd_stage.h). Wire: header {kZstd, count, param = inner payload bytes,
// flags bit 0 = body is a zstd frame (else the inner payload stored as-is)}, then body.
#include "compression/zstd_stage.h"

#include <memory>
#include <vector>

#include <zstd.h>

#include "compression/wire.h"

namespace tributary::compression {
namespace {

// One compression and one decompression context per thread, freed when the thread exits
// (a bare thread_local pointer leaked a context, ~1.3 MiB at level 3, per exiting thread:
// each agent connection and collective thread that ever encoded).
struct CCtxFree {
  void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
};
struct DCtxFree {
  void operator()(ZSTD_DCtx* c) const { ZSTD_freeDCtx(c); }
};

ZSTD_CCtx* thread_cctx() {
  thread_local const std::unique_ptr<ZSTD_CCtx, CCtxFree> cctx(ZSTD_createCCtx());
  return cctx.get();
}

ZSTD_DCtx* thread_dctx() {
  thread_local const std::unique_ptr<ZSTD_DCtx, DCtxFree> dctx(ZSTD_createDCtx());
  return dctx.get();
}

}  // namespace

namespace wire {
namespace {

constexpr std::uint32_t kCompressed = 1;

// Receivers bound the inner payload before decompressing: no codec's payload exceeds
// 64 + 8 * count bytes (float32 is 16 + 4 * count, the largest).
std::uint64_t inner_bound(std::uint64_t count) { return 64 + 8 * count; }

class ZstdStage final : public Codec {
 public:
  ZstdStage(std::unique_ptr<Codec> inner, int level, double min_gain)
      : inner_(std::move(inner)), level_(level), min_gain_(min_gain) {}
  CodecId id() const override { return CodecId::kZstd; }
  std::string spec() const override {
    return inner_->spec() + (inner_->spec().find(':') == std::string::npos ? ":" : ",") +
           "zstd,zstd_level=" + std::to_string(level_);
  }
  std::size_t max_encoded_bytes(std::size_t count) const override {
    return kHeaderBytes + inner_->max_encoded_bytes(count);
  }
  bool wants_error_feedback() const override { return inner_->wants_error_feedback(); }
  bool wants_momentum() const override { return inner_->wants_momentum(); }

 protected:
  Result<std::size_t> encode_f32(const float* x, std::size_t count, std::span<std::byte> out,
                                 const EncodeOptions& o) const override {
    thread_local std::vector<std::byte> inner;
    inner.resize(inner_->max_encoded_bytes(count));
    TRIB_ASSIGN_OR_RETURN(const std::size_t n, inner_->encode(x, DType::kFloat32, count, inner, o));
    ZSTD_CCtx* cctx = thread_cctx();
    if (cctx == nullptr)
      return error(StatusCode::kInternal, "zstd: cannot allocate a compression context");
    // Capacity = the size that would just pay: zstd fails with dstSize_tooSmall when it
    // cannot beat it, and the stage stores the inner payload instead.
    const std::size_t limit = static_cast<std::size_t>(static_cast<double>(n) * (1.0 - min_gain_));
    const std::size_t z =
        ZSTD_compressCCtx(cctx, out.data() + kHeaderBytes, limit, inner.data(), n, level_);
    const bool pays = !ZSTD_isError(z) && z < n;
    write_header(out.data(), {id(), kPayloadVersion, static_cast<std::uint32_t>(count),
                              static_cast<std::uint32_t>(n), pays ? kCompressed : 0u});
    if (!pays) {
      std::memcpy(out.data() + kHeaderBytes, inner.data(), n);
      return kHeaderBytes + n;
    }
    return kHeaderBytes + z;
  }

 private:
  std::unique_ptr<Codec> inner_;
  int level_;
  double min_gain_;
};

}  // namespace

Status decode_zstd(const PayloadHeader& h, std::span<const std::byte> p, float* out,
                   std::size_t count, bool accumulate) {
  if ((h.flags & ~kCompressed) != 0) return bad_frame(h.codec, "unknown flags");
  const std::uint64_t inner_bytes = h.param;
  if (inner_bytes > inner_bound(count)) {
    return bad_frame(h.codec, "inner length " + std::to_string(inner_bytes) +
                                  " is beyond any codec's size for " + std::to_string(count) +
                                  " elements");
  }
  std::span<const std::byte> body = p.subspan(kHeaderBytes);
  thread_local std::vector<std::byte> inner;
  if ((h.flags & kCompressed) != 0) {
    const unsigned long long declared = ZSTD_getFrameContentSize(body.data(), body.size());
    if (declared != inner_bytes)
      return bad_frame(h.codec, "zstd frame size does not match the header");
    inner.resize(inner_bytes);
    ZSTD_DCtx* dctx = thread_dctx();
    if (dctx == nullptr)
      return error(StatusCode::kInternal, "zstd: cannot allocate a decompression context");
    const std::size_t z =
        ZSTD_decompressDCtx(dctx, inner.data(), inner.size(), body.data(), body.size());
    if (ZSTD_isError(z)) return bad_frame(h.codec, std::string("zstd: ") + ZSTD_getErrorName(z));
    if (z != inner_bytes) return bad_frame(h.codec, "zstd frame decompressed to the wrong size");
    body = inner;
  } else if (body.size() != inner_bytes) {
    return bad_frame(h.codec, "stored body length does not match the header");
  }
  TRIB_ASSIGN_OR_RETURN(const PayloadHeader inner_header, read_header(body));
  if (inner_header.codec == CodecId::kZstd) return bad_frame(h.codec, "nested zstd stage");
  return accumulate ? decode_accumulate_payload(body, out, count)
                    : decode_payload(body, out, count);
}

}  // namespace wire

std::unique_ptr<Codec> make_zstd_stage(std::unique_ptr<Codec> inner, int level, double min_gain) {
  return std::make_unique<wire::ZstdStage>(std::move(inner), level, min_gain);
}

std::size_t zstd_compressed_size(std::span<const std::byte> bytes, int level) {
  std::vector<std::byte> out(ZSTD_compressBound(bytes.size()));
  const std::size_t z = ZSTD_compress(out.data(), out.size(), bytes.data(), bytes.size(), level);
  return ZSTD_isError(z) ? 0 : z;
}

}  // namespace tributary::compression
