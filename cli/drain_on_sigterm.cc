#include "cli/drain_on_sigterm.h"

#include <atomic>

namespace tributary::cli {
namespace {

std::atomic<agent::ElasticLoop*> g_loop{nullptr};

void on_sigterm(int) {
  if (agent::ElasticLoop* loop = g_loop.load()) loop->request_drain();
}

}  // namespace

DrainOnSigterm::DrainOnSigterm(agent::ElasticLoop& loop) {
  g_loop.store(&loop);
  struct sigaction sa {};
  sa.sa_handler = on_sigterm;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, &previous_);
}

DrainOnSigterm::~DrainOnSigterm() {
  sigaction(SIGTERM, &previous_, nullptr);
  g_loop.store(nullptr);
}

}  // namespace tributary::cli
