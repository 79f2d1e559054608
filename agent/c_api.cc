#include "agent/c_api.h"

#include <string>

#include "agent/worker.h"

struct tributary_worker {
  std::unique_ptr<tributary::agent::Worker> worker;
};

namespace {

thread_local std::string g_last_error;

int fail(const tributary::Status& s) {
  g_last_error = s.to_string();
  return static_cast<int>(s.code());
}

int fail_argument(const char* what) {
  return fail(tributary::error(tributary::StatusCode::kInvalidArgument, what));
}

bool valid_dtype(int d) {
  return d >= 0 && tributary::is_valid_dtype(static_cast<std::uint8_t>(d));
}
bool valid_op(int o) {
  return o >= 0 && tributary::is_valid_reduce_op(static_cast<std::uint8_t>(o));
}

int finish(const tributary::Result<tributary::agent::Outcome>& r, tributary_outcome* out) {
  if (!r) return fail(r.status());
  if (out != nullptr) {
    out->epoch = r->epoch;
    out->contributors = r->contributors;
  }
  return 0;
}

}  // namespace

extern "C" {

int tributary_worker_start(const tributary_worker_config* c, tributary_worker** out) {
  if (c == nullptr || out == nullptr) return fail_argument("config and out must not be NULL");
  if (c->coordinator == nullptr || c->secret == nullptr) {
    return fail_argument("coordinator and secret are required");
  }
  tributary::agent::WorkerConfig config;
  config.coordinator = c->coordinator;
  config.secret = c->secret;
  if (c->host != nullptr) config.host = c->host;
  if (c->bind_host != nullptr) config.bind_host = c->bind_host;
  if (c->join_timeout_ms != 0) config.join_timeout = std::chrono::milliseconds(c->join_timeout_ms);
  if (c->collective_timeout_ms != 0) {
    config.collective_timeout = std::chrono::milliseconds(c->collective_timeout_ms);
  }
  if (c->metrics_bind != nullptr) config.metrics_bind = c->metrics_bind;
  auto w = tributary::agent::Worker::start(config);
  if (!w) return fail(w.status());
  *out = new tributary_worker{std::move(*w)};
  return 0;
}

int tributary_worker_rank(const tributary_worker* w) { return w ? w->worker->rank() : -1; }
int tributary_worker_size(const tributary_worker* w) { return w ? w->worker->size() : -1; }

int tributary_all_reduce(tributary_worker* w, const void* send, void* recv, size_t count, int dtype,
                         int op, tributary_outcome* outcome) {
  if (w == nullptr || !valid_dtype(dtype) || !valid_op(op))
    return fail_argument("bad worker, dtype or op");
  return finish(w->worker->all_reduce(send, recv, count, static_cast<tributary::DType>(dtype),
                                      static_cast<tributary::ReduceOp>(op)),
                outcome);
}

int tributary_broadcast(tributary_worker* w, const void* send, void* recv, size_t count, int dtype,
                        int root, tributary_outcome* outcome) {
  if (w == nullptr || !valid_dtype(dtype)) return fail_argument("bad worker or dtype");
  return finish(w->worker->broadcast(send, recv, count, static_cast<tributary::DType>(dtype), root),
                outcome);
}

int tributary_all_gather(tributary_worker* w, const void* send, void* recv, size_t send_count,
                         int dtype, tributary_outcome* outcome) {
  if (w == nullptr || !valid_dtype(dtype)) return fail_argument("bad worker or dtype");
  return finish(w->worker->all_gather(send, recv, send_count, static_cast<tributary::DType>(dtype)),
                outcome);
}

int tributary_reduce_scatter(tributary_worker* w, const void* send, void* recv, size_t recv_count,
                             int dtype, int op, tributary_outcome* outcome) {
  if (w == nullptr || !valid_dtype(dtype) || !valid_op(op))
    return fail_argument("bad worker, dtype or op");
  return finish(
      w->worker->reduce_scatter(send, recv, recv_count, static_cast<tributary::DType>(dtype),
                                static_cast<tributary::ReduceOp>(op)),
      outcome);
}

int tributary_barrier(tributary_worker* w) {
  if (w == nullptr) return fail_argument("NULL worker");
  return finish(w->worker->barrier(), nullptr);
}

int tributary_worker_leave(tributary_worker* w) {
  if (w == nullptr) return 0;
  const tributary::Status s = w->worker->leave();
  delete w;
  return s.is_ok() ? 0 : fail(s);
}

const char* tributary_last_error(void) { return g_last_error.c_str(); }

}  // extern "C"
