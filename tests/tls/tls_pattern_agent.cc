// An agent process for tests/tls/tls_capture_test.sh: joins the coordinator as a real
// Worker and all-reduces (max) a buffer filled with a distinctive 16-byte pattern, so that
// a capture of its traffic shows whether gradients cross the wire in the clear.
//
//   tls_pattern_agent COORDINATOR BIND_HOST ZONE TLS_MODE [CERT KEY CA]
//
// The cluster secret comes from TRIBUTARY_SECRET. Prints "pattern all-reduce ok" when the
// result is the pattern again.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "agent/worker.h"

int main(int argc, char** argv) {
  using namespace tributary;
  if (argc != 5 && argc != 8) {
    std::fprintf(stderr, "usage: %s COORDINATOR BIND_HOST ZONE TLS_MODE [CERT KEY CA]\n", argv[0]);
    return 2;
  }
  agent::WorkerConfig c;
  c.coordinator = argv[1];
  const char* secret = std::getenv("TRIBUTARY_SECRET");
  c.secret = secret != nullptr ? secret : "";
  c.bind_host = argv[2];
  c.zone = argv[3];
  c.transport = "tcp";
  auto mode = transport::parse_tls_mode(argv[4]);
  if (!mode.is_ok()) {
    std::fprintf(stderr, "%s\n", mode.status().to_string().c_str());
    return 2;
  }
  c.tls.mode = *mode;
  if (argc == 8) c.tls = {*mode, argv[5], argv[6], argv[7]};
  auto worker = agent::Worker::start(c);
  if (!worker.is_ok()) {
    std::fprintf(stderr, "start: %s\n", worker.status().to_string().c_str());
    return 1;
  }
  static constexpr char kPattern[17] = "GRADIENT-PATTERN";
  std::vector<std::uint8_t> in(4 << 20), out(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<std::uint8_t>(kPattern[i % 16]);
  for (int step = 0; step < 3; ++step) {
    auto r = (*worker)->all_reduce(in.data(), out.data(), in.size(), DType::kUInt8, ReduceOp::kMax);
    if (!r.is_ok()) {
      std::fprintf(stderr, "all_reduce: %s\n", r.status().to_string().c_str());
      return 1;
    }
    if (out != in) {
      std::fprintf(stderr, "all_reduce: wrong result\n");
      return 1;
    }
  }
  std::printf("pattern all-reduce ok\n");
  return 0;
}
