// Journal replay (membership/journal.h) on arbitrary file contents: it never fails, its
// valid prefix is a prefix of the input, replaying that prefix alone gives the same state,
// and a record appended after the valid prefix is read back.
#include "core/check.h"
#include "membership/journal.h"

using namespace tributary;
using namespace tributary::membership;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const JournalState state = replay_journal(bytes);
  TRIB_CHECK(state.valid_bytes <= size) << "valid prefix longer than the file";
  TRIB_CHECK(state.warning.empty() == (state.valid_bytes == size)) << "a bad tail not reported";
  const JournalState prefix = replay_journal(bytes.substr(0, state.valid_bytes));
  TRIB_CHECK(prefix.records == state.records && prefix.last_epoch == state.last_epoch &&
             prefix.last_member_id == state.last_member_id &&
             prefix.members.size() == state.members.size() && prefix.warning.empty())
      << "the valid prefix replays differently";
  JournalEntry next;
  next.epoch = state.last_epoch + 1;
  next.last_member_id = state.last_member_id + 1;
  next.members.push_back({next.last_member_id, {"n", "h", "z", "h:1", {"tcp"}}});
  const std::string appended =
      std::string(bytes.substr(0, state.valid_bytes)) + encode_journal_entry(next);
  const JournalState after = replay_journal(appended);
  TRIB_CHECK(after.records == state.records + 1 && after.last_epoch >= next.epoch &&
             after.warning.empty())
      << "a record appended after the valid prefix is not replayed";
  return 0;
}
