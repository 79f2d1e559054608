// The coordinator's store and leadership: the local journal (always the leader) or etcd
// (coordinator_store/etcd_store.h: campaign for the lease, stand by answering NotLeader,
// take over by restoring the members as after a restart, stand down when a record fails
// its compare-and-swap).
#include <algorithm>

#include "coordinator/service.h"
#include "coordinator_store/etcd_store.h"
#include "coordinator_store/journal_store.h"

namespace tributary::coordinator {

using std::chrono::duration_cast;
using std::chrono::milliseconds;

Status Coordinator::Service::open_store(const std::string& bound) {
  if (!config_.etcd_endpoints.empty()) {
    coordinator_store::EtcdStoreConfig ec;
    ec.endpoints = config_.etcd_endpoints;
    ec.prefix = config_.etcd_prefix;
    ec.lease_ttl = config_.lease_ttl;
    ec.renew_timeout = std::min<Duration>(interval(), config_.lease_ttl / 4);
    ec.advertise = config_.advertise.empty() ? bound : config_.advertise;
    ec.instance_id = instance_id_;
    TRIB_ASSIGN_OR_RETURN(store_, coordinator_store::EtcdStore::create(std::move(ec), clock_));
    log_.info("replicated: " + store_->describe() + "; standing by until elected");
    next_campaign_ = clock_.now();
    publish_snapshot();
    return Status::ok();
  }
  if (config_.journal_path.empty()) {
    lead({});
    return Status::ok();
  }
  TRIB_ASSIGN_OR_RETURN(store_, coordinator_store::JournalStore::open(config_.journal_path));
  TRIB_ASSIGN_OR_RETURN(auto state, store_->campaign(nullptr));
  lead(std::move(state));
  return Status::ok();
}

void Coordinator::Service::lead(coordinator_store::StoredState state) {
  membership::MembershipConfig mc;
  mc.initial_world_size = config_.initial_world_size;
  mc.reform_when_empty = config_.serve_jobs;
  mc.heartbeat_timeout = config_.heartbeat_timeout;
  mc.heartbeat_interval = interval();
  mc.max_heartbeat_rate = config_.max_heartbeat_rate;
  mc.max_members = config_.max_members;
  mc.last_epoch = config_.last_epoch;
  mc.last_member_id = config_.last_member_id;
  mc.confirm_silence =
      config_.confirm_silence > Duration::zero() ? config_.confirm_silence : 3 * interval();
  mc.ready_timeout = config_.ready_timeout;
  mc.boundary_timeout = config_.boundary_timeout;
  mc.resume_timeout = config_.resume_timeout;
  mc.straggler = config_.straggler;
  if (store_) {
    const std::string what = store_->describe();
    if (!state.warning.empty()) {
      log_.warn(what + ": ignored a bad tail after " + std::to_string(state.records) +
                " good records: " + state.warning);
    }
    log_.info(what + ": " + std::to_string(state.records) + " records, last epoch " +
              std::to_string(state.last_epoch) + ", last member id " +
              std::to_string(state.last_member_id) + ", " + std::to_string(state.members.size()) +
              " members to resume");
    mc.last_epoch = std::max(mc.last_epoch, state.last_epoch);
    mc.last_member_id = std::max(mc.last_member_id, state.last_member_id);
    status_.restore(state.recent_views);
  }
  membership_.emplace(mc);
  rounds_ = membership::FederatedRounds();  // rounds are not journaled: members ask again
  encoded_view_ = {};  // encoded by the previous membership, if any
  delta_base_ = {};    // no member holds a view of this membership yet: full views first
  if (!state.members.empty()) {
    std::vector<std::pair<MemberId, membership::MemberLabels>> members;
    for (auto& m : state.members) members.emplace_back(m.id, std::move(m.labels));
    membership_->restore(std::move(members), clock_.now(), state.with_state);
  }
  leading_ = true;
  publish_snapshot();
}

void Coordinator::Service::stand_by() {
  const TimePoint now = clock_.now();
  if (now >= next_campaign_) {
    next_campaign_ = now + store_->campaign_interval();
    std::string leader;
    auto state = store_->campaign(&leader);
    if (state) {
      log_.info("elected leader (instance " + std::to_string(instance_id_) + ")");
      if (state->records > 0) metrics_->took_over();  // an earlier leader's state: a takeover
      standby_reason_.clear();
      return lead(std::move(state).value());
    }
    known_leader_ = leader;
    if (state.status().message() != standby_reason_) {
      standby_reason_ = state.status().message();
      log_.info("standing by: " + standby_reason_);
    }
  }
  const TimePoint after = clock_.now();
  const Duration wait = next_campaign_ <= after ? Duration::zero() : next_campaign_ - after;
  zmq::pollitem_t items[] = {{router_.handle(), 0, ZMQ_POLLIN, 0},
                             {monitor_.handle(), 0, ZMQ_POLLIN, 0},
                             {zap_.handle(), 0, ZMQ_POLLIN, 0}};
  zmq::poll(items, 3,
            duration_cast<milliseconds>(std::min<Duration>(wait, milliseconds(50)) +
                                        milliseconds(1) - Duration{1}));
  // A standby still answers CURVE handshakes, or agents could not hear its NotLeader.
  if (items[2].revents & ZMQ_POLLIN) drain_zap();
  if (items[1].revents & ZMQ_POLLIN) drain_monitor();
  if (items[0].revents & ZMQ_POLLIN) drain_router();  // handle() answers NotLeader
}

bool Coordinator::Service::still_leading() {
  if (!store_) return true;
  const Status st = store_->still_leading();
  if (st) return true;
  step_down(st);
  return false;
}

bool Coordinator::Service::recorded(const Status& st, const std::string& what) {
  if (st) return true;
  if (st.code() == StatusCode::kAborted) {
    step_down(st);
    return false;
  }
  log_.error("JOURNAL WRITE FAILED (a restart may forget " + what + "): " + st.to_string());
  return true;
}

// Forgets everything but the sockets: a later election restores from the store, and
// the members resume with whoever leads.
void Coordinator::Service::step_down(const Status& why) {
  log_.error("stopped leading (" + why.message() + "): issuing nothing, standing by");
  metrics_->stood_down();
  leading_ = false;
  known_leader_.clear();  // whoever we knew before we led; the next campaign says who leads
  membership_.reset();
  member_of_.clear();
  route_of_.clear();
  next_campaign_ = clock_.now() + store_->campaign_interval();
  publish_snapshot();
}

void Coordinator::Service::answer_not_leader(const Peer& peer) {
  control::Envelope out;
  out.mutable_not_leader()->set_leader(known_leader_);
  send(peer.identity, out);
}

}  // namespace tributary::coordinator
