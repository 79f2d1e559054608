// Replicated coordinators on etcd: one leader elected through an etcd lease, the
// coordinator's state written with compare-and-swap (docs/fault-tolerance.md, "Replicated
// coordinators").
//
// Keys, under `prefix`:
//   <prefix>/leader          the leader's endpoint (what agents dial), attached to its lease
//   <prefix>/state           one journal record (membership/journal.h framing): the epoch
//                            counter, the member id counter, the latest view's members
//   <prefix>/epochs/<E>      who issued epoch E (20-digit zero-padded, so keys sort)
//
// Guarantees:
//  - Election: a campaign is one transaction "if <prefix>/leader does not exist, create it
//    with my lease". Whoever creates it leads until its lease expires (kill -9, a pause, a
//    partition: nobody renews it) or it resigns (destruction revokes the lease).
//  - No epoch is issued twice: every record is one transaction comparing the leader key's
//    lease with ours, the state key's mod revision with the one we last wrote or read, and
//    (for a view) that <prefix>/epochs/<E> does not exist yet. A deposed leader's record
//    fails the compare: kAborted, and the coordinator sends nothing.
//  - A leader believes it leads only until (the time it sent its last successful renewal +
//    the TTL), which is never later than etcd's own expiry of the lease: a paused leader
//    that wakes up learns it lost before it handles a message (still_leading()).
//  - Every etcd call has a deadline (`request_timeout`; a leader's renewal `renew_timeout`,
//    so that an unreachable etcd stalls the coordinator's loop only that long); a failed
//    renewal is retried until the lease would have expired.
//  - An etcd restart keeps the lease (etcd persists leases and extends them when it comes
//    back): a leader whose renewals failed for less than the TTL goes on; one that stood
//    down finds its own lease still on the leader key and leads again.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "coordinator_store/etcd_client.h"
#include "coordinator_store/store.h"

namespace tributary::coordinator_store {

struct EtcdStoreConfig {
  std::vector<std::string> endpoints;  // etcd client URLs, "http://127.0.0.1:2379"
  std::string prefix = "/tributary/default";
  Duration lease_ttl = std::chrono::seconds(2);  // whole seconds; etcd's minimum is about 2 s
  Duration request_timeout{0};                   // per etcd call; zero: lease_ttl / 4
  // A leader's lease renewal runs on the coordinator's thread between messages: it may
  // block it this long at most (the coordinator passes its heartbeat interval, so agents
  // never see it silent because etcd is). Zero: the request timeout.
  Duration renew_timeout{0};
  std::string advertise;          // this coordinator's endpoint for agents
  std::uint64_t instance_id = 0;  // for the epoch history
};

// kInvalidArgument naming the field.
Status validate(const EtcdStoreConfig& config);

class EtcdStore final : public CoordinatorStore {
 public:
  // Checks the config and builds the client; contacts etcd only in campaign().
  static Result<std::unique_ptr<EtcdStore>> create(EtcdStoreConfig config,
                                                   const Clock& clock = SteadyClock::instance());
  // Revokes the lease (bounded by the request timeout): a standby takes over at once.
  ~EtcdStore() override;

  Result<StoredState> campaign(std::string* leader) override;
  Status still_leading() override;
  Status record(const membership::JournalEntry& entry) override;
  // Often: a standby that finds the leader's lease expired takes over at its next
  // campaign (about three cheap etcd calls each).
  Duration campaign_interval() const override { return config_.lease_ttl / 20; }
  std::string describe() const override;

  std::string leader_key() const { return config_.prefix + "/leader"; }
  std::string state_key() const { return config_.prefix + "/state"; }
  std::string epoch_key(membership::Epoch epoch) const;
  std::string epochs_prefix() const { return config_.prefix + "/epochs/"; }

 private:
  EtcdStore(EtcdStoreConfig config, std::unique_ptr<EtcdClient> client, const Clock& clock)
      : config_(std::move(config)), client_(std::move(client)), clock_(clock) {}
  // Renews our lease when due, or grants a new one when it expired.
  Status ensure_lease();
  // The leader key's lease has expired in etcd but etcd has not swept it yet (it does so
  // every 500 ms): revoke it, so that the key goes now. True when it did.
  bool revoke_expired(std::int64_t lease);
  // etcd's TTL resolution (whole seconds, truncated), with a margin for clock rates.
  static constexpr Duration kTtlResolution = std::chrono::milliseconds(1050);
  Result<StoredState> read_state();
  Status lose(std::string why);

  EtcdStoreConfig config_;
  std::unique_ptr<EtcdClient> client_;
  const Clock& clock_;
  std::int64_t lease_ = 0;
  TimePoint lease_valid_until_{};
  TimePoint next_renewal_{};
  bool leading_ = false;
  // The leader's lease a standby watches, and since when etcd says it has under 1 s left.
  std::int64_t watched_lease_ = 0;
  std::optional<TimePoint> watched_zero_since_;
  std::int64_t state_revision_ = 0;  // mod revision of the state key we last read or wrote
  membership::JournalEntry state_;   // what the state key holds
};

}  // namespace tributary::coordinator_store
