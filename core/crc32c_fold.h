// CRC-32C by carry-less multiplication folding (PCLMULQDQ) with SSE4.2's crc32 instruction
// running beside it over a second part of each block: for CPUs whose crc32 instruction
// is not pipelined (AMD Zen: one per 3 cycles, so ISA-L's three interleaved crc32 streams
// run at the speed of one, 6.5 GB/s here), where PCLMULQDQ folding is ~1.5x that. ISA-L
// folds with carry-less multiplication for CRC-32C only with AVX-512 VPCLMULQDQ
// (crc32_iscsi_by16_10); crc32c.cc times both at start-up and keeps the faster.
//
// The register convention is ISA-L's: no initial or final inversion.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tributary::crc32c_fold {

// Whether this CPU has SSE4.2 and PCLMULQDQ.
bool supported();

struct Progress {
  std::uint32_t reg = 0;
  std::size_t consumed = 0;  // a multiple of the stride; the rest is the caller's
};

// The register after as many whole strides of `data` as the folding takes (none when `n`
// is under two strides of 160 bytes), from `reg`. Requires supported().
Progress fold(const std::byte* data, std::size_t n, std::uint32_t reg);

}  // namespace tributary::crc32c_fold
