// rootspec-bench --launch: starts the target/drafter pair with `launch/rootspec up` in the
// background, waits until it prints "the pair is up", and stops it again (SIGTERM to the
// launcher, whose trap stops both daemons; SIGKILL to its process group if it does not exit).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <stdexcept>
#include <string>
#include <vector>

namespace rootspec {
namespace harness {

// The client endpoint in launch/rootspec's output: the word after "the pair is up; clients
// connect to " (up to a space, ';' or the line's end); "" while that line is not complete.
inline std::string endpoint_in_launcher_output(const std::string& output) {
  const std::string marker = "the pair is up; clients connect to ";
  const size_t at = output.find(marker);
  if (at == std::string::npos) return "";
  const size_t from = at + marker.size();
  const size_t end = output.find_first_of(" ;\n", from);
  return end == std::string::npos ? "" : output.substr(from, end - from);
}

struct LaunchOptions {
  std::string script;             // launch/rootspec
  std::string config;             // absolute path of the pair's TOML config
  std::vector<std::string> sets;  // section.key=value, passed as --set
  std::string build_dir;          // ROOTSPEC_BUILD_DIR (the launcher skips set-up)
  std::string run_dir;            // ROOTSPEC_RUN_DIR: the pair's logs and pid file
  double start_timeout_s = 900;   // the launcher itself gives up after 300 s of start-up
};

struct LaunchError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class PairLauncher {
 public:
  PairLauncher() = default;
  PairLauncher(const PairLauncher&) = delete;
  PairLauncher& operator=(const PairLauncher&) = delete;
  ~PairLauncher() { stop(); }

  // Starts the launcher and waits for the pair; returns the client endpoint it printed.
  // Throws LaunchError (with the launcher's last output lines) if it exits first, if
  // `interrupted` becomes true, or after start_timeout_s.
  std::string start(const LaunchOptions& opt, const std::atomic<bool>* interrupted);
  // True while the launcher (and so the pair) runs.
  bool alive();
  // Stops the pair; idempotent. Returns the launcher's exit status (-1 if none ran).
  int stop(double grace_s = 30);
  // Everything the launcher printed on stdout so far.
  const std::string& output() const { return output_; }

 private:
  void drain();
  pid_t pid_ = -1;
  int out_fd_ = -1;
  int status_ = -1;
  std::string output_;
};

}  // namespace harness
}  // namespace rootspec
