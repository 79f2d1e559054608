// Does the cost model choose the fastest all-reduce? Checked against what the algorithms
// measured when forced one by one (tests/algorithms/data/forced_all_reduce_*.tsv: every
// round of `bench/forced_sweep.sh`, agents as processes on the 2-core machines, in
// interleaved rounds), for each transport's constants: the chosen algorithm's fastest round
// must be within 10% of the fastest algorithm's median (a noisy machine: one slow round of
// the choice does not make it wrong; being slower in every round does). A change to the
// model's formulas or constants that makes it pick an algorithm measurably slower than
// another fails here, naming every cell it got wrong.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "algorithms/cost_model.h"

namespace tributary {
namespace {

struct Cell {
  std::map<std::string, std::vector<double>> rounds;  // algorithm -> microseconds per round
};
using Table = std::map<std::pair<int, std::size_t>, Cell>;  // (ranks, bytes)

// Rows: transport round ranks algorithm bytes microseconds.
Table read_table(const std::string& path, const std::string& transport) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  Table table;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream row(line);
    std::string t, algorithm;
    int round = 0, n = 0;
    std::size_t bytes = 0;
    double us = 0;
    EXPECT_TRUE(static_cast<bool>(row >> t >> round >> n >> algorithm >> bytes >> us))
        << "malformed row: " << line;
    if (t == transport) table[{n, bytes}].rounds[algorithm].push_back(us);
  }
  return table;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 == 1 ? v[m] : (v[m - 1] + v[m]) / 2;
}

// Every cell the model gets wrong, one line each; empty when it gets none wrong.
std::string wrong_choices(const algorithms::CostModel& model, const Table& table) {
  std::string wrong;
  for (const auto& [key, cell] : table) {
    const auto [n, bytes] = key;
    std::string best;
    double best_median = 0;
    for (const auto& [algorithm, rounds] : cell.rounds) {
      const double m = median(rounds);
      if (best.empty() || m < best_median) {
        best = algorithm;
        best_median = m;
      }
    }
    const std::string chosen(to_string(model.choose(n, bytes)));
    const auto it = cell.rounds.find(chosen);
    if (it == cell.rounds.end()) {
      wrong += "n=" + std::to_string(n) + " " + std::to_string(bytes) + " B: chose " + chosen +
               ", which was not measured\n";
      continue;
    }
    const double chosen_median = median(it->second);
    const double chosen_fastest = *std::min_element(it->second.begin(), it->second.end());
    if (chosen_fastest <= 1.10 * best_median) continue;
    std::ostringstream line;
    line << "n=" << n << " " << bytes << " B: chose " << chosen << " (" << chosen_median
         << " us), " << best << " took " << best_median << " us ("
         << chosen_median / best_median << "x)\n";
    wrong += line.str();
  }
  return wrong;
}

const std::string kTable =
    std::string(TRIBUTARY_TEST_DATA_DIR) + "/forced_all_reduce_2026-12-08.tsv";

TEST(CostModelChoice, TcpLoopbackPicksAnAlgorithmAsFastAsTheBest) {
  const Table table = read_table(kTable, "tcp");
  ASSERT_GE(table.size(), 20u) << kTable;
  EXPECT_EQ(wrong_choices(algorithms::CostModel::default_model(), table), "");
}

// Two cells are known to be wrong, and the test says so instead of hiding them: at N = 4,
// 16 and 64 KiB, halving-doubling's 16 messages against the double tree's 12 put its
// predicted work 2.4% above the double tree's, just past the 2% within which the shorter
// critical path (halving-doubling's) would decide, while it measures 1.3-1.4x faster. No
// change of the constants fixed them without turning other cells wrong on this table or
// the TCP one (bench/results/cost_model_single_copy_2026-12-08.md). Any other wrong cell,
// or either of these put right, fails here.
TEST(CostModelChoice, SharedMemoryPicksAnAlgorithmAsFastAsTheBest) {
  const Table table = read_table(kTable, "shm");
  ASSERT_GE(table.size(), 20u) << kTable;
  EXPECT_EQ(
      wrong_choices(algorithms::CostModel::default_model().on_shared_memory(), table),
      "n=4 16384 B: chose double_tree (30.01 us), halving_doubling took 21.22 us (1.41423x)\n"
      "n=4 65536 B: chose double_tree (67.595 us), halving_doubling took 52.295 us (1.29257x)\n");
}

// The check has teeth: without single copy priced (the shared-memory constants alone) the
// ring is chosen at N = 4, 4 MiB, 1.5x slower than halving-doubling.
TEST(CostModelChoice, TheRingUnderSingleCopyIsCaught) {
  const Table table = read_table(kTable, "shm");
  const algorithms::CostModel without_stalls = algorithms::CostModel::default_model().with_link(
      algorithms::CostModel::kSharedMemoryAlpha, algorithms::CostModel::kSharedMemoryBeta);
  EXPECT_EQ(without_stalls.single_copy_from_ranks(), 0);
  EXPECT_NE(wrong_choices(without_stalls, table).find("n=4 4194304 B: chose ring"),
            std::string::npos)
      << wrong_choices(without_stalls, table);
}

}  // namespace
}  // namespace tributary
