// While alive, no new file descriptor can be opened in this process, and every descriptor
// something closes meanwhile can be opened again: the limit is just above the highest
// descriptor in use and every hole below it is filled with a placeholder. (A limit at the
// lowest free descriptor, with descriptors in use above it, would make closing those
// useless.) For tests of EMFILE handling: make the sockets you need first, then this.
#pragma once

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

namespace tributary::testing {

class DescriptorsExhausted {
 public:
  DescriptorsExhausted() {
    int highest = 0;
    for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
      highest = std::max(highest, std::stoi(entry.path().filename().string()));
    }
    if (::getrlimit(RLIMIT_NOFILE, &saved_) != 0) return;
    rlimit tight = saved_;
    tight.rlim_cur = static_cast<rlim_t>(highest + 1);
    if (::setrlimit(RLIMIT_NOFILE, &tight) != 0) return;
    armed_ = true;
    for (int fd = ::dup(0); fd >= 0; fd = ::dup(0)) placeholders_.push_back(fd);
  }
  ~DescriptorsExhausted() {
    for (int fd : placeholders_) ::close(fd);
    if (armed_) ::setrlimit(RLIMIT_NOFILE, &saved_);
  }
  DescriptorsExhausted(const DescriptorsExhausted&) = delete;
  DescriptorsExhausted& operator=(const DescriptorsExhausted&) = delete;

  // False when the limit could not be read or lowered (nothing was exhausted).
  bool armed() const { return armed_; }

 private:
  rlimit saved_{};
  bool armed_ = false;
  std::vector<int> placeholders_;
};

}  // namespace tributary::testing
