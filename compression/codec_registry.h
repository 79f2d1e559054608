// Creating codecs by name: the typed configuration, its text form, and the factory.
//
// A spec string is "name[:key=value,key=value,...]", parsed once at the edge (flags, env,
// config file) into a CodecConfig that is passed around; nothing here reads the
// environment. Examples:
//   "qint8"                       bucket 512, stochastic rounding
//   "qint4:bucket=256,zstd"       4-bit codes, then a zstd stage where it pays
//   "topk:density=0.01,warmup=200,momentum=0.9,values=bf16"
//   "sign:bucket=1024"
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

struct CodecConfig {
  CodecId codec = CodecId::kFloat32;

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
  std::uint64_t warmup_steps_per_stage = 0;
  // top-k: DGC momentum correction factor (0 = off). Needs EncodeOptions::momentum.
  float momentum = 0.0f;
  // top-k: value type on the wire, kBFloat16 or kFloat16.
  DType values = DType::kBFloat16;

  // Wrap the codec's output in a zstd stage (compression/zstd_stage.h). The stage keeps
  // zstd's output only when it saves at least `zstd_min_gain` of the bytes.
  bool zstd = false;
  int zstd_level = 1;
  double zstd_min_gain = 0.10;
};

// "qint4:bucket=256,stochastic=0,zstd,zstd_level=3" -> CodecConfig. Keys: bucket,
// stochastic, density, warmup, momentum, values (bf16|f16), zstd, zstd_level,
// zstd_min_gain. kInvalidArgument names the offending key. The text is split by
// spec_tokens.h, shared with the compressed collectives' plan specs.
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
