#include "python/sigterm_drain.h"

#include <signal.h>

#include <atomic>

namespace tributary::python {
namespace {

struct Target {
  DrainFn fn = nullptr;
  void* context = nullptr;
};

// Two slots, so that a new target is written where the handler is not reading, then
// published with one atomic store of the pointer.
Target g_slots[2];
std::atomic<Target*> g_target{nullptr};
std::atomic<bool> g_received{false};
std::atomic<bool> g_installed{false};

void on_sigterm(int) {
  g_received.store(true);
  if (Target* t = g_target.load(); t != nullptr && t->fn != nullptr) t->fn(t->context);
}

}  // namespace

void set_drain_target(DrainFn fn, void* context) {
  Target* current = g_target.load();
  Target* next = current == &g_slots[0] ? &g_slots[1] : &g_slots[0];
  next->fn = fn;
  next->context = context;
  g_target.store(fn == nullptr ? nullptr : next);
  // A notice that came before the target existed still drains it.
  if (fn != nullptr && g_received.load()) fn(context);
}

void install_sigterm_drain() {
  if (g_installed.exchange(true)) return;
  struct sigaction sa {};
  sa.sa_handler = on_sigterm;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &sa, nullptr);
}

bool sigterm_received() { return g_received.load(); }

}  // namespace tributary::python
