// What a demo run leaves behind, in its run directory: the console transcript
// (demo.txt), each process's log, the committed steps (steps.csv), the faults
// (faults.csv) and a plot of loss and accuracy over steps with the faults marked
// (training.png, drawn by demo_plot.py next to the binary with Debian's matplotlib).
#pragma once

#include <cstdio>
#include <string>

#include "cli/demo_narrator.h"
#include "core/status.h"

namespace tributary::cli {

// Creates `requested` (and its parents), or a fresh tributary-demo-YYYYmmdd-HHMMSS-PID
// under $TMPDIR (default /tmp) when it is empty. Returns its path.
Result<std::string> make_run_dir(const std::string& requested);

// The console: every line goes to stdout and to the transcript.
class Console {
 public:
  explicit Console(const std::string& transcript_path);
  ~Console();
  Console(const Console&) = delete;
  Console& operator=(const Console&) = delete;
  void line(const std::string& text);

 private:
  std::FILE* transcript_ = nullptr;
};

// steps.csv (step, seconds, loss, accuracy, world, view) and faults.csv (step, seconds,
// kind, worker, view, handled), seconds from the narrator's start.
Status write_run_tables(const std::string& dir, const DemoNarrator& narrator);

// Runs demo_plot.py on the tables (bounded); returns the PNG's path, or why there is none.
Result<std::string> draw_run_plot(const std::string& dir);

}  // namespace tributary::cli
