// CompressionPlan::parse (compression_plan.h).
#include "compression/collectives/compression_plan.h"

#include <optional>
#include <string>
#include <utility>

#include "compression/spec_tokens.h"

namespace tributary::compression::collectives {
namespace {

Status bad_spec(std::string_view spec, const std::string& what) {
  return error(StatusCode::kInvalidArgument,
               "compression spec \"" + std::string(spec) + "\": " + what);
}

// The plan keys of a spec; the others are the codec's (handed on in `codec`).
struct PlanKeys {
  std::optional<bool> ef;
  std::optional<double> dense_at;
  PowerSgdParams powersgd;
  SpecTokens codec;
};

Result<PlanKeys> split_plan_keys(std::string_view spec) {
  PlanKeys keys;
  const SpecTokens tokens = tokenize_spec(spec);
  const bool powersgd = tokens.name == "powersgd";
  keys.codec.name = tokens.name;
  for (const SpecItem& item : tokens.items) {
    const std::string_view k = item.key, v = item.value;
    bool b = false;
    double d = 0;
    if (k == "ef") {
      if (!parse_spec_flag(v, b)) return bad_spec(spec, "ef must be 0 or 1");
      keys.ef = b;
    } else if (k == "dense_at") {
      if (!parse_spec_number(v, d) || !(d > 0))
        return bad_spec(spec, "dense_at must be a number > 0");
      keys.dense_at = d;
    } else if (powersgd && k == "rank") {
      if (!parse_spec_number(v, d) || d < 1 || d > 1024 ||
          d != static_cast<double>(static_cast<int>(d))) {
        return bad_spec(spec, "rank must be an integer in [1, 1024]");
      }
      keys.powersgd.rank = static_cast<std::uint32_t>(d);
    } else if (powersgd && k == "warm") {
      if (!parse_spec_flag(v, b)) return bad_spec(spec, "warm must be 0 or 1");
      keys.powersgd.warm_start = b;
    } else if (powersgd) {
      return bad_spec(spec, "unknown key '" + std::string(k) + "' for powersgd");
    } else {
      keys.codec.items.push_back(item);
    }
  }
  return keys;
}

Result<CompressionPlan> powersgd_plan(std::string_view spec, const PlanKeys& keys) {
  if (keys.dense_at) return bad_spec(spec, "dense_at applies to topk only");
  CompressionPlan plan;
  plan.kind = CompressionPlan::Kind::kPowerSgd;
  plan.powersgd = keys.powersgd;
  plan.powersgd.error_feedback = keys.ef.value_or(true);
  plan.error_feedback = plan.powersgd.error_feedback;
  plan.spec = "powersgd:rank=" + std::to_string(plan.powersgd.rank) +
              ",ef=" + (plan.powersgd.error_feedback ? "1" : "0") +
              ",warm=" + (plan.powersgd.warm_start ? "1" : "0");
  return plan;
}

}  // namespace

Result<CompressionPlan> CompressionPlan::parse(std::string_view spec) {
  TRIB_ASSIGN_OR_RETURN(const PlanKeys keys, split_plan_keys(spec));
  if (keys.codec.name == "powersgd") return powersgd_plan(spec, keys);
  TRIB_ASSIGN_OR_RETURN(CodecConfig config, parse_codec_spec(keys.codec));
  CompressionPlan plan;
  switch (config.codec) {
    case CodecId::kFloat32: plan.kind = Kind::kDense; break;
    case CodecId::kTopK: plan.kind = Kind::kSparse; break;
    default: plan.kind = Kind::kQuantized; break;
  }
  const bool cast = config.codec == CodecId::kFloat16 || config.codec == CodecId::kBFloat16;
  plan.error_feedback = plan.kind != Kind::kDense && keys.ef.value_or(!cast);
  // Momentum correction works through the residual: without error feedback the optimizer
  // keeps its momentum instead.
  if (!plan.error_feedback) config.momentum = 0.0f;
  TRIB_ASSIGN_OR_RETURN(std::unique_ptr<Codec> codec, make_codec(config));
  plan.codec_config = config;
  plan.codec = std::shared_ptr<const Codec>(std::move(codec));
  if (plan.kind == Kind::kDense && keys.ef.value_or(false))
    return bad_spec(spec, "float32 has no error feedback");
  if (keys.dense_at && plan.kind != Kind::kSparse)
    return bad_spec(spec, "dense_at applies to topk only");
  plan.dense_threshold = keys.dense_at.value_or(1.0);
  std::string canonical = to_spec(config);
  if (plan.kind != Kind::kDense) {
    canonical += canonical.find(':') == std::string::npos ? ":" : ",";
    canonical += std::string("ef=") + (plan.error_feedback ? "1" : "0");
  }
  // std::to_string ("1.000000"), not the shortest form: the text is hashed into the tag
  // check, which must stay what it was.
  if (plan.kind == Kind::kSparse) canonical += ",dense_at=" + std::to_string(plan.dense_threshold);
  plan.spec = std::move(canonical);
  return plan;
}

bool CompressionPlan::stateful() const {
  if (kind == Kind::kPowerSgd) return true;
  return kind != Kind::kDense && (error_feedback || (codec && codec->wants_momentum()));
}

}  // namespace tributary::compression::collectives
