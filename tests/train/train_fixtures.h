// Shared helpers of the trainer tests: a tiny repeated corpus (temporary folders: temp_dir.h).
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "temp_dir.h"

namespace rootspec::test {

using testing::TempDir;

// A small text repeated: easy to learn, long enough for a held-out split.
inline std::string write_tiny_corpus(const std::string& dir) {
  const std::string path = dir + "/corpus.txt";
  std::ofstream out(path);
  for (int i = 0; i < 60; ++i) out << "the quick brown fox jumps over the lazy dog. " << (i % 10) << "\n";
  return path;
}

}  // namespace rootspec::test
