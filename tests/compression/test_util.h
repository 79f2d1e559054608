// Shared helpers for the compression tests.
#pragma once

#include <cstddef>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "compression/codec.h"
#include "compression/codec_registry.h"

namespace tributary::compression::testing {

inline std::vector<float> gaussian(std::size_t n, std::uint32_t seed, float sigma = 1.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, sigma);
  std::vector<float> v(n);
  for (auto& x : v) x = d(gen);
  return v;
}

inline std::unique_ptr<Codec> must_make(const std::string& spec) {
  auto c = make_codec(spec);
  EXPECT_TRUE(c.is_ok()) << spec << ": " << c.status().to_string();
  return c.is_ok() ? std::move(c.value()) : nullptr;
}

inline std::vector<std::byte> encode(const Codec& codec, std::span<const float> x,
                                     const EncodeOptions& o = {}) {
  std::vector<std::byte> out(codec.max_encoded_bytes(x.size()));
  auto n = codec.encode(x.data(), DType::kFloat32, x.size(), out, o);
  EXPECT_TRUE(n.is_ok()) << n.status().to_string();
  out.resize(n.is_ok() ? *n : 0);
  return out;
}

inline std::vector<float> decode(std::span<const std::byte> payload, std::size_t count) {
  std::vector<float> out(count, -12345.0f);
  const Status s = decode_payload(payload, out.data(), count);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  return out;
}

}  // namespace tributary::compression::testing
