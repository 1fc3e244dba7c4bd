#include "pair_launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace rootspec {
namespace harness {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The last n lines of `text` (all of it when it has fewer; "" for "").
std::string last_lines(const std::string& text, int n) {
  size_t start = text.size();
  if (start > 0 && text[start - 1] == '\n') --start;  // the final line break ends the last line
  for (int i = 0; i < n; ++i) {
    const size_t nl = start == 0 ? std::string::npos : text.rfind('\n', start - 1);
    if (nl == std::string::npos) return text;
    start = nl;
  }
  return text.substr(start + 1);
}

}  // namespace

void PairLauncher::drain() {
  if (out_fd_ < 0) return;
  char buf[4096];
  for (;;) {
    const ssize_t got = read(out_fd_, buf, sizeof buf);
    if (got > 0) {
      output_.append(buf, static_cast<size_t>(got));
      continue;
    }
    if (got < 0 && errno == EINTR) continue;
    if (got == 0) {  // the launcher closed its stdout (it exited)
      close(out_fd_);
      out_fd_ = -1;
    }
    return;  // EAGAIN: nothing more now
  }
}

bool PairLauncher::alive() {
  if (pid_ <= 0) return false;
  drain();
  int status = 0;
  const pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    status_ = status;
    pid_ = -1;
    drain();
    return false;
  }
  return true;
}

std::string PairLauncher::start(const LaunchOptions& opt, const std::atomic<bool>* interrupted) {
  if (pid_ > 0) throw LaunchError("a pair is already launched");
  int fds[2];
  if (pipe(fds) != 0) throw LaunchError(std::string("pipe: ") + std::strerror(errno));
  // The bench speaks the client protocol: the pair's HTTP gateway takes any free port, so that
  // it never collides with a server on its default one.
  std::vector<std::string> args = {opt.script, "up", "--config", opt.config, "--set", "http.listen=127.0.0.1:0"};
  for (const std::string& s : opt.sets) {
    args.push_back("--set");
    args.push_back(s);
  }
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    throw LaunchError(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    // Own process group: a terminal Ctrl-C reaches the bench, which then stops the pair in
    // order, and the group can be killed as a whole if the launcher hangs.
    setpgid(0, 0);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    dup2(fds[1], STDOUT_FILENO);
    close(fds[0]);
    close(fds[1]);
    setenv("ROOTSPEC_SKIP_SETUP", "1", 1);
    if (!opt.build_dir.empty()) setenv("ROOTSPEC_BUILD_DIR", opt.build_dir.c_str(), 1);
    if (!opt.run_dir.empty()) setenv("ROOTSPEC_RUN_DIR", opt.run_dir.c_str(), 1);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    std::fprintf(stderr, "rootspec-bench: cannot run %s: %s\n", argv[0], std::strerror(errno));
    _exit(127);
  }
  setpgid(pid, pid);  // also from the parent, so the group exists before we might signal it
  close(fds[1]);
  pid_ = pid;
  out_fd_ = fds[0];
  fcntl(out_fd_, F_SETFL, fcntl(out_fd_, F_GETFL) | O_NONBLOCK);
  status_ = -1;
  output_.clear();

  const double deadline = now_s() + opt.start_timeout_s;
  for (;;) {
    if (out_fd_ >= 0) {
      pollfd p{out_fd_, POLLIN, 0};
      poll(&p, 1, 200);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    const bool running = alive();
    if (const std::string endpoint = endpoint_in_launcher_output(output_); !endpoint.empty()) return endpoint;
    if (!running) {
      const int code = WIFEXITED(status_) ? WEXITSTATUS(status_) : 128 + WTERMSIG(status_);
      throw LaunchError("the launcher exited (status " + std::to_string(code) +
                        ") before the pair was up; its output:\n" + last_lines(output_, 20) +
                        "(daemon logs in " + opt.run_dir + ")");
    }
    if (interrupted && interrupted->load()) {
      stop();
      throw LaunchError("interrupted while the pair was starting");
    }
    if (now_s() > deadline) {
      stop();
      throw LaunchError("the pair was not up after " + std::to_string(static_cast<int>(opt.start_timeout_s)) +
                        " s; launcher output:\n" + last_lines(output_, 20));
    }
  }
}

int PairLauncher::stop(double grace_s) {
  if (pid_ > 0) {
    kill(pid_, SIGTERM);  // the launcher's trap stops both daemons and exits 0
    const double deadline = now_s() + grace_s;
    while (alive() && now_s() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (pid_ > 0) {  // still there: kill its whole group (the daemons are its background jobs)
      const pid_t group = pid_;
      kill(-group, SIGKILL);
      int status = 0;
      waitpid(group, &status, 0);
      status_ = status;
      pid_ = -1;
    }
  }
  drain();
  if (out_fd_ >= 0) {
    close(out_fd_);
    out_fd_ = -1;
  }
  if (status_ < 0) return -1;
  return WIFEXITED(status_) ? WEXITSTATUS(status_) : 128 + WTERMSIG(status_);
}

}  // namespace harness
}  // namespace rootspec
