// Scripted interaction tests of the epoch machine (agent/runtime/epoch_machine.h), in the
// style of etcd raft's interaction tests: each file under scripts/ is a sequence of
// commands (events into one machine, with a hand-driven clock), each followed by the
// actions the machine must answer with. The scripts are the documentation of the agent's
// side of the protocol: read them next to docs/fault-tolerance.md.
//
// Format: a command line, a line "----", then the expected actions, one per line, up to a
// blank line. '#' starts a comment line. TRIBUTARY_REWRITE=1 rewrites the expected blocks
// with what the machine answers (then read the diff: that review is the test).
//
// Commands (times are milliseconds since the script's start, written +N):
//   config self=ID [min_world=N] [agreement=on|off] [speculative_max=BYTES]
//          [recovery_ms=N] [connect_ms=N] [nudge_ms=N]
//   advance MS
//   call bytes=N [result=N] [retry=off]      move deadline_ms=N
//   view epoch=E members=ID,ID,...          view_error CODE     view_timeout
//   go through=N [joiners=ID,..] [source=ID] go_error CODE
//   connected                               connect_error CODE
//   fitted [CODE]
//   repair_voted holder=RANK|none lack=0|-1 size=N
//   repair_received seq=S epoch=E contributors=ID,.. bytes=N
//   repair_error CODE
//   data ok|CODE [heard=off]                 agree ok|CODE
//   saw_epoch E    links_lost    evicted    aborted    state
// CODE: peer_lost timed_out aborted stale_epoch bad_frame mismatch unavailable evicted internal
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "agent/runtime/epoch_machine.h"

namespace tributary::agent::runtime {
namespace {

namespace fs = std::filesystem;

StatusCode parse_code(const std::string& name) {
  static const std::map<std::string, StatusCode> codes = {
      {"peer_lost", StatusCode::kPeerLost},      {"timed_out", StatusCode::kTimedOut},
      {"aborted", StatusCode::kAborted},         {"stale_epoch", StatusCode::kStaleEpoch},
      {"bad_frame", StatusCode::kBadFrame},      {"mismatch", StatusCode::kMismatch},
      {"unavailable", StatusCode::kUnavailable}, {"evicted", StatusCode::kEvicted},
      {"internal", StatusCode::kInternal}};
  auto it = codes.find(name);
  if (it == codes.end()) throw std::runtime_error("unknown status code '" + name + "'");
  return it->second;
}

Status status_of(const std::string& word) {
  if (word == "ok") return Status::ok();
  return error(parse_code(word), "injected " + word);
}

std::vector<MemberId> parse_ids(const std::string& list) {
  std::vector<MemberId> ids;
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) ids.push_back(std::stoull(item));
  }
  return ids;
}

// A command: its name, its positional words and its key=value arguments.
struct Command {
  std::string name;
  std::vector<std::string> words;
  std::map<std::string, std::string> args;

  std::string arg(const std::string& key, const std::string& fallback = "") const {
    auto it = args.find(key);
    return it == args.end() ? fallback : it->second;
  }
  std::uint64_t num(const std::string& key, std::uint64_t fallback = 0) const {
    auto it = args.find(key);
    return it == args.end() ? fallback : std::stoull(it->second);
  }
};

Command parse_command(const std::string& line) {
  Command c;
  std::stringstream in(line);
  in >> c.name;
  std::string w;
  while (in >> w) {
    auto eq = w.find('=');
    if (eq == std::string::npos) {
      c.words.push_back(w);
    } else {
      c.args[w.substr(0, eq)] = w.substr(eq + 1);
    }
  }
  return c;
}

class ScriptRunner {
 public:
  ScriptRunner() : machine_(MachineConfig{}) {}

  std::vector<std::string> run(const Command& c) {
    Actions out;
    const TimePoint now = origin_ + elapsed_;
    if (c.name == "config") {
      MachineConfig cfg;
      cfg.self = c.num("self", 1);
      cfg.min_world_size = static_cast<int>(c.num("min_world", 1));
      cfg.agreement = c.arg("agreement", "on") == "on";
      cfg.speculative_max_bytes = c.num("speculative_max", 0);
      cfg.recovery_timeout = std::chrono::milliseconds(c.num("recovery_ms", 60000));
      cfg.connect_timeout = std::chrono::milliseconds(c.num("connect_ms", 30000));
      cfg.view_nudge = std::chrono::milliseconds(c.num("nudge_ms", 1000));
      machine_ = EpochMachine(cfg);
      elapsed_ = Duration{0};  // each configuration starts its own clock at +0ms
      return {};
    }
    if (c.name == "advance") {
      elapsed_ += std::chrono::milliseconds(std::stoull(c.words.at(0)));
      return {};
    }
    if (c.name == "call") {
      CallSpec spec;
      spec.bytes = c.num("bytes");
      spec.result_bytes = c.num("result");
      spec.retry = c.arg("retry", "on") == "on";
      result_.assign(spec.result_bytes, std::byte{0x5a});
      out = machine_.call(spec, now);
    } else if (c.name == "move") {
      out = machine_.move(now, now + std::chrono::milliseconds(c.num("deadline_ms", 60000)));
    } else if (c.name == "view") {
      membership::View v;
      v.epoch = c.num("epoch");
      const auto ids = parse_ids(c.arg("members"));
      for (std::size_t r = 0; r < ids.size(); ++r) {
        v.members.push_back({ids[r], static_cast<std::uint32_t>(r), "", "", "", {}});
        v.ring.push_back(static_cast<std::uint32_t>(r));
      }
      out = machine_.view_arrived(v, now);
    } else if (c.name == "view_error") {
      out = machine_.view_wait_failed(status_of(c.words.at(0)), now);
    } else if (c.name == "view_timeout") {
      out = machine_.view_wait_failed(error(StatusCode::kTimedOut, "no view"), now);
    } else if (c.name == "go") {
      GoInfo go{c.num("through"), parse_ids(c.arg("joiners")), c.num("source")};
      out = machine_.go_arrived(go, now);
    } else if (c.name == "go_error") {
      out = machine_.go_failed(status_of(c.words.at(0)), now);
    } else if (c.name == "connected") {
      out = machine_.connected(now);
    } else if (c.name == "connect_error") {
      out = machine_.connect_failed(status_of(c.words.at(0)), now);
    } else if (c.name == "fitted") {
      out = machine_.links_fitted(status_of(c.words.empty() ? "ok" : c.words[0]), now);
    } else if (c.name == "repair_voted") {
      const std::string holder = c.arg("holder");
      const std::int64_t h =
          holder == "none" ? std::numeric_limits<std::int64_t>::max() : std::stoll(holder);
      out = machine_.repair_voted(
          {h, std::stoll(c.arg("lack", "0")), -static_cast<std::int64_t>(c.num("size"))}, now);
    } else if (c.name == "repair_received") {
      ResultCopy copy;
      copy.keep(c.num("seq"), c.num("epoch"), parse_ids(c.arg("contributors")),
                std::vector<std::byte>(c.num("bytes"), std::byte{0x33}));
      out = machine_.repair_received(encode_result_copy(copy), now);
    } else if (c.name == "repair_error") {
      out = machine_.repair_failed(status_of(c.words.at(0)), now);
    } else if (c.name == "data") {
      out = machine_.data_phase_done(status_of(c.words.at(0)), c.arg("heard", "on") == "on",
                                     result_, now);
    } else if (c.name == "agree") {
      out = machine_.agreement_done(status_of(c.words.at(0)), now);
    } else if (c.name == "saw_epoch") {
      machine_.saw_epoch(std::stoull(c.words.at(0)));
      return {};
    } else if (c.name == "links_lost") {
      machine_.links_lost();
      return {};
    } else if (c.name == "evicted") {
      machine_.evicted(error(StatusCode::kEvicted, "the coordinator removed this member"));
      return {};
    } else if (c.name == "aborted") {
      machine_.aborted(error(StatusCode::kAborted, "aborted: by the test"));
      return {};
    } else if (c.name == "state") {
      const ResultCopy& copy = machine_.result_copy();
      std::string s = "epoch=" + std::to_string(machine_.view().epoch) +
                      " rank=" + std::to_string(machine_.rank()) +
                      " next_seq=" + std::to_string(machine_.next_seq()) +
                      " commit_through=" + std::to_string(machine_.commit_through()) +
                      " links=" + (machine_.links_up() ? "up" : "down") +
                      " copy=" + (copy.held ? "seq" + std::to_string(copy.seq) : "none") +
                      (machine_.needs_state() ? " needs_state" : "");
      return {s};
    } else {
      throw std::runtime_error("unknown command '" + c.name + "'");
    }
    std::vector<std::string> lines;
    for (const Action& a : out) lines.push_back(describe(a, origin_));
    return lines;
  }

 private:
  EpochMachine machine_;
  TimePoint origin_{std::chrono::hours(1)};
  Duration elapsed_{0};
  std::vector<std::byte> result_;
};

// Runs one script; returns the script with the machine's answers (for rewrite) and
// records a failure per block that differs.
std::string run_script(const fs::path& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  ScriptRunner runner;
  std::string rewritten;
  std::size_t i = 0;
  while (i < lines.size()) {
    const std::string& line = lines[i];
    if (line.empty() || line[0] == '#') {
      rewritten += line + "\n";
      ++i;
      continue;
    }
    const std::size_t command_line = i + 1;
    rewritten += line + "\n";
    ++i;
    if (i >= lines.size() || lines[i] != "----") {
      ADD_FAILURE() << path.filename() << ":" << command_line << ": '----' expected after '" << line
                    << "'";
      return rewritten;
    }
    ++i;
    std::vector<std::string> expected;
    while (i < lines.size() && !lines[i].empty()) expected.push_back(lines[i++]);
    std::vector<std::string> got;
    try {
      got = runner.run(parse_command(line));
    } catch (const std::exception& e) {
      got = {std::string("error: ") + e.what()};
    }
    rewritten += "----\n";
    for (const auto& g : got) rewritten += g + "\n";
    if (got != expected) {
      std::string want, have;
      for (const auto& e : expected) want += "  " + e + "\n";
      for (const auto& g : got) have += "  " + g + "\n";
      ADD_FAILURE() << path.filename() << ":" << command_line << ": " << line << "\nexpected:\n"
                    << want << "got:\n"
                    << have;
    }
  }
  return rewritten;
}

TEST(EpochMachineScripts, EveryScriptAnswersAsWritten) {
  const fs::path dir = fs::path(TRIBUTARY_SOURCE_DIR) / "tests/agent/runtime/scripts";
  std::vector<fs::path> scripts;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".txt") scripts.push_back(e.path());
  }
  std::sort(scripts.begin(), scripts.end());
  const char* rewrite = std::getenv("TRIBUTARY_REWRITE");
  for (const auto& s : scripts) {
    SCOPED_TRACE(s.filename().string());
    const std::string out = run_script(s);
    if (rewrite != nullptr && std::string(rewrite) == "1") std::ofstream(s) << out;
  }
  EXPECT_GE(scripts.size(), 5u) << "scripts missing under " << dir;
}

}  // namespace
}  // namespace tributary::agent::runtime
