#include "membership/journal.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>

#include "core/little_endian.h"
#include "membership/journal.pb.h"

namespace tributary::membership {
namespace {

constexpr std::size_t kHeaderBytes = 8;

std::uint32_t crc(std::string_view bytes) {
  return static_cast<std::uint32_t>(::crc32(::crc32(0L, Z_NULL, 0),
                                            reinterpret_cast<const Bytef*>(bytes.data()),
                                            static_cast<uInt>(bytes.size())));
}

Status io_error(const std::string& what, const std::string& path) {
  return error(StatusCode::kInternal,
               "journal " + path + ": " + what + ": " + std::strerror(errno));
}

// Keeps the last kJournalRecentViews view records (for the status history).
void remember_view(JournalState& state, const proto::JournalRecord& record) {
  JournalEntry entry{record.last_member_id(), record.epoch(),   state.members,
                     record.cause(),          record.unix_ms(), {},
                     state.with_state};
  for (const auto& r : record.removed())
    entry.removed.push_back({r.id(), r.name(), r.reason(), r.noticed_by()});
  state.recent_views.push_back(std::move(entry));
  if (state.recent_views.size() > kJournalRecentViews)
    state.recent_views.erase(state.recent_views.begin());
}

}  // namespace

std::string encode_journal_entry(const JournalEntry& entry) {
  proto::JournalRecord record;
  record.set_last_member_id(entry.last_member_id);
  record.set_epoch(entry.epoch);
  for (const auto& m : entry.members) {
    auto* pm = record.add_members();
    pm->set_id(m.id);
    pm->set_name(m.labels.name);
    pm->set_host(m.labels.host);
    pm->set_zone(m.labels.zone);
    pm->set_data_address(m.labels.data_address);
    for (const auto& c : m.labels.capabilities) pm->add_capabilities(c);
  }
  record.set_cause(entry.cause);
  record.set_unix_ms(entry.unix_ms);
  for (const auto& r : entry.removed) {
    auto* pr = record.add_removed();
    pr->set_id(r.id);
    pr->set_name(r.name);
    pr->set_reason(r.reason);
    if (!r.noticed_by.empty()) pr->set_noticed_by(r.noticed_by);
  }
  if (entry.with_state) {
    record.set_with_state_known(true);
    for (MemberId id : *entry.with_state) record.add_with_state(id);
  }
  const std::string payload = record.SerializeAsString();
  std::string out;
  out.reserve(kHeaderBytes + payload.size());
  le::append<std::uint32_t>(out, static_cast<std::uint32_t>(payload.size()));
  le::append<std::uint32_t>(out, crc(payload));
  out += payload;
  return out;
}

JournalState replay_journal(std::string_view bytes) {
  JournalState state;
  std::size_t pos = 0;
  while (pos < bytes.size()) {
    const std::string at =
        " at offset " + std::to_string(pos) + " (record " + std::to_string(state.records + 1) + ")";
    if (bytes.size() - pos < kHeaderBytes) {
      state.warning = "truncated record header" + at;
      break;
    }
    const std::uint32_t length = le::load<std::uint32_t>(bytes.data() + pos);
    const std::uint32_t sum = le::load<std::uint32_t>(bytes.data() + pos + 4);
    if (length > kMaxJournalRecordBytes) {
      state.warning = "record length " + std::to_string(length) + " exceeds the maximum" + at;
      break;
    }
    if (bytes.size() - pos - kHeaderBytes < length) {
      state.warning = "truncated record of " + std::to_string(length) + " bytes" + at;
      break;
    }
    const std::string_view payload = bytes.substr(pos + kHeaderBytes, length);
    if (crc(payload) != sum) {
      state.warning = "CRC mismatch" + at;
      break;
    }
    proto::JournalRecord record;
    if (!record.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
      state.warning = "record does not parse" + at;
      break;
    }
    // Counters never go backwards, even if a record says so.
    state.last_member_id = std::max<MemberId>(state.last_member_id, record.last_member_id());
    if (record.epoch() != 0) {
      if (record.epoch() <= state.last_epoch) {
        state.warning = "epoch " + std::to_string(record.epoch()) + " does not exceed " +
                        std::to_string(state.last_epoch) + at;
        break;
      }
      state.last_epoch = record.epoch();
      state.members.clear();
      for (const auto& pm : record.members()) {
        state.members.push_back({pm.id(),
                                 {pm.name(),
                                  pm.host(),
                                  pm.zone(),
                                  pm.data_address(),
                                  {pm.capabilities().begin(), pm.capabilities().end()}}});
        state.last_member_id = std::max<MemberId>(state.last_member_id, pm.id());
      }
      state.with_state.reset();
      if (record.with_state_known()) {
        state.with_state.emplace(record.with_state().begin(), record.with_state().end());
      }
      remember_view(state, record);
    }
    ++state.records;
    pos += kHeaderBytes + length;
    state.valid_bytes = pos;
  }
  return state;
}

Result<std::unique_ptr<Journal>> Journal::open(const std::string& path, JournalState* state) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return io_error("cannot open", path);
  std::unique_ptr<Journal> journal(new Journal(path, fd));
  std::string bytes;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return io_error("cannot read", path);
    }
    if (n == 0) break;
    bytes.append(buf, static_cast<std::size_t>(n));
  }
  *state = replay_journal(bytes);
  if (state->valid_bytes < bytes.size()) {
    if (::ftruncate(fd, static_cast<off_t>(state->valid_bytes)) != 0)
      return io_error("cannot cut the bad tail", path);
    if (::fsync(fd) != 0) return io_error("cannot fsync", path);
  }
  if (::lseek(fd, 0, SEEK_END) < 0) return io_error("cannot seek", path);
  return journal;
}

Journal::~Journal() {
  if (fd_ >= 0) ::close(fd_);
}

Status Journal::append(const JournalEntry& entry) {
  const std::string bytes = encode_journal_entry(entry);
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return io_error("cannot append", path_);
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fdatasync(fd_) != 0) return io_error("cannot fsync", path_);
  return Status::ok();
}

}  // namespace tributary::membership
