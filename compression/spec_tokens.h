// The text form shared by codec specs (codec_registry.h) and compressed-collective plan
// specs (collectives/compression_plan.h): "name[:item,item,...]", each item "key" or
// "key=value". Both grammars split a spec here, so they agree on the separators, on a
// bare key meaning "1", and on what counts as a flag or a number; each then decides
// which keys it knows.
#pragma once

#include <charconv>
#include <string_view>
#include <system_error>
#include <vector>

namespace tributary::compression {

struct SpecItem {
  std::string_view key;
  std::string_view value;  // "1" for a bare key ("zstd" means "zstd=1")
};

struct SpecTokens {
  std::string_view name;
  // In order. An empty item between two commas is kept as an empty key, so that the
  // grammar rejects it by name; one trailing comma ends the list.
  std::vector<SpecItem> items;
};

// Views into `spec`: it must outlive the result.
SpecTokens tokenize_spec(std::string_view spec);

// "1", "true", "on" or "0", "false", "off".
bool parse_spec_flag(std::string_view value, bool& out);

// Strict: the whole value must be the number (std::from_chars: no spaces, no '+').
template <typename T>
bool parse_spec_number(std::string_view value, T& out) {
  const auto r = std::from_chars(value.data(), value.data() + value.size(), out);
  return r.ec == std::errc() && r.ptr == value.data() + value.size();
}

}  // namespace tributary::compression
