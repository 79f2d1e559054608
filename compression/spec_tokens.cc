// Spec tokenizer (spec_tokens.h).
#include "compression/spec_tokens.h"

namespace tributary::compression {

SpecTokens tokenize_spec(std::string_view spec) {
  SpecTokens t;
  const std::size_t colon = spec.find(':');
  t.name = spec.substr(0, colon);
  std::string_view rest =
      colon == std::string_view::npos ? std::string_view() : spec.substr(colon + 1);
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    const std::size_t eq = item.find('=');
    t.items.push_back({item.substr(0, eq),
                       eq == std::string_view::npos ? std::string_view("1") : item.substr(eq + 1)});
  }
  return t;
}

bool parse_spec_flag(std::string_view value, bool& out) {
  if (value == "1" || value == "true" || value == "on") {
    out = true;
    return true;
  }
  if (value == "0" || value == "false" || value == "off") {
    out = false;
    return true;
  }
  return false;
}

}  // namespace tributary::compression
