// CRC-32C (Castagnoli: polynomial 0x1EDC6F41, reflected, initial and final XOR 0xFFFFFFFF),
// the checksum of iSCSI, ext4 and SCTP: it catches every burst error up to 32 bits and
// every odd number of flipped bits.
//
// The data plane puts one on every frame (transport/tcp/frame.h), so its speed is the data plane's:
// the work is Intel's ISA-L (crc32_iscsi), which picks at run time the fastest code the CPU
// has (carry-less multiplication folding with AVX-512 VPCLMULQDQ, then PCLMULQDQ, then
// SSE4.2's crc32, then tables): about 2x the three-stream SSE4.2 code this replaced.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace tributary {

// The CRC-32C of `data` continued from `crc` (the value returned for the bytes before):
// crc32c(ab) == crc32c(b, crc32c(a)). crc32c({}) == 0.
std::uint32_t crc32c(std::span<const std::byte> data, std::uint32_t crc = 0);

// ISA-L's portable table-driven version alone: the reference the tests hold the
// dispatched code to.
std::uint32_t crc32c_reference(std::span<const std::byte> data, std::uint32_t crc = 0);

}  // namespace tributary
