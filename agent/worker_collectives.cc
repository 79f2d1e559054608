// The Worker's collective API: each call sizes its collective, names the caller's buffer
// that an in-place run overwrites, and hands one attempt to Impl::run (worker.cc), which
// makes it all-or-nothing and re-runs it after an abort.
#include "agent/worker.h"

#include <cstdint>
#include <vector>

#include "agent/worker_impl.h"
#include "algorithms/sub_link.h"

namespace tributary::agent {

namespace {
// The caller's send buffer when the collective's receive buffer overlaps it (in-place):
// the runtime stashes it so that a re-run starts from the original input.
std::span<std::byte> overwritten(const void* send, std::size_t send_bytes, const void* recv,
                                 std::size_t recv_bytes) {
  if (send == nullptr || recv == nullptr || send_bytes == 0 || recv_bytes == 0) return {};
  const auto s = reinterpret_cast<std::uintptr_t>(send);
  const auto r = reinterpret_cast<std::uintptr_t>(recv);
  if (r + recv_bytes <= s || s + send_bytes <= r) return {};
  return {static_cast<std::byte*>(const_cast<void*>(send)), send_bytes};
}
}  // namespace

Result<Outcome> Worker::all_reduce(const void* send, void* recv, std::size_t count, DType dtype,
                                   ReduceOp op) {
  const std::size_t bytes = count * dtype_size(dtype);
  return impl_->call("all_reduce", Impl::AlgorithmChoice::kPerAttempt, bytes,
                     overwritten(send, bytes, recv, bytes),
                     [&](algorithms::Link& link, const algorithms::CollectiveOptions& o) {
                       // A ring runs in the view's measured order (fit_links()); its result
                       // is the same on every member in any order.
                       const std::vector<int>& order = impl_->ctx->ring_order;
                       if (o.algorithm == algorithms::AllReduceAlgorithm::kRing &&
                           static_cast<int>(order.size()) == link.size()) {
                         algorithms::SubLink ordered(link, order);
                         algorithms::CollectiveOptions oo = o;
                         std::vector<int> zones;  // by the ordered ring's ranks
                         if (!o.zones.empty()) {
                           for (int r : order)
                             zones.push_back(o.zones[static_cast<std::size_t>(r)]);
                           oo.zones = zones;
                         }
                         return algorithms::all_reduce(ordered, send, recv, count, dtype, op, oo);
                       }
                       return algorithms::all_reduce(link, send, recv, count, dtype, op, o);
                     },
                     /*retry=*/true, {static_cast<std::byte*>(recv), bytes});
}

Result<Outcome> Worker::reduce_scatter(const void* send, void* recv, std::size_t recv_count,
                                       DType dtype, ReduceOp op) {
  const std::size_t bytes = recv_count * dtype_size(dtype) * static_cast<std::size_t>(size());
  return impl_->call("reduce_scatter", Impl::AlgorithmChoice::kNone, bytes,
                     overwritten(send, bytes, recv, recv_count * dtype_size(dtype)),
                     [&](algorithms::Link& link, const algorithms::CollectiveOptions& o) {
                       return algorithms::reduce_scatter(link, send, recv, recv_count, dtype, op,
                                                         o);
                     });
}

Result<Outcome> Worker::all_gather(const void* send, void* recv, std::size_t send_count,
                                   DType dtype) {
  const std::size_t bytes = send_count * dtype_size(dtype);
  return impl_->call("all_gather", Impl::AlgorithmChoice::kNone,
                     bytes * static_cast<std::size_t>(size()),
                     overwritten(send, bytes, recv, bytes * static_cast<std::size_t>(size())),
                     [&](algorithms::Link& link, const algorithms::CollectiveOptions& o) {
                       return algorithms::all_gather(link, send, recv, send_count, dtype, o);
                     });
}

Result<Outcome> Worker::broadcast(const void* send, void* recv, std::size_t count, DType dtype,
                                  int root) {
  const std::size_t bytes = count * dtype_size(dtype);
  return impl_->call("broadcast", Impl::AlgorithmChoice::kNone, bytes,
                     overwritten(send, bytes, recv, bytes),
                     [&](algorithms::Link& link, const algorithms::CollectiveOptions& o) {
                       return algorithms::broadcast(link, send, recv, count, dtype, root, o);
                     });
}

Result<Outcome> Worker::reduce(const void* send, void* recv, std::size_t count, DType dtype,
                               ReduceOp op, int root) {
  const std::size_t bytes = count * dtype_size(dtype);
  return impl_->call("reduce", Impl::AlgorithmChoice::kNone, bytes,
                     overwritten(send, bytes, recv, bytes),
                     [&](algorithms::Link& link, const algorithms::CollectiveOptions& o) {
                       return algorithms::reduce(link, send, recv, count, dtype, op, root, o);
                     });
}

Result<Outcome> Worker::gather(const void* send, void* recv, std::size_t send_count, DType dtype,
                               int root) {
  const std::size_t bytes = send_count * dtype_size(dtype);
  return impl_->call("gather", Impl::AlgorithmChoice::kNone,
                     bytes * static_cast<std::size_t>(size()),
                     overwritten(send, bytes, recv, bytes * static_cast<std::size_t>(size())),
                     [&](algorithms::Link& link, const algorithms::CollectiveOptions& o) {
                       return algorithms::gather(link, send, recv, send_count, dtype, root, o);
                     });
}

Result<Outcome> Worker::scatter(const void* send, void* recv, std::size_t recv_count, DType dtype,
                                int root) {
  const std::size_t bytes = recv_count * dtype_size(dtype) * static_cast<std::size_t>(size());
  return impl_->call("scatter", Impl::AlgorithmChoice::kNone, bytes,
                     overwritten(send, bytes, recv, recv_count * dtype_size(dtype)),
                     [&](algorithms::Link& link, const algorithms::CollectiveOptions& o) {
                       return algorithms::scatter(link, send, recv, recv_count, dtype, root, o);
                     });
}

Result<Outcome> Worker::all_to_all(const void* send, void* recv, std::size_t count_per_peer,
                                   DType dtype) {
  const std::size_t bytes = count_per_peer * dtype_size(dtype) * static_cast<std::size_t>(size());
  return impl_->call("all_to_all", Impl::AlgorithmChoice::kNone, bytes,
                     overwritten(send, bytes, recv, bytes),
                     [&](algorithms::Link& link, const algorithms::CollectiveOptions& o) {
                       return algorithms::all_to_all(link, send, recv, count_per_peer, dtype, o);
                     });
}

Result<Outcome> Worker::all_to_all_v(const void* send, std::span<const std::size_t> send_counts,
                                     std::span<const std::size_t> send_offsets, void* recv,
                                     std::span<const std::size_t> recv_counts,
                                     std::span<const std::size_t> recv_offsets, DType dtype) {
  std::size_t elements = 0;
  for (std::size_t c : send_counts) elements += c;
  return impl_->call("all_to_all_v", Impl::AlgorithmChoice::kNone, elements * dtype_size(dtype), {},
                     [&](algorithms::Link& link, const algorithms::CollectiveOptions& o) {
                       return algorithms::all_to_all_v(link, send, send_counts, send_offsets, recv,
                                                       recv_counts, recv_offsets, dtype, o);
                     });
}

Result<Outcome> Worker::barrier() {
  return impl_->call("barrier", Impl::AlgorithmChoice::kNone, 0, {},
                     [&](algorithms::Link& link, const algorithms::CollectiveOptions& o) {
                       return algorithms::barrier(link, o);
                     });
}

}  // namespace tributary::agent
