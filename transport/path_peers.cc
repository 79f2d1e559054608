#include "transport/path_peers.h"

#include <string>

namespace tributary::transport {

bool path_carries(const PathPeers& path_peers, std::size_t path, int peer) {
  if (path >= path_peers.size() || path_peers[path].empty()) return true;
  const auto& peers = path_peers[path];
  return peer >= 0 && static_cast<std::size_t>(peer) < peers.size() &&
         peers[static_cast<std::size_t>(peer)];
}

int first_path(const PathPeers& path_peers, std::size_t paths, int peer) {
  for (std::size_t k = 0; k < paths; ++k) {
    if (path_carries(path_peers, k, peer)) return static_cast<int>(k);
  }
  return -1;
}

Status check_path_peers(const PathPeers& path_peers, std::size_t paths, int rank, int size) {
  if (path_peers.size() > paths) {
    return error(StatusCode::kInvalidArgument, "path_peers names " +
                                                   std::to_string(path_peers.size()) +
                                                   " paths of " + std::to_string(paths));
  }
  for (const auto& peers : path_peers) {
    if (!peers.empty() && peers.size() != static_cast<std::size_t>(size)) {
      return error(StatusCode::kInvalidArgument,
                   "path_peers: an entry of " + std::to_string(peers.size()) +
                       " ranks for a group of " + std::to_string(size));
    }
  }
  for (int r = 0; r < size; ++r) {
    if (r != rank && first_path(path_peers, paths, r) < 0) {
      return error(StatusCode::kInvalidArgument,
                   "no path of the link carries rank " + std::to_string(r));
    }
  }
  return Status();
}

}  // namespace tributary::transport
