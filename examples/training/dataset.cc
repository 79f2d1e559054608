#include "examples/training/dataset.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <numeric>
#include <string_view>

#include "core/check.h"
#include "examples/training/rng.h"

#ifndef TRIBUTARY_DATA_DIR
#error "TRIBUTARY_DATA_DIR must be defined by the build (examples/training/CMakeLists.txt)"
#endif

namespace tributary::training {
namespace {

constexpr std::size_t kFieldsPerLine = kDigitsFeatures + 1;

// The whole decompressed file. gzread passes non-gzip files through unchanged, so plain
// CSV works too. A gzip stream that ends early is an error here, before any parsing, so
// a truncated download cannot pass as a shorter dataset.
Result<std::string> read_gz(const std::string& path) {
  errno = 0;  // gzopen sets errno only for OS failures; 0 then means zlib ran out of memory
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) {
    const int err = errno;
    return error(StatusCode::kInvalidArgument,
                 "cannot open " + path + ": " + (err != 0 ? std::strerror(err) : "out of memory"));
  }
  std::string text;
  char buffer[1 << 16];
  for (;;) {
    const int n = gzread(file, buffer, sizeof buffer);
    if (n > 0) {
      text.append(buffer, static_cast<std::size_t>(n));
      continue;
    }
    int zerr = Z_OK;
    const char* message = gzerror(file, &zerr);
    // Z_BUF_ERROR at the end of input is zlib's "unexpected end of file": truncated.
    if (n < 0 || zerr != Z_OK) {
      std::string why = zerr == Z_BUF_ERROR ? "gzip stream is truncated" : message;
      gzclose(file);
      return error(StatusCode::kInvalidArgument, path + ": " + why);
    }
    break;
  }
  if (const int rc = gzclose(file); rc != Z_OK) {
    return error(StatusCode::kInvalidArgument,
                 path + ": gzip stream is damaged (gzclose " + std::to_string(rc) + ")");
  }
  return text;
}

Status line_error(const std::string& path, std::size_t line, const std::string& what) {
  return error(StatusCode::kInvalidArgument, path + " line " + std::to_string(line) + ": " + what);
}

// One CSV line into `out`: 64 pixels then the label. Every field is bounds-checked.
Status parse_line(std::string_view line, const std::string& path, std::size_t line_no,
                  Dataset& out) {
  std::size_t field = 0;
  std::size_t pos = 0;
  int label = -1;
  for (;;) {
    const std::size_t comma = std::min(line.find(',', pos), line.size());
    const std::string_view text = line.substr(pos, comma - pos);
    ++field;
    if (field > kFieldsPerLine) {
      return line_error(path, line_no, "more than " + std::to_string(kFieldsPerLine) + " fields");
    }
    int value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec == std::errc::result_out_of_range) {
      return line_error(path, line_no,
                        "field " + std::to_string(field) + " is out of range: '" +
                            std::string(text.substr(0, 32)) + "'");
    }
    if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
      return line_error(path, line_no,
                        "field " + std::to_string(field) + " is not an integer: '" +
                            std::string(text.substr(0, 32)) + "'");
    }
    if (field <= kDigitsFeatures) {
      if (value < 0 || value > kDigitsMaxPixel) {
        return line_error(path, line_no,
                          "pixel " + std::to_string(field) + " = " + std::to_string(value) +
                              " is outside 0.." + std::to_string(kDigitsMaxPixel));
      }
      out.features.push_back(static_cast<float>(value) / static_cast<float>(kDigitsMaxPixel));
    } else {
      if (value < 0 || value >= static_cast<int>(kDigitsClasses)) {
        return line_error(path, line_no,
                          "label " + std::to_string(value) + " is outside 0.." +
                              std::to_string(kDigitsClasses - 1));
      }
      label = value;
    }
    if (comma == line.size()) break;
    pos = comma + 1;
  }
  if (field != kFieldsPerLine) {
    return line_error(path, line_no,
                      std::to_string(field) + " fields, expected " +
                          std::to_string(kFieldsPerLine) + " (64 pixels and a label)");
  }
  out.labels.push_back(static_cast<std::uint8_t>(label));
  return Status::ok();
}

}  // namespace

Dataset Dataset::subset(std::span<const std::size_t> indices) const {
  Dataset out;
  out.features.reserve(indices.size() * kDigitsFeatures);
  out.labels.reserve(indices.size());
  for (const std::size_t i : indices) {
    TRIB_CHECK(i < size()) << "index " << i << " of " << size();
    const auto r = row(i);
    out.features.insert(out.features.end(), r.begin(), r.end());
    out.labels.push_back(labels[i]);
  }
  return out;
}

std::string default_data_dir() { return TRIBUTARY_DATA_DIR; }
std::string default_digits_path() { return default_data_dir() + "/digits.csv.gz"; }

Result<Dataset> load_digits(const std::string& path) {
  Result<std::string> text = read_gz(path);
  if (!text) return text.status();
  const std::string_view all = *text;

  Dataset data;
  std::size_t line_no = 0;
  std::size_t pos = 0;
  while (pos < all.size()) {
    const std::size_t newline = std::min(all.find('\n', pos), all.size());
    std::string_view line = all.substr(pos, newline - pos);
    pos = newline + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    // Only the final newline may leave an empty line; the loop ends before it.
    if (line.empty()) return line_error(path, line_no, "empty line");
    TRIB_RETURN_IF_ERROR(parse_line(line, path, line_no, data));
  }
  if (data.size() == 0) return error(StatusCode::kInvalidArgument, path + ": no rows");
  return data;
}

Result<TrainTestSplit> split_train_test(const Dataset& all, std::size_t test_size,
                                        std::uint64_t seed) {
  if (test_size >= all.size()) {
    return error(StatusCode::kInvalidArgument, "test size " + std::to_string(test_size) +
                                                   " leaves no training rows out of " +
                                                   std::to_string(all.size()));
  }
  std::vector<std::size_t> order(all.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  Rng(seed).shuffle(std::span(order));
  const std::size_t train_size = all.size() - test_size;
  return TrainTestSplit{all.subset(std::span(order).first(train_size)),
                        all.subset(std::span(order).subspan(train_size))};
}

std::vector<std::vector<std::size_t>> shard_indices(const Dataset& train, std::size_t workers,
                                                    Sharding sharding, std::uint64_t seed) {
  TRIB_CHECK(workers >= 1 && workers <= train.size())
      << workers << " workers for " << train.size() << " rows";
  std::vector<std::size_t> order(train.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::vector<std::vector<std::size_t>> shards(workers);
  if (sharding == Sharding::kIid) {
    Rng(seed).shuffle(std::span(order));
    for (std::size_t i = 0; i < order.size(); ++i) shards[i % workers].push_back(order[i]);
    return shards;
  }
  // stable_sort keeps index order within a label, so the result needs no seed.
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return train.labels[a] < train.labels[b]; });
  for (std::size_t w = 0; w < workers; ++w) {
    const std::size_t begin = w * order.size() / workers;
    const std::size_t end = (w + 1) * order.size() / workers;
    shards[w].assign(order.begin() + static_cast<std::ptrdiff_t>(begin),
                     order.begin() + static_cast<std::ptrdiff_t>(end));
  }
  return shards;
}

}  // namespace tributary::training
