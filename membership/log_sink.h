// Where the control plane writes its log lines (one line per call, no trailing newline).
// Injected rather than global so tests can capture and assert on what was logged.
#pragma once

#include <functional>
#include <string_view>

namespace tributary::membership {

using LogSink = std::function<void(std::string_view line)>;

// Writes "tributary[<component>]: <line>" to stderr; thread-safe (one write per line).
LogSink stderr_log_sink(std::string_view component);

}  // namespace tributary::membership
