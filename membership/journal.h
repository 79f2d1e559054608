// The coordinator's journal: what it must not forget across kill -9 (docs/fault-tolerance.md,
// "Coordinator restarts"): the epoch counter, the member id counter and the members of
// the latest view.
//
// File format: a sequence of records, each
//     u32 little-endian payload length | u32 little-endian CRC-32 (zlib) of the payload |
//     payload: a protobuf control.JournalRecord
// appended and fsync'ed one at a time, before the view it records is sent to anyone.
// Replay reads records until the first one that is truncated, oversized, fails its CRC or
// does not parse; everything from there on is ignored (a crash mid-append leaves exactly
// such a tail), reported in `JournalState::warning`, and cut off the file so that later
// appends follow valid data. Replay never crashes on garbage.
//
// Not thread-safe: the coordinator thread owns it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "membership/membership.h"
#include "membership/view.h"

namespace tributary::membership {

inline constexpr std::size_t kMaxJournalRecordBytes = 32u << 20;

struct JournalMember {
  MemberId id = 0;
  MemberLabels labels;
};

// A member a view left out, and why (membership::to_string(RemovalReason)).
struct JournalRemoval {
  MemberId id = 0;
  std::string name;
  std::string reason;
  std::string noticed_by;  // MemberRef::noticed_by (empty in older journals)
};

// One record: a counter-only record (epoch 0) after a join, or a view. Views also record
// why they were issued and when, so that a restarted coordinator can still show its
// recent history (`tributary status`); records written before these fields replay with
// them empty.
struct JournalEntry {
  MemberId last_member_id = 0;
  Epoch epoch = 0;
  std::vector<JournalMember> members;  // by rank
  std::string cause;                   // membership::to_string(ViewCause)
  std::int64_t unix_ms = 0;            // wall clock when the view was issued
  std::vector<JournalRemoval> removed;
  // The members that held the training state when the view was issued (were in the last
  // started view); the rest of `members` joined with it and need the state. nullopt:
  // not recorded (older journals), every member is taken to hold it.
  std::optional<std::vector<MemberId>> with_state;
};

inline constexpr std::size_t kJournalRecentViews = 32;

// What replay recovered.
struct JournalState {
  Epoch last_epoch = 0;
  MemberId last_member_id = 0;
  std::vector<JournalMember> members;      // of the latest view (empty if none)
  std::optional<std::vector<MemberId>> with_state;  // of the latest view (JournalEntry)
  std::vector<JournalEntry> recent_views;  // the last kJournalRecentViews views, oldest first
  std::size_t records = 0;                 // valid records read
  std::size_t valid_bytes = 0;             // length of the valid prefix
  std::string warning;                     // non-empty when a bad tail was ignored
};

std::string encode_journal_entry(const JournalEntry& entry);
// Replays `bytes` (a whole journal file). Never fails: a bad tail ends the replay.
JournalState replay_journal(std::string_view bytes);

class Journal {
 public:
  // Opens `path` (creating it), replays it into `*state`, and cuts off a bad tail.
  // kInternal naming the path for I/O errors.
  static Result<std::unique_ptr<Journal>> open(const std::string& path, JournalState* state);
  ~Journal();
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;

  // Appends one record and fsyncs. kInternal on I/O errors.
  Status append(const JournalEntry& entry);
  const std::string& path() const { return path_; }

 private:
  Journal(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string path_;
  int fd_ = -1;
};

}  // namespace tributary::membership
