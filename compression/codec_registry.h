// Creating codecs by name: the typed configuration, its text form, and the factory.
//
// A spec string is "name[:key=value,key=value,...]", parsed once at the edge (flags, env,
// config file) into a CodecConfig that is passed around; nothing here reads the
// environment. Examples:
//   "qint8"                       bucket 512, stochastic rounding
//   "qint4:bucket=256,zstd"       4-bit codes, then a zstd stage where it pays
//   "topk:density=0.01,warmup=200,momentum=0.9,values=bf16"
//   "sign:bucket=1024,momentum=0.9"
//   "float16", "bfloat16", "float32"
// PowerSGD is not a Codec (it needs two all-reduces); see powersgd.h.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "compression/codec.h"
#include "compression/spec_tokens.h"
#include "core/dtype.h"
#include "core/status.h"

namespace tributary::compression {

// The member initialisers are the neutral values (no warm-up, no momentum correction);
// a spec starts from defaults(codec), the documented defaults of that codec, so "topk" and
// "sign" mean the configurations the convergence test proves (docs/compression.md).
struct CodecConfig {
  CodecId codec = CodecId::kFloat32;

  static CodecConfig defaults(CodecId codec);

  // qint8, qint4, sign: elements per scale. qint4 needs an even size, sign a multiple
  // of 8 (so every bucket starts on a byte); at most 1 << 24.
  std::uint32_t bucket_size = 512;
  // qint8, qint4: stochastic rounding (unbiased) from the counter RNG; false = round to
  // nearest even (biased per element, deterministic without a seed).
  bool stochastic = true;

  // top-k: target density (fraction of elements sent), in (0, 1].
  double density = 0.01;
  // top-k: DGC warm-up. Density starts at 0.25 and is divided by 4 every
  // `warmup_steps_per_stage` steps until it reaches `density`; 0 = no warm-up.
  // Default for a spec: 50.
  std::uint64_t warmup_steps_per_stage = 0;
  // top-k, sign: momentum correction factor (0 = off): the codec keeps this worker's
  // velocity u = m*u + x and compresses it with the residual, so the optimizer must not
  // apply momentum again (Codec::wants_momentum()). Needs EncodeOptions::momentum.
  // Default for a spec: 0.9 for sign (whose error feedback diverges under an optimizer's
  // momentum), 0 for top-k (its DGC correction measured worse here than the optimizer's).
  float momentum = 0.0f;
  // top-k: value type on the wire, kBFloat16 or kFloat16.
  DType values = DType::kBFloat16;

  // Wrap the codec's output in a zstd stage (compression/zstd_stage.h). The stage keeps
  // zstd's output only when it saves at least `zstd_min_gain` of the bytes.
  bool zstd = false;
  int zstd_level = 1;
  double zstd_min_gain = 0.10;
};

// "qint4:bucket=256,stochastic=0,zstd,zstd_level=3" -> CodecConfig, starting from
// CodecConfig::defaults(codec). Keys: bucket (qint8, qint4, sign), stochastic (qint8,
// qint4), density, warmup, values (bf16|f16) (top-k), momentum (top-k, sign), and for
// every codec zstd, zstd_level, zstd_min_gain. kInvalidArgument names the offending key,
// also a key the codec does not have. The text is split by spec_tokens.h, shared with the
// compressed collectives' plan specs.
Result<CodecConfig> parse_codec_spec(std::string_view spec);
// The same from a spec already split (a plan hands over the keys it does not know).
Result<CodecConfig> parse_codec_spec(const SpecTokens& spec);
// The canonical spec of a config (parse_codec_spec(to_spec(c)) == c).
std::string to_spec(const CodecConfig& config);

// kInvalidArgument when a parameter is out of range (bucket size, density, ...).
Result<std::unique_ptr<Codec>> make_codec(const CodecConfig& config);
Result<std::unique_ptr<Codec>> make_codec(std::string_view spec);

// The DGC warm-up: the top-k density used at `step` (>= config.density).
double topk_density_at(const CodecConfig& config, std::uint64_t step);

}  // namespace tributary::compression
