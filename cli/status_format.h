// How `tributary status` prints a ClusterStatus (membership/cluster_status.h): a table for
// people, JSON for scripts. Pure functions of the status and the endpoint it came from.
//
// Both split the members the same way: "members" are those of the view (in_view, suspect)
// and those a restarted coordinator waits for (resuming); "joiners" are those waiting to
// be admitted (pending: for a step boundary; waiting: for the initial world). Text from
// the network (names, labels, reasons) is escaped in both (core/log.h's escaping in the
// table, JSON string escaping in JSON), so no member can forge a line or a field.
#pragma once

#include <string>

#include "membership/cluster_status.h"

namespace tributary::cli {

std::string format_status_table(const membership::ClusterStatus& status,
                                const std::string& endpoint);

// One JSON object (and a newline). Times are integers in milliseconds or seconds as
// numbers; the instance id is a hex string (it does not fit a double).
std::string format_status_json(const membership::ClusterStatus& status,
                               const std::string& endpoint);

}  // namespace tributary::cli
