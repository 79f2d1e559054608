#include "membership/log_sink.h"

#include <cstdio>
#include <string>

namespace tributary::membership {

LogSink stderr_log_sink(std::string_view component) {
  return [prefix = "tributary[" + std::string(component) + "]: "](std::string_view line) {
    // Build the whole line first: one fwrite keeps lines from threads unbroken.
    std::string out = prefix;
    out.append(line);
    out.push_back('\n');
    std::fwrite(out.data(), 1, out.size(), stderr);
  };
}

}  // namespace tributary::membership
