// TempDir: the one temporary-folder helper of every test suite. A fresh empty folder under the
// system temp dir, unique per process and object, removed (with what the test left in it) when
// the object goes.
#pragma once

#include <unistd.h>
#include <filesystem>
#include <string>
#include <system_error>

namespace rootspec::testing {

class TempDir {
 public:
  explicit TempDir(const std::string& tag = "tmp") {
    static int counter = 0;
    path_ = (std::filesystem::temp_directory_path() /
             ("rootspec_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++)))
                .string();
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace rootspec::testing
