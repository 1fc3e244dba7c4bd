// Comma-separated lists on the command lines of the benchmark tools (rootspec-bench,
// rootspec-study): "--temperatures 0,1", "--budgets 4,8,16", "--decoders ar,auto". Every error
// names the option and the item.
#pragma once

#include <string>
#include <vector>

namespace rootspec {

// "a,b,c" → {"a","b","c"}; blanks around items are dropped; empty items are an error.
std::vector<std::string> split_list(const std::string& s, const std::string& option);

// Temperatures ≥ 0.
std::vector<double> parse_temperatures(const std::string& s, const std::string& option = "--temperatures");

// Whole numbers in [lo, hi].
std::vector<int> parse_ints(const std::string& s, const std::string& option, int lo, int hi);

}  // namespace rootspec
