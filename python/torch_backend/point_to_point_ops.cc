// The point-to-point operations of the "tributary" backend (backend.h): send, recv and recv
// from any source, each checked at the call, staged like the collectives (a CUDA tensor
// through its pinned host twin) and posted at once on the group's PointToPoint
// (point_to_point.h), whose callbacks complete the Work.
#include <ATen/ATen.h>

#include "python/torch_backend/backend.h"
#include "python/torch_backend/tensor_checks.h"

namespace tributary::python::torch_backend {
namespace {

std::uint32_t p2p_check(const at::Tensor& t) {
  // The dtype: a receiver that expects another one of the same byte size fails with Mismatch.
  return static_cast<std::uint32_t>(t.scalar_type()) + 1;
}

std::uint32_t p2p_tag(int tag) {
  TORCH_CHECK(tag >= 0, "tributary: send / recv tags are >= 0, got ", tag);
  return static_cast<std::uint32_t>(tag);
}

// A receive's callback: completes `work`; a CUDA tensor is copied back (on the side stream)
// only if the message came in. Holds the host buffer `h` until then.
PointToPoint::Done complete_receive(const c10::intrusive_ptr<TributaryWork>& work,
                                    const at::Tensor& h, Deadline deadline) {
  return [work, h, deadline](const Status& s) {
    if (const auto& staging = work->staging()) {
      work->complete(staging->run([&] { return s; }, deadline));
      return;
    }
    work->complete(s);
  };
}

}  // namespace

PointToPoint& TributaryBackend::peers(const char* what, int peer) {
  TORCH_CHECK(peer >= 0 && peer < size_, "tributary: ", what, " rank ", peer,
              " is not a rank of this group of ", size_);
  TORCH_CHECK(peer != rank_, "tributary: ", what, " itself (rank ", rank_, ")");
  TORCH_CHECK(!finished_ && p2p_ != nullptr, "tributary: ", what,
              " on a process group that was shut down (destroy_process_group)");
  return *p2p_;
}

c10::intrusive_ptr<c10d::Work> TributaryBackend::send(std::vector<at::Tensor>& tensors,
                                                      int dst_rank, int tag) {
  at::Tensor t = single(tensors, "send tensor");
  TensorStaging staging({t}, "send");
  at::Tensor h = staging.read(t);
  Staged staged = staging.seal();
  const Deadline deadline = op_deadline();
  if (staged.staging) {
    // The message is posted at once and read from the host twin while it goes: the copy
    // must be done before (the caller waits for it, and only for it).
    const Status s = staged.staging->run([] { return Status::ok(); }, deadline);
    TORCH_CHECK(s.is_ok(), "tributary: send: ", s.to_string());
  }
  std::lock_guard lock(finish_mu_);
  PointToPoint& p = peers("send to", dst_rank);
  auto work = make_work(c10d::OpType::SEND, {t}, std::move(staged));
  p.send(dst_rank, p2p_tag(tag), p2p_check(h),
         {static_cast<const std::byte*>(h.data_ptr()), h.nbytes()}, deadline,
         [work, h](const Status& s) { work->complete(s); });
  return work;
}

c10::intrusive_ptr<c10d::Work> TributaryBackend::recv(std::vector<at::Tensor>& tensors,
                                                      int src_rank, int tag) {
  at::Tensor t = single(tensors, "recv tensor");
  TensorStaging staging({t}, "recv");
  at::Tensor h = staging.write(t);
  const Deadline deadline = op_deadline();
  std::lock_guard lock(finish_mu_);
  PointToPoint& p = peers("recv from", src_rank);
  auto work = make_work(c10d::OpType::RECV, {t}, staging.seal());
  work->set_source(src_rank);
  p.recv(src_rank, p2p_tag(tag), p2p_check(h), {static_cast<std::byte*>(h.data_ptr()), h.nbytes()},
         deadline, complete_receive(work, h, deadline));
  return work;
}

c10::intrusive_ptr<c10d::Work> TributaryBackend::recvAnysource(std::vector<at::Tensor>& tensors,
                                                               int tag) {
  at::Tensor t = single(tensors, "recv tensor");
  TensorStaging staging({t}, "recv");
  at::Tensor h = staging.write(t);
  const Deadline deadline = op_deadline();
  std::lock_guard lock(finish_mu_);
  TORCH_CHECK(size_ > 1, "tributary: recv from any rank in a group of one: no one can send");
  // Any peer: the checks that concern the group, not the rank.
  PointToPoint& p = peers("recv from any rank:", rank_ == 0 ? 1 : 0);
  auto work = make_work(c10d::OpType::RECVANYSOURCE, {t}, staging.seal());
  p.recv_any(
      p2p_tag(tag), p2p_check(h), {static_cast<std::byte*>(h.data_ptr()), h.nbytes()}, deadline,
      [work](int source) { work->set_source(source); }, complete_receive(work, h, deadline));
  return work;
}

}  // namespace tributary::python::torch_backend
