// The coordinator journal: framing, replay, corrupt and truncated tails, a real file.
#include "membership/journal.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <random>

#include "core/hash.h"

namespace tributary::membership {
namespace {

JournalEntry view_entry(Epoch epoch, std::vector<MemberId> ids) {
  JournalEntry e;
  e.epoch = epoch;
  for (MemberId id : ids) {
    e.last_member_id = std::max(e.last_member_id, id);
    std::string name = "m";
    name += std::to_string(id);
    e.members.push_back({id, {name, "h", "z", "127.0.0.1:7000", {"tcp"}}});
  }
  return e;
}

JournalEntry counter_entry(MemberId last_member_id) {
  JournalEntry e;
  e.last_member_id = last_member_id;
  return e;
}

std::string three_records() {
  return encode_journal_entry(view_entry(1, {1, 2})) + encode_journal_entry(counter_entry(5)) +
         encode_journal_entry(view_entry(2, {2, 5}));
}

TEST(Journal, ReplayKeepsTheLatestViewAndCounters) {
  JournalState s = replay_journal(three_records());
  EXPECT_TRUE(s.warning.empty()) << s.warning;
  EXPECT_EQ(s.records, 3u);
  EXPECT_EQ(s.last_epoch, 2u);
  EXPECT_EQ(s.last_member_id, 5u);
  ASSERT_EQ(s.members.size(), 2u);
  EXPECT_EQ(s.members[1].id, 5u);
  EXPECT_EQ(s.members[1].labels.name, "m5");
  EXPECT_EQ(s.members[1].labels.capabilities, std::vector<std::string>{"tcp"});
  EXPECT_EQ(replay_journal("").records, 0u);
}

// The file format, byte for byte: journals written by an earlier build must replay. (The
// record schema moved from control/control.proto to membership/journal.proto; protobuf
// encodes field numbers, not package names, so the bytes are those of the old schema.)
TEST(Journal, RecordBytesAreTheFileFormat) {
  JournalEntry e;
  e.epoch = 7;
  e.last_member_id = 12;
  e.members.push_back({3, {"w3", "host-a", "zone-1", "10.0.0.3:7000", {"tcp", "shm"}}});
  e.members.push_back({12, {"w12", "host-b", "", "10.0.0.12:7001", {}}});
  const std::string view_record =
      "56000000e519dbd6080c10071a2f0803120277331a06686f73742d6122067a6f6e652d312a0d31302e302e30"
      "2e333a373030303203746370320373686d1a1f080c12037731321a06686f73742d622a0e31302e302e302e31"
      "323a37303031";
  auto hex = [](const std::string& bytes) { return to_hex(std::as_bytes(std::span(bytes))); };
  EXPECT_EQ(hex(encode_journal_entry(e)), view_record);
  EXPECT_EQ(hex(encode_journal_entry(counter_entry(13))), "020000004ae4b1f7080d");
  const JournalState s = replay_journal(encode_journal_entry(e));
  ASSERT_EQ(s.members.size(), 2u);
  EXPECT_EQ(s.members[0].labels.capabilities, (std::vector<std::string>{"tcp", "shm"}));
  EXPECT_EQ(s.last_member_id, 12u);
}

// Which members of the latest view held the state when it was issued: recorded, replayed
// from the latest view (a counter record keeps it), and absent from older records.
TEST(Journal, TheLatestViewSaysWhoHeldTheState) {
  JournalEntry joined = view_entry(2, {1, 2, 3});
  joined.with_state = std::vector<MemberId>{1, 2};
  JournalState s = replay_journal(encode_journal_entry(view_entry(1, {1, 2})) +
                                  encode_journal_entry(joined) +
                                  encode_journal_entry(counter_entry(4)));
  ASSERT_TRUE(s.with_state.has_value());
  EXPECT_EQ(*s.with_state, (std::vector<MemberId>{1, 2}));
  JournalEntry nobody = view_entry(3, {1, 2});
  nobody.with_state = std::vector<MemberId>{};
  s = replay_journal(encode_journal_entry(joined) + encode_journal_entry(nobody));
  ASSERT_TRUE(s.with_state.has_value()) << "an empty list is not an old record";
  EXPECT_TRUE(s.with_state->empty());
  EXPECT_FALSE(replay_journal(three_records()).with_state.has_value());
}

// Views carry why and when they were issued and whom they left out; replay keeps the last
// kJournalRecentViews of them (the status history of a restarted coordinator). Records
// without these fields (older journals, counter records) replay with them empty.
TEST(Journal, RecentViewsKeepCauseTimeAndRemovals) {
  std::string bytes = three_records();
  for (Epoch epoch = 3; epoch < 3 + kJournalRecentViews; ++epoch) {
    JournalEntry e = view_entry(epoch, {2, 5});
    e.cause = epoch % 2 ? "failure" : "boundary";
    e.unix_ms = 1'700'000'000'000 + static_cast<std::int64_t>(epoch);
    e.removed.push_back({7, "m7", "heartbeat_timeout", {}});
    e.removed.push_back({8, "m8", "failure_confirmed", "m5"});
    bytes += encode_journal_entry(e);
  }
  const JournalState s = replay_journal(bytes);
  EXPECT_TRUE(s.warning.empty()) << s.warning;
  ASSERT_EQ(s.recent_views.size(), kJournalRecentViews);
  const JournalEntry& last = s.recent_views.back();
  EXPECT_EQ(last.epoch, 2 + kJournalRecentViews);
  EXPECT_EQ(last.unix_ms, 1'700'000'000'000 + static_cast<std::int64_t>(last.epoch));
  EXPECT_EQ(last.cause, last.epoch % 2 ? "failure" : "boundary");
  ASSERT_EQ(last.removed.size(), 2u);
  EXPECT_EQ(last.removed[0].name, "m7");
  EXPECT_EQ(last.removed[0].reason, "heartbeat_timeout");
  EXPECT_EQ(last.removed[0].noticed_by, "");
  EXPECT_EQ(last.removed[1].noticed_by, "m5") << "who reported it survives a restart";
  ASSERT_EQ(last.members.size(), 2u);
  EXPECT_EQ(last.members[1].labels.name, "m5");
  EXPECT_EQ(s.recent_views.front().epoch, 3u);  // epochs 1 and 2 fell out of the window

  const JournalState old = replay_journal(three_records());
  ASSERT_EQ(old.recent_views.size(), 2u);  // the counter record is no view
  EXPECT_EQ(old.recent_views[0].epoch, 1u);
  EXPECT_TRUE(old.recent_views[0].cause.empty());
  EXPECT_EQ(old.recent_views[0].unix_ms, 0);
}

TEST(Journal, EveryTruncationStopsAtTheLastWholeRecord) {
  const std::string all = three_records();
  const std::size_t first = encode_journal_entry(view_entry(1, {1, 2})).size();
  const std::size_t second = first + encode_journal_entry(counter_entry(5)).size();
  for (std::size_t cut = 0; cut < all.size(); ++cut) {
    JournalState s = replay_journal(std::string_view(all).substr(0, cut));
    EXPECT_LE(s.valid_bytes, cut);
    const bool whole = cut == 0 || cut == first || cut == second;
    EXPECT_EQ(s.warning.empty(), whole) << "cut " << cut << ": " << s.warning;
    if (cut >= first) {
      EXPECT_EQ(s.last_epoch, 1u) << "cut " << cut;
    }
  }
}

TEST(Journal, CorruptionAnywhereEndsReplayThereWithoutCrashing) {
  const std::string all = three_records();
  std::mt19937 rng(7);
  for (int trial = 0; trial < 500; ++trial) {
    std::string bad = all;
    const std::size_t at = rng() % bad.size();
    bad[at] = static_cast<char>(bad[at] ^ static_cast<char>(1 + rng() % 255));
    JournalState s = replay_journal(bad);
    EXPECT_LE(s.last_epoch, 2u);
    EXPECT_LT(s.records, 3u) << "flipped byte " << at << " went unnoticed";
  }
  // Garbage lengths (huge, zero-payload garbage) are bounded.
  EXPECT_FALSE(replay_journal(std::string("\xff\xff\xff\xff\0\0\0\0", 8)).warning.empty());
  EXPECT_FALSE(replay_journal(std::string(1000, '\x01')).warning.empty());
}

TEST(Journal, FileReopenCutsTheBadTailAndAppendsAfterIt) {
  char path[] = "/tmp/tributary-journal-XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ::close(fd);
  {
    JournalState s;
    auto j = Journal::open(path, &s);
    ASSERT_TRUE(j.is_ok()) << j.status().to_string();
    EXPECT_EQ(s.records, 0u);
    ASSERT_TRUE((*j)->append(view_entry(1, {1, 2})).is_ok());
    ASSERT_TRUE((*j)->append(view_entry(2, {1, 2, 3})).is_ok());
  }
  {
    std::ofstream out(path, std::ios::app | std::ios::binary);
    out << "half a record";  // a crash mid-append
  }
  {
    JournalState s;
    auto j = Journal::open(path, &s);
    ASSERT_TRUE(j.is_ok());
    EXPECT_EQ(s.last_epoch, 2u);
    EXPECT_EQ(s.members.size(), 3u);
    EXPECT_FALSE(s.warning.empty());
    ASSERT_TRUE((*j)->append(view_entry(3, {2, 3})).is_ok());
  }
  JournalState s;
  auto j = Journal::open(path, &s);
  ASSERT_TRUE(j.is_ok());
  EXPECT_TRUE(s.warning.empty()) << "the bad tail was cut before appending: " << s.warning;
  EXPECT_EQ(s.records, 3u);
  EXPECT_EQ(s.last_epoch, 3u);
  EXPECT_EQ(s.last_member_id, 3u);
  ::unlink(path);
  EXPECT_EQ(Journal::open("/nonexistent-dir/j", &s).status().code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace tributary::membership
