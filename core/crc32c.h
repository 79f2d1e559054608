// CRC-32C (Castagnoli: polynomial 0x1EDC6F41, reflected, initial and final XOR 0xFFFFFFFF),
// the checksum of iSCSI, ext4 and SCTP: it catches every burst error up to 32 bits and
// every odd number of flipped bits.
//
// The data plane puts one on every frame (transport/tcp/frame.h), so its speed is the data
// plane's. Two engines, the faster on this CPU chosen once at the first call (timed; both
// give the same value): Intel's ISA-L (crc32_iscsi: AVX-512 VPCLMULQDQ folding where the
// CPU has it, else three interleaved SSE4.2 crc32 streams), and PCLMULQDQ folding with one
// crc32 stream beside it (core/crc32c_fold.h), for CPUs whose crc32 instruction is not
// pipelined (AMD Zen: ISA-L 6.5 GB/s, folding 9.6; bench/crc_bench).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace tributary {

// The CRC-32C of `data` continued from `crc` (the value returned for the bytes before):
// crc32c(ab) == crc32c(b, crc32c(a)). crc32c({}) == 0.
std::uint32_t crc32c(std::span<const std::byte> data, std::uint32_t crc = 0);

// Each engine alone (for the tests and bench/crc_bench): crc32c_folded is ISA-L's where the
// CPU lacks PCLMULQDQ. crc32c_engine(): "fold" or "isal", the one crc32c uses.
std::uint32_t crc32c_isal(std::span<const std::byte> data, std::uint32_t crc = 0);
std::uint32_t crc32c_folded(std::span<const std::byte> data, std::uint32_t crc = 0);
const char* crc32c_engine();

// ISA-L's portable table-driven version alone: the reference the tests hold the
// dispatched code to.
std::uint32_t crc32c_reference(std::span<const std::byte> data, std::uint32_t crc = 0);

}  // namespace tributary
