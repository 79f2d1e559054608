#include "algorithms/link_probe.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <vector>

#include "algorithms/in_flight.h"

namespace tributary::algorithms {
namespace {

// Wire protocol, equal on every agent: slots name the message, the check is "PROB".
constexpr std::uint32_t kCheck = 0x50524f42u;
constexpr std::uint32_t kPing = 0x100;
constexpr std::uint32_t kPong = 0x200;
constexpr std::uint32_t kBulk = 0x300;
constexpr std::uint32_t kBulkAck = 0x400;

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// One timed exchange: this rank sends `out` to `next` and times until `next` answers with
// `answer`; meanwhile it receives the same from `prev` and answers it. Both directions run
// at once on every rank, so nobody waits for anybody who waits for it.
Result<double> exchange(Link& link, const CollectiveOptions& options, int prev, int next,
                        std::uint32_t slot, std::uint32_t answer_slot, std::span<const std::byte> out,
                        std::span<std::byte> in) {
  const Tag request{options.seq, slot, kCheck};
  const Tag answer{options.seq, answer_slot, kCheck};
  const Link::Handle from_prev = link.recv(prev, request, in);
  const Link::Handle answered = link.recv(next, answer, {});
  const auto t0 = std::chrono::steady_clock::now();
  const Link::Handle sent = link.send(next, request, out);
  TRIB_RETURN_IF_ERROR(wait_or_abort(link, from_prev, options.deadline));
  const Link::Handle reply = link.send(prev, answer, {});
  TRIB_RETURN_IF_ERROR(wait_or_abort(link, answered, options.deadline));
  const double seconds = since(t0);
  TRIB_RETURN_IF_ERROR(wait_or_abort(link, sent, options.deadline));
  TRIB_RETURN_IF_ERROR(wait_or_abort(link, reply, options.deadline));
  return seconds;
}

}  // namespace

Result<LinkEstimate> measure_ring_links(Link& link, const CollectiveOptions& options,
                                        const LinkProbeParams& params) {
  const int n = link.size();
  if (n <= 1) return LinkEstimate{};
  const int next = (link.rank() + 1) % n;
  const int prev = (link.rank() + n - 1) % n;
  // The fastest of `times` exchanges of `out`/`in` under slots base + i, answers + i.
  auto fastest = [&](int times, std::uint32_t base, std::uint32_t answers,
                     std::span<const std::byte> out, std::span<std::byte> in) -> Result<double> {
    double best = 0;
    for (int i = 0; i < std::max(1, times); ++i) {
      const auto k = static_cast<std::uint32_t>(i);
      TRIB_ASSIGN_OR_RETURN(double t,
                            exchange(link, options, prev, next, base + k, answers + k, out, in));
      best = i == 0 ? t : std::min(best, t);
    }
    return best;
  };
  std::array<std::byte, 64> small_out{}, small_in{};
  TRIB_ASSIGN_OR_RETURN(const double rtt, fastest(params.pings, kPing, kPong, small_out, small_in));
  const double alpha = rtt / 2;
  std::vector<std::byte> bulk_out(params.bulk_bytes), bulk_in(params.bulk_bytes);
  TRIB_ASSIGN_OR_RETURN(const double bulk,
                        fastest(params.bulks, kBulk, kBulkAck, bulk_out, bulk_in));
  const double beta =
      params.bulk_bytes == 0 ? 0 : std::max(0.0, bulk - 2 * alpha) / static_cast<double>(params.bulk_bytes);
  std::array<double, 2> slowest{alpha, beta};
  CollectiveOptions agree = options;
  agree.seq = options.seq + 1;
  agree.algorithm = AllReduceAlgorithm::kDirect;
  agree.zones = {};
  TRIB_RETURN_IF_ERROR(all_reduce(link, slowest.data(), slowest.data(), slowest.size(),
                                  DType::kFloat64, ReduceOp::kMax, agree));
  return LinkEstimate{slowest[0], slowest[1]};
}

}  // namespace tributary::algorithms
