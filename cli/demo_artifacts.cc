#include "cli/demo_artifacts.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>

#include "cli/child_process.h"

namespace tributary::cli {

Result<std::string> make_run_dir(const std::string& requested) {
  std::string dir = requested;
  if (dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    ::localtime_r(&now, &tm);
    char stamp[32];
    std::strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
    dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/tributary-demo-" + stamp + "-" +
          std::to_string(::getpid());
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir)) {
    return error(StatusCode::kInvalidArgument,
                 "--run-dir: cannot create " + dir + (ec ? ": " + ec.message() : ""));
  }
  return std::filesystem::absolute(dir).string();
}

Console::Console(const std::string& transcript_path)
    : transcript_(std::fopen(transcript_path.c_str(), "w")) {}

Console::~Console() {
  if (transcript_) std::fclose(transcript_);
}

void Console::line(const std::string& text) {
  std::printf("%s\n", text.c_str());
  std::fflush(stdout);
  if (transcript_) {
    std::fprintf(transcript_, "%s\n", text.c_str());
    std::fflush(transcript_);
  }
}

Status write_run_tables(const std::string& dir, const DemoNarrator& narrator) {
  const double start = static_cast<double>(narrator.start_mono_us());
  std::ofstream steps(dir + "/steps.csv");
  steps << "step,seconds,loss,accuracy,world,view\n";
  for (const auto& [step, r] : narrator.steps()) {
    steps << step << ',' << (static_cast<double>(r.mono_us) - start) / 1e6 << ',' << r.loss << ','
          << (r.accuracy ? std::to_string(*r.accuracy) : "") << ',' << r.world << ',' << r.view
          << '\n';
  }
  std::ofstream faults(dir + "/faults.csv");
  faults << "step,seconds,kind,worker,view,handled\n";
  for (const auto& f : narrator.faults()) {
    faults << f.step << ',' << (static_cast<double>(f.mono_us) - start) / 1e6 << ','
           << to_string(f.kind) << ',' << f.worker << ',' << (f.view ? std::to_string(*f.view) : "")
           << ',' << (f.handled() ? 1 : 0) << '\n';
  }
  if (!steps || !faults) return error(StatusCode::kInternal, "cannot write the tables in " + dir);
  return Status::ok();
}

Result<std::string> draw_run_plot(const std::string& dir) {
  const std::filesystem::path script =
      std::filesystem::path(self_executable()).parent_path() / "demo_plot.py";
  if (!std::filesystem::exists(script)) {
    return error(StatusCode::kUnavailable, script.string() + " is missing");
  }
  const std::string png = dir + "/training.png";
  const std::string log = dir + "/plot.log";
  TRIB_ASSIGN_OR_RETURN(auto plot, ChildProcess::spawn({"/usr/bin/python3", script.string(), dir,
                                                        png},
                                                       {log, log}));
  const auto code = plot.wait(Deadline::after(std::chrono::seconds(60)));
  if (!code) {
    plot.signal(SIGKILL);
    return error(StatusCode::kTimedOut, "the plot took longer than 60 s");
  }
  if (*code != 0 || !std::filesystem::exists(png)) {
    std::ifstream in(log);
    std::string last, line;
    while (std::getline(in, line)) {
      if (!line.empty()) last = line;
    }
    return error(StatusCode::kUnavailable,
                 "demo_plot.py exited with status " + std::to_string(*code) +
                     (last.empty() ? "" : ": " + last) + " (see " + log + ")");
  }
  return png;
}

}  // namespace tributary::cli
