#include "transport/receive_paths.h"

#include <sched.h>

#include <algorithm>
#include <thread>

namespace tributary::transport {
namespace {

std::string_view host_of(std::string_view address) {
  if (!address.empty() && address.front() == '[') {
    const auto close = address.find(']');
    return close == std::string_view::npos ? address : address.substr(1, close - 1);
  }
  const auto colon = address.rfind(':');
  return colon == std::string_view::npos ? address : address.substr(0, colon);
}

std::string_view shm_key(const MemberAdvert& m) {
  for (const std::string& c : m.capabilities) {
    if (c.rfind("shm:", 0) == 0) return std::string_view(c).substr(4);
  }
  return {};
}

bool decide(PathChoice choice, bool when_auto) {
  return choice == PathChoice::kOn || (choice == PathChoice::kAuto && when_auto);
}

}  // namespace

Result<PathChoice> parse_path_choice(std::string_view text) {
  if (text == "auto") return PathChoice::kAuto;
  if (text == "on") return PathChoice::kOn;
  if (text == "off") return PathChoice::kOff;
  return error(StatusCode::kInvalidArgument,
               "'" + std::string(text) + "' is not auto, on or off");
}

std::string_view to_string(PathChoice choice) {
  switch (choice) {
    case PathChoice::kAuto: return "auto";
    case PathChoice::kOn: return "on";
    case PathChoice::kOff: return "off";
  }
  return "?";
}

ReceivePaths choose_receive_paths(PathChoice combine, PathChoice single_copy, int local_ranks,
                                  int cores) {
  const int c = cores < 1 ? 1 : cores;
  return ReceivePaths{decide(combine, local_ranks > c), decide(single_copy, local_ranks >= 2 * c)};
}

bool core_per_rank(int local_ranks, int cores) { return local_ranks <= std::max(cores, 1); }

int ranks_on_this_host(const GroupSpec& spec) {
  if (spec.rank < 0 || spec.rank >= spec.size()) return 1;
  const MemberAdvert& self = spec.members[static_cast<std::size_t>(spec.rank)];
  const std::string_view my_key = shm_key(self);
  const std::string_view my_host = host_of(self.data_address);
  int n = 0;
  for (const MemberAdvert& m : spec.members) {
    const bool same_key = !my_key.empty() && shm_key(m) == my_key;
    const bool same_host = !my_host.empty() && host_of(m.data_address) == my_host;
    n += same_key || same_host;
  }
  return n < 1 ? 1 : n;
}

int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  const unsigned h = std::thread::hardware_concurrency();
  return h > 0 ? static_cast<int>(h) : 1;
}

}  // namespace tributary::transport
