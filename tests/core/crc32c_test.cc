// CRC-32C: the published check values, both engines (ISA-L's dispatched code and the
// PCLMULQDQ folding of core/crc32c_fold.h) agreeing with ISA-L's table-driven reference on
// every length and alignment around their block sizes, from any register, and continuation.
#include "core/crc32c.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

namespace tributary {
namespace {

std::span<const std::byte> bytes(std::string_view s) { return std::as_bytes(std::span(s)); }

TEST(Crc32c, PublishedCheckValues) {
  // The CRC catalogue's check value, and RFC 3720 (iSCSI) appendix B.4.
  EXPECT_EQ(crc32c(bytes("123456789")), 0xE3069283u);
  EXPECT_EQ(crc32c(bytes(std::string(32, '\0'))), 0x8A9136AAu);
  EXPECT_EQ(crc32c(bytes(std::string(32, '\xff'))), 0x62A8AB43u);
  std::string ascending(32, '\0');
  for (int i = 0; i < 32; ++i) ascending[static_cast<std::size_t>(i)] = static_cast<char>(i);
  EXPECT_EQ(crc32c(bytes(ascending)), 0x46DD794Eu);
  EXPECT_EQ(crc32c_reference(bytes("123456789")), 0xE3069283u);
  EXPECT_EQ(crc32c({}), 0u);
}

TEST(Crc32c, DispatchedCodeAgreesWithTheReferenceOnEveryLengthAndAlignment) {
  std::mt19937_64 rng(42);
  std::vector<std::byte> buf(3 * 8192 * 2 + 3 * 256 * 3 + 64);
  for (auto& b : buf) b = static_cast<std::byte>(rng());
  std::vector<std::size_t> lengths;
  for (std::size_t n = 0; n < 80; ++n) lengths.push_back(n);
  // Either side of the folding loops' strides (16 to 256 bytes a round) and their tails.
  for (std::size_t n :
       {127u,  128u,  129u,  255u,  256u,  257u,  511u,  512u,   513u,   767u,   768u,   769u,
        1023u, 1024u, 1025u, 1536u, 4095u, 4096u, 4097u, 24575u, 24576u, 24577u, 49152u, 51000u})
    lengths.push_back(n);
  for (std::size_t offset = 0; offset < 8; ++offset) {
    for (std::size_t n : lengths) {
      if (offset + n > buf.size()) continue;
      const std::span<const std::byte> s(buf.data() + offset, n);
      ASSERT_EQ(crc32c(s), crc32c_reference(s)) << "offset " << offset << " length " << n;
      ASSERT_EQ(crc32c_isal(s), crc32c_reference(s)) << "offset " << offset << " length " << n;
      ASSERT_EQ(crc32c_folded(s), crc32c_reference(s)) << "offset " << offset << " length " << n;
    }
  }
}

TEST(Crc32c, FoldingAgreesWithTheReferenceAcrossItsStridesAndBlocksFromAnyRegister) {
  // The folding takes strides of 160 bytes from two strides on, in blocks of up to 64
  // strides (10 KiB), and leaves the rest to ISA-L: every count of strides, either side
  // of each block boundary, with a random starting value each time.
  std::mt19937_64 rng(20261128);
  std::vector<std::byte> buf(4 * 10240 + 1000);
  for (auto& b : buf) b = static_cast<std::byte>(rng());
  std::vector<std::size_t> lengths;
  for (std::size_t strides = 0; strides <= 66; ++strides) {
    for (std::size_t extra : {0u, 1u, 7u, 8u, 159u}) lengths.push_back(strides * 160 + extra);
  }
  for (std::size_t block = 1; block <= 4; ++block) {
    for (std::size_t extra : {0u, 1u, 159u, 160u, 319u, 320u, 321u, 1000u}) {
      lengths.push_back(block * 10240 + extra);
      lengths.push_back(block * 10240 - std::min<std::size_t>(extra, 10240));
    }
  }
  for (std::size_t offset : {0u, 3u, 8u}) {
    for (std::size_t n : lengths) {
      if (offset + n > buf.size()) continue;
      const std::span<const std::byte> s(buf.data() + offset, n);
      const auto crc = static_cast<std::uint32_t>(rng());
      ASSERT_EQ(crc32c_folded(s, crc), crc32c_reference(s, crc))
          << "offset " << offset << " length " << n << " from " << crc;
    }
  }
  // One bit flipped anywhere in a folded block changes the value.
  const std::span<const std::byte> all(buf.data(), 3 * 10240);
  const std::uint32_t whole = crc32c_folded(all);
  for (std::size_t bit : {0u, 5u, 127u * 8 + 7, 128u * 8, 10239u * 8 + 1, 20000u * 8 + 4}) {
    buf[bit / 8] ^= static_cast<std::byte>(1u << (bit % 8));
    EXPECT_NE(crc32c_folded(all), whole) << "bit " << bit;
    buf[bit / 8] ^= static_cast<std::byte>(1u << (bit % 8));
  }
  EXPECT_TRUE(std::string(crc32c_engine()) == "fold" || std::string(crc32c_engine()) == "isal");
}

TEST(Crc32c, ContinuesAcrossPiecesAndSeesOneFlippedBit) {
  std::vector<std::byte> buf(100000);
  std::mt19937 rng(7);
  for (auto& b : buf) b = static_cast<std::byte>(rng());
  const std::uint32_t whole = crc32c(buf);
  const std::span<const std::byte> all(buf);
  EXPECT_EQ(crc32c(all.subspan(33333), crc32c(all.first(33333))), whole);
  for (std::size_t bit : {0u, 7u, 4096u * 8 + 3, 99999u * 8 + 7}) {
    buf[bit / 8] ^= static_cast<std::byte>(1u << (bit % 8));
    EXPECT_NE(crc32c(buf), whole) << "bit " << bit;
    buf[bit / 8] ^= static_cast<std::byte>(1u << (bit % 8));
  }
  EXPECT_EQ(crc32c(buf), whole);
}

}  // namespace
}  // namespace tributary
