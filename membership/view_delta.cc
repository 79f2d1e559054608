#include "membership/view_delta.h"

#include <cstring>
#include <string>
#include <unordered_set>

#include "core/hash.h"
#include "core/little_endian.h"

namespace tributary::membership {
namespace {

void put_u64(std::string& out, std::uint64_t v) { le::append(out, v); }

void put_text(std::string& out, const std::string& s) {
  put_u64(out, s.size());
  out += s;
}

Status bad(const std::string& what) {
  return error(StatusCode::kBadFrame, "view delta: " + what);
}

}  // namespace

std::uint64_t view_digest(const View& view) {
  // One buffer, one hash update: per-field updates cost more than the copy at 4,096 members.
  std::string in;
  in.reserve(64 + view.members.size() * 64);
  put_u64(in, view.epoch);
  put_u64(in, view.members.size());
  for (const auto& m : view.members) {
    put_u64(in, m.id);
    put_u64(in, m.rank);
    put_text(in, m.data_address);
    put_text(in, m.host);
    put_text(in, m.zone);
    put_u64(in, m.capabilities.size());
    for (const auto& c : m.capabilities) put_text(in, c);
  }
  put_u64(in, view.ring.size());
  for (auto r : view.ring) put_u64(in, r);
  const Sha256Digest d = Sha256().update(in).finish();
  return le::load<std::uint64_t>(d.data());
}

std::optional<ViewDelta> make_delta(const View& base, const View& next) {
  if (base.empty() || next.epoch <= base.epoch) return std::nullopt;
  std::unordered_set<MemberId> in_next;
  in_next.reserve(next.size());
  for (const auto& m : next.members) in_next.insert(m.id);
  std::unordered_set<MemberId> in_base;
  in_base.reserve(base.size());
  ViewDelta delta;
  delta.epoch = next.epoch;
  delta.base_epoch = base.epoch;
  for (const auto& m : base.members) {
    in_base.insert(m.id);
    if (!in_next.contains(m.id)) delta.removed.push_back(m.id);
  }
  for (const auto& m : next.members) {
    if (!in_base.contains(m.id)) delta.added.push_back(m);
  }
  delta.size = static_cast<std::uint32_t>(next.size());
  delta.digest = view_digest(next);
  delta.leaves_only = next.leaves_only;
  // The proof that the receiver will rebuild `next`: do it here, once per epoch.
  auto rebuilt = apply_delta(base, delta);
  if (!rebuilt || *rebuilt != next) return std::nullopt;
  return delta;
}

Result<View> apply_delta(const View& base, const ViewDelta& delta) {
  if (base.epoch != delta.base_epoch) {
    return error(StatusCode::kStaleEpoch, "view delta to epoch " + std::to_string(delta.epoch) +
                                              " applies to epoch " +
                                              std::to_string(delta.base_epoch) + ", held " +
                                              std::to_string(base.epoch));
  }
  if (delta.epoch <= delta.base_epoch) return bad("epoch is not above its base");
  const std::unordered_set<MemberId> gone(delta.removed.begin(), delta.removed.end());
  if (gone.size() != delta.removed.size()) return bad("a member is removed twice");
  std::unordered_set<MemberId> in_base;
  in_base.reserve(base.size());
  std::size_t found = 0;
  for (const auto& m : base.members) {
    in_base.insert(m.id);
    found += gone.contains(m.id);
  }
  if (found != gone.size()) return bad("removes a member that is not in the base view");
  // Bounded by what the base and the delta hold, not by a number the sender chose.
  const std::size_t n = base.size() - gone.size() + delta.added.size();
  if (delta.size != n)
    return bad("size " + std::to_string(delta.size) + " does not match the " + std::to_string(n) +
               " members it leaves");
  View out;
  out.epoch = delta.epoch;
  out.leaves_only = delta.leaves_only;
  out.members.resize(n);
  std::vector<bool> taken(n, false);
  std::unordered_set<MemberId> added_ids;
  for (std::size_t i = 0; i < delta.added.size(); ++i) {
    const ViewMember& a = delta.added[i];
    if (a.rank >= n || (i > 0 && a.rank <= delta.added[i - 1].rank))
      return bad("added ranks are not increasing below the size");
    if (a.id == 0 || in_base.contains(a.id) || !added_ids.insert(a.id).second)
      return bad("added member id " + std::to_string(a.id) + " is zero or already present");
    taken[a.rank] = true;
    out.members[a.rank] = a;
  }
  std::size_t next = 0;
  for (const auto& m : base.members) {
    if (gone.contains(m.id)) continue;
    while (taken[next]) ++next;  // the slots add up to n: never runs past the end
    out.members[next] = m;
    out.members[next].rank = static_cast<std::uint32_t>(next);
    ++next;
  }
  out.ring.resize(n);
  for (std::size_t r = 0; r < n; ++r) out.ring[r] = static_cast<std::uint32_t>(r);
  if (view_digest(out) != delta.digest)
    return bad("the rebuilt view of epoch " + std::to_string(delta.epoch) +
               " does not match its digest");
  return out;
}

}  // namespace tributary::membership
