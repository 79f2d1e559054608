#include "core/hash.h"

#include <gtest/gtest.h>

#include <string>

namespace tributary {
namespace {

std::span<const std::byte> bytes_of(std::string_view s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

TEST(Hash, Fnv1aMatchesPublishedVectors) {
  // Vectors from the FNV reference (isthe.com/chongo/tech/comp/fnv).
  EXPECT_EQ(Fnv1a32().value(), 0x811c9dc5u);
  EXPECT_EQ(Fnv1a32().add("a").value(), 0xe40c292cu);
  EXPECT_EQ(Fnv1a32().add("foobar").value(), 0xbf9cf968u);
  EXPECT_EQ(fnv1a64(bytes_of("")), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a64(bytes_of("foobar")), 0x85944171f73967e8ull);
}

TEST(Hash, Fnv1aAddLeIsLittleEndianBytes) {
  const std::uint8_t le[4] = {0x04, 0x03, 0x02, 0x01};
  EXPECT_EQ(Fnv1a32().add_le(0x01020304u, 4).value(), Fnv1a32().add(le, 4).value());
  EXPECT_EQ(Fnv1a32().add_le(0xffffff07u, 1).value(), Fnv1a32().add_le(7, 1).value())
      << "only the low byte";
}

TEST(Hash, Sha256MatchesFips180Vectors) {
  EXPECT_EQ(to_hex(Sha256().finish()),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(to_hex(Sha256::of(bytes_of("abc"))),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  // Incremental updates give the digest of the concatenation.
  EXPECT_EQ(Sha256().update("a").update(std::string_view("bc")).finish(),
            Sha256::of(bytes_of("abc")));
}

TEST(Hash, HexIsLowerCaseTwoDigitsPerByte) {
  const std::uint8_t b[] = {0x00, 0x0f, 0xa0, 0xff};
  EXPECT_EQ(to_hex(std::span<const std::uint8_t>(b)), "000fa0ff");
  EXPECT_EQ(to_hex(std::span<const std::uint8_t>()), "");
}

}  // namespace
}  // namespace tributary
