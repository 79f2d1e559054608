#include "control/codec.h"

#include "control/status_codec.h"

#include <google/protobuf/stubs/logging.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstring>
#include <unordered_set>

namespace tributary::control {
namespace {

Status check_label(std::string_view field, const std::string& value, bool required) {
  if (required && value.empty())
    return error(StatusCode::kInvalidArgument, std::string(field) + " is empty");
  if (value.size() > kMaxLabelBytes) {
    return error(StatusCode::kInvalidArgument, std::string(field) + " is " +
                                                   std::to_string(value.size()) + " bytes, max " +
                                                   std::to_string(kMaxLabelBytes));
  }
  // Labels end up in log lines, metric labels and file names: no control characters.
  for (char ch : value) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7f)
      return error(StatusCode::kInvalidArgument, std::string(field) + " holds a control character");
  }
  return Status::ok();
}

Status check_capabilities(const google::protobuf::RepeatedPtrField<std::string>& caps) {
  if (static_cast<std::size_t>(caps.size()) > kMaxCapabilities) {
    return error(StatusCode::kInvalidArgument, "capabilities: " + std::to_string(caps.size()) +
                                                   " entries, max " +
                                                   std::to_string(kMaxCapabilities));
  }
  for (const auto& c : caps) TRIB_RETURN_IF_ERROR(check_label("capability", c, true));
  return Status::ok();
}

// "host:port" or "[v6]:port" with a port in 1..65535.
Status check_address(const std::string& address) {
  TRIB_RETURN_IF_ERROR(check_label("data_address", address, true));
  const auto colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) {
    return error(StatusCode::kInvalidArgument, "data_address '" + address + "' is not host:port");
  }
  unsigned port = 0;
  const char* first = address.data() + colon + 1;
  const char* last = address.data() + address.size();
  auto [ptr, ec] = std::from_chars(first, last, port);
  if (ec != std::errc{} || ptr != last || port == 0 || port > 65535) {
    return error(StatusCode::kInvalidArgument, "data_address '" + address + "' has no valid port");
  }
  return Status::ok();
}

template <std::size_t N>
Result<std::array<std::uint8_t, N>> fixed_bytes(std::string_view what, std::string_view bytes) {
  if (bytes.size() != N) {
    return error(StatusCode::kBadFrame, std::string(what) + " is " + std::to_string(bytes.size()) +
                                            " bytes, expected " + std::to_string(N));
  }
  std::array<std::uint8_t, N> out{};
  std::memcpy(out.data(), bytes.data(), N);
  return out;
}

void member_to_proto(const membership::ViewMember& m, Member* pm) {
  pm->set_id(m.id);
  pm->set_rank(m.rank);
  pm->set_data_address(m.data_address);
  pm->set_host(m.host);
  pm->set_zone(m.zone);
  for (const auto& c : m.capabilities) pm->add_capabilities(c);
}

// Labels and capabilities within bounds (kBadFrame); ids and ranks are the caller's.
Result<membership::ViewMember> member_from_proto(const Member& pm) {
  for (const auto* s : {&pm.data_address(), &pm.host(), &pm.zone()}) {
    if (Status st = check_label("view label", *s, false); !st)
      return error(StatusCode::kBadFrame, st.message());
  }
  if (Status st = check_capabilities(pm.capabilities()); !st)
    return error(StatusCode::kBadFrame, st.message());
  return membership::ViewMember{pm.id(),
                                pm.rank(),
                                pm.data_address(),
                                pm.host(),
                                pm.zone(),
                                {pm.capabilities().begin(), pm.capabilities().end()}};
}

bool valid_weight(double w) {
  return std::isfinite(w) && w > 0 && w <= membership::kMaxRoundWeight;  // NaN fails every test
}

template <typename Bad>
Status validate_round_ready(const RoundReady& r, const Bad& bad) {
  if (r.member_id() == 0) return bad("member_id is 0");
  if (r.epoch() == 0) return bad("epoch is 0");
  if (r.round() >= membership::kSeqLimit)
    return bad("round " + std::to_string(r.round()) + " is at or beyond 2^56");
  if (!valid_weight(r.weight()))
    return bad("weight " + std::to_string(r.weight()) + " is not finite, > 0 and <= 1e15");
  const auto max_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          membership::kMaxRoundDeadline)
                          .count();
  if (r.deadline_ms() == 0 || r.deadline_ms() > max_ms)
    return bad("deadline_ms " + std::to_string(r.deadline_ms()) + " is not in 1.." +
               std::to_string(max_ms));
  if (r.min_participants() == 0 || r.min_participants() > membership::kMaxMinParticipants)
    return bad("min_participants " + std::to_string(r.min_participants()) + " is not in 1.." +
               std::to_string(membership::kMaxMinParticipants));
  return Status::ok();
}

template <typename Bad>
Status validate_round_decision(const RoundDecision& d, const Bad& bad) {
  if (d.epoch() == 0) return bad("epoch is 0");
  if (d.round() >= membership::kSeqLimit)
    return bad("round " + std::to_string(d.round()) + " is at or beyond 2^56");
  if (d.reason().size() > kMaxDetailBytes)
    return bad("reason longer than " + std::to_string(kMaxDetailBytes) + " bytes");
  if (d.members() > kMaxViewMembers ||
      static_cast<std::size_t>(d.contributors_size()) > d.members())
    return bad(std::to_string(d.contributors_size()) + " contributors of " +
               std::to_string(d.members()) + " members: beyond the bounds");
  std::unordered_set<std::uint64_t> ids;
  for (const auto& c : d.contributors()) {
    if (c.member_id() == 0 || !ids.insert(c.member_id()).second)
      return bad("a zero or duplicate contributor id " + std::to_string(c.member_id()));
    if (!valid_weight(c.weight()))
      return bad("contributor " + std::to_string(c.member_id()) + " has weight " +
                 std::to_string(c.weight()) + ", not finite, > 0 and <= 1e15");
  }
  if (d.failed() && d.contributors_size() > 0) return bad("a failed round with contributors");
  return Status::ok();
}

// protobuf writes its own line to stderr for every string field that is not UTF-8 (and
// some other parse errors): unescaped, unlimited, and around our log facility. Every
// failed parse is reported by decode_envelope's status instead; fatal messages still
// abort as before.
void drop_protobuf_log(google::protobuf::LogLevel, const char*, int, const std::string&) {}

}  // namespace

Result<Envelope> decode_envelope(std::string_view bytes, std::size_t max_bytes) {
  [[maybe_unused]] static const bool quiet =
      (google::protobuf::SetLogHandler(&drop_protobuf_log), true);
  if (bytes.size() > max_bytes) {
    return error(StatusCode::kBadFrame, "message of " + std::to_string(bytes.size()) +
                                            " bytes exceeds " + std::to_string(max_bytes));
  }
  Envelope envelope;
  if (!envelope.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return error(StatusCode::kBadFrame,
                 std::to_string(bytes.size()) + " bytes do not parse as a control Envelope");
  }
  if (envelope.body_case() == Envelope::BODY_NOT_SET) {
    return error(StatusCode::kBadFrame, "envelope carries no message this version knows");
  }
  TRIB_RETURN_IF_ERROR(validate_body(envelope));
  return envelope;
}

Status validate_body(const Envelope& env) {
  using E = Envelope;
  auto bad = [&](const std::string& what) {
    return error(StatusCode::kBadFrame, std::string(body_name(env.body_case())) + ": " + what);
  };
  switch (env.body_case()) {
    case E::kFailureReport:
      if (env.failure_report().epoch() == 0) return bad("epoch is 0");
      if (env.failure_report().detail().size() > kMaxDetailBytes)
        return bad("detail longer than " + std::to_string(kMaxDetailBytes) + " bytes");
      return Status::ok();
    case E::kStepTiming: {
      const double s = env.step_timing().compute_seconds();
      // NaN fails every comparison: !(s >= 0) catches it.
      if (!(s >= 0.0) || s > kMaxComputeSeconds)
        return bad("compute_seconds " + std::to_string(s) + " is not in [0, 1e6]");
      return Status::ok();
    }
    case E::kResumeRequest:
      if (env.resume_request().member_id() == 0) return bad("member_id is 0");
      if (!env.resume_request().has_join()) return bad("no join labels");
      return Status::ok();
    case E::kReady: {
      const auto& r = env.ready();
      if (r.epoch() == 0) return bad("epoch is 0");
      if (r.previous_epoch() >= r.epoch())
        return bad("previous_epoch " + std::to_string(r.previous_epoch()) + " is not below epoch " +
                   std::to_string(r.epoch()));
      if (r.committed_seq() >= membership::kSeqLimit || r.held_seq() >= membership::kSeqLimit)
        return bad("a seq at or beyond 2^56 (committed " + std::to_string(r.committed_seq()) +
                   ", held " + std::to_string(r.held_seq()) + ")");
      return Status::ok();
    }
    case E::kGo: {
      const auto& g = env.go();
      if (g.epoch() == 0) return bad("epoch is 0");
      if (g.commit_through() >= membership::kSeqLimit)
        return bad("commit_through " + std::to_string(g.commit_through()) +
                   " is at or beyond 2^56");
      if (static_cast<std::size_t>(g.joiners_size()) > kMaxViewMembers)
        return bad(std::to_string(g.joiners_size()) + " joiners");
      for (auto j : g.joiners()) {
        if (j == 0) return bad("joiner id 0");
      }
      return Status::ok();
    }
    case E::kBoundaryRequest:
      if (env.boundary_request().epoch() == 0) return bad("epoch is 0");
      return Status::ok();
    case E::kHeartbeat: {
      if (!env.heartbeat().has_links()) return Status::ok();
      const auto& links = env.heartbeat().links().links();
      // A member reports its links as `tributary status` shows them: every peer up to
      // kMaxFullLinkMembers, its ring neighbours beyond.
      if (static_cast<std::size_t>(links.size()) >= membership::kMaxFullLinkMembers)
        return bad(std::to_string(links.size()) + " links");
      for (const auto& l : links) {
        if (Result<membership::LinkPath> ok = link_from_proto(l); !ok) return bad(ok.status().message());
      }
      return Status::ok();
    }
    case E::kEvicted:
    case E::kJoinRejected:
    case E::kStatusDenied: {
      const std::string& reason = env.body_case() == E::kEvicted ? env.evicted().reason()
                                  : env.body_case() == E::kStatusDenied
                                      ? env.status_denied().reason()
                                      : env.join_rejected().reason();
      if (reason.size() > kMaxDetailBytes)
        return bad("reason longer than " + std::to_string(kMaxDetailBytes) + " bytes");
      return Status::ok();
    }
    case E::kViewDelta: {
      const auto& d = env.view_delta();
      if (d.base_epoch() == 0 || d.epoch() <= d.base_epoch())
        return bad("epoch " + std::to_string(d.epoch()) + " is not above base_epoch " +
                   std::to_string(d.base_epoch()) + " > 0");
      if (static_cast<std::size_t>(d.removed_size()) > kMaxViewMembers ||
          static_cast<std::size_t>(d.added_size()) > kMaxViewMembers ||
          d.size() > kMaxViewMembers)
        return bad("more than " + std::to_string(kMaxViewMembers) + " members");
      return Status::ok();
    }
    case E::kRoundReady: return validate_round_ready(env.round_ready(), bad);
    case E::kRoundDecision: return validate_round_decision(env.round_decision(), bad);
    case E::kRoundDone:
      if (env.round_done().epoch() == 0) return bad("epoch is 0");
      if (env.round_done().round() >= membership::kSeqLimit) return bad("round at or beyond 2^56");
      return Status::ok();
    case E::kRoundCommit:
      if (env.round_commit().epoch() == 0) return bad("epoch is 0");
      if (env.round_commit().round() >= membership::kSeqLimit)
        return bad("round at or beyond 2^56");
      return Status::ok();
    case E::kNotLeader:
      if (env.not_leader().leader().size() > kMaxLabelBytes)
        return bad("leader longer than " + std::to_string(kMaxLabelBytes) + " bytes");
      return Status::ok();
    default: return Status::ok();
  }
}

std::string encode_envelope(const Envelope& envelope) { return envelope.SerializeAsString(); }

std::string_view body_name(Envelope::BodyCase body) {
  using E = Envelope;
  switch (body) {
    case E::kJoinRequest: return "join_request";
    case E::kChallenge: return "challenge";
    case E::kJoinProof: return "join_proof";
    case E::kJoinAccepted: return "join_accepted";
    case E::kJoinRejected: return "join_rejected";
    case E::kHeartbeat: return "heartbeat";
    case E::kHeartbeatAck: return "heartbeat_ack";
    case E::kView: return "view";
    case E::kLeave: return "leave";
    case E::kLeaveAck: return "leave_ack";
    case E::kEvicted: return "evicted";
    case E::kFailureReport: return "failure_report";
    case E::kStepTiming: return "step_timing";
    case E::kResumeRequest: return "resume_request";
    case E::kReady: return "ready";
    case E::kGo: return "go";
    case E::kBoundaryRequest: return "boundary_request";
    case E::kStatusRequest: return "status_request";
    case E::kStatusProof: return "status_proof";
    case E::kStatusReply: return "status_reply";
    case E::kStatusDenied: return "status_denied";
    case E::kNotLeader: return "not_leader";
    case E::kProbe: return "probe";
    case E::kViewDelta: return "view_delta";
    case E::kRoundReady: return "round_ready";
    case E::kRoundDecision: return "round_decision";
    case E::kRoundDone: return "round_done";
    case E::kRoundCommit: return "round_commit";
    case E::BODY_NOT_SET: break;
  }
  return "unknown";
}

void view_to_proto(const membership::View& view, View* out) {
  out->set_epoch(view.epoch);
  out->clear_members();
  for (const auto& m : view.members) member_to_proto(m, out->add_members());
  out->clear_ring();
  for (auto r : view.ring) out->add_ring(r);
  out->set_leaves_only(view.leaves_only);
}

Result<membership::View> view_from_proto(const View& pv) {
  const auto n = static_cast<std::size_t>(pv.members_size());
  if (n > kMaxViewMembers)
    return error(StatusCode::kBadFrame, "view has " + std::to_string(n) + " members");
  if (static_cast<std::size_t>(pv.ring_size()) != n) {
    return error(StatusCode::kBadFrame, "view ring lists " + std::to_string(pv.ring_size()) +
                                            " ranks for " + std::to_string(n) + " members");
  }
  membership::View view;
  view.epoch = pv.epoch();
  view.leaves_only = pv.leaves_only();
  view.members.reserve(n);
  std::unordered_set<membership::MemberId> ids;
  for (std::size_t i = 0; i < n; ++i) {
    const Member& pm = pv.members(static_cast<int>(i));
    if (pm.rank() != i) {
      return error(StatusCode::kBadFrame,
                   "view member " + std::to_string(i) + " has rank " + std::to_string(pm.rank()));
    }
    if (pm.id() == 0 || !ids.insert(pm.id()).second) {
      return error(StatusCode::kBadFrame,
                   "view has a zero or duplicate member id " + std::to_string(pm.id()));
    }
    TRIB_ASSIGN_OR_RETURN(auto member, member_from_proto(pm));
    view.members.push_back(std::move(member));
  }
  std::vector<bool> seen(n, false);
  for (auto r : pv.ring()) {
    if (r >= n || seen[r])
      return error(StatusCode::kBadFrame, "view ring is not a permutation of the ranks");
    seen[r] = true;
    view.ring.push_back(r);
  }
  // Agents take ring neighbours by rank (view.h): a ring in another order would be run in
  // rank order without anyone noticing, so it is refused here instead.
  for (std::size_t i = 0; i < view.ring.size(); ++i) {
    if (view.ring[i] != i)
      return error(StatusCode::kBadFrame,
                   "view ring order differs from rank order at position " + std::to_string(i));
  }
  return view;
}

void view_delta_to_proto(const membership::ViewDelta& d, ViewDelta* out) {
  out->set_epoch(d.epoch);
  out->set_base_epoch(d.base_epoch);
  out->clear_removed();
  for (auto id : d.removed) out->add_removed(id);
  out->clear_added();
  for (const auto& m : d.added) member_to_proto(m, out->add_added());
  out->set_size(d.size);
  out->set_digest(d.digest);
  out->set_leaves_only(d.leaves_only);
}

Result<membership::ViewDelta> view_delta_from_proto(const ViewDelta& pd) {
  auto bad = [](const std::string& what) {
    return error(StatusCode::kBadFrame, "view delta: " + what);
  };
  if (pd.base_epoch() == 0 || pd.epoch() <= pd.base_epoch())
    return bad("epoch " + std::to_string(pd.epoch()) + " is not above base_epoch " +
               std::to_string(pd.base_epoch()) + " > 0");
  const auto removed = static_cast<std::size_t>(pd.removed_size());
  const auto added = static_cast<std::size_t>(pd.added_size());
  if (removed > kMaxViewMembers || added > kMaxViewMembers || pd.size() > kMaxViewMembers ||
      added > pd.size())
    return bad(std::to_string(removed) + " removed, " + std::to_string(added) + " added, size " +
               std::to_string(pd.size()) + ": beyond the bounds");
  membership::ViewDelta d;
  d.epoch = pd.epoch();
  d.base_epoch = pd.base_epoch();
  d.size = pd.size();
  d.digest = pd.digest();
  d.leaves_only = pd.leaves_only();
  d.removed.reserve(removed);
  for (auto id : pd.removed()) {
    if (id == 0) return bad("removed id 0");
    d.removed.push_back(id);
  }
  d.added.reserve(added);
  std::unordered_set<membership::MemberId> ids;
  for (const Member& pm : pd.added()) {
    if (pm.id() == 0 || !ids.insert(pm.id()).second)
      return bad("a zero or duplicate added id " + std::to_string(pm.id()));
    if (pm.rank() >= pd.size() || (!d.added.empty() && pm.rank() <= d.added.back().rank))
      return bad("added ranks are not increasing below size " + std::to_string(pd.size()));
    TRIB_ASSIGN_OR_RETURN(auto member, member_from_proto(pm));
    d.added.push_back(std::move(member));
  }
  return d;
}

membership::RoundReady round_ready_from_proto(const RoundReady& r) {
  membership::RoundReady out;
  out.member = r.member_id();
  out.epoch = r.epoch();
  out.round = r.round();
  out.weight = r.weight();
  out.deadline = std::chrono::milliseconds(r.deadline_ms());
  out.min_participants = r.min_participants();
  return out;
}

void round_decision_to_proto(const membership::RoundDecision& d, RoundDecision* out) {
  out->set_epoch(d.epoch);
  out->set_round(d.round);
  out->set_failed(d.failed);
  out->set_committed(d.committed);
  out->set_reason(d.reason.substr(0, kMaxDetailBytes));
  out->clear_contributors();
  for (const auto& c : d.contributors) {
    auto* pc = out->add_contributors();
    pc->set_member_id(c.id);
    pc->set_weight(c.weight);
  }
  out->set_members(d.members);
  out->set_min_participants(d.min_participants);
}

membership::RoundDecision round_decision_from_proto(const RoundDecision& d) {
  membership::RoundDecision out;
  out.epoch = d.epoch();
  out.round = d.round();
  out.failed = d.failed();
  out.committed = d.committed();
  out.reason = d.reason();
  for (const auto& c : d.contributors()) out.contributors.push_back({c.member_id(), c.weight()});
  out.members = d.members();
  out.min_participants = d.min_participants();
  return out;
}

Status validate_join_request(const JoinRequest& r) {
  if (r.protocol_version() != kProtocolVersion) {
    return error(StatusCode::kInvalidArgument,
                 "protocol version " + std::to_string(r.protocol_version()) +
                     ", coordinator speaks " + std::to_string(kProtocolVersion));
  }
  TRIB_RETURN_IF_ERROR(check_label("name", r.name(), true));
  TRIB_RETURN_IF_ERROR(check_label("host", r.host(), true));
  TRIB_RETURN_IF_ERROR(check_label("zone", r.zone(), false));
  TRIB_RETURN_IF_ERROR(check_label("process_name", r.process_name(), false));
  TRIB_RETURN_IF_ERROR(check_address(r.data_address()));
  return check_capabilities(r.capabilities());
}

membership::MemberLabels labels_from_request(const JoinRequest& r) {
  return {r.name(),
          r.host(),
          r.zone(),
          r.data_address(),
          {r.capabilities().begin(), r.capabilities().end()}};
}

Result<Nonce> nonce_from_bytes(std::string_view bytes) {
  return fixed_bytes<sizeof(Nonce)>("nonce", bytes);
}
Result<Mac> mac_from_bytes(std::string_view bytes) {
  return fixed_bytes<sizeof(Mac)>("mac", bytes);
}

}  // namespace tributary::control
