#include "cli/ha_control_plane.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <thread>

#include "cli/launcher.h"
#include "coordinator_store/etcd_client.h"

namespace tributary::cli {
namespace {

using std::chrono::milliseconds;

constexpr const char* kPrefix = "/tributary/demo";

// A loopback port nobody listened on a moment ago (etcd cannot bind port 0 and say which).
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  ::close(fd);
  return port;
}

std::string find_etcd() {
  for (const char* dir : {"/usr/bin", "/usr/local/bin"}) {
    const std::string path = std::string(dir) + "/etcd";
    if (::access(path.c_str(), X_OK) == 0) return path;
  }
  return {};
}

}  // namespace

Result<std::unique_ptr<HaControlPlane>> HaControlPlane::start(
    int world_size, int coordinators, const std::vector<std::string>& extra_args,
    Deadline deadline, const std::string& log_dir) {
  const std::string etcd = find_etcd();
  if (etcd.empty()) {
    return error(StatusCode::kUnavailable,
                 "no etcd binary in /usr/bin or /usr/local/bin (scripts/deps.sh installs "
                 "Debian's etcd-server)");
  }
  std::unique_ptr<HaControlPlane> plane(new HaControlPlane());
  char dir_template[] = "/tmp/tributary-ha-XXXXXX";
  if (::mkdtemp(dir_template) == nullptr) return error(StatusCode::kInternal, "mkdtemp failed");
  plane->dir_ = dir_template;
  // A port taken between the probe and etcd's bind: try other ports (bounded).
  std::string url;
  for (int attempt = 0; attempt < 5 && url.empty() && !deadline.passed(); ++attempt) {
    const std::string client = "http://127.0.0.1:" + std::to_string(free_port());
    const std::string peer = "http://127.0.0.1:" + std::to_string(free_port());
    TRIB_ASSIGN_OR_RETURN(auto child,
                          ChildProcess::spawn({etcd,
                                               "--name",
                                               "demo",
                                               "--data-dir",
                                               plane->dir_ + "/etcd." + std::to_string(attempt),
                                               "--listen-client-urls",
                                               client,
                                               "--advertise-client-urls",
                                               client,
                                               "--listen-peer-urls",
                                               peer,
                                               "--initial-advertise-peer-urls",
                                               peer,
                                               "--initial-cluster",
                                               "demo=" + peer,
                                               "--log-level",
                                               "error",
                                               "--logger",
                                               "zap",
                                               "--log-outputs",
                                               plane->dir_ + "/etcd.log"}));
    TRIB_ASSIGN_OR_RETURN(plane->client_,
                          coordinator_store::EtcdClient::create({client}, milliseconds(500)));
    const Deadline up =
        Deadline{std::min(deadline.at, Deadline::after(std::chrono::seconds(10)).at)};
    while (!up.passed() && !child.wait(Deadline::after(milliseconds(50)))) {
      if (plane->client_->get(kPrefix).is_ok()) {
        url = client;
        break;
      }
    }
    if (url.empty()) {
      child.signal(SIGKILL);
      (void)child.wait(Deadline::after(std::chrono::seconds(5)));
      continue;
    }
    plane->etcd_.emplace(std::move(child));
  }
  if (url.empty())
    return error(StatusCode::kUnavailable, "etcd did not start (see " + plane->dir_ + "/etcd.log)");
  std::printf("demo: etcd %s (data in %s)\n", url.c_str(), plane->dir_.c_str());
  std::fflush(stdout);
  for (int i = 0; i < coordinators; ++i) {
    std::vector<std::string> args = {"--etcd", url, "--etcd-prefix", kPrefix};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    std::string endpoint;
    ChildOutput output;
    if (!log_dir.empty()) {
      output.stdout_path = output.stderr_path =
          log_dir + "/coordinator-" + std::to_string(i + 1) + ".log";
    }
    TRIB_ASSIGN_OR_RETURN(
        auto child, start_coordinator_process(world_size, &endpoint, deadline, args, output));
    plane->coordinators_.push_back(std::move(child));
    plane->endpoints_.push_back(endpoint);
  }
  return plane;
}

HaControlPlane::~HaControlPlane() {
  for (auto& c : coordinators_) c.signal(SIGTERM);
  for (auto& c : coordinators_) {
    if (!c.wait(Deadline::after(std::chrono::seconds(10)))) c.signal(SIGKILL);
  }
  if (etcd_) {
    etcd_->signal(SIGTERM);
    if (!etcd_->wait(Deadline::after(std::chrono::seconds(10)))) etcd_->signal(SIGKILL);
  }
  std::error_code ignored;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
}

std::string HaControlPlane::endpoints() const {
  std::string all;
  for (const auto& e : endpoints_) all += (all.empty() ? "" : ",") + e;
  return all;
}

std::string HaControlPlane::leader() {
  auto kv = client_->get(std::string(kPrefix) + "/leader");
  return kv.is_ok() && kv->has_value() ? (*kv)->value : std::string();
}

bool HaControlPlane::kill(const std::string& endpoint) {
  for (std::size_t i = 0; i < endpoints_.size(); ++i) {
    if (endpoints_[i] != endpoint) continue;
    coordinators_[i].signal(SIGKILL);
    (void)coordinators_[i].wait(Deadline::after(std::chrono::seconds(5)));
    return true;
  }
  return false;
}

}  // namespace tributary::cli
