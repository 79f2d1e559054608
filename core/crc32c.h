// CRC-32C (Castagnoli: polynomial 0x1EDC6F41, reflected, initial and final XOR 0xFFFFFFFF),
// the checksum of iSCSI, ext4 and SCTP: it catches every burst error up to 32 bits and
// every odd number of flipped bits, and x86-64 computes it in hardware (SSE4.2's crc32).
//
// The data plane puts one on every frame (agent/frame.h). Speed matters there: with
// SSE4.2, three independent streams of crc32 instructions run interleaved and are combined
// (the method of Mark Adler's crc32c.c), about 3x the single-stream rate; without it, a
// table-driven software version (slicing by 8) gives the same values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace tributary {

// The CRC-32C of `data` continued from `crc` (the value returned for the bytes before):
// crc32c(ab) == crc32c(b, crc32c(a)). crc32c({}) == 0.
std::uint32_t crc32c(std::span<const std::byte> data, std::uint32_t crc = 0);

// The table-driven version alone (for tests and machines without SSE4.2).
std::uint32_t crc32c_software(std::span<const std::byte> data, std::uint32_t crc = 0);

// True when crc32c() uses the SSE4.2 instruction on this CPU.
bool crc32c_hardware();

}  // namespace tributary
