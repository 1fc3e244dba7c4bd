// StopStrings: a request's streamed text cut before the first stop string (OpenAI's `stop`).
// Text that may be the start of a stop string is held back until later text decides, so what
// was streamed never has to be taken back; a stop string split across tokens is found too.
#pragma once

#include <string>
#include <vector>

namespace rootspec {

class StopStrings {
 public:
  explicit StopStrings(std::vector<std::string> stops);

  // Appends decoded text; returns what can be streamed now. Once a stop string appears, returns
  // the text before it, and stopped() is true (later calls return nothing).
  std::string push(const std::string& text);
  // The held-back text, when the request ends without a stop string.
  std::string flush();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string pending_;  // text not streamed yet: a possible start of a stop string
  bool stopped_ = false;
};

}  // namespace rootspec
