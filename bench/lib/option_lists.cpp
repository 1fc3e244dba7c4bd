#include "option_lists.h"

#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>

namespace rootspec {

std::vector<std::string> split_list(const std::string& s, const std::string& option) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string part;
  while (std::getline(in, part, ',')) {
    const auto b = part.find_first_not_of(" \t");
    const auto e = part.find_last_not_of(" \t");
    if (b == std::string::npos) throw std::invalid_argument(option + ": empty item in '" + s + "'");
    out.push_back(part.substr(b, e - b + 1));
  }
  if (out.empty()) throw std::invalid_argument(option + ": empty list");
  return out;
}

std::vector<double> parse_temperatures(const std::string& s, const std::string& option) {
  std::vector<double> out;
  for (const std::string& item : split_list(s, option)) {
    size_t used = 0;
    double v = -1;
    try {
      v = std::stod(item, &used);
    } catch (...) {
      used = 0;
    }
    if (used != item.size() || !std::isfinite(v) || v < 0)
      throw std::invalid_argument(option + ": '" + item + "' is not a temperature >= 0");
    out.push_back(v);
  }
  return out;
}

std::vector<int> parse_ints(const std::string& s, const std::string& option, int lo, int hi) {
  std::vector<int> out;
  for (const std::string& item : split_list(s, option)) {
    size_t used = 0;
    long v = 0;
    try {
      v = std::stol(item, &used);
    } catch (...) {
      used = 0;
    }
    if (used != item.size() || v < lo || v > hi)
      throw std::invalid_argument(option + ": '" + item + "' is not a whole number " +
                                  (hi == std::numeric_limits<int>::max()
                                       ? ">= " + std::to_string(lo)
                                       : "in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]"));
    out.push_back(static_cast<int>(v));
  }
  return out;
}

}  // namespace rootspec
