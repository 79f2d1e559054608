// Decoding and encoding of control Envelopes, with the bounds every decoder must check.
//
// This header includes the generated protobuf header; include it only from .cc files of
// the control plane (control/, control_client/, coordinator/), never from a header agent
// code sees. The generated messages share this namespace (proto package tributary.control):
// View is the wire form of membership::View.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "control/control.pb.h"
#include "core/auth.h"
#include "core/status.h"
#include "membership/federated_rounds.h"
#include "membership/membership.h"
#include "membership/view.h"
#include "membership/view_delta.h"

namespace tributary::control {

inline constexpr std::uint32_t kProtocolVersion = 1;
inline constexpr std::size_t kMaxControlMessageBytes = 1 << 20;  // a 4096-member view fits
inline constexpr std::size_t kMaxLabelBytes = 256;
inline constexpr std::size_t kMaxCapabilities = 32;
inline constexpr std::size_t kMaxViewMembers = 65536;
inline constexpr std::size_t kMaxDetailBytes = 1024;  // FailureReport.detail, reasons
inline constexpr double kMaxComputeSeconds = 1e6;     // StepTiming.compute_seconds

// kBadFrame when `bytes` is larger than max_bytes, does not parse, carries no body this
// version knows (an unknown oneof case parses into an unset body), or a body breaks its
// bounds (see validate_body).
Result<Envelope> decode_envelope(std::string_view bytes,
                                 std::size_t max_bytes = kMaxControlMessageBytes);
std::string encode_envelope(const Envelope& envelope);
// Per-message bounds beyond what protobuf parsing checks: ids and epochs that must be
// non-zero, finite non-negative timings, seqs below membership::kSeqLimit, list and string
// lengths. kBadFrame naming the field. (Claims that are well-formed but impossible given
// what the coordinator knows are refused by the membership logic.)
Status validate_body(const Envelope& envelope);

// "join_request", "heartbeat", ...: the `type` label of tributary_control_messages_total.
std::string_view body_name(Envelope::BodyCase body);

void view_to_proto(const membership::View& view, View* out);

// Federated rounds (membership/federated_rounds.h). The Envelope bodies are bounds-checked
// by validate_body; these convert.
membership::RoundReady round_ready_from_proto(const RoundReady& r);
void round_decision_to_proto(const membership::RoundDecision& d, RoundDecision* out);
membership::RoundDecision round_decision_from_proto(const RoundDecision& d);
// kBadFrame unless ranks are 0..n-1 in order, ids are unique and non-zero, ring is the
// ranks in rank order (membership/view.h), and every label is within bounds.
Result<membership::View> view_from_proto(const View& view);

void view_delta_to_proto(const membership::ViewDelta& delta, ViewDelta* out);
// kBadFrame unless epoch > base_epoch > 0, the lists are within kMaxViewMembers, removed
// ids are non-zero, and added members are valid view members (ids non-zero and unique,
// ranks increasing and below size, labels within bounds). Whether it fits a base view is
// membership::apply_delta's check.
Result<membership::ViewDelta> view_delta_from_proto(const ViewDelta& delta);

// kInvalidArgument (with the offending field named) for labels that are empty where they
// must not be, too long, hold control characters, or a data address that is not
// "host:port".
Status validate_join_request(const JoinRequest& request);
membership::MemberLabels labels_from_request(const JoinRequest& request);

// kBadFrame unless the bytes have exactly the right length.
Result<Nonce> nonce_from_bytes(std::string_view bytes);
Result<Mac> mac_from_bytes(std::string_view bytes);
template <typename Array>
std::string to_bytes(const Array& a) {
  return std::string(reinterpret_cast<const char*>(a.data()), a.size());
}

}  // namespace tributary::control
