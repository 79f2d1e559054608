// How the torch backend runs a host collective on device (CUDA) tensors: each device tensor
// is staged through a pinned host twin on a side stream, the way torch's ProcessGroupGloo
// runs its CPU algorithms on CUDA tensors. No torch and no CUDA here: the device work is
// behind DeviceOps (torch_device_ops.h implements it with c10's streams and events; the unit
// test, tests/python/device_staging_test.cc, with a fake device that logs and orders it).
//
// Contract (one DeviceStaging per operation):
//  - Order: at the call, on the caller's thread, the side stream waits for an event on the
//    caller's current stream (so the copies see what the producer kernels wrote: no
//    device-wide synchronize, no host wait), then each tensor the collective reads is copied
//    to its host twin on the side stream, then an event marks the staged copies (seal()).
//    On the queue's thread, run() waits on the host for that event only (bounded by its
//    deadline; never the device, never the default stream), runs the host collective on the
//    twins, copies each twin the collective writes back on the side stream and records the
//    completion event. join() makes the waiting thread's current stream wait on that event
//    (cudaStreamWaitEvent semantics: the host does not block on the device part).
//  - All or nothing: a host collective that fails (or a staged copy that cannot be waited
//    for) copies nothing back: the device tensors keep what they held at the call.
//  - The completion event is recorded whenever run() ran, success or not, so join() after
//    run() always has an event to wait on. join() before run() (a Work refused by a closed
//    queue) waits for nothing.
//  - Phases are checked: staging after seal(), running twice or before seal() is a bug
//    (TRIB_CHECK), not a cluster event.
//  - Threading: stage()/seal() on the calling thread, run() on one other thread, join() and
//    complete() after run() returned (the Work's completion orders them), or never.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "core/clock.h"
#include "core/status.h"

namespace tributary::python::torch_backend {

// What the host collective does with a staged tensor's twin.
enum class Access : std::uint8_t { kRead, kWrite, kReadWrite };

// The device operations staging needs, for one operation on one device. Slot i is the i-th
// device tensor the implementation staged (it owns the tensors and their pinned twins).
class DeviceOps {
 public:
  virtual ~DeviceOps() = default;
  // On the caller's thread, at the call:
  // Records an event on the caller's current stream and makes the side stream wait on it.
  virtual void side_stream_waits_for_caller() = 0;
  virtual void copy_to_host(std::size_t slot) = 0;  // asynchronous, on the side stream
  virtual void record_staged() = 0;                 // an event on the side stream
  // On the queue's thread:
  // The host waits for the staged event (only it), until `deadline`.
  virtual Status wait_staged(Deadline deadline) = 0;
  virtual void copy_to_device(std::size_t slot) = 0;  // asynchronous, on the side stream
  virtual void record_done() = 0;                     // the completion event, on the side stream
  // Calls `fn` with the side stream as the thread's current stream (a CUDA-aware Future
  // marked completed there records its own event after the copies back).
  virtual void with_side_stream_current(const std::function<void()>& fn) = 0;
  // On a thread that waits for the operation: its current stream waits on the completion
  // event (no host wait).
  virtual void caller_waits_for_done() = 0;
};

class DeviceStaging {
 public:
  // Makes the side stream wait for the caller's current stream at once.
  explicit DeviceStaging(std::unique_ptr<DeviceOps> ops);

  // At the call: the twin of `slot` is read (copied to the host now), written (copied back
  // after the collective succeeded) or both. Then seal(), once.
  void stage(std::size_t slot, Access access);
  void seal();

  // On the queue's thread: see the contract. Returns the host collective's Status, or why the
  // staged copies could not be waited for (the collective then does not run).
  Status run(const std::function<Status()>& host_collective, Deadline deadline);

  // Calls `mark` (completing the Work's Future) with the side stream current.
  void complete(const std::function<void()>& mark);
  // The waiting thread's current stream waits for the copies back (after run(); else nothing).
  void join();

 private:
  enum class Phase : std::uint8_t { kStaging, kSealed, kRunning, kRan };

  std::unique_ptr<DeviceOps> ops_;
  std::vector<std::size_t> written_;  // slots copied back after a successful collective
  Phase phase_ = Phase::kStaging;
};

}  // namespace tributary::python::torch_backend
