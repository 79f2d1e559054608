#include "algorithms/memory_link.h"

#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "core/check.h"
#include "core/reduce.h"

namespace tributary::algorithms {
namespace {

struct Message {
  std::vector<std::byte> bytes;
  std::uint32_t check = 0;
  std::uint64_t stamp = 0;
  TimePoint visible_at{};
  bool reported = false;  // report_early told of it
};

struct PendingRecv {
  int peer = 0;
  Tag tag;
  std::span<std::byte> out;
  std::optional<Combine> combine;  // recv_combine: reduced into `out` on arrival
};

}  // namespace

class MemoryFabric::Impl {
 public:
  explicit Impl(int size)
      : size_(size),
        links_(),
        frozen_(size, false),
        dead_(size, false),
        delay_(static_cast<std::size_t>(size) * size, Duration::zero()),
        broken_(static_cast<std::size_t>(size) * size, false),
        silent_(static_cast<std::size_t>(size) * size, false),
        held_(static_cast<std::size_t>(size) * size) {}

  class RankLink;

  int size_;
  std::vector<std::unique_ptr<RankLink>> links_;
  // One lock for the whole fabric: tests favour simplicity over scalability here. But
  // each rank waits on its own condition variable, woken only by what concerns it (a
  // message to it) or by what may concern everyone (a kill, a broken or released link):
  // one shared one woke every rank on every message, and with 16 ranks as threads on two
  // cores the sweeps spent most of their time in futex calls.
  std::mutex mu_;
  std::vector<bool> frozen_;
  std::vector<bool> dead_;
  std::vector<Duration> delay_;  // [from * size + to]
  std::vector<bool> broken_;  // [a * size + b]
  std::vector<bool> silent_;  // [a * size + b]: a's messages to b vanish
  struct Held {
    bool on = false;
    std::deque<std::pair<Tag, Message>> messages;  // a's messages to b, in send order
  };
  std::vector<Held> held_;  // [a * size + b]
  bool combining_ = false;  // links answer combines() with this (set before use)

  bool is_broken(int a, int b) const { return broken_[static_cast<std::size_t>(a) * size_ + b]; }
  bool is_silent(int a, int b) const { return silent_[static_cast<std::size_t>(a) * size_ + b]; }
  // With mu_ held.
  void wake(int rank);
  void wake_all();
};

class MemoryFabric::Impl::RankLink final : public PollableLink {
 public:
  RankLink(Impl* fabric, int rank) : fabric_(fabric), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return fabric_->size_; }

  Handle send(int peer, Tag tag, std::span<const std::byte> data) override {
    return send_stamped(peer, tag, data, 0);
  }

  bool carries_stamps() const override { return true; }

  Handle send_stamped(int peer, Tag tag, std::span<const std::byte> data,
                      std::uint64_t stamp) override {
    TRIB_CHECK(peer >= 0 && peer < size() && peer != rank_) << "bad peer " << peer;
    const Handle h = next_handle_++;
    std::lock_guard lock(fabric_->mu_);
    Status st;
    if (!aborted_.is_ok()) {
      st = aborted_;
    } else if (fabric_->dead_[peer] || fabric_->is_broken(rank_, peer)) {
      st = error(StatusCode::kPeerLost, "rank " + std::to_string(peer) + " is unreachable");
    } else if (!fabric_->frozen_[rank_] && !fabric_->is_silent(rank_, peer)) {
      Message m;
      m.bytes.assign(data.begin(), data.end());
      m.check = tag.check;
      m.stamp = stamp;
      m.visible_at = std::chrono::steady_clock::now() +
                     fabric_->delay_[static_cast<std::size_t>(rank_) * size() + peer];
      auto& held = fabric_->held_[static_cast<std::size_t>(rank_) * size() + peer];
      if (held.on) {
        held.messages.emplace_back(tag, std::move(m));
      } else {
        fabric_->links_[peer]->mailbox_[{rank_, tag}].push_back(std::move(m));
        fabric_->wake(peer);
      }
    }
    sends_.emplace(h, st);
    return h;
  }

  Handle recv(int peer, Tag tag, std::span<std::byte> data) override {
    TRIB_CHECK(peer >= 0 && peer < size() && peer != rank_) << "bad peer " << peer;
    return post(PendingRecv{peer, tag, data, std::nullopt});
  }

  bool combines() const override { return fabric_->combining_; }

  Handle recv_combine(int peer, Tag tag, std::span<std::byte> data, const Combine& c) override {
    TRIB_CHECK(combines()) << "recv_combine() on a fabric that does not combine";
    TRIB_CHECK(peer >= 0 && peer < size() && peer != rank_) << "bad peer " << peer;
    TRIB_CHECK(data.size() % dtype_size(c.dtype) == 0) << "partial element";
    return post(PendingRecv{peer, tag, data, c});
  }

  void report_early(int peer, std::vector<EarlyArrival>& out) override {
    std::lock_guard lock(fabric_->mu_);
    const auto now = std::chrono::steady_clock::now();
    for (auto& [key, box] : mailbox_) {
      if (key.first != peer) continue;
      // The first messages of the box go to the receives posted for them already.
      const auto q = queues_.find(key);
      std::size_t claimed = q == queues_.end() ? 0 : q->second.size();
      for (Message& m : box) {
        if (claimed > 0) {
          --claimed;
          continue;
        }
        if (m.reported || m.stamp == 0 || m.visible_at > now) continue;
        m.reported = true;
        out.push_back({key.second, m.bytes.size(), m.stamp});
      }
    }
  }

  std::uint64_t stamp(Handle h) const override {
    const auto it = stamps_.find(h);
    return it == stamps_.end() ? 0 : it->second;
  }

  Status wait(Handle h, Deadline deadline) override {
    if (auto it = sends_.find(h); it != sends_.end()) {
      Status st = std::move(it->second);
      sends_.erase(it);
      stamps_.erase(h);
      return st;
    }
    TRIB_CHECK(recvs_.count(h) > 0) << "unknown handle " << h;
    std::unique_lock lock(fabric_->mu_);
    for (;;) {
      TimePoint wake = deadline.at;
      if (settle(h, &wake)) {
        lock.unlock();
        return wait(h, deadline);  // finished: collected as a send is
      }
      if (deadline.passed()) {
        const int peer = recvs_.at(h).peer;
        withdraw(h);
        return error(StatusCode::kTimedOut,
                     "no message from rank " + std::to_string(peer) + " before deadline");
      }
      if (wake == TimePoint::max()) {
        cv_.wait(lock);
      } else {
        cv_.wait_until(lock, wake);
      }
    }
  }

  bool test(Handle h) override {
    if (sends_.count(h) > 0) return true;
    TRIB_CHECK(recvs_.count(h) > 0) << "unknown handle " << h;
    std::lock_guard lock(fabric_->mu_);
    TimePoint wake = TimePoint::max();
    return settle(h, &wake);
  }

  void drive(Deadline until) override {
    std::unique_lock lock(fabric_->mu_);
    if (until.at == TimePoint::max()) {
      cv_.wait(lock);
    } else {
      cv_.wait_until(lock, until.at);
    }
  }

  void abort(const Status& reason) override {
    std::lock_guard lock(fabric_->mu_);
    if (aborted_.is_ok()) {
      aborted_ = reason.is_ok() ? error(StatusCode::kAborted, "aborted") : reason;
    }
    cv_.notify_all();
  }

  // Guarded by fabric_->mu_.
  std::map<std::pair<int, Tag>, std::deque<Message>> mailbox_;
  Status aborted_;
  std::condition_variable cv_;  // waited on with fabric_->mu_, by this rank only

 private:
  using Key = std::pair<int, Tag>;

  Handle post(PendingRecv pending) {
    const Handle h = next_handle_++;
    std::lock_guard lock(fabric_->mu_);  // report_early reads the queues
    queues_[{pending.peer, pending.tag}].push_back(h);
    recvs_.emplace(h, std::move(pending));
    return h;
  }

  // With fabric_->mu_ held: receive h is over (moved to sends_ with its outcome, as a
  // finished send is) or not yet; in the latter case lowers *wake to when a delayed
  // message becomes visible. Messages of one (peer, tag) go to its receives in the order
  // they were posted, whichever of them is tested: the earlier ones take theirs first.
  bool settle(Handle h, TimePoint* wake) {
    const PendingRecv& pending = recvs_.at(h);
    if (!aborted_.is_ok()) {
      complete(h, aborted_, 0);
      return true;
    }
    const Key key{pending.peer, pending.tag};
    const auto now = std::chrono::steady_clock::now();
    auto& queue = queues_.at(key);
    for (;;) {
      auto box = mailbox_.find(key);
      if (box == mailbox_.end() || box->second.empty()) break;
      Message& m = box->second.front();
      if (m.visible_at > now) {
        *wake = std::min(*wake, m.visible_at);
        break;
      }
      const Handle head = queue.front();
      deliver(recvs_.at(head), m, head);
      box->second.pop_front();
      if (box->second.empty()) mailbox_.erase(box);
      if (head == h) return true;
    }
    if (fabric_->dead_[pending.peer] || fabric_->is_broken(rank_, pending.peer)) {
      complete(
          h,
          error(StatusCode::kPeerLost, "rank " + std::to_string(pending.peer) + " is unreachable"),
          0);
      return true;
    }
    return false;
  }

  // With fabric_->mu_ held: message m is the one receive `h` takes.
  void deliver(const PendingRecv& pending, const Message& m, Handle h) {
    Status st;
    if (m.bytes.size() != pending.out.size() || m.check != pending.tag.check) {
      st = error(StatusCode::kMismatch, "rank " + std::to_string(pending.peer) + " sent " +
                                            std::to_string(m.bytes.size()) + " bytes (check " +
                                            std::to_string(m.check) + "), expected " +
                                            std::to_string(pending.out.size()) + " (check " +
                                            std::to_string(pending.tag.check) + ")");
    } else if (!m.bytes.empty() && pending.combine) {
      const Combine& c = *pending.combine;
      const std::size_t count = m.bytes.size() / dtype_size(c.dtype);
      if (c.incoming_first) {
        reduce_to(pending.out.data(), m.bytes.data(), c.operand, count, c.dtype, c.op);
      } else {
        reduce_to(pending.out.data(), c.operand, m.bytes.data(), count, c.dtype, c.op);
      }
    } else if (!m.bytes.empty()) {
      std::memcpy(pending.out.data(), m.bytes.data(), m.bytes.size());
    }
    complete(h, std::move(st), m.stamp);
  }

  // Receive h is over: out of its queue, its outcome (and stamp) kept for wait().
  void complete(Handle h, Status st, std::uint64_t stamp) {
    if (stamp != 0) stamps_[h] = stamp;
    withdraw(h);
    sends_.emplace(h, std::move(st));
  }

  void withdraw(Handle h) {
    auto it = recvs_.find(h);
    const Key key{it->second.peer, it->second.tag};
    auto q = queues_.find(key);
    std::erase(q->second, h);
    if (q->second.empty()) queues_.erase(q);
    recvs_.erase(it);
  }

  Impl* fabric_;
  int rank_;
  // Touched only by the owning thread.
  Handle next_handle_ = 1;
  std::unordered_map<Handle, Status> sends_;
  std::unordered_map<Handle, PendingRecv> recvs_;
  std::unordered_map<Handle, std::uint64_t> stamps_;  // finished receives' nonzero stamps
  // Pending receives per (peer, tag), in post order; read by report_early under mu_.
  std::map<Key, std::deque<Handle>> queues_;
};

void MemoryFabric::Impl::wake(int rank) { links_[rank]->cv_.notify_all(); }

void MemoryFabric::Impl::wake_all() {
  for (auto& link : links_) link->cv_.notify_all();
}

MemoryFabric::MemoryFabric(int size) : impl_(std::make_unique<Impl>(size)) {
  TRIB_CHECK(size >= 1) << "size=" << size;
  for (int r = 0; r < size; ++r)
    impl_->links_.push_back(std::make_unique<Impl::RankLink>(impl_.get(), r));
}

MemoryFabric::~MemoryFabric() = default;

int MemoryFabric::size() const { return impl_->size_; }

Link& MemoryFabric::link(int rank) { return pollable(rank); }

PollableLink& MemoryFabric::pollable(int rank) {
  TRIB_CHECK(rank >= 0 && rank < impl_->size_) << "rank=" << rank;
  return *impl_->links_[rank];
}

void MemoryFabric::set_combining(bool on) {
  std::lock_guard lock(impl_->mu_);
  impl_->combining_ = on;
}

void MemoryFabric::set_delay(int rank, Duration delay) {
  for (int to = 0; to < impl_->size_; ++to) set_delay(rank, to, delay);
}

void MemoryFabric::set_delay(int from, int to, Duration delay) {
  std::lock_guard lock(impl_->mu_);
  impl_->delay_[static_cast<std::size_t>(from) * impl_->size_ + to] = delay;
}

void MemoryFabric::kill(int rank) {
  {
    std::lock_guard lock(impl_->mu_);
    impl_->dead_[rank] = true;
    // Whatever the dead rank had sent but nobody consumed is lost with it.
    for (auto& link : impl_->links_) {
      for (auto it = link->mailbox_.begin(); it != link->mailbox_.end();) {
        it = it->first.first == rank ? link->mailbox_.erase(it) : std::next(it);
      }
    }
    impl_->wake_all();  // its peers' receives fail now with kPeerLost
  }
  impl_->links_[rank]->abort(error(StatusCode::kAborted, "this rank was killed"));
}

void MemoryFabric::freeze(int rank) {
  std::lock_guard lock(impl_->mu_);
  impl_->frozen_[rank] = true;
}

void MemoryFabric::fail_link(int a, int b) {
  std::lock_guard lock(impl_->mu_);
  impl_->broken_[static_cast<std::size_t>(a) * impl_->size_ + b] = true;
  impl_->broken_[static_cast<std::size_t>(b) * impl_->size_ + a] = true;
  impl_->wake(a);
  impl_->wake(b);
}

void MemoryFabric::hold_link(int a, int b) {
  std::lock_guard lock(impl_->mu_);
  impl_->held_[static_cast<std::size_t>(a) * impl_->size_ + b].on = true;
  impl_->held_[static_cast<std::size_t>(b) * impl_->size_ + a].on = true;
}

void MemoryFabric::release_link(int a, int b) {
  std::lock_guard lock(impl_->mu_);
  for (auto [from, to] : {std::pair{a, b}, std::pair{b, a}}) {
    auto& held = impl_->held_[static_cast<std::size_t>(from) * impl_->size_ + to];
    held.on = false;
    for (auto& [tag, m] : held.messages) {
      impl_->links_[to]->mailbox_[{from, tag}].push_back(std::move(m));
    }
    held.messages.clear();
  }
  impl_->wake(a);
  impl_->wake(b);
}

void MemoryFabric::silence_link(int a, int b) {
  std::lock_guard lock(impl_->mu_);
  impl_->silent_[static_cast<std::size_t>(a) * impl_->size_ + b] = true;
  impl_->silent_[static_cast<std::size_t>(b) * impl_->size_ + a] = true;
}

}  // namespace tributary::algorithms
