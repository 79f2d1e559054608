// The copy of a speculatively returned all-reduce (agent/result_copy.h): what it keeps,
// when a completion drops it, and its wire form in the repair step.
#include "agent/result_copy.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

namespace tributary::agent {
namespace {

std::vector<std::byte> bytes_of(std::initializer_list<int> v) {
  std::vector<std::byte> out;
  for (int x : v) out.push_back(static_cast<std::byte>(x));
  return out;
}

TEST(ResultCopy, KeepsTheLatestAndDropsOnlyEarlierSeqs) {
  ResultCopy copy;
  EXPECT_FALSE(copy.held);
  copy.keep(7, 3, {11, 12}, bytes_of({1, 2, 3}));
  EXPECT_TRUE(copy.held);
  copy.drop_before(7);  // a completion of seq 7 itself proves nothing about seq 7
  EXPECT_TRUE(copy.held);
  copy.drop_before(8);
  EXPECT_FALSE(copy.held);
  copy.keep(9, 4, {11}, bytes_of({4}));
  EXPECT_EQ(copy.seq, 9u);
  EXPECT_EQ(copy.bytes, bytes_of({4}));
}

TEST(ResultCopy, RoundTripsThroughTheRepairBlob) {
  ResultCopy copy;
  copy.keep(42, 5, {101, 202, 303}, bytes_of({9, 8, 7, 6, 5}));
  const std::vector<std::byte> blob = encode_result_copy(copy);
  EXPECT_EQ(blob.size(), 16 + 3 * 8 + 5u);
  ResultCopy got;
  ASSERT_TRUE(decode_result_copy(blob, 42, got).is_ok());
  EXPECT_TRUE(got.held);
  EXPECT_EQ(got.seq, 42u);
  EXPECT_EQ(got.epoch, 5u);
  EXPECT_EQ(got.contributors, (std::vector<std::uint64_t>{101, 202, 303}));
  EXPECT_EQ(got.bytes, copy.bytes);
}

TEST(ResultCopy, ABlobWhoseLengthsDoNotAddUpIsRefused) {
  ResultCopy copy;
  copy.keep(1, 1, {5, 6}, bytes_of({1}));
  std::vector<std::byte> blob = encode_result_copy(copy);
  ResultCopy got;
  const std::vector<std::byte> short_header(blob.begin(), blob.begin() + 10);
  EXPECT_EQ(decode_result_copy(short_header, 1, got).code(), StatusCode::kBadFrame);
  const std::vector<std::byte> cut_ids(blob.begin(), blob.begin() + 20);
  EXPECT_EQ(decode_result_copy(cut_ids, 1, got).code(), StatusCode::kBadFrame);
  blob[8] = std::byte{0};  // zero contributors
  EXPECT_EQ(decode_result_copy(blob, 1, got).code(), StatusCode::kBadFrame);
  EXPECT_FALSE(got.held);
}

}  // namespace
}  // namespace tributary::agent
