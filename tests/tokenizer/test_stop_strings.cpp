// StopStrings (common/text/stop_strings.h): the streamed text is cut before the first stop
// string, a stop string split across pushes is found, and text that might start one is held
// back, never streamed and taken back.
#include <gtest/gtest.h>

#include "stop_strings.h"

namespace rootspec {
namespace {

// Pushes `pieces` one by one; the streamed text and whether it stopped.
std::pair<std::string, bool> stream(const std::vector<std::string>& stops,
                                    const std::vector<std::string>& pieces) {
  StopStrings s(stops);
  std::string out;
  for (const std::string& p : pieces) out += s.push(p);
  if (!s.stopped()) out += s.flush();
  return {out, s.stopped()};
}

TEST(StopStrings, CutsBeforeTheFirstStopString) {
  EXPECT_EQ(stream({"END"}, {"abc END def"}), (std::pair<std::string, bool>{"abc ", true}));
  EXPECT_EQ(stream({"xy", "b"}, {"aaxybb"}), (std::pair<std::string, bool>{"aa", true}));  // the earliest
  EXPECT_EQ(stream({"zzz"}, {"no stop here"}), (std::pair<std::string, bool>{"no stop here", false}));
  EXPECT_EQ(stream({}, {"a", "b"}), (std::pair<std::string, bool>{"ab", false}));
}

TEST(StopStrings, FindsAStopStringAcrossPushesAndHoldsItsStartBack) {
  StopStrings s({"\n\n"});
  EXPECT_EQ(s.push("one\n"), "one");  // "\n" may start the stop string: held
  EXPECT_EQ(s.push("two"), "\ntwo");  // it did not
  EXPECT_EQ(s.push("\n"), "");
  EXPECT_EQ(s.push("\nthree"), "");  // it did
  EXPECT_TRUE(s.stopped());
  EXPECT_EQ(s.push("more"), "");
  EXPECT_EQ(stream({"<|end|>"}, {"text <|e", "nd|> after"}), (std::pair<std::string, bool>{"text ", true}));
  EXPECT_EQ(stream({"<|end|>"}, {"text <|e", "nding"}),
            (std::pair<std::string, bool>{"text <|ending", false}));
}

TEST(StopStrings, KeepsUtf8CharactersWhole) {
  // The held-back tail starts where a stop string starts, i.e. at a character boundary.
  StopStrings s({"é!"});
  EXPECT_EQ(s.push("caf\xC3\xA9"), "caf");
  EXPECT_EQ(s.push("s"), "\xC3\xA9s");
}

}  // namespace
}  // namespace rootspec
