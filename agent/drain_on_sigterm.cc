#include "agent/drain_on_sigterm.h"

#include <atomic>

namespace tributary::agent {
namespace {

std::atomic<ElasticLoop*> g_loop{nullptr};

void on_sigterm(int) {
  if (ElasticLoop* loop = g_loop.load()) loop->request_drain();
}

}  // namespace

DrainOnSigterm::DrainOnSigterm(ElasticLoop& loop) {
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

}  // namespace tributary::agent
