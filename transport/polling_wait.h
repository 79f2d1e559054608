// The wait of a link that polls memory (ShmLink, RdmaLink) for one of its operations: look
// (the link's progress, under its I/O lock) until the operation is done, the link is
// aborted or the deadline passes, pacing the looks as PollPace says. The links differ only
// in what they pass: their progress (under `io_mu`; true when anything moved), how an
// operation that ran out of time is detached so that its buffer is never touched again
// (under `io_mu`), work they may find before sleeping (true: look again instead), and their
// sleep (poll(2) on the peers' connections and the abort's eventfd until a time; the
// present time: a look at the connections without sleeping). Internal to transport/.
#pragma once

#include <sched.h>

#include <chrono>
#include <cstdint>
#include <mutex>

#include "core/clock.h"
#include "core/status.h"
#include "transport/link_ops.h"
#include "transport/poll_pace.h"

namespace tributary::transport {

template <typename Ops, typename Progress, typename TimeOut, typename WorkBeforeSleep,
          typename Sleep>
Status wait_polling(Ops& ops, std::uint32_t i, Deadline deadline, Duration busy_poll,
                    const AbortState& abort, std::mutex& io_mu, Progress progress,
                    TimeOut time_out, WorkBeforeSleep work_before_sleep, Sleep sleep) {
  // Done already (a layered link collecting what its test() saw finish): no look, no clock.
  if (ops[i].done) return ops.release(i);
  PollPace pace(std::chrono::steady_clock::now(), busy_poll);
  for (;;) {
    bool moved;
    {
      std::lock_guard io(io_mu);
      moved = !abort.raised() && progress();
    }
    if (ops[i].done) return ops.release(i);
    if (abort.raised()) {
      ops.free(i);
      return abort.status();
    }
    const TimePoint now = std::chrono::steady_clock::now();
    if (deadline.passed(now)) {
      std::lock_guard io(io_mu);
      return time_out();
    }
    switch (pace.after(moved, now)) {
      case PollPace::Next::kLook: break;
      case PollPace::Next::kLookAtConnections: sleep(now); break;
      case PollPace::Next::kYield: sched_yield(); break;
      case PollPace::Next::kSleep:
        if (work_before_sleep()) {
          pace.found_work(now);
          break;
        }
        sleep(deadline.at);
        pace.slept(std::chrono::steady_clock::now());
        break;
    }
  }
}

}  // namespace tributary::transport
