// The control plane's decoders (control/codec.h) on arbitrary bytes: decode_envelope
// answers a validated Envelope or kBadFrame; a decoded Envelope re-encodes and decodes to
// the same message; views, view deltas, join requests and the ZAP request parser never crash and
// uphold what they promise.
#include <unordered_set>

#include "control/codec.h"
#include "coordinator/zap_handler.h"
#include "core/check.h"

using namespace tributary;

namespace {

void check_view(const control::View& proto) {
  auto view = control::view_from_proto(proto);
  if (!view) return;
  std::unordered_set<membership::MemberId> ids;
  for (std::size_t i = 0; i < view->members.size(); ++i) {
    TRIB_CHECK(view->members[i].rank == i) << "view member out of rank order";
    TRIB_CHECK(view->members[i].id != 0 && ids.insert(view->members[i].id).second)
        << "zero or duplicate id";
    TRIB_CHECK(view->ring[i] == i) << "ring not in rank order";
  }
  control::View again;
  control::view_to_proto(*view, &again);
  TRIB_CHECK(control::view_from_proto(again).is_ok()) << "a valid view does not round-trip";
}

// A decoded delta is bounded as promised; applied to a small fixed base it either
// rebuilds a view that passes view_from_proto's checks or is refused.
void check_view_delta(const control::ViewDelta& proto) {
  auto delta = control::view_delta_from_proto(proto);
  if (!delta) return;
  TRIB_CHECK(delta->epoch > delta->base_epoch && delta->base_epoch > 0) << "epochs out of order";
  TRIB_CHECK(delta->added.size() <= delta->size) << "more added than the size";
  membership::View base;
  base.epoch = delta->base_epoch;
  for (std::uint32_t r = 0; r < 4; ++r) {
    base.members.push_back({r + 1, r, "127.0.0.1:1", "h", "z", {"tcp"}});
    base.ring.push_back(r);
  }
  auto view = membership::apply_delta(base, *delta);
  if (!view) return;
  control::View again;
  control::view_to_proto(*view, &again);
  TRIB_CHECK(control::view_from_proto(again).is_ok()) << "a delta rebuilt an invalid view";
  TRIB_CHECK(membership::view_digest(*view) == delta->digest) << "digest not checked";
}

void check_join_request(const control::JoinRequest& r) {
  if (!control::validate_join_request(r).is_ok()) return;
  for (const std::string* label : {&r.name(), &r.host(), &r.zone(), &r.data_address()}) {
    TRIB_CHECK(label->size() <= control::kMaxLabelBytes) << "oversized label accepted";
    for (char c : *label)
      TRIB_CHECK(static_cast<unsigned char>(c) >= 0x20 && c != 0x7f) << "control character";
  }
}

// The input, cut at 0x00 bytes, as the frames of a ZAP request.
void check_zap(std::string_view bytes) {
  std::vector<std::string> frames;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= bytes.size() && frames.size() < 12; ++i) {
    if (i == bytes.size() || bytes[i] == '\0') {
      frames.emplace_back(bytes.substr(start, i - start));
      start = i + 1;
    }
  }
  auto request = coordinator::parse_zap_request(frames);
  if (!request) return;
  const CurveKey key{};  // the all-zero key: no input may be admitted by accident...
  const auto verdict = coordinator::judge_zap_request(*request, key);
  // ...unless it really presents exactly that key over CURVE in our domain.
  if (verdict.allowed) {
    TRIB_CHECK(request->mechanism == "CURVE" && request->credentials.size() == 1 &&
               request->credentials[0] == std::string(32, '\0'))
        << "ZAP admitted a key that is not the cluster's";
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  check_zap(bytes);
  auto env = control::decode_envelope(bytes, 1 << 16);
  if (!env) return 0;
  TRIB_CHECK(env->body_case() != control::Envelope::BODY_NOT_SET) << "empty envelope accepted";
  const std::string again = control::encode_envelope(*env);
  auto redecoded = control::decode_envelope(again, 1 << 20);
  TRIB_CHECK(redecoded.is_ok()) << "a valid envelope does not decode after re-encoding: "
                                << redecoded.status().to_string();
  TRIB_CHECK(control::encode_envelope(*redecoded) == again) << "re-encoding is not stable";
  (void)control::body_name(env->body_case());
  if (env->has_view()) check_view(env->view());
  if (env->has_join_accepted() && env->join_accepted().has_view())
    check_view(env->join_accepted().view());
  if (env->has_view_delta()) check_view_delta(env->view_delta());
  if (env->has_join_request()) check_join_request(env->join_request());
  if (env->has_resume_request()) check_join_request(env->resume_request().join());
  if (env->has_ready()) {
    TRIB_CHECK(env->ready().committed_seq() < membership::kSeqLimit &&
               env->ready().held_seq() < membership::kSeqLimit)
        << "a seq beyond every seq space accepted";
  }
  if (env->has_challenge()) (void)control::nonce_from_bytes(env->challenge().nonce());
  if (env->has_join_proof()) (void)control::mac_from_bytes(env->join_proof().mac());
  return 0;
}
