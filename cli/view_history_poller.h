// The demo's window on the coordinator: a thread that asks for `tributary status` every
// `interval` (control_client/status_client.h, authenticated, read-only) and keeps the view
// changes it has not handed out yet. With replicated coordinators it asks each endpoint in
// turn until one answers (a standby points it to the leader).
//
// Every ask is bounded by `timeout`; stop() (and the destructor) returns within one ask.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "membership/cluster_status.h"

namespace tributary::cli {

class ViewHistoryPoller {
 public:
  ViewHistoryPoller(std::vector<std::string> endpoints, std::string secret, Duration interval,
                    Duration timeout);
  ~ViewHistoryPoller();
  ViewHistoryPoller(const ViewHistoryPoller&) = delete;
  ViewHistoryPoller& operator=(const ViewHistoryPoller&) = delete;

  // View changes newer than any handed out before, oldest first.
  std::vector<membership::ViewChange> take();
  // One ask now, on the caller's thread (the last look before the demo ends); its
  // changes are handed out by take() like the thread's.
  void poll_once();
  void stop();

 private:
  void run();

  const std::vector<std::string> endpoints_;
  const std::string secret_;
  const Duration interval_;
  const Duration timeout_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::uint64_t newest_ = 0;  // the newest epoch queued
  std::vector<membership::ViewChange> queued_;
  std::size_t next_endpoint_ = 0;
  std::thread thread_;
};

}  // namespace tributary::cli
