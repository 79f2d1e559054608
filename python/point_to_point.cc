#include "python/point_to_point.h"

#include <sstream>
#include <utility>

#include "agent/data_plane.h"
#include "core/log.h"

namespace tributary::python {
namespace {

// How long the engine drives its links before it looks for newly posted operations: the
// latency a fresh post can wait while others are pending (none are: it sleeps on mu_).
constexpr Duration kDriveSlice = std::chrono::milliseconds(1);
// The group's one epoch: its links never change (a fixed group).
constexpr std::uint64_t kEpoch = 1;
// Every message is sent stamped (any nonzero stamp) so that the link reports it when it
// holds it whole before a receive was posted: what a receive from any member looks for.
constexpr std::uint64_t kStamp = 1;

// "address\ncapability\ncapability...": what a member publishes (neither contains a newline).
std::string advert_of(const agent::DataPlane& plane) {
  std::string out = plane.addresses().front();
  for (const std::string& c : plane.capabilities()) out += "\n" + c;
  return out;
}

transport::MemberAdvert parse_advert(int rank, const std::string& text) {
  transport::MemberAdvert a;
  a.member = static_cast<std::uint64_t>(rank) + 1;
  std::istringstream in(text);
  std::string line;
  bool first = true;
  while (std::getline(in, line)) {
    if (first) {
      a.data_address = line;
      first = false;
    } else {
      a.capabilities.push_back(line);
    }
  }
  return a;
}

std::string describe(bool is_send, int peer, const algorithms::Tag& tag) {
  return std::string(is_send ? "send to" : "recv from") + " rank " + std::to_string(peer) +
         " (tag " + std::to_string(tag.seq) + ")";
}

}  // namespace

Result<std::unique_ptr<PointToPoint>> PointToPoint::connect(agent::WorkerConfig config, int rank,
                                                            int size, const Exchange& exchange,
                                                            Deadline deadline) {
  if (size < 2 || rank < 0 || rank >= size) {
    return error(StatusCode::kInvalidArgument, "point-to-point needs a group of at least 2, rank " +
                                                   std::to_string(rank) + " of " +
                                                   std::to_string(size));
  }
  config.transport = "tcp";
  config.failover = transport::PathChoice::kOff;
  config.data_port = 0;
  std::unique_ptr<PointToPoint> p(new PointToPoint(rank, size));
  TRIB_ASSIGN_OR_RETURN(const agent::DataPlaneConfig plane_config, agent::DataPlaneConfig::of(config));
  TRIB_ASSIGN_OR_RETURN(p->plane_, agent::DataPlane::start(plane_config, Logger("p2p")));
  TRIB_ASSIGN_OR_RETURN(std::vector<std::string> adverts, exchange(advert_of(*p->plane_)));
  if (static_cast<int>(adverts.size()) != size) {
    return error(StatusCode::kInternal, "point-to-point exchange returned " +
                                            std::to_string(adverts.size()) + " addresses for " +
                                            std::to_string(size) + " members");
  }
  transport::GroupSpec spec;
  spec.epoch = kEpoch;
  spec.rank = rank;
  for (int r = 0; r < size; ++r) spec.members.push_back(parse_advert(r, adverts[r]));
  TRIB_ASSIGN_OR_RETURN(p->link_, p->plane_->connect(spec, deadline));
  p->pollable_ = dynamic_cast<algorithms::PollableLink*>(p->link_.get());
  if (p->pollable_ == nullptr) {
    return error(StatusCode::kInternal, "the point-to-point link cannot be polled");
  }
  PointToPoint* self = p.get();
  p->engine_ = std::thread([self] { self->run(); });
  return p;
}

PointToPoint::PointToPoint(int rank, int size)
    : rank_(rank), size_(size), early_(static_cast<std::size_t>(size)) {}

PointToPoint::~PointToPoint() { close(error(StatusCode::kAborted, "the group was destroyed")); }

void PointToPoint::send(int peer, std::uint32_t tag, std::uint32_t check,
                        std::span<const std::byte> data, Deadline deadline, Done done) {
  Op op;
  op.is_send = true;
  op.peer = peer;
  op.tag = {tag, 0, check};
  op.data = {const_cast<std::byte*>(data.data()), data.size()};  // only ever read
  op.deadline = deadline;
  op.done = std::move(done);
  submit(std::move(op));
}

void PointToPoint::recv(int peer, std::uint32_t tag, std::uint32_t check, std::span<std::byte> data,
                        Deadline deadline, Done done) {
  Op op;
  op.peer = peer;
  op.tag = {tag, 0, check};
  op.data = data;
  op.deadline = deadline;
  op.done = std::move(done);
  submit(std::move(op));
}

void PointToPoint::recv_any(std::uint32_t tag, std::uint32_t check, std::span<std::byte> data,
                            Deadline deadline, std::function<void(int)> from, Done done) {
  Op op;
  op.peer = -1;
  op.tag = {tag, 0, check};
  op.data = data;
  op.deadline = deadline;
  op.from = std::move(from);
  op.done = std::move(done);
  submit(std::move(op));
}

void PointToPoint::submit(Op op) {
  std::unique_lock lock(mu_);
  if (closing_) {
    const Status why = close_why_;
    lock.unlock();
    op.done(why);
    return;
  }
  incoming_.push_back(std::move(op));
  cv_.notify_one();
}

void PointToPoint::close(const Status& why) {
  {
    std::lock_guard lock(mu_);
    if (!closing_) {
      closing_ = true;
      close_why_ = why;
    }
  }
  cv_.notify_one();
  if (engine_.joinable() && engine_.get_id() != std::this_thread::get_id()) engine_.join();
}

void PointToPoint::fail(const Status& why) {
  if (!failed_.is_ok()) return;
  failed_ = why;
  link_->abort(why);
}

void PointToPoint::note_early(int peer) {
  std::vector<algorithms::EarlyArrival> fresh;
  pollable_->report_early(peer, fresh);
  auto& early = early_[static_cast<std::size_t>(peer)];
  early.insert(early.end(), fresh.begin(), fresh.end());
}

bool PointToPoint::take_early(int peer, const algorithms::Tag& tag) {
  auto& early = early_[static_cast<std::size_t>(peer)];
  for (auto it = early.begin(); it != early.end(); ++it) {
    if (it->tag == tag) {
      early.erase(it);
      return true;
    }
  }
  return false;
}

algorithms::Link::Handle PointToPoint::post_recv(Op& op) {
  note_early(op.peer);
  (void)take_early(op.peer, op.tag);
  return link_->recv(op.peer, op.tag, op.data);
}

void PointToPoint::match_any(std::vector<Op>& pending) {
  if (any_.empty()) return;
  for (int peer = 0; peer < size_; ++peer) {
    if (peer != rank_) note_early(peer);
  }
  // Each in posting order; one that finds nothing leaves nothing for a later one of its tag.
  for (auto op = any_.begin(); op != any_.end();) {
    int found = -1;
    for (int k = 0; k < size_ && found < 0; ++k) {
      const int peer = (next_any_peer_ + k) % size_;
      if (peer != rank_ && take_early(peer, op->tag)) found = peer;
    }
    if (found < 0) {
      if (op->deadline.passed()) {
        fail(error(StatusCode::kTimedOut, "recv from any rank (tag " + std::to_string(op->tag.seq) +
                                              "): no message before the deadline"));
        return;
      }
      ++op;
      continue;
    }
    next_any_peer_ = (found + 1) % size_;
    op->peer = found;
    if (op->from) op->from(found);
    op->handle = link_->recv(op->peer, op->tag, op->data);
    pending.push_back(std::move(*op));
    op = any_.erase(op);
  }
}

void PointToPoint::run() {
  std::vector<Op> pending;
  for (;;) {
    std::deque<Op> fresh;
    bool closing = false;
    Status why;
    {
      std::unique_lock lock(mu_);
      if (pending.empty() && any_.empty()) {
        // Nothing to drive: sleep until a post (bounded, so a lost wake-up costs 100 ms).
        cv_.wait_for(lock, std::chrono::milliseconds(100),
                     [&] { return closing_ || !incoming_.empty(); });
      }
      fresh.swap(incoming_);
      closing = closing_;
      why = close_why_;
    }
    if (closing) {
      fail(why);
      for (Op& op : pending) {
        (void)link_->wait(op.handle, Deadline{std::chrono::steady_clock::now()});
        op.done(failed_);
      }
      for (Op& op : any_) op.done(failed_);
      any_.clear();
      for (Op& op : fresh) op.done(failed_);
      return;
    }
    for (Op& op : fresh) {
      if (!failed_.is_ok()) {
        op.done(failed_);
        continue;
      }
      if (op.peer < 0) {
        any_.push_back(std::move(op));
        continue;
      }
      op.handle =
          op.is_send ? pollable_->send_stamped(op.peer, op.tag, op.data, kStamp) : post_recv(op);
      pending.push_back(std::move(op));
    }
    if (pending.empty() && any_.empty()) continue;
    pollable_->drive(Deadline::after(kDriveSlice));
    if (failed_.is_ok()) match_any(pending);
    for (auto it = pending.begin(); it != pending.end();) {
      const bool ready = pollable_->test(it->handle);
      if (!ready && !it->deadline.passed()) {
        ++it;
        continue;
      }
      // Ready: collect it. Past its deadline: the wait gives it up (kTimedOut) and the link
      // never touches its buffer again.
      Status s = link_->wait(it->handle, Deadline{std::chrono::steady_clock::now()});
      if (!s.is_ok()) {
        if (failed_.is_ok()) {
          fail(error(s.code(), describe(it->is_send, it->peer, it->tag) + ": " + s.message()));
        }
        s = failed_;
      }
      it->done(s);
      it = pending.erase(it);
    }
    if (!failed_.is_ok()) {
      for (Op& op : any_) op.done(failed_);
      any_.clear();
    }
  }
}

}  // namespace tributary::python
