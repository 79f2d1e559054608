#include "gpu/host_device_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "core/little_endian.h"
#include "core/reduce.h"

namespace tributary::gpu {
namespace {

// Handle layout: {u64 bytes, name (NUL-terminated, at most 55 bytes)}.
constexpr std::size_t kNameOffset = 8;
constexpr std::size_t kMaxName = kIpcHandleBytes - kNameOffset - 1;

std::string errno_text(const char* what, const std::string& name) {
  return std::string(what) + " " + name + ": " + std::strerror(errno);
}

Result<void*> map_object(int fd, std::size_t bytes, const std::string& name) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return error(StatusCode::kUnavailable, errno_text("mmap", name));
  return p;
}

}  // namespace

HostDeviceMemory::~HostDeviceMemory() {
  for (auto& [p, m] : mappings_) {
    ::munmap(p, m.bytes);
    if (!m.name.empty()) ::shm_unlink(m.name.c_str());
  }
}

Result<void*> HostDeviceMemory::allocate(std::size_t bytes) {
  static std::atomic<std::uint64_t> next{0};
  const std::string name =
      "/tributary-ipc-" + std::to_string(::getpid()) + "-" + std::to_string(next.fetch_add(1));
  const int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) return error(StatusCode::kUnavailable, errno_text("shm_open", name));
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const Status st = error(StatusCode::kUnavailable, errno_text("ftruncate", name));
    ::close(fd);
    ::shm_unlink(name.c_str());
    return st;
  }
  auto p = map_object(fd, bytes, name);
  ::close(fd);
  if (!p.is_ok()) {
    ::shm_unlink(name.c_str());
    return p.status();
  }
  std::lock_guard lock(mu_);
  mappings_[*p] = {bytes, name};
  return *p;
}

void HostDeviceMemory::free(void* buffer) {
  std::lock_guard lock(mu_);
  auto it = mappings_.find(buffer);
  if (it == mappings_.end()) return;
  ::munmap(buffer, it->second.bytes);
  if (!it->second.name.empty()) ::shm_unlink(it->second.name.c_str());
  mappings_.erase(it);
}

Result<IpcHandle> HostDeviceMemory::export_handle(void* buffer) {
  std::lock_guard lock(mu_);
  auto it = mappings_.find(buffer);
  if (it == mappings_.end() || it->second.name.empty()) {
    return error(StatusCode::kInvalidArgument,
                 "export_handle of a buffer allocate() did not return");
  }
  IpcHandle h{};
  le::store<std::uint64_t>(h.data(), it->second.bytes);
  const std::string& name = it->second.name;
  if (name.size() > kMaxName)
    return error(StatusCode::kInternal, "shared-memory name too long: " + name);
  std::memcpy(h.data() + kNameOffset, name.data(), name.size());
  return h;
}

Result<void*> HostDeviceMemory::open_peer(const IpcHandle& handle) {
  const auto bytes = le::load<std::uint64_t>(handle.data());
  const char* raw = reinterpret_cast<const char*>(handle.data() + kNameOffset);
  const std::string name(raw, ::strnlen(raw, kMaxName));
  if (bytes == 0 || name.empty() || name[0] != '/') {
    return error(StatusCode::kInvalidArgument, "not a host-memory IPC handle");
  }
  const int fd = ::shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) return error(StatusCode::kUnavailable, errno_text("shm_open", name));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<std::uint64_t>(st.st_size) < bytes) {
    ::close(fd);
    return error(StatusCode::kUnavailable,
                 "shared-memory object " + name + " is smaller than its handle says");
  }
  auto p = map_object(fd, bytes, name);
  ::close(fd);
  if (!p.is_ok()) return p.status();
  std::lock_guard lock(mu_);
  mappings_[*p] = {bytes, ""};
  return *p;
}

void HostDeviceMemory::close_peer(void* mapped) { free(mapped); }

Status HostDeviceMemory::copy(void* dst, const void* src, std::size_t bytes) {
  if (dst != src && bytes > 0) std::memmove(dst, src, bytes);
  return Status::ok();
}

Status HostDeviceMemory::reduce_sources(void* dst, std::span<const void* const> srcs,
                                        std::size_t count, DType dtype, ReduceOp op,
                                        int divide_by) {
  if (srcs.empty() || static_cast<int>(srcs.size()) > kMaxSources) {
    return error(StatusCode::kInvalidArgument,
                 "reduce_sources of " + std::to_string(srcs.size()) + " sources");
  }
  TRIB_RETURN_IF_ERROR(copy(dst, srcs[0], count * dtype_size(dtype)));
  for (std::size_t r = 1; r < srcs.size(); ++r)
    ::tributary::reduce_into(dst, srcs[r], count, dtype, op);
  if (divide_by > 0) ::tributary::scale_by_count(dst, count, dtype, divide_by);
  return Status::ok();
}

Status HostDeviceMemory::synchronize(Deadline) {
  return Status::ok();  // every operation was done when it returned
}

}  // namespace tributary::gpu
