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

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar.h"
#include "matcher.h"

namespace rootspec::grammar {

// Token vocabulary as byte strings (Tokenizer::token_bytes), built once per tokenizer and shared.
class TokenVocabulary {
 public:
  // never_allowed: special tokens other than EOS (never in a mask). eos_id < 0: no EOS token.
  TokenVocabulary(std::vector<std::string> token_bytes, int32_t eos_id, std::vector<int32_t> never_allowed);

  int32_t size() const { return static_cast<int32_t>(bytes_.size()); }
  int32_t eos_id() const { return eos_id_; }
  int32_t mask_words() const { return (size() + 31) / 32; }  // uint32 words of a mask
  const std::string& token_bytes(int32_t id) const { return bytes_[id]; }

  // The trie of the maskable tokens (non-empty, not EOS, not never_allowed), in preorder. Node 0 is
  // the root (the empty prefix); node i > 0 extends its parent by byte(i).
  int32_t trie_nodes() const { return static_cast<int32_t>(byte_.size()); }
  int32_t max_depth() const { return max_depth_; }  // longest maskable token, bytes
  uint8_t byte(int32_t node) const { return byte_[node]; }
  int32_t depth(int32_t node) const { return depth_[node]; }
  int32_t subtree_end(int32_t node) const { return end_[node]; }  // one past the node's last descendant
  // Tokens whose bytes end exactly at `node`: sorted_tokens()[tokens_begin(node) .. tokens_begin(node + 1)).
  // The tokens of a whole subtree: [tokens_begin(node), tokens_begin(subtree_end(node))).
  int32_t tokens_begin(int32_t node) const { return tok_begin_[node]; }
  const std::vector<int32_t>& sorted_tokens() const { return tokens_; }  // by bytes

 private:
  std::vector<std::string> bytes_;  // [vocab]
  int32_t eos_id_;
  int32_t max_depth_ = 0;
  std::vector<uint8_t> byte_;       // [trie nodes]
  std::vector<int32_t> depth_;      // [trie nodes]
  std::vector<int32_t> end_;        // [trie nodes]
  std::vector<int32_t> tok_begin_;  // [trie nodes + 1]
  std::vector<int32_t> tokens_;     // [maskable tokens] in trie order
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
    size_t states_split = 0;     // automaton states whose split is made
    size_t uncertain_total = 0;  // uncertain tokens over those states
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
