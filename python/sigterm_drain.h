// SIGTERM (a spot preemption notice) drains the training process's Worker.
//
// Python runs its own signal handlers only between bytecodes of the main thread, that is not
// while that thread is blocked in a join, a step boundary or a collective; a preemption
// notice must reach the agent at once. install_sigterm_drain() puts a C handler in place that
// records the signal and calls the current drain target, which must be async-signal-safe
// (Worker::drain and ElasticLoop::request_drain only set atomics). Whoever set a target
// clears it (nullptr) before the object behind it goes away.
//
// Compiled into the runtime library both Python extensions load (python/CMakeLists.txt).
#pragma once

namespace tributary::python {

using DrainFn = void (*)(void* context);

// The handler calls fn(context) from now on; fn == nullptr: nothing to call.
void set_drain_target(DrainFn fn, void* context);
// Installs the SIGTERM handler (idempotent).
void install_sigterm_drain();
// Whether a SIGTERM arrived since the handler was installed.
bool sigterm_received();

}  // namespace tributary::python
