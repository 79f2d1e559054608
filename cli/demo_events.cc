#include "cli/demo_events.h"

#include <chrono>
#include <cstdio>
#include <sstream>

namespace tributary::cli {
namespace {

template <class... F>
struct Overload : F... {
  using F::operator()...;
};
template <class... F>
Overload(F...) -> Overload<F...>;

// Reads every field and insists on the end of the line: a truncated or padded line is
// not an event.
template <class... T>
bool read_all(std::istringstream& in, T&... fields) {
  if (!(in >> ... >> fields)) return false;
  std::string rest;
  return !(in >> rest);
}

}  // namespace

std::string encode_event(const DemoEvent& event) {
  char buf[256];
  std::visit(Overload{
                 [&](const StepEvent& e) {
                   std::snprintf(buf, sizeof(buf), "@step %ld %ld %llu %d %d %.6g %lld", e.step,
                                 e.data_epoch, static_cast<unsigned long long>(e.view), e.world,
                                 e.rank, e.loss, static_cast<long long>(e.mono_us));
                 },
                 [&](const EvalEvent& e) {
                   std::snprintf(buf, sizeof(buf), "@eval %ld %.6f", e.step, e.accuracy);
                 },
                 [&](const StateEvent& e) {
                   std::snprintf(buf, sizeof(buf), "@state %ld %llu %d %s", e.step,
                                 static_cast<unsigned long long>(e.bytes), e.source_rank,
                                 e.sha256.empty() ? "-" : e.sha256.c_str());
                 },
                 [&](const FaultEvent& e) {
                   std::snprintf(buf, sizeof(buf), "@fault %s %ld %lld", e.kind.c_str(), e.step,
                                 static_cast<long long>(e.unix_ms));
                 }},
             event);
  return buf;
}

std::optional<DemoEvent> parse_event(const std::string& line) {
  if (line.empty() || line[0] != '@') return std::nullopt;
  std::istringstream in(line);
  std::string kind;
  in >> kind;
  if (kind == "@step") {
    StepEvent e;
    long long mono = 0;
    unsigned long long view = 0;
    if (!read_all(in, e.step, e.data_epoch, view, e.world, e.rank, e.loss, mono))
      return std::nullopt;
    e.view = view;
    e.mono_us = mono;
    return e;
  }
  if (kind == "@eval") {
    EvalEvent e;
    if (!read_all(in, e.step, e.accuracy)) return std::nullopt;
    return e;
  }
  if (kind == "@state") {
    StateEvent e;
    unsigned long long bytes = 0;
    if (!read_all(in, e.step, bytes, e.source_rank, e.sha256)) return std::nullopt;
    e.bytes = bytes;
    if (e.sha256 == "-") e.sha256.clear();
    return e;
  }
  if (kind == "@fault") {
    FaultEvent e;
    long long unix_ms = 0;
    if (!read_all(in, e.kind, e.step, unix_ms) || (e.kind != "kill" && e.kind != "stop")) {
      return std::nullopt;
    }
    e.unix_ms = unix_ms;
    return e;
  }
  return std::nullopt;
}

std::int64_t mono_us_now() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace tributary::cli
