// rootspec-tokenize: encode, decode or render a chat prompt with a model folder's tokenizer.
//   rootspec-tokenize --model DIR --encode TEXT [--special] [--json]
//   rootspec-tokenize --model DIR --decode "1 2 3" [--json]          (ids separated by spaces or commas)
//   rootspec-tokenize --model DIR --chat MESSAGE [--system TEXT] [--no-thinking] [--json]
#include "chat_template.h"
#include "token_ids.h"
#include "tokenizer.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <iostream>
#include <sstream>

using namespace rootspec;

static std::vector<token_id> parse_ids(const std::string& s) {
  try {
    const std::vector<int32_t> ids = parse_token_ids(s);
    return std::vector<token_id>(ids.begin(), ids.end());
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(std::string("--decode: ") + e.what());
  }
}

static void print_ids(const std::vector<token_id>& ids) {
  for (size_t i = 0; i < ids.size(); ++i) std::cout << (i ? " " : "") << ids[i];
  std::cout << "\n";
}

int main(int argc, char** argv) {
  CLI::App app{"Tokenize, detokenize or apply the chat template of a model folder"};
  std::string model, encode_text, decode_ids, chat_msg, system_msg;
  bool json = false, special = false, no_thinking = false;
  app.add_option("--model", model, "model folder (tokenizer.json or config.json with rootspec_tokenizer)")
      ->required();
  auto* enc = app.add_option("--encode", encode_text, "text to encode");
  auto* dec = app.add_option("--decode", decode_ids, "token ids to decode, separated by spaces or commas");
  auto* chat = app.add_option("--chat", chat_msg, "user message to render with the chat template and encode");
  enc->excludes(dec)->excludes(chat);
  dec->excludes(chat);
  app.add_option("--system", system_msg, "system message for --chat");
  app.add_flag("--special", special, "with --encode: add the model's special tokens (e.g. BOS)");
  app.add_flag("--no-thinking", no_thinking, "with --chat: Qwen3 non-thinking generation prompt");
  app.add_flag("--json", json, "print JSON");
  CLI11_PARSE(app, argc, argv);
  if (!*enc && !*dec && !*chat) {
    std::cerr << "one of --encode, --decode, --chat is required\n" << app.help();
    return 2;
  }

  try {
    const auto tok = load_tokenizer(model);
    if (*enc) {
      const auto ids = tok->encode(encode_text, special);
      if (json)
        std::cout << nlohmann::json{{"ids", ids}}.dump() << "\n";
      else
        print_ids(ids);
    } else if (*dec) {
      const std::string text = tok->decode(parse_ids(decode_ids));
      if (json)
        std::cout << nlohmann::json{{"text", text}}.dump() << "\n";
      else
        std::cout << text << "\n";
    } else {
      const auto tmpl = ChatTemplate::from_tokenizer_config(
          (std::filesystem::path(model) / "tokenizer_config.json").string());
      std::vector<ChatMessage> msgs;
      if (!system_msg.empty()) msgs.push_back({"system", system_msg});
      msgs.push_back({"user", chat_msg});
      ChatOptions opt;
      opt.enable_thinking = !no_thinking;
      const std::string text = tmpl.apply(msgs, opt);
      // The rendered prompt already holds BOS where the template wants it.
      const auto ids = tok->encode(text, false);
      if (json) {
        std::cout << nlohmann::json{{"template", tmpl.name()}, {"text", text}, {"ids", ids}}.dump() << "\n";
      } else {
        std::cout << text << "\n";
        print_ids(ids);
      }
    }
  } catch (const std::exception& e) {
    std::cerr << "rootspec-tokenize: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
