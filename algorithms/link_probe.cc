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
// measure_pair_links(): the lower rank of a pair pings, both send a bulk (the lower first).
constexpr std::uint32_t kPairPing = 0x500;
constexpr std::uint32_t kPairPong = 0x600;
constexpr std::uint32_t kPairBulk = 0x700;
constexpr std::uint32_t kPairBulkAck = 0x800;

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

// This rank's partner in `round` of a round-robin schedule over n ranks (the circle
// method over m = n rounded up to even: i and j meet when i + j = 2 round mod m - 1, and
// m - 1 meets the one left over); -1 when this rank sits the round out (n odd).
int partner(int rank, int n, int round) {
  const int m = n + (n % 2);
  int p;
  if (rank == m - 1) {
    p = round;
  } else if (rank == round) {
    p = m - 1;
  } else {
    p = ((2 * round - rank) % (m - 1) + (m - 1)) % (m - 1);
  }
  return p < n ? p : -1;
}

// Times sending `out` to `peer` until `peer` acknowledges it (slot, ack_slot).
Result<double> timed_send(Link& link, const CollectiveOptions& options, int peer,
                          std::uint32_t slot, std::uint32_t ack_slot,
                          std::span<const std::byte> out) {
  const Link::Handle acked = link.recv(peer, Tag{options.seq, ack_slot, kCheck}, {});
  const auto t0 = std::chrono::steady_clock::now();
  const Link::Handle sent = link.send(peer, Tag{options.seq, slot, kCheck}, out);
  TRIB_RETURN_IF_ERROR(wait_or_abort(link, acked, options.deadline));
  const double seconds = since(t0);
  TRIB_RETURN_IF_ERROR(wait_or_abort(link, sent, options.deadline));
  return seconds;
}

// Receives `in` from `peer` and acknowledges it (the other side of timed_send()).
Status answer(Link& link, const CollectiveOptions& options, int peer, std::uint32_t slot,
              std::uint32_t ack_slot, std::span<std::byte> in) {
  TRIB_RETURN_IF_ERROR(
      wait_or_abort(link, link.recv(peer, Tag{options.seq, slot, kCheck}, in), options.deadline));
  return wait_or_abort(link, link.send(peer, Tag{options.seq, ack_slot, kCheck}, {}),
                       options.deadline);
}

// One pair's measurement, run by both ranks of the pair: the bandwidth from this rank to
// `peer`.
Result<double> measure_pair(Link& link, const CollectiveOptions& options,
                            const PairProbeParams& params, int peer,
                            std::span<std::byte> bulk_out, std::span<std::byte> bulk_in) {
  const bool lower = link.rank() < peer;
  std::array<std::byte, 64> small_out{}, small_in{};
  // The two ranks take turns pinging (the lower first), each timing its own round trips.
  double rtt = -1;
  for (int i = 0; i < std::max(2, params.pings); ++i) {
    const auto k = static_cast<std::uint32_t>(i);
    const Tag ping{options.seq, kPairPing + k, kCheck};
    const Tag pong{options.seq, kPairPong + k, kCheck};
    if ((i % 2 == 0) == lower) {
      const Link::Handle answered = link.recv(peer, pong, small_in);
      const auto t0 = std::chrono::steady_clock::now();
      const Link::Handle sent = link.send(peer, ping, small_out);
      TRIB_RETURN_IF_ERROR(wait_or_abort(link, answered, options.deadline));
      const double t = since(t0);
      rtt = rtt < 0 ? t : std::min(rtt, t);
      TRIB_RETURN_IF_ERROR(wait_or_abort(link, sent, options.deadline));
    } else {
      TRIB_RETURN_IF_ERROR(
          wait_or_abort(link, link.recv(peer, ping, small_in), options.deadline));
      TRIB_RETURN_IF_ERROR(
          wait_or_abort(link, link.send(peer, pong, small_out), options.deadline));
    }
  }
  double best = 0;
  for (int i = 0; i < std::max(1, params.bulks); ++i) {
    const auto k = static_cast<std::uint32_t>(i);
    // The lower rank's bulk first, then the higher's: one direction at a time.
    double t = 0;
    for (int turn = 0; turn < 2; ++turn) {
      const bool mine = (turn == 0) == lower;
      const std::uint32_t slot = kPairBulk + 2 * k + static_cast<std::uint32_t>(turn);
      const std::uint32_t ack = kPairBulkAck + 2 * k + static_cast<std::uint32_t>(turn);
      if (mine) {
        TRIB_ASSIGN_OR_RETURN(t, timed_send(link, options, peer, slot, ack, bulk_out));
      } else {
        TRIB_RETURN_IF_ERROR(answer(link, options, peer, slot, ack, bulk_in));
      }
    }
    best = i == 0 ? t : std::min(best, t);
  }
  // The bulk's time beyond its two latencies (floored: noise must not make a link look
  // ten times faster than its whole transfer).
  const double transfer = std::max(best - std::max(rtt, 0.0), best / 10);
  return transfer > 0 ? static_cast<double>(bulk_out.size()) / transfer : 0.0;
}

}  // namespace

Result<std::vector<double>> measure_pair_links(Link& link, const CollectiveOptions& options,
                                               const PairProbeParams& params) {
  const int n = link.size();
  if (n <= 1) return std::vector<double>{};
  const int me = link.rank();
  const std::size_t bulk = std::max<std::size_t>(params.bulk_bytes, 1);
  std::vector<std::byte> bulk_out(bulk), bulk_in(bulk);
  std::vector<double> row(static_cast<std::size_t>(n), 0.0);
  const int rounds = n + (n % 2) - 1;
  for (int round = 0; round < rounds; ++round) {
    const int peer = partner(me, n, round);
    if (peer < 0) continue;
    TRIB_ASSIGN_OR_RETURN(row[static_cast<std::size_t>(peer)],
                          measure_pair(link, options, params, peer, bulk_out, bulk_in));
  }
  std::vector<double> matrix(static_cast<std::size_t>(n) * static_cast<std::size_t>(n), 0.0);
  CollectiveOptions gather = options;
  gather.seq = options.seq + 1;
  gather.zones = {};
  TRIB_RETURN_IF_ERROR(all_gather(link, row.data(), matrix.data(), row.size(), DType::kFloat64,
                                  gather));
  return matrix;
}

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
