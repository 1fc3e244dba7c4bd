// Chat templates (common/text/chat_template.h): the Jinja source is recognised, never run. The
// input is the template, a NUL, then messages as role NUL content NUL …
// Contract: an unrecognised template is a std::runtime_error naming its origin; a recognised one
// renders any messages, or refuses a role with std::invalid_argument naming it; nothing else.
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "chat_template.h"
#include "fuzz_contract.h"

using namespace rootspec;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> parts;
  for (size_t start = 0;;) {
    const size_t nul = input.find('\0', start);
    parts.push_back(input.substr(start, nul == std::string::npos ? std::string::npos : nul - start));
    if (nul == std::string::npos) break;
    start = nul + 1;
  }
  std::optional<ChatTemplate> chat;
  try {
    chat.emplace(ChatTemplate::from_source(parts[0], "<s>", "fuzz/tokenizer_config.json"));
  } catch (const std::runtime_error& e) {
    FUZZ_CHECK_NAMED(e.what(), "fuzz/tokenizer_config.json");
    return 0;
  }
  std::vector<ChatMessage> messages;
  for (size_t i = 1; i + 1 < parts.size(); i += 2) messages.push_back({parts[i], parts[i + 1]});
  for (bool generation : {false, true})
    for (bool thinking : {false, true}) {
      try {
        (void)chat->apply(messages, ChatOptions{generation, thinking, "1 Dec 2026"});
      } catch (const std::invalid_argument& e) {
        bool named = false;
        for (const ChatMessage& m : messages)
          named = named || std::string(e.what()).find(m.role) != std::string::npos;
        FUZZ_CHECK(named, e.what());
      }
    }
  return 0;
}
