#include "python/torch_backend/device_staging.h"

#include "core/check.h"

namespace tributary::python::torch_backend {

DeviceStaging::DeviceStaging(std::unique_ptr<DeviceOps> ops) : ops_(std::move(ops)) {
  TRIB_CHECK(ops_ != nullptr);
  ops_->side_stream_waits_for_caller();
}

void DeviceStaging::stage(std::size_t slot, Access access) {
  TRIB_CHECK(phase_ == Phase::kStaging) << "a tensor staged after seal()";
  if (access != Access::kWrite) ops_->copy_to_host(slot);
  if (access != Access::kRead) written_.push_back(slot);
}

void DeviceStaging::seal() {
  TRIB_CHECK(phase_ == Phase::kStaging) << "sealed twice";
  ops_->record_staged();
  phase_ = Phase::kSealed;
}

Status DeviceStaging::run(const std::function<Status()>& host_collective, Deadline deadline) {
  TRIB_CHECK(phase_ == Phase::kSealed) << "run() before seal() or twice";
  phase_ = Phase::kRunning;
  Status status = ops_->wait_staged(deadline);
  if (status.is_ok()) status = host_collective();
  // Only a collective that succeeded reaches the device tensors (all or nothing).
  if (status.is_ok()) {
    for (std::size_t slot : written_) ops_->copy_to_device(slot);
  }
  ops_->record_done();
  phase_ = Phase::kRan;  // published to join() / complete() by the Work's completion
  return status;
}

void DeviceStaging::complete(const std::function<void()>& mark) {
  if (phase_ != Phase::kRan) {
    mark();  // refused before it ran: nothing on the side stream to order after
    return;
  }
  ops_->with_side_stream_current(mark);
}

void DeviceStaging::join() {
  if (phase_ == Phase::kRan) ops_->caller_waits_for_done();
}

}  // namespace tributary::python::torch_backend
