#include "coordinator_store/etcd_store.h"

#include <cstdio>

namespace tributary::coordinator_store {

using std::chrono::duration_cast;
using std::chrono::milliseconds;
using std::chrono::seconds;
using Target = EtcdCompare::Target;

Status validate(const EtcdStoreConfig& c) {
  auto bad = [](const std::string& what) {
    return error(StatusCode::kInvalidArgument, "etcd store config: " + what);
  };
  if (c.endpoints.empty()) return bad("no etcd endpoint");
  if (c.prefix.empty() || c.prefix.front() != '/' || c.prefix.back() == '/')
    return bad("prefix '" + c.prefix + "' must start with '/' and not end with one");
  if (c.lease_ttl < seconds(1) || c.lease_ttl % seconds(1) != Duration::zero())
    return bad("lease TTL must be a whole number of seconds, at least 1");
  if (c.request_timeout < Duration::zero() || c.request_timeout >= c.lease_ttl)
    return bad("request timeout must be below the lease TTL");
  if (c.renew_timeout < Duration::zero() || c.renew_timeout >= c.lease_ttl)
    return bad("renew timeout must be below the lease TTL");
  if (c.advertise.empty()) return bad("no advertised endpoint");
  return Status::ok();
}

Result<std::unique_ptr<EtcdStore>> EtcdStore::create(EtcdStoreConfig config, const Clock& clock) {
  TRIB_RETURN_IF_ERROR(validate(config));
  if (config.request_timeout == Duration::zero()) config.request_timeout = config.lease_ttl / 4;
  TRIB_ASSIGN_OR_RETURN(auto client, EtcdClient::create(config.endpoints, config.request_timeout));
  return std::unique_ptr<EtcdStore>(new EtcdStore(std::move(config), std::move(client), clock));
}

EtcdStore::~EtcdStore() {
  if (lease_ != 0) (void)client_->revoke_lease(lease_);
}

std::string EtcdStore::epoch_key(membership::Epoch epoch) const {
  char digits[24];
  std::snprintf(digits, sizeof digits, "%020llu", static_cast<unsigned long long>(epoch));
  return epochs_prefix() + digits;
}

std::string EtcdStore::describe() const {
  std::string urls;
  for (const auto& e : config_.endpoints) urls += (urls.empty() ? "" : ",") + e;
  return "etcd " + urls + " prefix " + config_.prefix + " lease " +
         std::to_string(duration_cast<seconds>(config_.lease_ttl).count()) + " s";
}

Status EtcdStore::ensure_lease() {
  const TimePoint sent = clock_.now();
  if (lease_ != 0 && sent < next_renewal_ && sent < lease_valid_until_) return Status::ok();
  if (lease_ != 0) {
    TRIB_ASSIGN_OR_RETURN(const Duration ttl, client_->keep_alive(lease_));
    if (ttl > Duration::zero()) {
      lease_valid_until_ = sent + std::min(ttl, config_.lease_ttl);
      next_renewal_ = sent + config_.lease_ttl / 3;
      return Status::ok();
    }
    lease_ = 0;  // expired: a new one below
  }
  TRIB_ASSIGN_OR_RETURN(lease_, client_->grant_lease(config_.lease_ttl));
  lease_valid_until_ = sent + config_.lease_ttl;
  next_renewal_ = sent + config_.lease_ttl / 3;
  return Status::ok();
}

Result<StoredState> EtcdStore::campaign(std::string* leader) {
  if (leading_) return error(StatusCode::kInvalidArgument, "campaign() while leading");
  TRIB_RETURN_IF_ERROR(ensure_lease());
  auto try_lead = [&] {
    return client_->txn({{leader_key(), Target::kCreateRevision, 0}},
                        {{leader_key(), config_.advertise, lease_}}, {leader_key()});
  };
  TRIB_ASSIGN_OR_RETURN(auto txn, try_lead());
  if (!txn.succeeded && txn.read.size() == 1 && txn.read.front().lease != lease_ &&
      revoke_expired(txn.read.front().lease)) {
    TRIB_ASSIGN_OR_RETURN(txn, try_lead());
  }
  // Our own lease on the key: we led, stood down (etcd was unreachable), and still hold it.
  if (!txn.succeeded && !(txn.read.size() == 1 && txn.read.front().lease == lease_)) {
    if (leader != nullptr) *leader = txn.read.empty() ? std::string() : txn.read.front().value;
    return error(StatusCode::kUnavailable,
                 "another coordinator leads" +
                     (txn.read.empty() ? std::string() : " (" + txn.read.front().value + ")"));
  }
  auto state = read_state();
  if (!state) {
    // Do not sit on the leader key while unable to lead.
    (void)client_->revoke_lease(lease_);
    lease_ = 0;
    return state.status();
  }
  leading_ = true;
  return state;
}

// etcd reports the TTL in whole seconds, truncated: 0 means less than one second is left
// (or up to one second past expiry). So the lease is certainly expired one second after
// it was first seen at 0 without a renewal in between (a renewal shows as a TTL >= 1).
// Safe against a live leader: etcd's expiry is at least the leader's own bound (its renewal
// was sent before etcd received it), so a leader whose lease etcd has expired has already
// stopped issuing; and its writes would fail the compare-and-swap anyway.
bool EtcdStore::revoke_expired(std::int64_t lease) {
  if (lease == 0) return false;
  auto ttl = client_->time_to_live(lease);
  if (!ttl) return false;
  const TimePoint now = clock_.now();
  if (lease != watched_lease_ || *ttl > Duration::zero()) {
    watched_lease_ = lease;
    watched_zero_since_.reset();
    if (*ttl > Duration::zero()) return false;
  }
  if (!watched_zero_since_) watched_zero_since_ = now;
  if (now - *watched_zero_since_ < kTtlResolution) return false;
  (void)client_->revoke_lease(lease);  // "not found": swept meanwhile, the key is gone too
  return true;
}

Result<StoredState> EtcdStore::read_state() {
  TRIB_ASSIGN_OR_RETURN(const auto kv, client_->get(state_key()));
  state_revision_ = 0;
  state_ = {};
  if (!kv) return StoredState{};
  StoredState state = membership::replay_journal(kv->value);
  if (!state.warning.empty() || state.records != 1) {
    return error(StatusCode::kInternal, "etcd key " + state_key() + " does not hold one valid " +
                                            "journal record: " + state.warning);
  }
  state_revision_ = kv->mod_revision;
  state_.epoch = state.last_epoch;
  state_.last_member_id = state.last_member_id;
  state_.members = state.members;
  state_.with_state = state.with_state;
  return state;
}

Status EtcdStore::lose(std::string why) {
  leading_ = false;
  return error(StatusCode::kAborted, "no longer the leader: " + why);
}

Status EtcdStore::still_leading() {
  if (!leading_) return error(StatusCode::kAborted, "not the leader");
  const TimePoint now = clock_.now();
  if (now >= lease_valid_until_) {
    return lose("the lease was not renewed within its " +
                std::to_string(duration_cast<milliseconds>(config_.lease_ttl).count()) + " ms");
  }
  if (now < next_renewal_) return Status::ok();
  const TimePoint sent = now;
  auto ttl = client_->keep_alive(lease_, config_.renew_timeout);
  if (!ttl) {
    next_renewal_ = sent + config_.lease_ttl / 10;  // retry soon; the lease is still ours
    return Status::ok();
  }
  if (*ttl <= Duration::zero()) return lose("etcd expired the lease");
  lease_valid_until_ = sent + std::min(*ttl, config_.lease_ttl);
  next_renewal_ = sent + config_.lease_ttl / 3;
  return Status::ok();
}

Status EtcdStore::record(const membership::JournalEntry& entry) {
  TRIB_RETURN_IF_ERROR(still_leading());
  membership::JournalEntry next = entry;
  if (entry.epoch == 0) {  // a counter: the view stays what it was
    next = state_;
    next.last_member_id = std::max(state_.last_member_id, entry.last_member_id);
  }
  std::vector<EtcdCompare> compares = {{leader_key(), Target::kLease, lease_},
                                       {state_key(), Target::kModRevision, state_revision_}};
  std::vector<EtcdPut> puts = {{state_key(), membership::encode_journal_entry(next), 0}};
  if (entry.epoch != 0) {
    compares.push_back({epoch_key(entry.epoch), Target::kCreateRevision, 0});
    puts.push_back({epoch_key(entry.epoch),
                    config_.advertise + " instance " + std::to_string(config_.instance_id), 0});
  }
  auto txn = client_->txn(compares, puts);
  // Unknown outcome: stand down. If it did apply, the next leader reads it and issues a
  // larger epoch; nobody saw this one.
  if (!txn)
    return lose("cannot record epoch " + std::to_string(next.epoch) + ": " +
                txn.status().message());
  if (!txn->succeeded) {
    return lose("compare-and-swap of epoch " + std::to_string(next.epoch) +
                " failed (another coordinator leads, or our lease expired)");
  }
  state_revision_ = txn->revision;
  state_ = std::move(next);
  return Status::ok();
}

}  // namespace tributary::coordinator_store
