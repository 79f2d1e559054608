// A membership view as agent code sees it: plain C++, no protobuf.
//
// The coordinator alone issues views. Each view has a strictly larger epoch than the one
// before it; a view is immutable once issued (a change is a new view). `members` is
// sorted by rank (members[i].rank == i), and a rank is a position in the ring: `ring`
// (ranks in ring order) is 0..n-1 in every view. Consumers rely on that rather than walk
// `ring`: the agent's collectives take their ring neighbours by rank (r - 1, r + 1).
// Held at both ends: the coordinator numbers ranks along its ring order (membership.h;
// tests/membership checks every view it issues) and the agent's decoder rejects a view
// whose ring is in any other order (control/codec.h). An ordering that must keep ranks
// stable (bandwidth-aware, say) therefore changes the consumers and the decoder together.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tributary::membership {

using MemberId = std::uint64_t;  // never reused within a coordinator's lifetime; 0 = none
using Epoch = std::uint64_t;     // 0 = "no view yet"

struct ViewMember {
  MemberId id = 0;
  std::uint32_t rank = 0;
  std::string data_address;  // "host:port"
  std::string host;          // host label
  std::string zone;          // zone label
  std::vector<std::string> capabilities;

  friend bool operator==(const ViewMember&, const ViewMember&) = default;
};

struct View {
  Epoch epoch = 0;
  std::vector<ViewMember> members;  // by rank
  std::vector<std::uint32_t> ring;  // ranks in ring order
  // Every member of the previous view that this one lacks left on its own (a Leave, a
  // leaving boundary request) and nobody came: a collective of the previous view that a
  // leaver completed before it left can still complete among the others, so members let
  // it run instead of aborting it for this view (agent/worker.cc, the watcher). Not part
  // of view_digest(); not journaled (a view restored after a restart has it false).
  bool leaves_only = false;

  bool empty() const { return members.empty(); }
  std::size_t size() const { return members.size(); }
  // nullptr when `id` is not in this view.
  const ViewMember* find(MemberId id) const {
    for (const auto& m : members) {
      if (m.id == id) return &m;
    }
    return nullptr;
  }
  bool contains(MemberId id) const { return find(id) != nullptr; }

  friend bool operator==(const View&, const View&) = default;
};

}  // namespace tributary::membership
