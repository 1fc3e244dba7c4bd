// Shared helpers of the trainer tests: temporary folders and a tiny repeated corpus.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace rootspec::test {

// A fresh empty folder under the system temp dir, named after the running test.
inline std::string fresh_dir(const std::string& tag) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  auto d = std::filesystem::temp_directory_path() /
           ("rootspec_train_" + std::string(info->test_suite_name()) + "_" + info->name() + "_" + tag);
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d.string();
}

// A small text repeated: easy to learn, long enough for a held-out split.
inline std::string write_tiny_corpus(const std::string& dir) {
  const std::string path = dir + "/corpus.txt";
  std::ofstream out(path);
  for (int i = 0; i < 60; ++i) out << "the quick brown fox jumps over the lazy dog. " << (i % 10) << "\n";
  return path;
}

}  // namespace rootspec::test
