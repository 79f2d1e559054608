#include "control/status_codec.h"

#include <cmath>
#include <vector>

#include "control/codec.h"

namespace tributary::control {
namespace {

Mac domain_mac(std::string_view secret, std::string_view domain, const Nonce& server_nonce,
               const Nonce& client_nonce, std::string_view tail) {
  std::vector<std::uint8_t> msg(domain.begin(), domain.end());
  msg.insert(msg.end(), server_nonce.begin(), server_nonce.end());
  msg.insert(msg.end(), client_nonce.begin(), client_nonce.end());
  msg.insert(msg.end(), tail.begin(), tail.end());
  return hmac_sha256(secret, msg);
}

// Collects the first bound a report breaks; later checks are skipped.
class Checker {
 public:
  void label(std::string_view field, const std::string& value) {
    if (value.size() > kMaxLabelBytes)
      fail(std::string(field) + " is " + std::to_string(value.size()) + " bytes");
  }
  void seconds(std::string_view field, double value) {
    if (!std::isfinite(value) || value < 0) fail(std::string(field) + " is not a duration");
  }
  void count(std::string_view field, int size, std::size_t max) {
    if (static_cast<std::size_t>(size) > max)
      fail(std::string(field) + ": " + std::to_string(size) + " entries, max " +
           std::to_string(max));
  }
  void fail(const std::string& why) {
    if (status_.is_ok()) status_ = error(StatusCode::kBadFrame, "status report: " + why);
  }
  const Status& status() const { return status_; }

 private:
  Status status_ = Status::ok();
};

void member_to_proto(const membership::MemberStatus& m, MemberStatus* p) {
  p->set_id(m.id);
  p->set_name(m.name);
  p->set_host(m.host);
  p->set_zone(m.zone);
  p->set_data_address(m.data_address);
  p->set_state(m.state);
  p->set_in_view(m.in_view);
  p->set_rank(m.rank);
  p->set_known_epoch(m.known_epoch);
  p->set_step(m.step);
  p->set_heartbeat_age_ms(m.heartbeat_age_ms);
  p->set_timed_steps(m.timed_steps);
  p->set_step_seconds(m.step_seconds);
  p->set_compute_seconds(m.compute_seconds);
  p->set_collective_seconds(m.collective_seconds);
  p->set_straggler_score(m.straggler_score);
  p->set_straggling_steps(m.straggling_steps);
  for (const auto& l : m.links) link_to_proto(l, p->add_links());
}

membership::MemberStatus member_from_proto(const MemberStatus& p, Checker& check) {
  for (const auto* s : {&p.name(), &p.host(), &p.zone(), &p.data_address(), &p.state()})
    check.label("member label", *s);
  check.seconds("step_seconds", p.step_seconds());
  check.seconds("compute_seconds", p.compute_seconds());
  check.seconds("collective_seconds", p.collective_seconds());
  check.seconds("straggler_score", p.straggler_score());
  check.count("links of member " + std::to_string(p.id()), p.links_size(),
              membership::kMaxFullLinkMembers - 1);
  membership::MemberStatus m{p.id(),
                             p.name(),
                             p.host(),
                             p.zone(),
                             p.data_address(),
                             p.state(),
                             p.in_view(),
                             p.rank(),
                             p.known_epoch(),
                             p.step(),
                             p.heartbeat_age_ms(),
                             p.timed_steps(),
                             p.step_seconds(),
                             p.compute_seconds(),
                             p.collective_seconds(),
                             p.straggler_score(),
                             p.straggling_steps(),
                             {}};
  for (const auto& l : p.links()) {
    Result<membership::LinkPath> link = link_from_proto(l);
    if (!link) {
      check.fail(link.status().message());
      break;
    }
    m.links.push_back(std::move(*link));
  }
  return m;
}

}  // namespace

void link_to_proto(const membership::LinkPath& l, LinkPath* out) {
  out->set_peer(l.peer);
  out->set_transport(l.transport);
  out->set_address(l.address);
  out->set_source(l.source);
  for (const std::string& p : l.paths) out->add_paths(p);
  out->set_moves(l.moves);
  out->set_last_move(l.last_move);
}

Result<membership::LinkPath> link_from_proto(const LinkPath& l) {
  Checker check;
  for (const auto* s : {&l.transport(), &l.address(), &l.source(), &l.last_move()}) {
    check.label("link", *s);
  }
  check.count("paths of a link", l.paths_size(), membership::kMaxLinkPaths);
  for (const std::string& p : l.paths()) {
    if (p.size() > membership::kMaxPathNameBytes)
      check.fail("link path is " + std::to_string(p.size()) + " bytes");
  }
  if (l.last_move().size() > membership::kMaxLastMoveBytes)
    check.fail("last move is " + std::to_string(l.last_move().size()) + " bytes");
  if (!check.status().is_ok()) return check.status();
  return membership::LinkPath{l.peer(),     l.transport(),
                              l.address(),  l.source(),
                              {l.paths().begin(), l.paths().end()},
                              l.moves(),    l.last_move()};
}

namespace {

void refs_to_proto(const std::vector<membership::MemberRef>& refs,
                   google::protobuf::RepeatedPtrField<MemberRef>* out) {
  for (const auto& r : refs) {
    auto* p = out->Add();
    p->set_id(r.id);
    p->set_name(r.name);
    p->set_reason(r.reason);
    if (!r.noticed_by.empty()) p->set_noticed_by(r.noticed_by);
  }
}

std::vector<membership::MemberRef> refs_from_proto(
    const google::protobuf::RepeatedPtrField<MemberRef>& refs, Checker& check) {
  check.count("view change members", refs.size(), membership::kMaxChangeMembers);
  std::vector<membership::MemberRef> out;
  for (const auto& r : refs) {
    check.label("member name", r.name());
    check.label("removal reason", r.reason());
    check.label("member name", r.noticed_by());
    out.push_back({r.id(), r.name(), r.reason(), r.noticed_by()});
  }
  return out;
}

}  // namespace

Mac status_request_mac(std::string_view secret, const Nonce& server_nonce,
                       const Nonce& client_nonce) {
  return domain_mac(secret, "tributary/status-request/v1", server_nonce, client_nonce, {});
}

Mac status_reply_mac(std::string_view secret, const Nonce& server_nonce, const Nonce& client_nonce,
                     std::string_view report_bytes) {
  return domain_mac(secret, "tributary/status-reply/v1", server_nonce, client_nonce, report_bytes);
}

void status_to_proto(const membership::ClusterStatus& s, StatusReport* out) {
  out->set_instance_id(s.instance_id);
  out->set_unix_ms(s.unix_ms);
  out->set_uptime_ms(s.uptime_ms);
  out->set_phase(s.phase);
  out->set_epoch(s.epoch);
  out->set_world_size(s.world_size);
  out->set_heartbeat_interval_ms(s.heartbeat_interval_ms);
  out->set_heartbeat_timeout_ms(s.heartbeat_timeout_ms);
  out->set_suspect_after_ms(s.suspect_after_ms);
  out->set_straggler_k(s.straggler_k);
  out->set_straggler_m(s.straggler_m);
  out->set_straggler_window(s.straggler_window);
  for (const auto& m : s.members) member_to_proto(m, out->add_members());
  out->set_members_omitted(s.members_omitted);
  out->set_links_scope(s.links_scope);
  out->set_handshakes_open(s.handshakes_open);
  for (const auto& c : s.history) {
    auto* pc = out->add_history();
    pc->set_epoch(c.epoch);
    pc->set_cause(c.cause);
    pc->set_unix_ms(c.unix_ms);
    pc->set_size(c.size);
    refs_to_proto(c.joined, pc->mutable_joined());
    refs_to_proto(c.removed, pc->mutable_removed());
    pc->set_omitted(c.omitted);
    pc->set_from_journal(c.from_journal);
  }
}

Result<membership::ClusterStatus> status_from_proto(const StatusReport& p) {
  Checker check;
  check.count("members", p.members_size(), membership::kMaxStatusMembers);
  check.count("history", p.history_size(), membership::kMaxStatusHistory);
  check.label("phase", p.phase());
  check.label("links_scope", p.links_scope());
  check.seconds("straggler_k", p.straggler_k());
  std::size_t links = 0;
  for (const auto& m : p.members()) links += static_cast<std::size_t>(m.links_size());
  check.count("links", static_cast<int>(links), membership::kMaxStatusLinks);
  TRIB_RETURN_IF_ERROR(check.status());  // before walking lists that may be huge
  membership::ClusterStatus s;
  s.instance_id = p.instance_id();
  s.unix_ms = p.unix_ms();
  s.uptime_ms = p.uptime_ms();
  s.phase = p.phase();
  s.epoch = p.epoch();
  s.world_size = p.world_size();
  s.heartbeat_interval_ms = p.heartbeat_interval_ms();
  s.heartbeat_timeout_ms = p.heartbeat_timeout_ms();
  s.suspect_after_ms = p.suspect_after_ms();
  s.straggler_k = p.straggler_k();
  s.straggler_m = p.straggler_m();
  s.straggler_window = p.straggler_window();
  for (const auto& m : p.members()) s.members.push_back(member_from_proto(m, check));
  s.members_omitted = p.members_omitted();
  s.links_scope = p.links_scope();
  s.handshakes_open = p.handshakes_open();
  for (const auto& c : p.history()) {
    check.label("cause", c.cause());
    s.history.push_back({c.epoch(), c.cause(), c.unix_ms(), c.size(),
                         refs_from_proto(c.joined(), check), refs_from_proto(c.removed(), check),
                         c.omitted(), c.from_journal()});
  }
  TRIB_RETURN_IF_ERROR(check.status());
  return s;
}

}  // namespace tributary::control
