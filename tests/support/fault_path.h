// A failover link's path for tests (transport/failover_link.h): forwards to a pollable
// link, borrowed or owned, fires a fault when its rank has posted a given number of sends
// on it, and, given a FakeClock, moves it by 1 ms whenever it blocks, so stall deadlines
// pass without a test sleeping. With jitter(seed), a tenth of its sends and polls first
// sleep up to 300 us and a fifth yield: thread interleavings a quiet machine never
// produces (the lost send completion of tree_n2_break_at7 showed only on another machine).
#pragma once

#include <functional>
#include <memory>
#include <random>
#include <thread>

#include "algorithms/pollable_link.h"
#include "core/clock.h"

namespace tributary::testing {

class FaultPath final : public algorithms::PollableLink {
 public:
  explicit FaultPath(algorithms::PollableLink& inner, FakeClock* clock = nullptr)
      : inner_(inner), clock_(clock) {}
  explicit FaultPath(std::unique_ptr<algorithms::PollableLink> owned, FakeClock* clock = nullptr)
      : owned_(std::move(owned)), inner_(*owned_), clock_(clock) {}

  // `fault` runs on the rank's thread just before its `sends`-th send goes out here.
  void fire_at(int sends, std::function<void()> fault) {
    fire_at_ = sends;
    fault_ = std::move(fault);
  }
  void jitter(std::uint64_t seed) {
    jitter_ = true;
    rng_.seed(seed);
  }
  algorithms::PollableLink& inner() { return inner_; }
  int sends() const { return sends_; }  // posted on this path so far

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  Handle send(int peer, algorithms::Tag tag, std::span<const std::byte> data) override {
    perturb();
    if (++sends_ == fire_at_ && fault_) fault_();
    return inner_.send(peer, tag, data);
  }
  Handle recv(int peer, algorithms::Tag tag, std::span<std::byte> data) override {
    return inner_.recv(peer, tag, data);
  }
  bool carries_stamps() const override { return inner_.carries_stamps(); }
  Handle send_stamped(int peer, algorithms::Tag tag, std::span<const std::byte> data,
                      std::uint64_t stamp) override {
    perturb();
    if (++sends_ == fire_at_ && fault_) fault_();
    return inner_.send_stamped(peer, tag, data, stamp);
  }
  std::uint64_t stamp(Handle h) const override { return inner_.stamp(h); }
  void report_early(int peer, std::vector<algorithms::EarlyArrival>& out) override {
    inner_.report_early(peer, out);
  }
  algorithms::PollableLink& carrier() override { return inner_.carrier(); }
  bool combines() const override { return inner_.combines(); }
  Handle recv_combine(int peer, algorithms::Tag tag, std::span<std::byte> data,
                      const algorithms::Combine& c) override {
    return inner_.recv_combine(peer, tag, data, c);
  }
  Status wait(Handle h, Deadline deadline) override { return inner_.wait(h, deadline); }
  void abort(const Status& reason) override { inner_.abort(reason); }
  bool test(Handle h) override {
    perturb();
    return inner_.test(h);
  }
  bool look() override { return inner_.look(); }
  void drive(Deadline until) override {
    const bool blocks = !until.passed();  // a look without blocking takes no time
    inner_.drive(until);
    if (clock_ != nullptr && blocks) clock_->advance(std::chrono::milliseconds(1));
  }

 private:
  void perturb() {
    if (!jitter_) return;
    const auto x = rng_() % 100;
    if (x < 10) {
      std::this_thread::sleep_for(std::chrono::microseconds(rng_() % 300));
    } else if (x < 30) {
      std::this_thread::yield();
    }
  }

  std::unique_ptr<algorithms::PollableLink> owned_;
  algorithms::PollableLink& inner_;
  FakeClock* clock_;
  int sends_ = 0;
  int fire_at_ = -1;
  std::function<void()> fault_;
  bool jitter_ = false;
  std::mt19937_64 rng_;
};

}  // namespace tributary::testing
