// Top-k sparsification, DGC-style (Lin et al., 2018).
//
// Selection: |v| >= t where the threshold t comes from a random sample of |v| (counter
// RNG, no sort of the tensor), then one vectorised gather pass collects what passes;
// when that is outside [k/1.5, 1.5k] the sample quantile is moved and counted again
// (a few times at most), and a candidate set still above 1.5k is cut to exactly k by a
// selection on the candidates only. Exact zeros are never sent.
//
// Error feedback: v = x + residual (with momentum correction: u = m*u + x, v = residual
// + u), residual = v everywhere, then at sent positions residual = v - wire_value(v) (the
// 16-bit rounding error stays too) and u = 0 (momentum factor masking).
#include <algorithm>
#include <bit>
#include <cmath>
#include <vector>

#include "compression/counter_rng.h"
#include "compression/wire.h"
#include "core/reduce.h"

namespace tributary::compression::wire {
namespace {

constexpr std::uint32_t kValuesBF16 = 0;
constexpr std::uint32_t kValuesF16 = 1;
constexpr std::uint32_t kIndexBitmap = 1u << 2;
constexpr std::size_t kTopKHeader = kHeaderBytes + 4;
// The index section is zero-padded to a multiple of 4 bytes so that the 16-bit values
// start aligned (aligned, coalesced loads in the CUDA port; aligned stores here).
inline std::uint64_t pad4(std::uint64_t n) { return (n + 3) & ~std::uint64_t{3}; }

inline std::uint32_t abs_bits(float f) { return std::bit_cast<std::uint32_t>(f) & 0x7fffffffu; }

TRIB_CODEC_MULTIVERSION
std::size_t count_ge(const float* __restrict v, std::size_t n, std::uint32_t t) {
  std::size_t c = 0;
  for (std::size_t i = 0; i < n; ++i) {
    c += (std::bit_cast<std::uint32_t>(v[i]) & 0x7fffffffu) >= t ? 1 : 0;
  }
  return c;
}

// Appends the indices i with |v[i]| >= t. Blocks of 16 are tested with a vectorised
// any-of first: at 1% density most blocks hold nothing and are skipped.
TRIB_CODEC_MULTIVERSION
void gather_ge(const float* __restrict v, std::size_t n, std::uint32_t t,
               std::vector<std::uint32_t>& out) {
  constexpr std::size_t kB = 16;
  std::size_t i = 0;
  for (; i + kB <= n; i += kB) {
    unsigned any = 0;
    for (std::size_t j = 0; j < kB; ++j) {
      any |= (std::bit_cast<std::uint32_t>(v[i + j]) & 0x7fffffffu) >= t ? 1u : 0u;
    }
    if (any == 0) continue;
    for (std::size_t j = 0; j < kB; ++j) {
      if (abs_bits(v[i + j]) >= t) out.push_back(static_cast<std::uint32_t>(i + j));
    }
  }
  for (; i < n; ++i) {
    if (abs_bits(v[i]) >= t) out.push_back(static_cast<std::uint32_t>(i));
  }
}

std::size_t varint_len(std::uint32_t v) {
  return v < (1u << 7) ? 1 : v < (1u << 14) ? 2 : v < (1u << 21) ? 3 : v < (1u << 28) ? 4 : 5;
}

std::byte* put_varint(std::byte* p, std::uint32_t v) {
  while (v >= 0x80u) {
    *p++ = static_cast<std::byte>((v & 0x7fu) | 0x80u);
    v >>= 7;
  }
  *p++ = static_cast<std::byte>(v);
  return p;
}

void narrow_values(std::uint32_t type, const float* in, std::byte* out, std::size_t n) {
  type == kValuesF16 ? float_to_half(in, out, n) : float_to_bfloat16(in, out, n);
}
void widen_values(std::uint32_t type, const std::byte* in, float* out, std::size_t n) {
  type == kValuesF16 ? half_to_float(in, out, n) : bfloat16_to_float(in, out, n);
}

// Selects about k of the n elements: the indices with |v| >= t, t a sampled quantile.
// The gather pass doubles as the check (one streaming pass over the tensor in the usual
// case); a count outside [k/1.5, 1.5k] moves the quantile and gathers again.
void select_threshold(const float* v, std::size_t n, std::size_t k, RngKey key,
                      std::vector<std::uint32_t>& sample, std::vector<std::uint32_t>& idx) {
  const double density = static_cast<double>(k) / static_cast<double>(n);
  const std::size_t want = std::clamp<std::size_t>(static_cast<std::size_t>(256.0 / density), 16384,
                                                   std::size_t{1} << 20);
  const bool exact = want >= n;
  const std::size_t s = exact ? n : want;
  sample.resize(s);
  if (exact) {
    for (std::size_t j = 0; j < n; ++j) sample[j] = abs_bits(v[j]);
  } else {
    for (std::size_t j = 0; j < s; ++j) {
      // Multiply-shift maps 32 random bits onto [0, n) (n < 2^32); the bias is < n/2^32.
      const std::uint64_t i = (std::uint64_t{rng_bits(key, std::uint64_t{j})} * n) >> 32;
      sample[j] = abs_bits(v[i]);
    }
  }
  double frac = density;  // fraction of the sample that should pass
  for (int round = 0; round < 6; ++round) {
    std::size_t above = static_cast<std::size_t>(std::ceil(frac * static_cast<double>(s)));
    above = std::clamp<std::size_t>(above, 1, s);
    const std::size_t pos = s - above;
    std::nth_element(sample.begin(), sample.begin() + static_cast<std::ptrdiff_t>(pos),
                     sample.end());
    const std::uint32_t t = std::max<std::uint32_t>(sample[pos], 1);  // never send exact zeros
    if (!exact && round > 0) {
      // A retry: count first (cheaper than gathering) and only gather when it is in range.
      const std::size_t c = count_ge(v, n, t);
      const double ratio = static_cast<double>(c) / static_cast<double>(k);
      if ((ratio > 1.5 || ratio < 1.0 / 1.5) && round < 5) {
        frac = std::clamp(c == 0 ? frac * 4 : frac / ratio, 1.0 / static_cast<double>(s), 1.0);
        continue;
      }
    }
    idx.clear();
    gather_ge(v, n, t, idx);
    if (exact || round > 0) return;  // exact: the cut to k below makes it exact
    const double ratio = static_cast<double>(idx.size()) / static_cast<double>(k);
    if (ratio <= 1.5 && ratio >= 1.0 / 1.5) return;
    frac = std::clamp(idx.empty() ? frac * 4 : frac / ratio, 1.0 / static_cast<double>(s), 1.0);
  }
}

class TopKCodec final : public Codec {
 public:
  explicit TopKCodec(const CodecConfig& c) : config_(c) {
    max_density_ = c.warmup_steps_per_stage > 0 ? std::max(c.density, 0.25) : c.density;
  }
  CodecId id() const override { return CodecId::kTopK; }
  std::string spec() const override { return to_spec(config_); }
  std::size_t max_encoded_bytes(std::size_t count) const override {
    return kTopKHeader + pad4(ceil_div(count, 8)) + 2 * max_nnz(count, max_density_);
  }
  bool wants_error_feedback() const override { return true; }
  bool wants_momentum() const override { return config_.momentum > 0.0f; }

 protected:
  static std::size_t target_k(std::size_t count, double density) {
    return std::clamp<std::size_t>(static_cast<std::size_t>(std::llround(density * count)), 1,
                                   count);
  }
  static std::size_t max_nnz(std::size_t count, double density) {
    const std::size_t cap = static_cast<std::size_t>(std::ceil(1.5 * density * count)) + 1;
    return std::min(count, cap);
  }

  Result<std::size_t> encode_f32(const float* x, std::size_t count, std::span<std::byte> out,
                                 const EncodeOptions& o) const override {
    const bool use_momentum = config_.momentum > 0.0f && !o.momentum.empty();
    if (use_momentum && o.residual.empty()) {
      return error(StatusCode::kInvalidArgument,
                   "topk encode: momentum correction needs a residual");
    }
    const std::uint32_t vtype = config_.values == DType::kFloat16 ? kValuesF16 : kValuesBF16;
    const float* v = x;
    float* r = o.residual.empty() ? nullptr : o.residual.data();
    if (use_momentum) {
      accumulate_momentum(o.momentum.data(), r, x, count, config_.momentum);
      v = r;
    } else if (r != nullptr) {
      add_residual(r, x, count);
      v = r;
    }

    thread_local std::vector<std::uint32_t> sample;
    thread_local std::vector<std::uint32_t> idx;
    thread_local std::vector<float> vals;
    idx.clear();
    if (count > 0) {
      const double density = topk_density_at(config_, o.step);
      const std::size_t k = target_k(count, density);
      const std::size_t cap = max_nnz(count, density);
      select_threshold(v, count, k, rng_key(o.seed, o.stream, o.step, o.rank), sample, idx);
      if (idx.size() > cap) {
        // Ties or a skewed sample: keep the k largest candidates exactly.
        std::nth_element(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(k), idx.end(),
                         [&](std::uint32_t a, std::uint32_t b) {
                           const auto ba = abs_bits(v[a]), bb = abs_bits(v[b]);
                           return ba != bb ? ba > bb : a < b;
                         });
        idx.resize(k);
        std::sort(idx.begin(), idx.end());
      }
    }
    const std::size_t nnz = idx.size();

    std::size_t varint_bytes = 0;
    for (std::size_t j = 0; j < nnz; ++j) {
      varint_bytes += varint_len(j == 0 ? idx[0] : idx[j] - idx[j - 1] - 1);
    }
    const std::size_t bitmap_bytes = ceil_div(count, 8);
    const bool bitmap = bitmap_bytes <= varint_bytes;
    const std::size_t index_bytes = bitmap ? bitmap_bytes : varint_bytes;

    write_header(out.data(),
                 {id(), kPayloadVersion, static_cast<std::uint32_t>(count),
                  static_cast<std::uint32_t>(nnz), vtype | (bitmap ? kIndexBitmap : 0u)});
    store_u32(out.data() + kHeaderBytes, static_cast<std::uint32_t>(index_bytes));
    std::byte* index = out.data() + kTopKHeader;
    if (bitmap) {
      std::memset(index, 0, bitmap_bytes);
      for (std::uint32_t i : idx) index[i / 8] |= static_cast<std::byte>(1u << (i % 8));
    } else {
      std::byte* p = index;
      for (std::size_t j = 0; j < nnz; ++j)
        p = put_varint(p, j == 0 ? idx[0] : idx[j] - idx[j - 1] - 1);
    }
    std::memset(index + index_bytes, 0, pad4(index_bytes) - index_bytes);
    std::byte* values = index + pad4(index_bytes);
    vals.resize(nnz);
    for (std::size_t j = 0; j < nnz; ++j) vals[j] = v[idx[j]];
    narrow_values(vtype, vals.data(), values, nnz);
    if (r != nullptr) {
      thread_local std::vector<float> sent;
      sent.resize(nnz);
      widen_values(vtype, values, sent.data(), nnz);
      for (std::size_t j = 0; j < nnz; ++j) r[idx[j]] = vals[j] - sent[j];
      if (use_momentum) {
        for (std::uint32_t i : idx) o.momentum[i] = 0.0f;
      }
    }
    return kTopKHeader + pad4(index_bytes) + 2 * nnz;
  }

 private:
  CodecConfig config_;
  double max_density_ = 0;
};

}  // namespace

std::unique_ptr<Codec> make_topk_codec(const CodecConfig& c) {
  return std::make_unique<TopKCodec>(c);
}

Status decode_topk(const PayloadHeader& h, std::span<const std::byte> p, float* out,
                   std::size_t count, bool accumulate) {
  const std::uint32_t vtype = h.flags & 3u;
  if ((h.flags & ~(3u | kIndexBitmap)) != 0 || vtype > kValuesF16) {
    return bad_frame(h.codec, "unknown flags");
  }
  const std::size_t nnz = h.param;
  if (nnz > count) return bad_frame(h.codec, "nnz " + std::to_string(nnz) + " > count");
  if (p.size() < kTopKHeader) return bad_frame(h.codec, "truncated before the index length");
  const std::uint64_t index_bytes = load_u32(p.data() + kHeaderBytes);
  TRIB_RETURN_IF_ERROR(
      expect_size(h.codec, p.size(), kTopKHeader + pad4(index_bytes) + 2ull * nnz));
  const auto* index = reinterpret_cast<const std::uint8_t*>(p.data() + kTopKHeader);
  const std::byte* values = p.data() + kTopKHeader + pad4(index_bytes);
  for (std::uint64_t j = index_bytes; j < pad4(index_bytes); ++j) {
    if (index[j] != 0) return bad_frame(h.codec, "non-zero padding after the index section");
  }

  // Validate every index before the first write, so accumulate is all-or-nothing.
  thread_local std::vector<std::uint32_t> idx;
  idx.clear();
  if ((h.flags & kIndexBitmap) != 0) {
    if (index_bytes != ceil_div(count, 8))
      return bad_frame(h.codec, "bitmap length != ceil(count/8)");
    std::size_t pop = 0;
    for (std::uint64_t j = 0; j < index_bytes; ++j) pop += std::popcount(index[j]);
    if (pop != nnz) return bad_frame(h.codec, "bitmap population != nnz");
    if (count % 8 != 0 && (index[index_bytes - 1] >> (count % 8)) != 0) {
      return bad_frame(h.codec, "bitmap bits set past count");
    }
    idx.reserve(nnz);
    for (std::uint64_t j = 0; j < index_bytes; ++j) {
      for (unsigned b = index[j]; b != 0; b &= b - 1) {
        idx.push_back(static_cast<std::uint32_t>(j * 8 + std::countr_zero(b)));
      }
    }
  } else {
    idx.reserve(nnz);
    std::uint64_t pos = 0;
    std::uint64_t next = 0;  // smallest index the next entry may take
    for (std::size_t j = 0; j < nnz; ++j) {
      std::uint64_t delta = 0;
      for (int shift = 0;; shift += 7) {
        if (pos >= index_bytes) return bad_frame(h.codec, "varint index stream truncated");
        if (shift > 28) return bad_frame(h.codec, "varint longer than 5 bytes");
        const std::uint8_t byte = index[pos++];
        delta |= std::uint64_t{byte & 0x7fu} << shift;
        if ((byte & 0x80u) == 0) break;
      }
      const std::uint64_t i = next + delta;
      if (i >= count) return bad_frame(h.codec, "index " + std::to_string(i) + " >= count");
      idx.push_back(static_cast<std::uint32_t>(i));
      next = i + 1;
    }
    if (pos != index_bytes) return bad_frame(h.codec, "trailing bytes in the index stream");
  }

  thread_local std::vector<float> vals;
  vals.resize(nnz);
  widen_values(vtype, values, vals.data(), nnz);
  if (!accumulate && count > 0) std::memset(out, 0, count * sizeof(float));
  for (std::size_t j = 0; j < nnz; ++j) {
    out[idx[j]] = accumulate ? out[idx[j]] + vals[j] : vals[j];
  }
  return Status::ok();
}

}  // namespace tributary::compression::wire
