#include "transport/transport_table.h"

#include "core/check.h"

namespace tributary::transport {

std::vector<std::string> capability_parameters(const std::vector<std::string>& capabilities,
                                               std::string_view name) {
  std::vector<std::string> out;
  for (const std::string& c : capabilities) {
    if (c == name) {
      out.emplace_back();
    } else if (c.size() > name.size() && c.compare(0, name.size(), name) == 0 &&
               c[name.size()] == ':') {
      out.push_back(c.substr(name.size() + 1));
    }
  }
  return out;
}

TransportTable::TransportTable(std::vector<std::unique_ptr<Transport>> ordered, Logger log)
    : ordered_(std::move(ordered)), log_(std::move(log)) {
  TRIB_CHECK(!ordered_.empty()) << "a transport table needs at least one transport";
}

TransportTable::~TransportTable() {
  for (auto& t : ordered_) t.reset();
}

std::vector<std::string> TransportTable::advertise() const {
  std::vector<std::string> out;
  for (const auto& t : ordered_) {
    for (std::string& c : t->advertise()) out.push_back(std::move(c));
  }
  return out;
}

std::vector<std::string> TransportTable::names() const {
  std::vector<std::string> out;
  for (const auto& t : ordered_) out.emplace_back(t->name());
  return out;
}

Transport* TransportTable::choose(const MemberAdvert& self, const MemberAdvert& peer) const {
  for (const auto& t : ordered_) {
    if (t->can_connect(self, peer)) return t.get();
  }
  return nullptr;
}

Result<Transport*> TransportTable::group_transport(const GroupSpec& spec) const {
  const int n = spec.size();
  for (const auto& t : ordered_) {
    bool every_pair = true;
    for (int i = 0; i < n && every_pair; ++i) {
      for (int j = i + 1; j < n && every_pair; ++j) {
        every_pair = t->can_connect(spec.members[i], spec.members[j]);
      }
    }
    if (every_pair) return t.get();
  }
  for (int peer = 0; peer < n; ++peer) {
    if (peer == spec.rank) continue;
    if (choose(spec.members[spec.rank], spec.members[peer]) == nullptr) {
      return error(StatusCode::kUnavailable,
                   "no transport of this member's table connects it to rank " +
                       std::to_string(peer) + " (member " +
                       std::to_string(spec.members[peer].member) + ", data " +
                       spec.members[peer].data_address + ")");
    }
  }
  std::string names;
  for (const auto& t : ordered_) names += (names.empty() ? "" : ", ") + std::string(t->name());
  return error(StatusCode::kUnavailable,
               "none of this member's transports (" + names +
                   ") connects every pair of the group (another pair lacks a common one)");
}

Result<ConnectedGroup> TransportTable::connect_group(const GroupSpec& spec, Deadline deadline) {
  TRIB_CHECK(spec.rank >= 0 && spec.rank < spec.size()) << "rank " << spec.rank;
  TRIB_ASSIGN_OR_RETURN(Transport * carrier, group_transport(spec));
  ConnectedGroup out;
  out.carrier = carrier;
  out.transport = std::string(carrier->name());
  out.paths.resize(spec.members.size());
  const MemberAdvert& self = spec.members[spec.rank];
  std::string mixed;
  for (int peer = 0; peer < spec.size(); ++peer) {
    if (peer == spec.rank) continue;
    out.paths[peer] = out.transport;
    const Transport* best = choose(self, spec.members[peer]);
    if (best != nullptr && best != carrier) {
      mixed += " rank " + std::to_string(peer) + " could use " + std::string(best->name()) + ";";
    }
  }
  if (!mixed.empty()) {
    log_.info("epoch " + std::to_string(spec.epoch) + ": the group runs over " + out.transport +
              ", the one transport every pair can use;" + mixed +
              " one group runs over one transport");
  }
  TRIB_ASSIGN_OR_RETURN(out.link, carrier->connect_group(spec, deadline));
  return out;
}

void TransportTable::cancel_connect(std::uint64_t newer_epoch) {
  for (const auto& t : ordered_) t->cancel_connect(newer_epoch);
}

}  // namespace tributary::transport
