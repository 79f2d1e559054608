#include "examples/training/dataset.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace tributary::training {
namespace {

const Dataset& digits() {
  static const Dataset data = [] {
    Result<Dataset> r = load_digits();
    EXPECT_TRUE(r.is_ok()) << r.status().to_string();
    return r.is_ok() ? std::move(r).value() : Dataset{};
  }();
  return data;
}

// A scratch file unique to this process and test, removed when the test ends.
class TempFile {
 public:
  explicit TempFile(const std::string& tag)
      : path_(::testing::TempDir() + "tributary_digits_" + std::to_string(::getpid()) + "_" + tag) {
  }
  ~TempFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

  void write_plain(const std::string& bytes) const {
    std::ofstream(path_, std::ios::binary) << bytes;
  }
  void write_gzip(const std::string& text) const {
    gzFile f = gzopen(path_.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(gzwrite(f, text.data(), static_cast<unsigned>(text.size())),
              static_cast<int>(text.size()));
    ASSERT_EQ(gzclose(f), Z_OK);
  }

 private:
  std::string path_;
};

// A valid CSV line: 64 pixels then `label`.
std::string good_line(int label, int pixel = 7) {
  std::string s;
  for (int i = 0; i < 64; ++i) s += std::to_string((pixel + i) % 17) + ",";
  return s + std::to_string(label) + "\n";
}

// Loads `text` written as gzip and returns the error message (empty if it loaded).
std::string load_error(const std::string& tag, const std::string& text) {
  TempFile f(tag);
  f.write_gzip(text);
  Result<Dataset> r = load_digits(f.path());
  if (r.is_ok()) return "";
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  return r.status().message();
}

TEST(DigitsDataset, LoadsAll1797RowsWithTenClasses) {
  const Dataset& d = digits();
  ASSERT_EQ(d.size(), 1797u);
  ASSERT_EQ(d.features.size(), 1797u * kDigitsFeatures);
  std::array<int, kDigitsClasses> counts{};
  for (auto label : d.labels) ++counts.at(label);
  // The class counts of the UCI/scikit-learn digits.
  const std::array<int, kDigitsClasses> expected{178, 182, 177, 183, 181, 182, 181, 179, 174, 180};
  EXPECT_EQ(counts, expected);
  EXPECT_EQ(*std::min_element(d.features.begin(), d.features.end()), 0.0f);
  EXPECT_EQ(*std::max_element(d.features.begin(), d.features.end()), 1.0f);
  // First row of the file: 0,0,5,13,9,1,... label 0.
  EXPECT_EQ(d.labels[0], 0);
  EXPECT_FLOAT_EQ(d.row(0)[2], 5.0f / 16.0f);
  EXPECT_FLOAT_EQ(d.row(0)[3], 13.0f / 16.0f);
}

TEST(DigitsDataset, SplitIsFixedAndPartitionsTheRows) {
  Result<TrainTestSplit> a = split_train_test(digits());
  Result<TrainTestSplit> b = split_train_test(digits());
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  EXPECT_EQ(a->train.size(), 1347u);
  EXPECT_EQ(a->test.size(), 450u);
  EXPECT_EQ(a->train.features, b->train.features);
  EXPECT_EQ(a->test.labels, b->test.labels);
  // Every row lands on exactly one side: the multiset of rows is preserved.
  std::multiset<std::vector<float>> all_rows, split_rows;
  for (std::size_t i = 0; i < digits().size(); ++i) {
    const auto r = digits().row(i);
    all_rows.emplace(r.begin(), r.end());
  }
  for (const Dataset* part : {&a->train, &a->test}) {
    for (std::size_t i = 0; i < part->size(); ++i) {
      const auto r = part->row(i);
      split_rows.emplace(r.begin(), r.end());
    }
  }
  EXPECT_EQ(all_rows, split_rows);
  // The test set is a real mix of classes, not a block of the file.
  std::set<int> test_classes(a->test.labels.begin(), a->test.labels.end());
  EXPECT_EQ(test_classes.size(), kDigitsClasses);

  Result<TrainTestSplit> other_seed = split_train_test(digits(), 450, kDigitsSplitSeed + 1);
  ASSERT_TRUE(other_seed.is_ok());
  EXPECT_NE(other_seed->test.labels, a->test.labels);
}

TEST(DigitsDataset, SplitRejectsATestSetWithNoTrainingRowsLeft) {
  Result<TrainTestSplit> r = split_train_test(digits(), digits().size());
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

class ShardingTest : public ::testing::TestWithParam<std::tuple<Sharding, std::size_t>> {};

TEST_P(ShardingTest, ShardsPartitionTheTrainingSet) {
  const auto [sharding, workers] = GetParam();
  Result<TrainTestSplit> split = split_train_test(digits());
  ASSERT_TRUE(split.is_ok());
  const Dataset& train = split->train;
  const auto shards = shard_indices(train, workers, sharding, 7);
  ASSERT_EQ(shards.size(), workers);

  std::vector<int> seen(train.size(), 0);
  std::size_t smallest = train.size(), largest = 0;
  for (const auto& shard : shards) {
    smallest = std::min(smallest, shard.size());
    largest = std::max(largest, shard.size());
    for (std::size_t i : shard) {
      ASSERT_LT(i, train.size());
      ++seen[i];
    }
  }
  EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
  EXPECT_LE(largest - smallest, 1u);
  EXPECT_EQ(shard_indices(train, workers, sharding, 7), shards) << "not deterministic";

  if (sharding == Sharding::kLabelSorted) {
    // Concatenated shards are sorted by label: worker w holds a contiguous label range.
    int previous = -1;
    for (const auto& shard : shards) {
      for (std::size_t i : shard) {
        EXPECT_GE(train.labels[i], previous);
        previous = train.labels[i];
      }
    }
  } else if (workers <= 4) {
    // IID: each shard holds every class.
    for (const auto& shard : shards) {
      std::set<int> classes;
      for (std::size_t i : shard) classes.insert(train.labels[i]);
      EXPECT_EQ(classes.size(), kDigitsClasses);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    WorkersAndKinds, ShardingTest,
    ::testing::Combine(::testing::Values(Sharding::kIid, Sharding::kLabelSorted),
                       ::testing::Values(std::size_t{1}, 2, 3, 4, 7, 16, 1347)));

TEST(DigitsDataset, LabelSortedShardsOfFourSeeFewClasses) {
  Result<TrainTestSplit> split = split_train_test(digits());
  ASSERT_TRUE(split.is_ok());
  for (const auto& shard : shard_indices(split->train, 4, Sharding::kLabelSorted, 0)) {
    std::set<int> classes;
    for (std::size_t i : shard) classes.insert(split->train.labels[i]);
    EXPECT_LE(classes.size(), 4u);  // ~2.5 classes each, plus boundary classes
  }
}

TEST(DigitsDataset, ReadsPlainCsvAndWindowsLineEndings) {
  TempFile f("plain");
  std::string crlf = good_line(9, 0);
  crlf.back() = '\r';
  f.write_plain(good_line(3) + crlf + "\n");
  Result<Dataset> r = load_digits(f.path());
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->size(), 2u);
  EXPECT_EQ(r->labels, (std::vector<std::uint8_t>{3, 9}));
}

// good_line() with field `field` (1-based; 65 is the label) replaced by `text`.
std::string line_with_field(int field, const std::string& text) {
  std::string line = good_line(4);
  line.pop_back();  // '\n'
  std::vector<std::string> fields;
  std::stringstream in(line);
  for (std::string f; std::getline(in, f, ',');) fields.push_back(f);
  fields.at(static_cast<std::size_t>(field - 1)) = text;
  std::string out;
  for (std::size_t i = 0; i < fields.size(); ++i) out += (i ? "," : "") + fields[i];
  return out + "\n";
}

struct MalformedCase {
  std::string name;
  std::string bad_line;  // placed as line 3, after two good lines
  std::string expected;  // substring of the error message
};

class MalformedTest : public ::testing::TestWithParam<MalformedCase> {};

TEST_P(MalformedTest, IsAClearErrorNamingLineThree) {
  const MalformedCase& c = GetParam();
  const std::string msg =
      load_error(c.name, good_line(1) + good_line(2) + c.bad_line + good_line(5));
  EXPECT_NE(msg.find(" line 3: "), std::string::npos) << msg;
  EXPECT_NE(msg.find(c.expected), std::string::npos) << msg;
}

INSTANTIATE_TEST_SUITE_P(
    Digits, MalformedTest,
    ::testing::Values(
        MalformedCase{"bad_number", line_with_field(2, "1x"), "field 2 is not an integer: '1x'"},
        MalformedCase{"float", line_with_field(5, "3.5"), "field 5 is not an integer"},
        MalformedCase{"empty_field", line_with_field(10, ""), "field 10 is not an integer: ''"},
        MalformedCase{"overflow", line_with_field(1, "99999999999999999999"),
                      "field 1 is out of range"},
        MalformedCase{"pixel_high", line_with_field(64, "17"), "pixel 64 = 17 is outside 0..16"},
        MalformedCase{"pixel_negative", line_with_field(1, "-1"), "pixel 1 = -1 is outside"},
        MalformedCase{"label_high", line_with_field(65, "10"), "label 10 is outside 0..9"},
        MalformedCase{"label_negative", line_with_field(65, "-2"), "label -2 is outside 0..9"},
        MalformedCase{"too_few_columns", "1,2,3\n", "3 fields, expected 65"},
        MalformedCase{"one_column_short", good_line(4).substr(2), "64 fields, expected 65"},
        MalformedCase{"too_many_columns", line_with_field(65, "4,4"), "more than 65 fields"},
        MalformedCase{"trailing_comma", line_with_field(65, "4,"), "more than 65 fields"},
        MalformedCase{"empty_line", "\n", "empty line"},
        MalformedCase{"binary", std::string("\x01\xff\x00\x7f", 4) + "\n", "not an integer"}),
    [](const ::testing::TestParamInfo<MalformedCase>& info) { return info.param.name; });

TEST(DigitsDataset, TruncatedGzipIsAnErrorNotAShortDataset) {
  std::ifstream in(default_digits_path(), std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 1000u);
  // Cut in the middle of the deflate stream, and just before the 8-byte CRC/size trailer.
  for (const std::size_t keep : {bytes.size() / 2, bytes.size() - 4, std::size_t{5}}) {
    TempFile f("truncated_" + std::to_string(keep));
    f.write_plain(bytes.substr(0, keep));
    Result<Dataset> r = load_digits(f.path());
    ASSERT_FALSE(r.is_ok()) << "kept " << keep << " bytes and loaded " << r->size() << " rows";
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("truncated"), std::string::npos) << r.status().message();
  }
}

TEST(DigitsDataset, CorruptGzipIsAnError) {
  std::ifstream in(default_digits_path(), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x5a);
  TempFile f("corrupt");
  f.write_plain(bytes);
  Result<Dataset> r = load_digits(f.path());
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

TEST(DigitsDataset, MissingAndEmptyFilesAreErrors) {
  Result<Dataset> missing = load_digits("/nonexistent/tributary/digits.csv.gz");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("cannot open /nonexistent/tributary/digits.csv.gz"),
            std::string::npos)
      << missing.status().message();

  EXPECT_NE(load_error("empty", "").find("no rows"), std::string::npos);
}

}  // namespace
}  // namespace tributary::training
