// The digits dataset (data/README.md): 8x8 grey-level images of handwritten digits, a
// fixed train/test split, and the two ways of sharding the training set across workers.
//
// Guarantees:
//  - load_digits() never crashes on bad input: a missing file, a broken gzip stream or a
//    malformed line is a kInvalidArgument Status naming the file and the 1-based line.
//  - Pixels are stored as float in [0, 1] (grey level / 16); labels are 0..9.
//  - The split and the shards depend only on their inputs and seeds (see rng.h), so every
//    worker of a cluster computes the same split and the same shards without talking.
//  - Shards partition the training set: every training index is in exactly one shard.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"

namespace tributary::training {

inline constexpr std::size_t kDigitsFeatures = 64;  // 8x8 pixels
inline constexpr std::size_t kDigitsClasses = 10;
inline constexpr int kDigitsMaxPixel = 16;
inline constexpr std::size_t kDigitsTestSize = 450;  // 1797 = 1347 train + 450 test
inline constexpr std::uint64_t kDigitsSplitSeed = 20261121;

// Rows of features with their labels. Owns its storage; copies are deep.
struct Dataset {
  std::vector<float> features;       // size() * kDigitsFeatures, row-major, in [0, 1]
  std::vector<std::uint8_t> labels;  // size() entries, each < kDigitsClasses

  std::size_t size() const { return labels.size(); }
  std::span<const float> row(std::size_t i) const {
    return {features.data() + i * kDigitsFeatures, kDigitsFeatures};
  }
  // The rows at `indices`, in that order (indices must be < size()).
  Dataset subset(std::span<const std::size_t> indices) const;
};

// The data directory compiled in (TRIBUTARY_DATA_DIR = <source>/data) and the default
// dataset file inside it. Callers that ship elsewhere pass their own path to load_digits.
std::string default_data_dir();
std::string default_digits_path();

// Reads a gzip-compressed (or plain) CSV: 64 integer pixels 0..16 then a label 0..9 per
// line. Empty input or any malformed line is an error; nothing is returned partially.
Result<Dataset> load_digits(const std::string& path = default_digits_path());

struct TrainTestSplit {
  Dataset train;
  Dataset test;
};

// A fixed seeded shuffle of all rows, then the last `test_size` rows are the test set.
// With the defaults on the 1,797 digits: 1,347 train / 450 test, the same on every run.
// kInvalidArgument when test_size leaves no training rows.
Result<TrainTestSplit> split_train_test(const Dataset& all, std::size_t test_size = kDigitsTestSize,
                                        std::uint64_t seed = kDigitsSplitSeed);

enum class Sharding {
  kIid,          // a seeded shuffle dealt round-robin: every shard sees every class
  kLabelSorted,  // sorted by label, cut into contiguous blocks: each shard sees ~C/W classes
};

// Splits indices [0, rows) into `workers` shards (1 <= workers <= rows). Shard sizes
// differ by at most one. Within a label-sorted shard the indices are sorted by (label,
// index); within an IID shard they are in dealt order. `seed` only affects kIid.
std::vector<std::vector<std::size_t>> shard_indices(const Dataset& train, std::size_t workers,
                                                    Sharding sharding, std::uint64_t seed);

}  // namespace tributary::training
