// What compressed_all_reduce does (compressed_all_reduce.h), parsed once at the edge
// from a spec string (flags, config) into a value every rank holds alike.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "compression/codec.h"
#include "compression/codec_registry.h"
#include "compression/powersgd.h"
#include "core/status.h"

namespace tributary::compression::collectives {

// Specs (split by spec_tokens.h, like codec specs):
//   "float32"                                   plain all_reduce
//   "float16", "bfloat16"                       casts (error feedback off unless ef=1)
//   "qint8:bucket=512", "qint4:bucket=256,zstd" quantized (error feedback on unless ef=0)
//   "sign:bucket=512"                           quantized, scaled sign (ef on unless ef=0)
//   "topk:density=0.01,warmup=50,dense_at=1"    sparse (ef on unless ef=0)
//   "powersgd:rank=2[,ef=0][,warm=0]"           PowerSGD
// Keys added to codec_registry.h's: ef=0|1, dense_at=X (top-k: switch to dense when
// density(step) * n > X; default 1, i.e. when the union could cover the tensor).
struct CompressionPlan {
  enum class Kind : std::uint8_t { kDense, kQuantized, kSparse, kPowerSgd };

  Kind kind = Kind::kDense;
  CodecConfig codec_config;            // kQuantized, kSparse
  std::shared_ptr<const Codec> codec;  // kQuantized, kSparse
  PowerSgdParams powersgd;             // kPowerSgd (seed comes from the context)
  bool error_feedback = false;         // kQuantized, kSparse (PowerSGD: powersgd.error_feedback)
  double dense_threshold = 1.0;        // kSparse
  // Canonical, equal on every rank for equal plans; part of the collective's tag check,
  // so its text must not change for a plan that did not change.
  std::string spec;

  static Result<CompressionPlan> parse(std::string_view spec);

  // Whether a call keeps state between steps (residuals, momentum, PowerSGD), and so
  // needs a CompressionState.
  bool stateful() const;
};

}  // namespace tributary::compression::collectives
