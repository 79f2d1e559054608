// The ordered table of transports an agent may use, in the spirit of NCCL's transport
// list: for a pair of members the first entry whose can_connect() says yes is that pair's
// path, and what a member advertises is the table's adverts, entry by entry.
//
// connect_group() connects a whole group over one transport: the first entry, in table
// order, that can connect every pair of the group's members (computed from the adverts
// alone, so every member reaches the same answer without talking). A single-host group
// therefore runs over shared memory and a multi-host one over TCP; a group whose pairs
// would pick different transports (some members sharing a host, some not) runs over the
// one every pair can use, and the log says so. The agent's data plane mixes shared memory
// and TCP per pair in such a group instead (agent/data_plane.h, choose() per pair, one
// link over both: docs/transports.md, "One transport per group, or per pair").
//
// Threading: connect_group() from one thread at a time; cancel_connect() from any.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/log.h"
#include "transport/transport.h"

namespace tributary::transport {

// What connect_group() built: the link and, per rank, the transport that carries it
// ("" for this member's own rank).
struct ConnectedGroup {
  std::unique_ptr<algorithms::Link> link;
  Transport* carrier = nullptr;  // the entry that carries it (owned by the table)
  std::string transport;
  std::vector<std::string> paths;
};

class TransportTable {
 public:
  // `ordered`: most preferred first; must not be empty. Destroyed first to last, so an
  // entry may use the ones after it (shared memory borrows TCP's channels).
  TransportTable(std::vector<std::unique_ptr<Transport>> ordered, Logger log);
  ~TransportTable();
  TransportTable(const TransportTable&) = delete;
  TransportTable& operator=(const TransportTable&) = delete;

  // Every entry's adverts, in table order.
  std::vector<std::string> advertise() const;
  std::vector<std::string> names() const;

  // The first entry whose can_connect(self, peer) holds; nullptr when none does.
  Transport* choose(const MemberAdvert& self, const MemberAdvert& peer) const;
  // The entry that carries `spec`'s group (see above), or kUnavailable naming a pair no
  // entry of this table can connect.
  Result<Transport*> group_transport(const GroupSpec& spec) const;

  Result<ConnectedGroup> connect_group(const GroupSpec& spec, Deadline deadline);
  void cancel_connect(std::uint64_t newer_epoch);

 private:
  std::vector<std::unique_ptr<Transport>> ordered_;
  Logger log_;
};

}  // namespace tributary::transport
