#include "cli/federated_check_workload.h"

#include <chrono>
#include <algorithm>
#include <cstring>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "core/hash.h"

namespace tributary::cli {
namespace {

// Input element i of `member` in `round`: an integer in [-5, 5], so weighted sums (weights
// 1..4) are exact in float in any order.
float input(std::uint64_t member, std::uint64_t round, std::size_t i) {
  return static_cast<float>(static_cast<int>((member * 7 + round * 3 + i) % 11) - 5);
}

double weight_of(std::uint64_t member) { return static_cast<double>(member % 4 + 1); }

}  // namespace

Status run_federated_check(agent::Worker& w, const FederatedCheckSpec& spec, std::FILE* out) {
  std::vector<float> data(spec.count);
  std::vector<float> sum(spec.count);
  for (int round = 1; round <= spec.rounds; ++round) {
    TRIB_RETURN_IF_ERROR(w.step_boundary().status());
    const bool slow = w.rank() == w.size() - 1 && round % 2 == 1;
    std::this_thread::sleep_for(std::chrono::milliseconds(slow ? spec.slow_ms : spec.step_ms));
    const auto r = static_cast<std::uint64_t>(round);
    for (std::size_t i = 0; i < data.size(); ++i) data[i] = input(w.member_id(), r, i);
    const std::vector<float> before = data;
    agent::FederatedRound fr;
    fr.round = r;
    fr.weight = weight_of(w.member_id());
    fr.deadline = std::chrono::milliseconds(spec.deadline_ms);
    fr.min_participants = spec.min_participants;
    fr.late = agent::LatePolicy::kDrop;
    auto outcome = w.federated_round(data.data(), data.size(), fr);
    if (!outcome) return outcome.status();
    std::string names;
    for (const auto& c : outcome->contributors) {
      if (!names.empty()) names += ',';
      names += std::to_string(c.member_id) + ":" + std::to_string(static_cast<int>(c.weight));
    }
    bool ok = true;
    std::string sha = "-";
    if (outcome->contributed) {
      std::fill(sum.begin(), sum.end(), 0.0f);
      for (const auto& c : outcome->contributors) {
        for (std::size_t i = 0; i < sum.size(); ++i)
          sum[i] += static_cast<float>(c.weight) * input(c.member_id, r, i);
      }
      for (std::size_t i = 0; i < sum.size(); ++i) {
        const auto expected = static_cast<float>(static_cast<double>(sum[i]) / outcome->total_weight);
        if (std::memcmp(&expected, &data[i], sizeof(float)) != 0) ok = false;
      }
      sha = to_hex(Sha256::of(std::as_bytes(std::span(data))));
    } else {
      ok = data == before;  // a late member's data is untouched
    }
    std::fprintf(out,
                 "federated round %d epoch %llu member %llu %s contributors %s total %g sha256 %s "
                 "%s\n",
                 round, static_cast<unsigned long long>(outcome->epoch),
                 static_cast<unsigned long long>(w.member_id()),
                 outcome->contributed ? "contributed" : "late", names.c_str(),
                 outcome->total_weight, sha.c_str(), ok ? "ok" : "WRONG");
    std::fflush(out);
    if (!ok) {
      return error(StatusCode::kMismatch,
                   "federated round " + std::to_string(round) + " differs from its reference");
    }
  }
  std::fprintf(out, "federated done\n");
  std::fflush(out);
  return Status::ok();
}

}  // namespace tributary::cli
