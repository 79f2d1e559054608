#include "transport/absent_path.h"

#include <unordered_map>

#include "core/check.h"

namespace tributary::transport {
namespace {

class AbsentPath final : public algorithms::PollableLink {
 public:
  AbsentPath(int rank, int size, Status reason)
      : rank_(rank), size_(size), reason_(std::move(reason)) {
    TRIB_CHECK(!reason_.is_ok()) << "an absent path needs the reason it is absent";
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Handle send(int, algorithms::Tag, std::span<const std::byte>) override { return next_++; }
  Handle recv(int, algorithms::Tag, std::span<std::byte>) override { return next_++; }
  Status wait(Handle, Deadline) override { return reason_; }
  void abort(const Status&) override {}
  bool test(Handle) override { return true; }
  void drive(Deadline) override {}

 private:
  int rank_;
  int size_;
  Status reason_;
  Handle next_ = 1;
};

}  // namespace

std::unique_ptr<algorithms::PollableLink> make_absent_path(int rank, int size, Status reason) {
  return std::make_unique<AbsentPath>(rank, size, std::move(reason));
}

}  // namespace tributary::transport
