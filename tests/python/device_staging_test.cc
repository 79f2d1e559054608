// The torch backend's staging of device tensors (python/torch_backend/device_staging.h),
// against a fake device: two streams (the caller's and the side stream) whose operations run
// only when something waits for them, as a GPU's run when the GPU gets to them. So a copy
// that was not ordered after the producer reads the old value, and a copy back that the
// caller's stream does not wait for is not seen by the consumer.
#include "python/torch_backend/device_staging.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <map>
#include <string>
#include <vector>

namespace tributary::python::torch_backend {
namespace {

using Buffer = std::vector<int>;

class FakeDevice {
 public:
  struct Stream {
    std::deque<std::function<void()>> pending;
    std::size_t issued = 0;
    std::size_t done = 0;
  };
  struct Event {
    Stream* stream = nullptr;
    std::size_t at = 0;  // complete once the stream has done this many operations
  };

  Stream caller;
  Stream side;
  std::vector<std::string> log;        // what staging asked for, in order
  std::vector<std::string> host_waits;  // what the host blocked on

  void enqueue(Stream& s, std::function<void()> op) {
    s.pending.push_back(std::move(op));
    ++s.issued;
  }
  Event record(Stream& s) { return {&s, s.issued}; }
  void run_until(const Event& e) {
    while (e.stream->done < e.at) {
      auto op = std::move(e.stream->pending.front());
      e.stream->pending.pop_front();
      ++e.stream->done;
      op();
    }
  }
  // `waiter` runs nothing past this point until `e` completed (cudaStreamWaitEvent).
  void wait_event(Stream& waiter, Event e) {
    enqueue(waiter, [this, e] { run_until(e); });
  }
  void drain(Stream& s) { run_until(record(s)); }
};

class FakeOps final : public DeviceOps {
 public:
  FakeOps(FakeDevice& d, std::vector<Buffer*> device) : d_(d), device_(std::move(device)) {
    host_.resize(device_.size());
  }
  Buffer& host(std::size_t slot) { return host_.at(slot); }

  void side_stream_waits_for_caller() override {
    d_.log.push_back("side waits for caller");
    d_.wait_event(d_.side, d_.record(d_.caller));
  }
  void copy_to_host(std::size_t slot) override {
    d_.log.push_back("D2H " + std::to_string(slot));
    d_.enqueue(d_.side, [this, slot] { host_.at(slot) = *device_.at(slot); });
  }
  void record_staged() override {
    d_.log.push_back("record staged");
    staged_ = d_.record(d_.side);
  }
  Status wait_staged(Deadline) override {
    d_.log.push_back("host waits for staged");
    d_.host_waits.push_back("staged event");
    if (fail_wait) return error(StatusCode::kInternal, "the side stream failed");
    d_.run_until(staged_);
    return Status::ok();
  }
  void copy_to_device(std::size_t slot) override {
    d_.log.push_back("H2D " + std::to_string(slot));
    d_.enqueue(d_.side, [this, slot] { *device_.at(slot) = host_.at(slot); });
  }
  void record_done() override {
    d_.log.push_back("record done");
    done_ = d_.record(d_.side);
  }
  void with_side_stream_current(const std::function<void()>& fn) override {
    d_.log.push_back("complete on side stream");
    fn();
  }
  void caller_waits_for_done() override {
    d_.log.push_back("caller waits for done");
    d_.wait_event(d_.caller, done_);
  }

  bool fail_wait = false;

 private:
  FakeDevice& d_;
  std::vector<Buffer*> device_;
  std::vector<Buffer> host_;
  FakeDevice::Event staged_;
  FakeDevice::Event done_;
};

struct Fixture {
  FakeDevice device;
  Buffer x{0, 0, 0};
  Buffer y{0, 0, 0};
  FakeOps* ops = nullptr;
  std::unique_ptr<DeviceStaging> staging;

  // The producer writes x on the caller's stream (not run yet), then the call stages x
  // (read and written: an in-place all-reduce) and y (written: a gather's output).
  void call() {
    device.enqueue(device.caller, [this] { x = {1, 2, 3}; });
    auto fake = std::make_unique<FakeOps>(device, std::vector<Buffer*>{&x, &y});
    ops = fake.get();
    staging = std::make_unique<DeviceStaging>(std::move(fake));
    staging->stage(0, Access::kReadWrite);
    staging->stage(1, Access::kWrite);
    staging->seal();
  }
  Status run(Status result) {
    return staging->run(
        [&] {
          // The host collective: doubles x's twin into both twins, then reports `result`.
          for (int& v : ops->host(0)) v *= 2;
          ops->host(1) = ops->host(0);
          return result;
        },
        Deadline::after(std::chrono::seconds(5)));
  }
};

TEST(DeviceStaging, OrdersProducerCopiesCollectiveAndConsumer) {
  Fixture f;
  f.call();
  EXPECT_EQ(f.x, (Buffer{0, 0, 0})) << "nothing ran on the device at the call";
  ASSERT_TRUE(f.run(Status::ok()).is_ok());
  // The twin held what the producer wrote: the side stream waited for the caller's stream.
  EXPECT_EQ(f.ops->host(0), (Buffer{2, 4, 6}));
  EXPECT_EQ(f.x, (Buffer{1, 2, 3})) << "the copy back is asynchronous";
  f.staging->complete([] {});
  f.staging->join();
  // A consumer on the caller's stream after join() sees the result.
  Buffer seen;
  f.device.enqueue(f.device.caller, [&] { seen = f.x; });
  f.device.drain(f.device.caller);
  EXPECT_EQ(seen, (Buffer{2, 4, 6}));
  EXPECT_EQ(f.y, (Buffer{2, 4, 6}));
  EXPECT_EQ(f.device.log,
            (std::vector<std::string>{"side waits for caller", "D2H 0", "record staged",
                                      "host waits for staged", "H2D 0", "H2D 1", "record done",
                                      "complete on side stream", "caller waits for done"}));
}

TEST(DeviceStaging, HostWaitsForTheStagedEventOnly) {
  Fixture f;
  f.call();
  ASSERT_TRUE(f.run(Status::ok()).is_ok());
  f.staging->join();
  // The fake has no device-wide synchronize to call (nor has DeviceOps); the one host wait
  // is the staged event, and the caller's stream was never drained by the host.
  EXPECT_EQ(f.device.host_waits, (std::vector<std::string>{"staged event"}));
  EXPECT_EQ(f.device.caller.done, 1u) << "only the producer ran on the caller's stream";
  EXPECT_FALSE(f.device.caller.pending.empty()) << "the join is queued, not waited for";
}

TEST(DeviceStaging, FailedCollectiveLeavesTheDeviceTensorsUntouched) {
  Fixture f;
  f.call();
  const Status s = f.run(error(StatusCode::kPeerLost, "rank 2 closed the link"));
  EXPECT_EQ(s.code(), StatusCode::kPeerLost);
  f.staging->join();
  f.device.drain(f.device.caller);
  f.device.drain(f.device.side);
  EXPECT_EQ(f.x, (Buffer{1, 2, 3})) << "the producer's value, not the twin's";
  EXPECT_EQ(f.y, (Buffer{0, 0, 0}));
  for (const std::string& op : f.device.log) EXPECT_NE(op.rfind("H2D", 0), 0u) << op;
  EXPECT_NE(std::find(f.device.log.begin(), f.device.log.end(), "record done"),
            f.device.log.end())
      << "the completion event is recorded either way, so a join has one to wait on";
}

TEST(DeviceStaging, MismatchFailsCleanly) {
  Fixture f;
  f.call();
  const Status s = f.run(error(StatusCode::kMismatch, "rank 1 all_reduce of 4 float32, here 3"));
  EXPECT_EQ(s.code(), StatusCode::kMismatch);
  EXPECT_EQ(s.message(), "rank 1 all_reduce of 4 float32, here 3");
  f.device.drain(f.device.side);
  EXPECT_EQ(f.y, (Buffer{0, 0, 0}));
}

TEST(DeviceStaging, UnwaitableCopiesSkipTheCollective) {
  Fixture f;
  f.call();
  f.ops->fail_wait = true;
  bool ran = false;
  const Status s = f.staging->run(
      [&] {
        ran = true;
        return Status::ok();
      },
      Deadline::after(std::chrono::seconds(5)));
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_FALSE(ran);
  f.device.drain(f.device.side);
  EXPECT_EQ(f.y, (Buffer{0, 0, 0}));
}

TEST(DeviceStaging, RefusedBeforeRunningJoinsNothing) {
  Fixture f;
  f.call();
  bool marked = false;
  f.staging->complete([&] { marked = true; });  // a closed queue completes it unrun
  f.staging->join();
  EXPECT_TRUE(marked);
  EXPECT_EQ(f.device.log.back(), "record staged");
}

TEST(DeviceStaging, ReadOnlyTensorsAreNotCopiedBack) {
  FakeDevice device;
  Buffer in{5, 6};
  Buffer out{0, 0};
  auto fake = std::make_unique<FakeOps>(device, std::vector<Buffer*>{&in, &out});
  FakeOps* ops = fake.get();
  DeviceStaging staging(std::move(fake));
  staging.stage(0, Access::kRead);
  staging.stage(1, Access::kWrite);
  staging.seal();
  ASSERT_TRUE(staging
                  .run(
                      [&] {
                        ops->host(0) = {9, 9};  // a collective never writes its input; if it did
                        ops->host(1) = {5, 6};
                        return Status::ok();
                      },
                      Deadline::after(std::chrono::seconds(5)))
                  .is_ok());
  device.drain(device.side);
  EXPECT_EQ(in, (Buffer{5, 6}));
  EXPECT_EQ(out, (Buffer{5, 6}));
  EXPECT_EQ(device.log, (std::vector<std::string>{"side waits for caller", "D2H 0",
                                                  "record staged", "host waits for staged",
                                                  "H2D 1", "record done"}));
}

TEST(DeviceStagingDeathTest, PhasesAreChecked) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  FakeDevice device;
  Buffer x{1};
  EXPECT_DEATH(
      {
        DeviceStaging s(std::make_unique<FakeOps>(device, std::vector<Buffer*>{&x}));
        s.seal();
        s.stage(0, Access::kRead);
      },
      "staged after seal");
  EXPECT_DEATH(
      {
        DeviceStaging s(std::make_unique<FakeOps>(device, std::vector<Buffer*>{&x}));
        (void)s.run([] { return Status::ok(); }, Deadline::after(std::chrono::seconds(1)));
      },
      "before seal");
}

}  // namespace
}  // namespace tributary::python::torch_backend
