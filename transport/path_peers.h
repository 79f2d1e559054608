// Which pairs each path of a multi-path link carries (FailoverParams::path_peers,
// PairRouteParams::path_peers): path_peers[k][r] says whether path k carries the pair with
// rank r; an empty list, or path k's entry empty, means every pair.
#pragma once

#include <cstddef>
#include <vector>

#include "core/status.h"

namespace tributary::transport {

using PathPeers = std::vector<std::vector<bool>>;

bool path_carries(const PathPeers& path_peers, std::size_t path, int peer);
// The first of `paths` paths that carries the pair with `peer`; -1 when none does.
int first_path(const PathPeers& path_peers, std::size_t paths, int peer);
// kInvalidArgument when `path_peers` names more paths than `paths`, has an entry of another
// size than the group, or leaves a pair of `rank` without a path.
Status check_path_peers(const PathPeers& path_peers, std::size_t paths, int rank, int size);

}  // namespace tributary::transport
