// Spec parsing and the codec factory.
#include "compression/codec_registry.h"

#include <charconv>
#include <cmath>
#include <vector>

#include "compression/spec_tokens.h"
#include "compression/wire.h"
#include "compression/zstd_stage.h"

namespace tributary::compression {
namespace {

Status bad(const std::string& what) {
  return error(StatusCode::kInvalidArgument, "codec spec: " + what);
}

// Shortest text that parses back to the same value (a float: "0.9", not 0.899999976...).
template <typename T>
std::string format_number(T v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, r.ptr);
}
std::string format_double(double v) { return format_number(v); }

// Which keys a codec has (the zstd keys belong to every codec).
bool codec_has_key(CodecId id, std::string_view key) {
  const bool qint = id == CodecId::kQInt8 || id == CodecId::kQInt4;
  if (key == "bucket") return qint || id == CodecId::kSign;
  if (key == "stochastic") return qint;
  if (key == "density" || key == "warmup" || key == "values") return id == CodecId::kTopK;
  if (key == "momentum") return id == CodecId::kTopK || id == CodecId::kSign;
  return true;
}

}  // namespace

CodecConfig CodecConfig::defaults(CodecId codec) {
  CodecConfig c;
  c.codec = codec;
  if (codec == CodecId::kSign) c.momentum = 0.9f;
  if (codec == CodecId::kTopK) c.warmup_steps_per_stage = 50;
  return c;
}

Result<CodecConfig> parse_codec_spec(std::string_view spec) {
  return parse_codec_spec(tokenize_spec(spec));
}

Result<CodecConfig> parse_codec_spec(const SpecTokens& spec) {
  CodecConfig c;
  const std::string_view name = spec.name;
  bool found = false;
  for (std::uint8_t id = 1; id <= kMaxCodecId; ++id) {
    if (id != static_cast<std::uint8_t>(CodecId::kZstd) &&
        to_string(static_cast<CodecId>(id)) == name) {
      c.codec = static_cast<CodecId>(id);
      found = true;
    }
  }
  if (name == "fp32" || name == "f32" || name == "none") {
    c.codec = CodecId::kFloat32;
    found = true;
  }
  if (name == "fp16" || name == "f16") {
    c.codec = CodecId::kFloat16;
    found = true;
  }
  if (name == "bf16") {
    c.codec = CodecId::kBFloat16;
    found = true;
  }
  if (!found) return bad("unknown codec '" + std::string(name) + "'");
  c = CodecConfig::defaults(c.codec);
  for (const auto& [key, value] : spec.items) {
    bool ok = false;
    if (!codec_has_key(c.codec, key)) {
      return bad("'" + std::string(key) + "' is not a parameter of " +
                 std::string(to_string(c.codec)));
    }
    if (key == "bucket") {
      ok = parse_spec_number(value, c.bucket_size);
    } else if (key == "stochastic") {
      ok = parse_spec_flag(value, c.stochastic);
    } else if (key == "density") {
      ok = parse_spec_number(value, c.density);
    } else if (key == "warmup") {
      ok = parse_spec_number(value, c.warmup_steps_per_stage);
    } else if (key == "momentum") {
      ok = parse_spec_number(value, c.momentum);
    } else if (key == "values") {
      ok = value == "bf16" || value == "f16";
      c.values = value == "f16" ? DType::kFloat16 : DType::kBFloat16;
    } else if (key == "zstd") {
      ok = parse_spec_flag(value, c.zstd);
    } else if (key == "zstd_level") {
      ok = parse_spec_number(value, c.zstd_level);
    } else if (key == "zstd_min_gain") {
      ok = parse_spec_number(value, c.zstd_min_gain);
    } else {
      return bad("unknown key '" + std::string(key) + "'");
    }
    if (!ok) return bad("bad value '" + std::string(value) + "' for '" + std::string(key) + "'");
  }
  return c;
}

std::string to_spec(const CodecConfig& c) {
  std::string s(to_string(c.codec));
  std::vector<std::string> kv;
  switch (c.codec) {
    case CodecId::kQInt8:
    case CodecId::kQInt4:
      kv.push_back("bucket=" + std::to_string(c.bucket_size));
      kv.push_back(std::string("stochastic=") + (c.stochastic ? "1" : "0"));
      break;
    case CodecId::kSign:
      kv.push_back("bucket=" + std::to_string(c.bucket_size));
      kv.push_back("momentum=" + format_number(c.momentum));
      break;
    case CodecId::kTopK:
      kv.push_back("density=" + format_double(c.density));
      kv.push_back("warmup=" + std::to_string(c.warmup_steps_per_stage));
      kv.push_back("momentum=" + format_number(c.momentum));
      kv.push_back(std::string("values=") + (c.values == DType::kFloat16 ? "f16" : "bf16"));
      break;
    default: break;
  }
  if (c.zstd) {
    kv.push_back("zstd");
    kv.push_back("zstd_level=" + std::to_string(c.zstd_level));
    kv.push_back("zstd_min_gain=" + format_double(c.zstd_min_gain));
  }
  for (std::size_t i = 0; i < kv.size(); ++i) s += (i == 0 ? ":" : ",") + kv[i];
  return s;
}

double topk_density_at(const CodecConfig& c, std::uint64_t step) {
  if (c.warmup_steps_per_stage == 0) return c.density;
  // 0.25, 0.0625, 0.015625, ... one stage per warmup_steps_per_stage, floored at target.
  const std::uint64_t stage = step / c.warmup_steps_per_stage;
  if (stage >= 32) return c.density;
  return std::max(c.density, 0.25 * std::pow(0.25, static_cast<double>(stage)));
}

Result<std::unique_ptr<Codec>> make_codec(const CodecConfig& c) {
  std::unique_ptr<Codec> codec;
  switch (c.codec) {
    case CodecId::kFloat32:
    case CodecId::kFloat16:
    case CodecId::kBFloat16: codec = wire::make_cast_codec(c.codec); break;
    case CodecId::kQInt8:
    case CodecId::kQInt4:
      if (c.bucket_size == 0 || c.bucket_size > (1u << 24) ||
          (c.codec == CodecId::kQInt4 && c.bucket_size % 2 != 0)) {
        return bad("qint bucket must be in [1, 2^24] (even for qint4)");
      }
      codec = wire::make_qint_codec(c);
      break;
    case CodecId::kSign:
      if (c.bucket_size == 0 || c.bucket_size > (1u << 24) || c.bucket_size % 8 != 0) {
        return bad("sign bucket must be a multiple of 8 in [8, 2^24]");
      }
      if (!(c.momentum >= 0.0f && c.momentum < 1.0f)) return bad("sign momentum must be in [0, 1)");
      codec = wire::make_sign_codec(c);
      break;
    case CodecId::kTopK:
      if (!(c.density > 0.0 && c.density <= 1.0)) return bad("topk density must be in (0, 1]");
      if (!(c.momentum >= 0.0f && c.momentum < 1.0f)) return bad("topk momentum must be in [0, 1)");
      if (c.values != DType::kBFloat16 && c.values != DType::kFloat16) {
        return bad("topk values must be bf16 or f16");
      }
      codec = wire::make_topk_codec(c);
      break;
    case CodecId::kZstd: return bad("zstd is a stage: add ',zstd' to another codec");
  }
  if (c.zstd) {
    if (c.zstd_level < -7 || c.zstd_level > 22) return bad("zstd_level must be in [-7, 22]");
    if (!(c.zstd_min_gain >= 0.0 && c.zstd_min_gain < 1.0))
      return bad("zstd_min_gain must be in [0, 1)");
    codec = make_zstd_stage(std::move(codec), c.zstd_level, c.zstd_min_gain);
  }
  return codec;
}

Result<std::unique_ptr<Codec>> make_codec(std::string_view spec) {
  TRIB_ASSIGN_OR_RETURN(const CodecConfig config, parse_codec_spec(spec));
  return make_codec(config);
}

}  // namespace tributary::compression
