// The local journal as a CoordinatorStore: one coordinator on one machine, always the
// leader; the state survives kill -9 of the process, not the loss of the machine.
#pragma once

#include <memory>

#include "coordinator_store/store.h"

namespace tributary::coordinator_store {

class JournalStore final : public CoordinatorStore {
 public:
  // Opens (creating) and replays `path` (membership/journal.h). kInternal for I/O errors.
  static Result<std::unique_ptr<JournalStore>> open(const std::string& path);

  // The replayed state (a warning about a bad tail is in StoredState::warning).
  Result<StoredState> campaign(std::string* leader) override;
  Status still_leading() override { return Status::ok(); }
  Status record(const membership::JournalEntry& entry) override;
  Duration campaign_interval() const override { return Duration::zero(); }
  std::string describe() const override { return "journal " + journal_->path(); }

 private:
  JournalStore(std::unique_ptr<membership::Journal> journal, StoredState state)
      : journal_(std::move(journal)), state_(std::move(state)) {}
  std::unique_ptr<membership::Journal> journal_;
  StoredState state_;
};

}  // namespace tributary::coordinator_store
