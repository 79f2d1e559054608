// The zstd stage: wraps any codec and passes its payload through zstd where that pays.
//
// The inner codec's payload is compressed with zstd; if that saves at least `min_gain`
// of the bytes, the compressed frame is sent, otherwise the inner payload is stored
// as-is (flag bit 0). Either way the result is a kZstd payload whose header names the
// inner payload's length, so the receiver bounds the decompression before running it
// (no decompression bombs). Nesting a zstd stage inside another is rejected.
// Thread-safety: as Codec; zstd contexts are per call (thread_local), never shared.
#pragma once

#include <memory>

#include "compression/codec.h"

namespace tributary::compression {

std::unique_ptr<Codec> make_zstd_stage(std::unique_ptr<Codec> inner, int level, double min_gain);

// Raw zstd of a byte stream, for measuring which streams it pays on (bench, tests).
// Returns the compressed size (0 on a zstd error).
std::size_t zstd_compressed_size(std::span<const std::byte> bytes, int level);

}  // namespace tributary::compression
