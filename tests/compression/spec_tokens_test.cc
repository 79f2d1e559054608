// The spec tokenizer shared by codec specs and compressed-collective plan specs.
#include "compression/spec_tokens.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace tributary::compression {
namespace {

std::string items_of(std::string_view spec) {
  std::string s;
  for (const SpecItem& item : tokenize_spec(spec).items)
    s += "[" + std::string(item.key) + "=" + std::string(item.value) + "]";
  return s;
}

TEST(SpecTokens, SplitsNameAndItems) {
  EXPECT_EQ(tokenize_spec("qint8").name, "qint8");
  EXPECT_TRUE(tokenize_spec("qint8").items.empty());
  EXPECT_EQ(tokenize_spec("qint4:bucket=256,zstd").name, "qint4");
  EXPECT_EQ(items_of("qint4:bucket=256,zstd"), "[bucket=256][zstd=1]");
  EXPECT_EQ(items_of("x:a=1=2"), "[a=1=2]") << "the first '=' splits";
  // An empty item is a key the grammar will reject; one trailing comma ends the list.
  EXPECT_EQ(items_of("x:a,,b"), "[a=1][=1][b=1]");
  EXPECT_EQ(items_of("x:a,"), "[a=1]");
  EXPECT_EQ(items_of("x:"), "");
  EXPECT_EQ(tokenize_spec("").name, "");
}

TEST(SpecTokens, FlagsAndNumbersAreStrict) {
  bool b = false;
  for (const char* yes : {"1", "true", "on"}) EXPECT_TRUE(parse_spec_flag(yes, b) && b) << yes;
  for (const char* no : {"0", "false", "off"}) EXPECT_TRUE(parse_spec_flag(no, b) && !b) << no;
  for (const char* bad : {"", "2", "yes", "On", " 1"}) EXPECT_FALSE(parse_spec_flag(bad, b)) << bad;
  double d = 0;
  EXPECT_TRUE(parse_spec_number("0.25", d));
  EXPECT_EQ(d, 0.25);
  EXPECT_TRUE(parse_spec_number("1e-2", d));
  for (const char* bad : {"", " 1", "1 ", "+1", "1x", "0x10"})
    EXPECT_FALSE(parse_spec_number(bad, d)) << bad;
  std::uint32_t u = 0;
  EXPECT_TRUE(parse_spec_number("512", u));
  EXPECT_EQ(u, 512u);
  EXPECT_FALSE(parse_spec_number("-1", u));
  EXPECT_FALSE(parse_spec_number("4294967296", u)) << "out of range";
}

}  // namespace
}  // namespace tributary::compression
