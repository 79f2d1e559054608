#include "coordinator_store/journal_store.h"

namespace tributary::coordinator_store {

Result<std::unique_ptr<JournalStore>> JournalStore::open(const std::string& path) {
  StoredState state;
  TRIB_ASSIGN_OR_RETURN(auto journal, membership::Journal::open(path, &state));
  return std::unique_ptr<JournalStore>(new JournalStore(std::move(journal), std::move(state)));
}

Result<StoredState> JournalStore::campaign(std::string* /*leader*/) { return state_; }

Status JournalStore::record(const membership::JournalEntry& entry) {
  return journal_->append(entry);
}

}  // namespace tributary::coordinator_store
