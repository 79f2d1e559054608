// Command-line flags of the single-machine benchmarks: "--name value" pairs, each value a
// number. Shared so that every bench refuses bad input the same way.
#pragma once

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <string_view>
#include <variant>

namespace tributary::bench {

struct Flag {
  std::string_view name;  // with the dashes, e.g. "--iters"
  std::variant<std::size_t*, int*, double*> target;
};

// Sets each named flag's target. On an unknown flag, a flag without a value, or a value that
// is not a number of the flag's kind, prints what is wrong and `usage` to stderr and returns
// false (the caller exits 2).
inline bool parse_flags(int argc, char** argv, std::initializer_list<Flag> flags,
                        const char* usage) {
  for (int i = 1; i < argc; i += 2) {
    const std::string_view name = argv[i];
    const Flag* flag = nullptr;
    for (const Flag& f : flags)
      if (f.name == name) flag = &f;
    const char* problem = flag == nullptr ? "unknown flag" : i + 1 >= argc ? "no value" : nullptr;
    if (problem == nullptr) {
      const char* text = argv[i + 1];
      char* end = nullptr;
      errno = 0;
      if (auto* z = std::get_if<std::size_t*>(&flag->target); z && *text != '-')
        **z = std::strtoull(text, &end, 10);
      else if (auto* n = std::get_if<int*>(&flag->target))
        **n = static_cast<int>(std::strtol(text, &end, 10));
      else if (auto* d = std::get_if<double*>(&flag->target))
        **d = std::strtod(text, &end);
      if (end == nullptr || end == text || *end != '\0' || errno != 0) problem = "bad value";
    }
    if (problem != nullptr) {
      std::fprintf(stderr, "%s: %.*s\nusage: %s\n", problem, static_cast<int>(name.size()),
                   name.data(), usage);
      return false;
    }
  }
  return true;
}

}  // namespace tributary::bench
