#include "transport/shm_segment.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <new>
#include <string_view>

#include "core/hash.h"

namespace tributary::transport {
namespace {

constexpr std::uint64_t kMagic = 0x314d485342495254ull;  // "TRIBSHM1"
constexpr std::size_t kHeaderPage = 4096;
constexpr std::size_t kControlOffset[2] = {128, 256};

struct SegmentHeader {
  std::uint64_t magic;
  std::uint64_t epoch;
  std::uint64_t ring_bytes;
  std::uint32_t low_rank;
  std::uint32_t high_rank;
};

std::size_t segment_bytes(std::uint64_t ring_bytes) {
  return kHeaderPage + 2 * static_cast<std::size_t>(ring_bytes);
}

Status os_error(const std::string& what, int err) {
  return error(StatusCode::kUnavailable, what + ": " + std::strerror(err));
}

}  // namespace

std::size_t ShmRing::write_some(const std::byte* src, std::size_t n) {
  const std::uint64_t head = control_->head.load(std::memory_order_relaxed);
  const std::uint64_t tail = control_->tail.load(std::memory_order_acquire);
  n = std::min<std::size_t>(n, capacity_ - (head - tail));
  if (n == 0) return 0;
  const std::size_t at = head & (capacity_ - 1);
  const std::size_t first = std::min<std::size_t>(n, capacity_ - at);
  std::memcpy(data_ + at, src, first);
  if (n > first) std::memcpy(data_, src + first, n - first);
  control_->head.store(head + n, std::memory_order_release);
  return n;
}

std::size_t ShmRing::free_bytes() const {
  return capacity_ - (control_->head.load(std::memory_order_relaxed) -
                      control_->tail.load(std::memory_order_acquire));
}

std::size_t ShmRing::read_some(std::byte* dst, std::size_t n) {
  const std::uint64_t tail = control_->tail.load(std::memory_order_relaxed);
  const std::uint64_t head = control_->head.load(std::memory_order_acquire);
  n = std::min<std::size_t>(n, head - tail);
  if (n == 0) return 0;
  if (dst != nullptr) {
    const std::size_t at = tail & (capacity_ - 1);
    const std::size_t first = std::min<std::size_t>(n, capacity_ - at);
    std::memcpy(dst, data_ + at, first);
    if (n > first) std::memcpy(dst + first, data_, n - first);
  }
  control_->tail.store(tail + n, std::memory_order_release);
  return n;
}

ShmRing::View ShmRing::peek(std::size_t n) const {
  const std::uint64_t tail = control_->tail.load(std::memory_order_relaxed);
  const std::uint64_t head = control_->head.load(std::memory_order_acquire);
  n = std::min<std::size_t>(n, head - tail);
  View v;
  if (n == 0) return v;
  const std::size_t at = tail & (capacity_ - 1);
  v.first = data_ + at;
  v.first_len = std::min<std::size_t>(n, capacity_ - at);
  if (n > v.first_len) {
    v.second = data_;
    v.second_len = n - v.first_len;
  }
  return v;
}

void ShmRing::consume(std::size_t n) {
  const std::uint64_t tail = control_->tail.load(std::memory_order_relaxed);
  control_->tail.store(tail + n, std::memory_order_release);
}

std::size_t ShmRing::readable() const {
  return control_->head.load(std::memory_order_acquire) -
         control_->tail.load(std::memory_order_relaxed);
}

bool ShmRing::consumer_needs_wake() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return control_->consumer_sleeping.load(std::memory_order_relaxed) != 0 &&
         control_->consumer_sleeping.exchange(0) != 0;
}

bool ShmRing::producer_needs_wake() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return control_->producer_sleeping.load(std::memory_order_relaxed) != 0 &&
         control_->producer_sleeping.exchange(0) != 0;
}

bool ShmRing::consumer_sleeping() const { return control_->consumer_sleeping.load() != 0; }

void ShmRing::set_consumer_sleeping(bool on) {
  control_->consumer_sleeping.store(on ? 1 : 0);
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

void ShmRing::set_producer_sleeping(bool on) {
  control_->producer_sleeping.store(on ? 1 : 0);
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

ShmSegment::~ShmSegment() {
  if (base_ != nullptr) ::munmap(base_, mapped_);
}

ShmSegment::ShmSegment(ShmSegment&& other) noexcept { *this = std::move(other); }

ShmSegment& ShmSegment::operator=(ShmSegment&& other) noexcept {
  if (this != &other) {
    if (base_ != nullptr) ::munmap(base_, mapped_);
    base_ = std::exchange(other.base_, nullptr);
    mapped_ = std::exchange(other.mapped_, 0);
    ring_bytes_ = std::exchange(other.ring_bytes_, 0);
  }
  return *this;
}

Result<std::string> ShmSegment::random_name() {
  std::array<std::uint8_t, 16> bytes{};
  if (::getrandom(bytes.data(), bytes.size(), 0) != static_cast<ssize_t>(bytes.size())) {
    return os_error("getrandom", errno);
  }
  return "/tributary-" + to_hex(bytes);
}

Result<ShmSegment> ShmSegment::create(const std::string& name, std::uint64_t epoch, int low_rank,
                                      int high_rank, std::uint64_t ring_bytes) {
  if (ring_bytes < 4096 || (ring_bytes & (ring_bytes - 1)) != 0) {
    return error(StatusCode::kInvalidArgument, "shared-memory ring of " +
                                                   std::to_string(ring_bytes) +
                                                   " bytes: want a power of two of at least 4096");
  }
  const int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return os_error("shm_open " + name, errno);
  const std::size_t bytes = segment_bytes(ring_bytes);
  // Allocated now, not on first touch: a /dev/shm too small for the rings (a container's
  // default 64 MiB) is an error here instead of a SIGBUS in the middle of a collective.
  if (const int rc = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes)); rc != 0) {
    ::close(fd);
    ::shm_unlink(name.c_str());
    return os_error("allocating " + std::to_string(bytes) + " bytes of shared memory for " + name +
                        " (a smaller --shm-ring-bytes, or --transport tcp, needs less)",
                    rc);
  }
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  const int err = errno;
  ::close(fd);
  if (base == MAP_FAILED) {
    ::shm_unlink(name.c_str());
    return os_error("mapping " + std::to_string(bytes) + " bytes of " + name, err);
  }
  ShmSegment s;
  s.base_ = static_cast<std::byte*>(base);
  s.mapped_ = bytes;
  s.ring_bytes_ = ring_bytes;
  for (std::size_t off : kControlOffset) new (s.base_ + off) RingControl{};
  auto* h = reinterpret_cast<SegmentHeader*>(s.base_);
  *h = SegmentHeader{0, epoch, ring_bytes, static_cast<std::uint32_t>(low_rank),
                     static_cast<std::uint32_t>(high_rank)};
  std::atomic_thread_fence(std::memory_order_release);
  h->magic = kMagic;
  return s;
}

Result<ShmSegment> ShmSegment::open(const std::string& name, std::uint64_t epoch, int low_rank,
                                    int high_rank) {
  const int fd = ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) return os_error("shm_open " + name, errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(kHeaderPage)) {
    ::close(fd);
    return error(StatusCode::kMismatch, name + " is not a tributary segment (too small)");
  }
  const auto bytes = static_cast<std::size_t>(st.st_size);
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  const int err = errno;
  ::close(fd);
  if (base == MAP_FAILED) return os_error("mapping " + name, err);
  ShmSegment s;
  s.base_ = static_cast<std::byte*>(base);
  s.mapped_ = bytes;
  const auto* h = reinterpret_cast<const SegmentHeader*>(s.base_);
  const bool ours = h->magic == kMagic && h->epoch == epoch &&
                    h->low_rank == static_cast<std::uint32_t>(low_rank) &&
                    h->high_rank == static_cast<std::uint32_t>(high_rank) &&
                    h->ring_bytes >= 4096 && (h->ring_bytes & (h->ring_bytes - 1)) == 0 &&
                    segment_bytes(h->ring_bytes) == bytes;
  if (!ours) {
    return error(StatusCode::kMismatch,
                 name + " is not the segment of ranks " + std::to_string(low_rank) + " and " +
                     std::to_string(high_rank) + " in epoch " + std::to_string(epoch));
  }
  s.ring_bytes_ = h->ring_bytes;
  return s;
}

void ShmSegment::unlink(const std::string& name) { ::shm_unlink(name.c_str()); }

int ShmSegment::sweep_stale(std::chrono::system_clock::time_point now, Duration older_than) {
  constexpr std::string_view kPrefix = "tributary-";
  DIR* dir = ::opendir("/dev/shm");
  if (dir == nullptr) return 0;
  int removed = 0;
  while (const dirent* e = ::readdir(dir)) {
    const std::string_view name(e->d_name);
    // Exactly random_name()'s shape: the prefix and 32 hex digits.
    if (name.size() != kPrefix.size() + 32 || !name.starts_with(kPrefix) ||
        !std::all_of(name.begin() + kPrefix.size(), name.end(),
                     [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; })) {
      continue;
    }
    struct stat st {};
    if (::fstatat(::dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) {
      continue;
    }
    const auto modified = std::chrono::system_clock::time_point(
        std::chrono::duration_cast<std::chrono::system_clock::duration>(
            std::chrono::seconds(st.st_mtim.tv_sec) +
            std::chrono::nanoseconds(st.st_mtim.tv_nsec)));
    if (now - modified < older_than) continue;
    if (::shm_unlink(("/" + std::string(name)).c_str()) == 0) ++removed;
  }
  ::closedir(dir);
  return removed;
}

ShmRing ShmSegment::ring(int which) const {
  auto* control = reinterpret_cast<RingControl*>(base_ + kControlOffset[which]);
  return ShmRing(control, base_ + kHeaderPage + static_cast<std::size_t>(which) * ring_bytes_,
                 ring_bytes_);
}

}  // namespace tributary::transport
