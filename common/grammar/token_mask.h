// Token masks: which tokens of a vocabulary a matcher state accepts whole (mask_G of
// docs/design.md#the-processed-target-law).
//
// XGrammar's adaptive token mask cache (Dong et al., MLSys'25), over this library's automaton:
//   - the vocabulary's byte strings form a trie (TokenVocabulary), walked depth-first so that a
//     shared prefix is stepped once and a subtree is dropped as soon as no stack survives it;
//   - for each automaton state q that can be a stack top, one walk with q alone on a stack whose
//     bottom is a sentinel splits the vocabulary into tokens accepted whatever lies below q
//     (context-independent), rejected whatever lies below, and "uncertain": those that need the
//     rule holding q to return and the caller to go on. The split is made once per state (lazily,
//     or all at once by precompute_all) and shared by every matcher of the grammar;
//   - a mask is the union over the state's stacks of the accepted sets, plus the uncertain tokens
//     checked against the real stack; finished masks are cached by stack set.
// The result is exact: the same as copying the matcher and calling accept_bytes for every token.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar.h"
#include "matcher.h"

namespace rootspec::grammar {

// A trie of token byte strings, in preorder. Node 0 is the root (the empty prefix); node i > 0
// extends its parent by byte(i).
class TokenTrie {
 public:
  TokenTrie() = default;
  TokenTrie(const std::vector<std::string>& bytes, std::vector<int32_t> ids);  // ids: the tokens it holds
  int32_t nodes() const { return static_cast<int32_t>(byte_.size()); }
  int32_t max_depth() const { return max_depth_; }  // longest token, bytes
  uint8_t byte(int32_t node) const { return byte_[node]; }
  int32_t depth(int32_t node) const { return depth_[node]; }
  int32_t subtree_end(int32_t node) const { return end_[node]; }  // one past the node's last descendant
  // Tokens whose bytes end exactly at `node`: tokens()[tokens_begin(node) .. tokens_begin(node + 1)).
  // The tokens of a whole subtree: [tokens_begin(node), tokens_begin(subtree_end(node))).
  int32_t tokens_begin(int32_t node) const { return tok_begin_[node]; }
  const std::vector<int32_t>& tokens() const { return tokens_; }  // by bytes

 private:
  int32_t max_depth_ = 0;
  std::vector<uint8_t> byte_;       // [nodes]
  std::vector<int32_t> depth_;      // [nodes]
  std::vector<int32_t> end_;        // [nodes]
  std::vector<int32_t> tok_begin_;  // [nodes + 1]
  std::vector<int32_t> tokens_;     // [tokens] in trie order
};

// Token vocabulary as byte strings (Tokenizer::token_bytes), built once per tokenizer and shared.
class TokenVocabulary {
 public:
  // never_allowed: special tokens other than EOS (never in a mask). eos_id < 0: no EOS token.
  TokenVocabulary(std::vector<std::string> token_bytes, int32_t eos_id, std::vector<int32_t> never_allowed);

  int32_t size() const { return static_cast<int32_t>(bytes_.size()); }
  int32_t eos_id() const { return eos_id_; }
  int32_t mask_words() const { return (size() + 31) / 32; }  // uint32 words of a mask
  const std::string& token_bytes(int32_t id) const { return bytes_[id]; }

  // The trie of the maskable tokens (non-empty, not EOS, not never_allowed).
  const TokenTrie& trie() const { return all_; }
  int32_t trie_nodes() const { return all_.nodes(); }
  int32_t max_depth() const { return all_.max_depth(); }
  uint8_t byte(int32_t node) const { return all_.byte(node); }
  int32_t depth(int32_t node) const { return all_.depth(node); }
  int32_t subtree_end(int32_t node) const { return all_.subtree_end(node); }
  int32_t tokens_begin(int32_t node) const { return all_.tokens_begin(node); }
  const std::vector<int32_t>& sorted_tokens() const { return all_.tokens(); }

  // JSON string content, the most common state of a structured output and the costliest to
  // split (nearly every token goes on in it): the maskable tokens whose bytes a JSON string's
  // unescaped characters ([^"\\\x00-\x1F] as UTF-8, the token possibly ending inside a character)
  // make up whole, with their characters (one ended inside counts), fewest first; and the trie of
  // every other maskable token.
  const std::vector<std::pair<int32_t, size_t>>& string_content_tokens() const { return content_; }
  size_t string_content_max_chars() const { return content_max_chars_; }
  const TokenTrie& other_than_string_content() const { return rest_; }

  // A state that loops on a set of bytes C (and on nothing else of them) accepts every token of
  // C* whole; of the others only the bytes from the first one outside C need walking. Per C,
  // made on first use and kept (at most kMaxLoopClasses; past them, none is made).
  struct LoopClassTokens {
    std::vector<uint32_t> accepted;  // [mask words] the maskable tokens in C*
    TokenTrie suffixes;              // the others, each from its first byte outside C
  };
  using ByteSet = std::array<uint64_t, 4>;
  const LoopClassTokens* loop_class_tokens(const ByteSet& c) const;  // nullptr past the cap
  static constexpr size_t kMaxLoopClasses = 64;

 private:
  std::vector<std::string> bytes_;  // [vocab]
  int32_t eos_id_;
  TokenTrie all_, rest_;
  std::vector<std::pair<int32_t, size_t>> content_;  // [string-content tokens] (token, characters)
  size_t content_max_chars_ = 0;
  std::vector<int32_t> maskable_;  // [maskable tokens]
  mutable std::mutex loops_mu_;
  mutable std::map<ByteSet, std::unique_ptr<const LoopClassTokens>> loops_;
};

// One per compiled grammar and vocabulary. fill_mask is thread-safe (concurrent calls share the
// per-state splits and the mask cache under one mutex; the trie walks run outside it).
class TokenMasker {
 public:
  TokenMasker(std::shared_ptr<const Grammar> g, std::shared_ptr<const TokenVocabulary> v);

  // bits [ceil(vocab/32)] (bit t%32 of word t/32 set = token t allowed): tokens whose whole byte
  // string the matcher accepts from its state; EOS exactly when m.complete(); tokens with empty
  // byte strings and never_allowed tokens never. m must run this masker's grammar.
  void fill_mask(const Matcher& m, uint32_t* bits) const;

  // Makes the context-independent split of every automaton state now (the "compile" part of the
  // cost), instead of on first use.
  void precompute_all();

  // Finished masks kept (each ceil(vocab/32) words); 0 turns the cache off. Default 1024.
  void set_cache_capacity(size_t entries);

  struct Stats {
    size_t states_split = 0;           // automaton states whose split is made
    size_t string_content_splits = 0;  // of those, made inside a JSON string (content tokens unwalked)
    size_t loop_class_splits = 0;      // of those, made at a loop over a set of bytes (its tokens unwalked)
    size_t uncertain_total = 0;        // uncertain tokens over those states
    size_t cache_hits = 0, cache_misses = 0;
  };
  Stats stats() const;

  const TokenVocabulary& vocabulary() const { return *vocab_; }

 private:
  struct Split {
    std::vector<uint32_t> accepted;  // [mask words] accepted whatever lies below the state
    std::vector<int32_t> uncertain;  // tokens to check with the real stack, in trie order
  };
  struct CacheEntry {
    std::vector<StackRef> stacks;
    bool complete;
    std::vector<uint32_t> bits;  // [mask words]
  };

  const Split& split(int32_t state) const;  // lazily made; needs mu_ held
  Split make_split(int32_t state) const;
  // Walks `trie` from `state` (on a sentinel stack) into `out`.
  void walk_trie(int32_t state, const TokenTrie& trie, Split& out) const;
  // The bytes on which `state` loops back to itself, where that is all it does on them and the
  // state neither returns nor calls; nullopt where too few bytes loop to be worth it.
  std::optional<TokenVocabulary::ByteSet> loop_class(int32_t state) const;
  static constexpr int kMinLoopClass = 16;  // fewer looping bytes: the plain walk is cheap
  // Inside a JSON string's content: the most characters `state` reads on (SIZE_MAX: no bound),
  // where it reads every character alike at each position (any string, or one with lengths);
  // nullopt otherwise (a pattern, a format, not a string).
  std::optional<size_t> string_content_chars(int32_t state) const;
  void check_uncertain(const StackRef& stack, const std::vector<int32_t>& tokens, uint32_t* bits) const;

  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const TokenVocabulary> vocab_;
  mutable std::mutex mu_;
  mutable std::vector<std::unique_ptr<Split>> splits_;  // [automaton states]
  mutable std::unordered_map<uint64_t, std::vector<CacheEntry>> cache_;
  mutable size_t cache_size_ = 0;
  size_t cache_capacity_ = 1024;
  mutable Stats stats_;
};

}  // namespace rootspec::grammar
