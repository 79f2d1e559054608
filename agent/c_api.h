/* C API of the Tributary agent runtime, for bindings (Python ctypes/cffi, Rust, ...).
 *
 * Every function returns 0 on success or a positive tributary status code (the values of
 * tributary::StatusCode: 1 peer lost, 2 timed out, 3 aborted, ..., 11 internal, 12 round
 * failed); tributary_last_error()
 * gives the message of the calling thread's last failure. Buffers are the caller's and
 * are touched only during the call. A worker handle is used by one thread at a time. */
#ifndef TRIBUTARY_AGENT_C_API_H_
#define TRIBUTARY_AGENT_C_API_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tributary_worker tributary_worker;

/* dtype: 0 float32, 1 float64, 2 float16, 3 bfloat16, 4 int8, 5 uint8, 6 int32, 7 int64.
 * op: 0 sum, 1 prod, 2 min, 3 max, 4 avg. */
typedef struct tributary_outcome {
  uint64_t epoch;
  int32_t contributors;
} tributary_outcome;

typedef struct tributary_worker_config {
  const char* coordinator;        /* "tcp://127.0.0.1:7070" */
  const char* secret;             /* cluster secret */
  const char* host;               /* host label; NULL: hostname */
  const char* bind_host;          /* data-plane address; NULL: 127.0.0.1 */
  uint32_t join_timeout_ms;       /* 0: 30000 */
  uint32_t collective_timeout_ms; /* cap on each attempt of a collective; 0: 30000 */
  const char* metrics_bind;       /* NULL: no /metrics */
} tributary_worker_config;

int tributary_worker_start(const tributary_worker_config* config, tributary_worker** out);
int tributary_worker_rank(const tributary_worker* w);
int tributary_worker_size(const tributary_worker* w);
int tributary_all_reduce(tributary_worker* w, const void* send, void* recv, size_t count, int dtype,
                         int op, tributary_outcome* outcome);
int tributary_broadcast(tributary_worker* w, const void* send, void* recv, size_t count, int dtype,
                        int root, tributary_outcome* outcome);
int tributary_all_gather(tributary_worker* w, const void* send, void* recv, size_t send_count,
                         int dtype, tributary_outcome* outcome);
int tributary_reduce_scatter(tributary_worker* w, const void* send, void* recv, size_t recv_count,
                             int dtype, int op, tributary_outcome* outcome);
int tributary_barrier(tributary_worker* w);
/* Leaves the cluster and frees the handle (NULL is fine). */
int tributary_worker_leave(tributary_worker* w);
const char* tributary_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* TRIBUTARY_AGENT_C_API_H_ */
