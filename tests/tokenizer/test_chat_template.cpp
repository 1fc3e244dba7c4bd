// Chat templates: Llama-3 output equals the peer's apply_chat_template (transformers.js Jinja) on
// the package's own tokenizer_config.json; the peer cannot parse Qwen3's template, so Qwen3 and
// Qwen2.5 are checked against the strings their model cards document (the peer is still asked,
// and compared with when it can render). Unknown templates are errors naming the file.
#include "chat_template.h"
#include "peer_fixture.h"
#include "tokenizer.h"

#include <nlohmann/json.hpp>

using namespace rootspec;
using json = nlohmann::json;

namespace {

struct Case {
    std::vector<ChatMessage> messages;
    ChatOptions              opt;
};

std::vector<Case> cases() {
    ChatOptions gen, nogen, nothink;
    nogen.add_generation_prompt = false;
    nothink.enable_thinking     = false;
    return {
        { { { "user", "Hi there" } }, gen },
        { { { "user", "Hi there" } }, nothink },
        { { { "system", "You are a terse assistant." }, { "user", "  What is 2+2?\n" } }, gen },
        { { { "user", "Translate: 你好，世界 👋" }, { "assistant", "Hello, world 👋" }, { "user", "Again, in Arabic: مرحبا" } }, gen },
        { { { "user", "Think first." }, { "assistant", "<think>\nreasoning here\n</think>\n\nThe answer is 4." }, { "user", "Why?" } }, nothink },
        { { { "system", "sys" }, { "user", "u1" }, { "assistant", "a1" } }, nogen },
        { { { "user", "line1\n\nline2\t<|eot_id|> inside" } }, gen },
        { { { "user", "\xE3\x80\x80\xC2\xA0 padded with U+3000 and U+00A0 \xC2\xA0\xE3\x80\x80\n" } }, gen },
    };
}

json to_json(const Case & c) {
    json msgs = json::array();
    for (const auto & m : c.messages) msgs.push_back({ { "role", m.role }, { "content", m.content } });
    return { { "messages", msgs }, { "options", { { "add_generation_prompt", c.opt.add_generation_prompt }, { "enable_thinking", c.opt.enable_thinking } } } };
}

// Renders every case with the peer; entries are null where the peer cannot render the template.
json peer_render(const std::string & model) {
    json all = json::array();
    for (const auto & c : cases()) all.push_back(to_json(c));
    return json::parse(peer::run({ "chat", model }, all.dump()));
}

void write(const peer::fs::path & p, const std::string & s) { std::ofstream(p, std::ios::binary) << s; }

} // namespace

TEST(ChatTemplate, Llama3MatchesPeer) {
    const std::string dir  = peer::model_dir("llama3");
    const auto        tmpl = ChatTemplate::from_tokenizer_config(dir + "/tokenizer_config.json");
    EXPECT_EQ(tmpl.name(), "llama3");
    const auto tok   = load_tokenizer(dir);
    const json theirs = peer_render("llama3");
    const auto cs     = cases();
    ASSERT_EQ(theirs.size(), cs.size());
    for (size_t i = 0; i < cs.size(); ++i) {
        ASSERT_FALSE(theirs[i].is_null()) << "the peer should render the Llama-3 template, case " << i;
        const std::string ours = tmpl.apply(cs[i].messages, cs[i].opt);
        EXPECT_EQ(ours, theirs[i]["text"].get<std::string>()) << "case " << i;
        EXPECT_EQ(tok->encode(ours, false), theirs[i]["ids"].get<std::vector<token_id>>()) << "case " << i;
    }
    // The documented Llama-3 prompt format (model card).
    EXPECT_EQ(tmpl.apply({ { "system", "S" }, { "user", "U" } }),
              "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|>"
              "<|start_header_id|>user<|end_header_id|>\n\nU<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplate, Qwen3DocumentedStrings) {
    const std::string dir  = peer::model_dir("qwen3");
    const auto        tmpl = ChatTemplate::from_tokenizer_config(dir + "/tokenizer_config.json");
    EXPECT_EQ(tmpl.name(), "qwen3");
    EXPECT_TRUE(tmpl.has_thinking_switch());
    const auto cs  = cases();
    const auto got = [&](size_t i) { return tmpl.apply(cs[i].messages, cs[i].opt); };
    EXPECT_EQ(got(0), "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n");
    EXPECT_EQ(got(1), "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
    EXPECT_EQ(got(2), "<|im_start|>system\nYou are a terse assistant.<|im_end|>\n<|im_start|>user\n  What is 2+2?\n<|im_end|>\n<|im_start|>assistant\n");
    EXPECT_EQ(got(3), "<|im_start|>user\nTranslate: 你好，世界 👋<|im_end|>\n<|im_start|>assistant\nHello, world 👋<|im_end|>\n"
                      "<|im_start|>user\nAgain, in Arabic: مرحبا<|im_end|>\n<|im_start|>assistant\n");
    // Reasoning of earlier turns is dropped from the history.
    EXPECT_EQ(got(4), "<|im_start|>user\nThink first.<|im_end|>\n<|im_start|>assistant\nThe answer is 4.<|im_end|>\n"
                      "<|im_start|>user\nWhy?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
    // A final assistant turn (after the last user turn) keeps an explicit think block.
    EXPECT_EQ(got(5), "<|im_start|>system\nsys<|im_end|>\n<|im_start|>user\nu1<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\na1<|im_end|>\n");

    // Where the peer can render Qwen3 (a later version), it must agree; this one cannot parse it.
    const json theirs = peer_render("qwen3");
    ASSERT_EQ(theirs.size(), cs.size());
    size_t rendered = 0;
    for (size_t i = 0; i < cs.size(); ++i) {
        if (theirs[i].is_null()) continue;
        ++rendered;
        EXPECT_EQ(got(i), theirs[i]["text"].get<std::string>()) << "case " << i;
    }
    std::printf("[qwen3] peer rendered %zu of %zu cases\n", rendered, cs.size());
}

TEST(ChatTemplate, Qwen25DefaultSystemFromTemplate) {
    // The non-tool part of Qwen2.5-Instruct's chat_template (tokenizer_config.json of the model).
    const std::string src =
        "{%- if tools %}\n    {{- '<|im_start|>system\\n' }}\n{%- else %}\n    {%- if messages[0]['role'] == 'system' %}\n"
        "        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}\n    {%- else %}\n"
        "        {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}\n"
        "    {%- endif %}\n{%- endif %}\n{%- for message in messages %}\n"
        "    {%- if (message.role == \"user\") or (message.role == \"system\" and not loop.first) or (message.role == \"assistant\" and not message.tool_calls) %}\n"
        "        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}\n    {%- endif %}\n{%- endfor %}\n"
        "{%- if add_generation_prompt %}\n    {{- '<|im_start|>assistant\\n' }}\n{%- endif %}\n";
    const auto tmpl = ChatTemplate::from_source(src, "", "qwen2.5");
    EXPECT_EQ(tmpl.name(), "chatml");
    EXPECT_FALSE(tmpl.has_thinking_switch());
    EXPECT_EQ(tmpl.apply({ { "user", "Hello" } }),
              "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
              "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n");
    EXPECT_EQ(tmpl.apply({ { "system", "Be brief." }, { "user", "Hello" } }),
              "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n");
    ChatOptions nothink;
    nothink.enable_thinking = false; // no switch in this template: ignored
    EXPECT_EQ(tmpl.apply({ { "user", "Hi" } }, nothink), tmpl.apply({ { "user", "Hi" } }));
}

TEST(ChatTemplate, UnknownTemplateNamesTheFile) {
    peer::TempDir tmp;
    const auto    cfg = tmp.path / "tokenizer_config.json";
    write(cfg, R"({"chat_template": "{% for m in messages %}[INST] {{ m.content }} [/INST]{% endfor %}"})");
    try {
        ChatTemplate::from_tokenizer_config(cfg.string());
        FAIL() << "an unknown template must be an error";
    } catch (const std::runtime_error & e) {
        EXPECT_NE(std::string(e.what()).find(cfg.string()), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("unknown chat template"), std::string::npos) << e.what();
    }
    write(cfg, R"({"bos_token": "<s>"})");
    EXPECT_THROW(ChatTemplate::from_tokenizer_config(cfg.string()), std::runtime_error);
    EXPECT_THROW(ChatTemplate::from_tokenizer_config((tmp.path / "missing.json").string()), std::runtime_error);
    const auto llama = ChatTemplate::from_source("<|start_header_id|><|end_header_id|><|eot_id|>{{ add_generation_prompt }}", "<s>", "x");
    EXPECT_THROW(llama.apply({ { "tool", "x" } }), std::invalid_argument);
}
