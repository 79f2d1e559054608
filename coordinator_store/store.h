// Where the coordinator keeps what it must not forget (docs/fault-tolerance.md,
// "Coordinator restarts" and "Replicated coordinators"): the epoch counter, the member id
// counter and the members of the latest view, and who may issue views.
//
// Two implementations: the local journal (journal_store.h: one coordinator, always the
// leader) and etcd (etcd_store.h: several coordinators, one leader elected through a
// lease, the state written with compare-and-swap so that two leaders never issue the same
// epoch).
//
// The contract the coordinator relies on:
//  - campaign() returns the state to restore exactly when this process may issue views
//    from now on; until then the coordinator answers agents NotLeader.
//  - record() is called, and must succeed, before a view or an admission it records
//    reaches anyone. kAborted means leadership is lost: nothing may be sent, and the
//    coordinator stands by (campaign() again). Other errors are I/O failures of a store
//    that still leads (the local journal): the coordinator logs them and goes on.
//  - still_leading() is called before every batch of messages is handled; kAborted means
//    leadership is lost (a paused leader learns it here, before it answers anyone).
//  - Every call returns within the store's deadline.
// Not thread-safe: the coordinator thread owns it.
#pragma once

#include <string>

#include "core/clock.h"
#include "core/status.h"
#include "membership/journal.h"

namespace tributary::coordinator_store {

// What a new leader restores: the journal's replay result (last epoch, last member id,
// members of the latest view).
using StoredState = membership::JournalState;

class CoordinatorStore {
 public:
  virtual ~CoordinatorStore() = default;

  // ok with the state to restore when this process leads now. kUnavailable while another
  // process leads (`*leader` gets its endpoint, when known) or the store is unreachable.
  virtual Result<StoredState> campaign(std::string* leader) = 0;
  // ok while this process leads (renewing its lease when due); kAborted once it does not.
  virtual Status still_leading() = 0;
  // Records a view (entry.epoch != 0) or the member id counter (entry.epoch == 0).
  virtual Status record(const membership::JournalEntry& entry) = 0;
  // How long a standby waits between campaigns.
  virtual Duration campaign_interval() const = 0;
  // "journal /var/lib/x.journal", "etcd http://... prefix /tributary/default": for logs.
  virtual std::string describe() const = 0;
};

}  // namespace tributary::coordinator_store
