#include "cli/view_history_poller.h"

#include "control_client/status_client.h"

namespace tributary::cli {

ViewHistoryPoller::ViewHistoryPoller(std::vector<std::string> endpoints, std::string secret,
                                     Duration interval, Duration timeout)
    : endpoints_(std::move(endpoints)),
      secret_(std::move(secret)),
      interval_(interval),
      timeout_(timeout),
      thread_([this] { run(); }) {}

ViewHistoryPoller::~ViewHistoryPoller() { stop(); }

void ViewHistoryPoller::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::vector<membership::ViewChange> ViewHistoryPoller::take() {
  std::lock_guard lock(mu_);
  return std::exchange(queued_, {});
}

void ViewHistoryPoller::poll_once() {
  std::size_t first;
  {
    std::lock_guard lock(mu_);
    first = next_endpoint_;
  }
  for (std::size_t i = 0; i < endpoints_.size(); ++i) {
    const std::size_t e = (first + i) % endpoints_.size();
    auto status = control_client::fetch_status(endpoints_[e], secret_, timeout_);
    if (!status) continue;
    std::lock_guard lock(mu_);
    next_endpoint_ = e;  // ask the one that answered first next time
    for (auto& change : status->history) {
      if (change.epoch <= newest_) continue;
      newest_ = change.epoch;
      queued_.push_back(std::move(change));
    }
    return;
  }
}

void ViewHistoryPoller::run() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    lock.unlock();
    poll_once();
    lock.lock();
    wake_.wait_for(lock, interval_, [this] { return stopping_; });
  }
}

}  // namespace tributary::cli
