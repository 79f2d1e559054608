// CRC-32C: the published check values, the dispatched code (AVX-512 / PCLMUL folding on
// this CPU) agreeing with ISA-L's table-driven reference on every length and alignment
// around its block sizes, and continuation.
#include "core/crc32c.h"

#include <gtest/gtest.h>

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
  for (std::size_t n : {127u, 128u, 129u, 255u, 256u, 257u, 511u, 512u, 513u, 767u, 768u, 769u,
                        1023u, 1024u, 1025u, 1536u, 4095u, 4096u, 4097u, 24575u, 24576u, 24577u,
                        49152u, 51000u})
    lengths.push_back(n);
  for (std::size_t offset = 0; offset < 8; ++offset) {
    for (std::size_t n : lengths) {
      if (offset + n > buf.size()) continue;
      const std::span<const std::byte> s(buf.data() + offset, n);
      ASSERT_EQ(crc32c(s), crc32c_reference(s)) << "offset " << offset << " length " << n;
    }
  }
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
