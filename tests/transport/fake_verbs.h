// In-memory verbs (transport/rdma_verbs.h) for the RDMA link's and transport's tests: a
// fabric of queue pairs in one process, with the RC semantics the protocol relies on.
//
// - A send lands in the oldest receive its peer posted, in order, at once: both sides get
//   a completion (the receiver's carries the byte count). A send that finds no receive
//   posted fails with "RNR retry counter exceeded" and is counted (rnr_errors()): with
//   correct credits it never happens, so the tests assert the count stays 0.
// - A send to a queue pair that is gone (its group destroyed, or cut()) fails with
//   "transport retry counter exceeded", as hardware reports a dead peer after its retries.
// - arm() makes the next completion (not one already queued) write the group's eventfd.
// - corrupt_next_from(owner): the next chunk a group of that owner sends arrives as
//   garbage. fail_open(owner): that owner's devices refuse open_group().
// Thread-safe: one mutex over the whole fabric (ranks run as threads).
#pragma once

#include <sys/eventfd.h>
#include <unistd.h>

#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>

#include "transport/rdma_verbs.h"

namespace tributary::testing {

class FakeFabric : public std::enable_shared_from_this<FakeFabric> {
 public:
  // A device for member `owner` (any id the test likes, e.g. its rank).
  std::shared_ptr<transport::VerbsDevice> device(int owner, std::string advert = "fake0/1/lid1");

  std::uint64_t rnr_errors() const {
    std::lock_guard lock(mu_);
    return rnr_errors_;
  }
  // Whether a group of `owner` has armed its queue and not been woken since: it is asleep
  // or about to be (lets a test act on a sleeping waiter instead of guessing how long
  // falling asleep takes).
  bool armed(int owner) const;
  // The queue pairs of `owner`'s groups vanish from the fabric (its host's adapter died)
  // while its links live on: sends to them fail.
  void cut(int owner);
  void corrupt_next_from(int owner) {
    std::lock_guard lock(mu_);
    corrupt_.insert(owner);
  }
  void fail_open(int owner) {
    std::lock_guard lock(mu_);
    fail_open_.insert(owner);
  }

 private:
  friend class FakeGroup;
  friend class FakeDevice;
  struct Qp;
  mutable std::mutex mu_;
  std::map<std::uint32_t, Qp*> qps_;             // by qpn: the ones reachable
  std::multimap<int, class FakeGroup*> groups_;  // by owner
  std::uint32_t next_qpn_ = 100;
  std::uint64_t rnr_errors_ = 0;
  std::set<int> corrupt_;
  std::set<int> fail_open_;
};

class FakeGroup;

struct FakeFabric::Qp {
  FakeGroup* group = nullptr;
  int peer = -1;
  std::uint32_t qpn = 0;
  std::uint32_t remote = 0;
  bool connected = false;
  std::vector<std::byte> send_mem;
  std::vector<std::byte> recv_mem;
  std::deque<std::pair<std::uint32_t, std::uint64_t>> recvs;  // slot, wr_id
};

class FakeGroup final : public transport::VerbsGroup {
 public:
  FakeGroup(std::shared_ptr<FakeFabric> fabric, int owner, const std::vector<int>& peers,
            const transport::RdmaSlots& slots)
      : fabric_(std::move(fabric)),
        owner_(owner),
        slots_(slots),
        efd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
    std::lock_guard lock(fabric_->mu_);
    for (int p : peers) {
      auto q = std::make_unique<FakeFabric::Qp>();
      q->group = this;
      q->peer = p;
      q->qpn = fabric_->next_qpn_++;
      q->send_mem.resize(std::size_t{slots.send_slots} * slots.slot_bytes);
      q->recv_mem.resize(std::size_t{slots.recv_slots} * slots.slot_bytes);
      fabric_->qps_[q->qpn] = q.get();
      qps_[p] = std::move(q);
    }
    fabric_->groups_.emplace(owner, this);
  }
  ~FakeGroup() override {
    std::lock_guard lock(fabric_->mu_);
    for (auto& [peer, q] : qps_) fabric_->qps_.erase(q->qpn);
    for (auto it = fabric_->groups_.begin(); it != fabric_->groups_.end(); ++it) {
      if (it->second == this) {
        fabric_->groups_.erase(it);
        break;
      }
    }
    ::close(efd_);
  }

  transport::QpAddress local_address(int peer) const override {
    transport::QpAddress a;
    a.qpn = qps_.at(peer)->qpn;
    a.psn = 7;
    a.lid = static_cast<std::uint16_t>(owner_ + 1);
    a.mtu = 5;
    return a;
  }
  Status connect(int peer, const transport::QpAddress& remote) override {
    std::lock_guard lock(fabric_->mu_);
    FakeFabric::Qp& q = *qps_.at(peer);
    q.remote = remote.qpn;
    q.connected = true;
    return Status();
  }
  std::span<std::byte> send_slot(int peer, std::uint32_t slot) override {
    return std::span<std::byte>(qps_.at(peer)->send_mem)
        .subspan(std::size_t{slot} * slots_.slot_bytes, slots_.slot_bytes);
  }
  std::span<const std::byte> recv_slot(int peer, std::uint32_t slot) const override {
    return std::span<const std::byte>(qps_.at(peer)->recv_mem)
        .subspan(std::size_t{slot} * slots_.slot_bytes, slots_.slot_bytes);
  }

  Status post_send(int peer, std::uint32_t slot, std::uint32_t bytes,
                   std::uint64_t wr_id) override {
    std::lock_guard lock(fabric_->mu_);
    FakeFabric::Qp& q = *qps_.at(peer);
    if (!q.connected) return error(StatusCode::kInternal, "fake verbs: queue pair not connected");
    if (slot >= slots_.send_slots || bytes > slots_.slot_bytes) {
      return error(StatusCode::kInternal, "fake verbs: send outside its slot");
    }
    auto it = fabric_->qps_.find(q.remote);
    if (it == fabric_->qps_.end() || it->second->remote != q.qpn) {
      complete({wr_id, 0, error(StatusCode::kPeerLost, "transport retry counter exceeded")});
      return Status();
    }
    FakeFabric::Qp& r = *it->second;
    if (r.recvs.empty() || bytes > r.group->slots_.slot_bytes) {
      ++fabric_->rnr_errors_;
      complete({wr_id, 0, error(StatusCode::kPeerLost, "RNR retry counter exceeded")});
      return Status();
    }
    const auto [rslot, rwr] = r.recvs.front();
    r.recvs.pop_front();
    std::byte* dst = r.recv_mem.data() + std::size_t{rslot} * r.group->slots_.slot_bytes;
    std::memcpy(dst, q.send_mem.data() + std::size_t{slot} * slots_.slot_bytes, bytes);
    if (fabric_->corrupt_.erase(owner_) > 0) std::memset(dst, 0xab, bytes);
    r.group->complete({rwr, bytes, Status()});
    complete({wr_id, bytes, Status()});
    return Status();
  }
  Status post_recv(int peer, std::uint32_t slot, std::uint64_t wr_id) override {
    std::lock_guard lock(fabric_->mu_);
    if (slot >= slots_.recv_slots) return error(StatusCode::kInternal, "fake verbs: no such slot");
    qps_.at(peer)->recvs.emplace_back(slot, wr_id);
    return Status();
  }
  std::size_t poll(std::span<transport::VerbsCompletion> out) override {
    std::lock_guard lock(fabric_->mu_);
    std::size_t n = 0;
    while (n < out.size() && !cq_.empty()) {
      out[n++] = std::move(cq_.front());
      cq_.pop_front();
    }
    return n;
  }
  Status arm() override {
    std::lock_guard lock(fabric_->mu_);
    armed_ = true;
    return Status();
  }
  int wake_fd() const override { return efd_; }
  void clear_wakeups() override {
    std::uint64_t v;
    [[maybe_unused]] ssize_t n = ::read(efd_, &v, sizeof(v));
  }

 private:
  friend class FakeFabric;
  // fabric_->mu_ held.
  void complete(transport::VerbsCompletion c) {
    cq_.push_back(std::move(c));
    if (armed_) {
      armed_ = false;
      const std::uint64_t one = 1;
      [[maybe_unused]] ssize_t n = ::write(efd_, &one, sizeof(one));
    }
  }

  std::shared_ptr<FakeFabric> fabric_;
  int owner_;
  transport::RdmaSlots slots_;
  int efd_;
  bool armed_ = false;
  std::map<int, std::unique_ptr<FakeFabric::Qp>> qps_;
  std::deque<transport::VerbsCompletion> cq_;
};

class FakeDevice final : public transport::VerbsDevice {
 public:
  FakeDevice(std::shared_ptr<FakeFabric> fabric, int owner, std::string advert)
      : fabric_(std::move(fabric)), owner_(owner), advert_(std::move(advert)) {}
  std::string advert() const override { return advert_; }
  Result<std::unique_ptr<transport::VerbsGroup>> open_group(
      const std::vector<int>& peers, const transport::RdmaSlots& slots) override {
    {
      std::lock_guard lock(fabric_->mu_);
      if (fabric_->fail_open_.count(owner_) > 0) {
        return error(StatusCode::kUnavailable, "fake verbs: ibv_create_qp: Cannot allocate memory");
      }
    }
    return std::unique_ptr<transport::VerbsGroup>(
        std::make_unique<FakeGroup>(fabric_, owner_, peers, slots));
  }

 private:
  std::shared_ptr<FakeFabric> fabric_;
  int owner_;
  std::string advert_;
};

inline std::shared_ptr<transport::VerbsDevice> FakeFabric::device(int owner, std::string advert) {
  return std::make_shared<FakeDevice>(shared_from_this(), owner, std::move(advert));
}

inline bool FakeFabric::armed(int owner) const {
  std::lock_guard lock(mu_);
  auto [first, last] = groups_.equal_range(owner);
  for (auto it = first; it != last; ++it) {
    if (it->second->armed_) return true;
  }
  return false;
}

inline void FakeFabric::cut(int owner) {
  std::lock_guard lock(mu_);
  auto [first, last] = groups_.equal_range(owner);
  for (auto it = first; it != last; ++it) {
    for (auto& [peer, q] : it->second->qps_) qps_.erase(q->qpn);
  }
}

}  // namespace tributary::testing
