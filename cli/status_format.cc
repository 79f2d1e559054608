#include "cli/status_format.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <ctime>
#include <vector>

#include "core/log.h"

namespace tributary::cli {
namespace {

using membership::ClusterStatus;
using membership::MemberRef;
using membership::MemberStatus;
using membership::ViewChange;

bool is_joiner(const MemberStatus& m) { return m.state == "pending" || m.state == "waiting"; }

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string hex64(std::uint64_t v) {
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
  return buf;
}

// "08:57:01.123Z" (UTC) for a Unix time in milliseconds.
std::string clock_time(std::int64_t unix_ms) {
  const std::time_t secs = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%02d:%02d:%02d.%03dZ", tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(unix_ms % 1000));
  return buf;
}

std::string label(const std::string& text) { return text.empty() ? "-" : escape_log_text(text); }

// Left-aligned columns, two spaces apart; every row as wide as the header.
class Table {
 public:
  explicit Table(std::vector<std::string> header) { rows_.push_back(std::move(header)); }
  void add(std::vector<std::string> row) {
    row.resize(rows_.front().size());
    rows_.push_back(std::move(row));
  }
  std::string render(const std::string& indent) const {
    std::vector<std::size_t> width(rows_.front().size(), 0);
    for (const auto& row : rows_) {
      for (std::size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
    }
    std::string out;
    for (const auto& row : rows_) {
      std::string line = indent;
      for (std::size_t c = 0; c < row.size(); ++c) {
        line += row[c];
        if (c + 1 < row.size()) line += std::string(width[c] - row[c].size() + 2, ' ');
      }
      out += line + "\n";
    }
    return out;
  }

 private:
  std::vector<std::vector<std::string>> rows_;
};

std::string ms(double seconds, bool known) { return known ? fixed(seconds * 1e3, 1) : "-"; }

std::vector<std::string> member_row(const MemberStatus& m, const ClusterStatus& s) {
  const bool timed = m.timed_steps > 0;
  const std::string straggler =
      (m.straggler_score > 0 ? fixed(m.straggler_score, 2) : std::string("-")) + " (" +
      std::to_string(m.straggling_steps) + "/" + std::to_string(s.straggler_window) + ")";
  return {m.in_view ? std::to_string(m.rank) : "-",
          std::to_string(m.id),
          label(m.name),
          label(m.host),
          label(m.zone),
          m.state,
          std::to_string(m.heartbeat_age_ms) + " ms",
          std::to_string(m.step),
          ms(m.step_seconds, timed),
          ms(m.compute_seconds, timed),
          ms(m.collective_seconds, timed),
          straggler};
}

std::string refs_text(const std::vector<MemberRef>& refs, char sign) {
  std::string out;
  for (const auto& r : refs) {
    if (!out.empty()) out += ", ";
    out += sign + std::to_string(r.id) + " " + label(r.name);
    if (!r.reason.empty()) {
      out += " (" + escape_log_text(r.reason);
      if (!r.noticed_by.empty()) out += ", reported by " + label(r.noticed_by);
      out += ")";
    }
  }
  return out;
}

std::string change_text(const ViewChange& c) {
  std::string out = refs_text(c.joined, '+');
  const std::string removed = refs_text(c.removed, '-');
  if (!removed.empty()) out += (out.empty() ? "" : ", ") + removed;
  if (c.omitted) out += (out.empty() ? "" : ", ") + std::to_string(c.omitted) + " more";
  return out.empty() ? "-" : out;
}

// The coordinator that answered: the one asked, or the leader a standby named.
std::string answered(const ClusterStatus& s, const std::string& endpoint) {
  return s.asked_standby.empty() ? endpoint : s.answered_by;
}

std::string header_text(const ClusterStatus& s, const std::string& endpoint) {
  std::size_t in_view = 0, suspects = 0, joiners = 0;
  for (const auto& m : s.members) {
    in_view += m.in_view;
    suspects += m.state == "suspect";
    joiners += is_joiner(m);
  }
  std::string out = "coordinator " + escape_log_text(answered(s, endpoint)) + "  instance " +
                    hex64(s.instance_id) + "  up " + fixed(s.uptime_ms / 1e3, 1) + " s\n";
  if (!s.asked_standby.empty()) {
    out += "(asked " + escape_log_text(s.asked_standby) +
           ", a standby coordinator: this is the leader it named)\n";
  }
  out += "epoch " + std::to_string(s.epoch) + "  " + s.phase + "  " + std::to_string(in_view) +
         " in view";
  if (suspects) out += ", " + std::to_string(suspects) + " suspect";
  if (joiners) out += ", " + std::to_string(joiners) + " waiting to join";
  out += " (world size " + std::to_string(s.world_size) + ")\n";
  out += "heartbeats every " + std::to_string(s.heartbeat_interval_ms) + " ms; suspect after " +
         std::to_string(s.suspect_after_ms) + " ms of silence, removed after " +
         std::to_string(s.heartbeat_timeout_ms) + " ms; stragglers: compute above " +
         fixed(s.straggler_k, 1) + " x median in " + std::to_string(s.straggler_m) + " of " +
         std::to_string(s.straggler_window) + " steps\n";
  return out;
}

std::string links_text(const ClusterStatus& s) {
  std::string out = "\nlinks (" +
                    std::string(s.links_scope == "all_peers" ? "every peer" : "ring neighbours") +
                    "; source view: inferred from the view, agent: reported):\n";
  bool any = false;
  for (const auto& m : s.members) {
    if (m.links.empty()) continue;
    any = true;
    // Appended piece by piece: GCC 12 warns (-Wrestrict, falsely) on " " + std::string&&.
    std::string line(2, ' ');
    line += std::to_string(m.id) + " " + label(m.name) + " ->";
    for (const auto& l : m.links) {
      line += ' ';
      line += std::to_string(l.peer) + " " + label(l.transport) + " " + label(l.address) + " (" +
              label(l.source);
      if (l.paths.size() > 1) {
        // The pair's path list, and how it moved in this view.
        line += "; paths ";
        for (const auto& p : l.paths) {
          line += label(p);
          if (&p != &l.paths.back()) line += '>';
        }
      }
      if (l.moves > 0) {
        line += "; ";
        line += std::to_string(l.moves) + (l.moves == 1 ? " move, last " : " moves, last ");
        line += label(l.last_move);
      }
      line += ')';
      if (&l != &m.links.back()) line += ',';
    }
    out += line + "\n";
  }
  return any ? out : out + "  (none)\n";
}

// --- JSON -------------------------------------------------------------------------------

std::string json_string(std::string_view s) {
  std::string out;
  append_json_string(out, s);
  return out;
}

std::string json_number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

// {"key":value,...} from pairs whose values are already JSON.
std::string json_object(const std::vector<std::pair<std::string, std::string>>& fields) {
  std::string out = "{";
  for (const auto& [key, value] : fields) {
    if (out.size() > 1) out += ",";
    out += json_string(key) + ":" + value;
  }
  return out + "}";
}

template <typename T, typename F>
std::string json_array(const std::vector<T>& items, F to_json) {
  std::string out = "[";
  for (const auto& item : items) {
    if (out.size() > 1) out += ",";
    out += to_json(item);
  }
  return out + "]";
}

std::string member_json(const MemberStatus& m) {
  const std::string links = json_array(m.links, [](const membership::LinkPath& l) {
    return json_object({{"peer", std::to_string(l.peer)},
                        {"transport", json_string(l.transport)},
                        {"address", json_string(l.address)},
                        {"source", json_string(l.source)},
                        {"paths", json_array(l.paths, [](const std::string& p) { return json_string(p); })},
                        {"moves", std::to_string(l.moves)},
                        {"last_move", json_string(l.last_move)}});
  });
  return json_object({{"id", std::to_string(m.id)},
                      {"name", json_string(m.name)},
                      {"host", json_string(m.host)},
                      {"zone", json_string(m.zone)},
                      {"data_address", json_string(m.data_address)},
                      {"state", json_string(m.state)},
                      {"in_view", m.in_view ? "true" : "false"},
                      {"rank", m.in_view ? std::to_string(m.rank) : "null"},
                      {"known_epoch", std::to_string(m.known_epoch)},
                      {"step", std::to_string(m.step)},
                      {"heartbeat_age_ms", std::to_string(m.heartbeat_age_ms)},
                      {"timed_steps", std::to_string(m.timed_steps)},
                      {"step_seconds", json_number(m.step_seconds)},
                      {"compute_seconds", json_number(m.compute_seconds)},
                      {"collective_seconds", json_number(m.collective_seconds)},
                      {"straggler_score", json_number(m.straggler_score)},
                      {"straggling_steps", std::to_string(m.straggling_steps)},
                      {"links", links}});
}

std::string refs_json(const std::vector<MemberRef>& refs) {
  return json_array(refs, [](const MemberRef& r) {
    return json_object({{"id", std::to_string(r.id)},
                        {"name", json_string(r.name)},
                        {"reason", json_string(r.reason)},
                        {"noticed_by", json_string(r.noticed_by)}});
  });
}

std::string change_json(const ViewChange& c) {
  return json_object({{"epoch", std::to_string(c.epoch)},
                      {"cause", json_string(c.cause)},
                      {"unix_ms", std::to_string(c.unix_ms)},
                      {"size", std::to_string(c.size)},
                      {"joined", refs_json(c.joined)},
                      {"removed", refs_json(c.removed)},
                      {"omitted", std::to_string(c.omitted)},
                      {"from_journal", c.from_journal ? "true" : "false"}});
}

}  // namespace

std::string format_status_table(const ClusterStatus& s, const std::string& endpoint) {
  std::string out = header_text(s, endpoint);
  Table members({"RANK", "ID", "NAME", "HOST", "ZONE", "STATE", "HEARTBEAT", "STEP", "STEP MS",
                 "COMPUTE MS", "COLLECTIVE MS", "STRAGGLER"});
  Table joiners({"ID", "NAME", "HOST", "ZONE", "STATE", "HEARTBEAT", "DATA"});
  std::size_t n_members = 0, n_joiners = 0;
  for (const auto& m : s.members) {
    if (is_joiner(m)) {
      joiners.add({std::to_string(m.id), label(m.name), label(m.host), label(m.zone), m.state,
                   std::to_string(m.heartbeat_age_ms) + " ms", label(m.data_address)});
      ++n_joiners;
    } else {
      members.add(member_row(m, s));
      ++n_members;
    }
  }
  out += "\nmembers:\n" + (n_members ? members.render("  ") : "  (none)\n");
  if (s.members_omitted)
    out += "  ... and " + std::to_string(s.members_omitted) + " more (not listed)\n";
  out += links_text(s);
  out += "\njoiners waiting:\n" + (n_joiners ? joiners.render("  ") : "  (none)\n");
  if (s.handshakes_open)
    out += "  " + std::to_string(s.handshakes_open) + " join handshakes in progress\n";
  Table history({"EPOCH", "WHEN (UTC)", "AGO", "CAUSE", "SIZE", "CHANGES"});
  for (const auto& c : s.history) {
    history.add({std::to_string(c.epoch) + (c.from_journal ? "*" : ""), clock_time(c.unix_ms),
                 fixed((s.unix_ms - c.unix_ms) / 1e3, 1) + " s", label(c.cause),
                 std::to_string(c.size), change_text(c)});
  }
  out += "\nrecent view changes (oldest first; * from the journal of an earlier process):\n" +
         (s.history.empty() ? "  (none)\n" : history.render("  "));
  return out;
}

std::string format_status_json(const ClusterStatus& s, const std::string& endpoint) {
  std::vector<MemberStatus> members, joiners;
  for (const auto& m : s.members) (is_joiner(m) ? joiners : members).push_back(m);
  return json_object(
             {{"coordinator", json_string(answered(s, endpoint))},
              {"asked_standby", s.asked_standby.empty() ? "null" : json_string(s.asked_standby)},
              {"instance_id", json_string(hex64(s.instance_id))},
              {"unix_ms", std::to_string(s.unix_ms)},
              {"uptime_ms", std::to_string(s.uptime_ms)},
              {"phase", json_string(s.phase)},
              {"epoch", std::to_string(s.epoch)},
              {"world_size", std::to_string(s.world_size)},
              {"heartbeat_interval_ms", std::to_string(s.heartbeat_interval_ms)},
              {"heartbeat_timeout_ms", std::to_string(s.heartbeat_timeout_ms)},
              {"suspect_after_ms", std::to_string(s.suspect_after_ms)},
              {"straggler", json_object({{"k", json_number(s.straggler_k)},
                                         {"m", std::to_string(s.straggler_m)},
                                         {"window", std::to_string(s.straggler_window)}})},
              {"members", json_array(members, member_json)},
              {"joiners", json_array(joiners, member_json)},
              {"members_omitted", std::to_string(s.members_omitted)},
              {"links_scope", json_string(s.links_scope)},
              {"handshakes_open", std::to_string(s.handshakes_open)},
              {"history", json_array(s.history, change_json)}}) +
         "\n";
}

}  // namespace tributary::cli
