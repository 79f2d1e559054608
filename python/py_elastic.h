// The elastic loop (agent/elastic_loop.h) for Python: join -> register state -> { step
// boundary -> step }*, rejoining after an eviction, with the workload's callbacks written in
// Python. The Python elastic trainer (tributary/torch/elastic.py) is built on it, so Python
// and the CLI share one loop.
//
// Contract with the callbacks:
//  - register_state(worker) runs after every join, with a tributary.Worker borrowing the
//    loop's new Worker; step(worker, boundary) runs after every successful step boundary and
//    returns "continue", "finished" or "drain". Both run on the thread that called run(),
//    holding the GIL; the loop itself (joins, boundaries, leaving) runs with it released.
//  - The borrowed worker is valid until the loop replaces or drops its Worker; it is
//    detached then (calls raise InvalidArgument).
//  - Whatever step() leaves queued (async collectives) is waited for before the loop uses
//    the Worker again, whether step() returned or raised.
//  - step() raising tributary.Evicted is an eviction (the next boundary rejoins); any other
//    exception from a callback ends the loop and is re-raised by run() as it was.
//  - SIGTERM drains while run() runs (agent/drain_on_sigterm.h); request_drain() too.
#pragma once

#include <pybind11/pybind11.h>

namespace tributary::python {

// Binds ElasticLoop and ElasticReport on `m`.
void bind_elastic(pybind11::module_& m);

}  // namespace tributary::python
