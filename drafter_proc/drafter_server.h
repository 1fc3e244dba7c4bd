// DrafterServer: the drafter process (docs/design.md#processes-and-messages). For each request the
// target decodes it keeps a session (a KV region of its own over one copy of the weights:
// ModelRuntime::sequences, [target] max_batch of them) holding the committed context; for every
// Prefill or Commit it appends the new tokens, grows the round's pool with tree passes over the
// drafter model and sends the Pool at once. A request's session ends with the target's Cancel (sent
// when the request ends), or, when every session is in use, the least recently used one is taken.
//
// The requests of a batch draft together: every message waiting is read first (a batch's
// Commits come one after another as the target verifies its members), then one step of every
// pool being drafted runs in passes shared across the sessions (draft_step_together,
// runtime_drafter.h: a prefill chunk or an expansion step each), and so on until each pool is
// whole; a pool goes out as soon as it is, and a Commit read between two steps joins at the
// next. Draft-ahead runs only when no pool is being drafted and no message waits.
//
// A Prefill's structured output (its constraint) is compiled with the drafter's own tokenizer
// (grammar_vocabulary.h) into the session's sampling parameters when [drafter] process_rows is on,
// so that the draft rows are masked and the pools hold grammatical paths only. Exactness never
// depends on it (the target masks its own rows): a constraint the drafter cannot compile, or a
// drafter model folder without a tokenizer, drafts unmasked, with one warning.
#pragma once

#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "constraint.h"
#include "daemon_config.h"
#include "model_runtime.h"
#include "pool_channel.h"
#include "protocol.h"
#include "runtime_drafter.h"
#include "shm_channel.h"

namespace rootspec {

class DrafterServer {
 public:
  // `sequences`: one runtime per session, sharing a backend (ModelRuntime::sequences).
  DrafterServer(const DaemonConfig& config, std::vector<std::unique_ptr<ModelRuntime>> sequences);
  // Serves until Shutdown (returns 0) or the target dies (returns 3).
  int run();

 private:
  // Handles one message; returns false on Shutdown. One handler per message type; each answers
  // a bad message with an Error (refuse) and returns true.
  bool handle(const std::string& identity, const void* data, size_t size);
  bool on_hello(const std::string& identity, const Header& h, const HelloBody& b);  // a (new) target: Ready
  bool on_prefill(const std::string& identity, const Header& h, const PrefillBody& b);  // a request's start
  bool on_commit(const std::string& identity, const Header& h, const CommitBody& b);    // a round's tokens
  void on_cancel(const Header& h);                                                      // a request's end
  // Sends to the target over ZeroMQ, ringing its shared-memory doorbell when the pair has one.
  void send_to_target(const std::string& identity, const std::string& bytes);
  // Answers a bad message with an Error naming `field`; returns true (keep serving).
  bool refuse(const std::string& identity, const Header& about, const std::string& field,
              const std::string& message);
  // One request's drafting state.
  struct Session {
    ModelRuntime* rt = nullptr;
    std::unique_ptr<DraftSession> draft;
    uint64_t request = 0;                          // 0: free
    uint32_t next_round = 0;                       // round the next Commit must carry
    int64_t last_used_ns = 0;                      // the least recently used is taken when all are
    int64_t ahead_start_ns = 0, ahead_end_ns = 0;  // the last draft-ahead (a hit's drafting times)
    std::string identity;                          // the target's, for the Pool being drafted
    PoolBody body;                                 // the Pool being drafted, or the last sent
    bool ahead_due = false;                        // draft ahead below the Pool just sent
  };
  Session* session_of(uint64_t request);
  // A session for a new request: a free one, else the least recently used (its request lost).
  Session& take_session(uint64_t request);
  void end_sessions();  // a Hello starts over: no request is open
  // The next message waiting (held ones first, then shared memory, then ZeroMQ), if any.
  struct HeldMessage {
    std::string identity, bytes;
  };
  std::optional<HeldMessage> next_message();
  // Appends `tokens` to the session's context and starts its pool (sent at once when drafted
  // ahead); draft_step() grows it.
  void begin_draft(const std::string& identity, Session& s, const std::vector<int32_t>& tokens);
  // One step of every session's pool being drafted, in shared passes; sends the pools that are
  // whole. False: none was being drafted.
  bool draft_step();
  // Sends the session's pool; with draft-ahead on, its draft ahead is due.
  void send_drafted(Session& s);
  // Drafts ahead for one session whose pool went out (draft_ahead); false: none due.
  bool draft_ahead_due();
  void send_pool(const std::string& identity, const Header& h, const PoolBody& body);
  void draft_ahead(Session& s, const Pool& sent);  // runtime_drafter.h: DraftSession::draft_ahead
  // A Commit of `s`'s request and the round expected next whose tokens are its draft-ahead guess.
  bool is_guessed_commit(const Session& s, const std::string& bytes) const;
  // The Prefill's constraint over the drafter's vocabulary; null (drafting unmasked) when it
  // cannot be compiled here.
  std::shared_ptr<const grammar::TokenConstraint> draft_constraint(uint64_t request,
                                                                   const grammar::OutputConstraint& c);

  const DaemonConfig& config_;
  std::vector<std::unique_ptr<ModelRuntime>> runtimes_;  // [sessions] over one backend
  // Committed K/V of prompt prefixes, shared by the sessions (null: [drafter] prefix_cache_mb 0, or
  // a backend that cannot use one exactly: runtime_drafter.h).
  std::unique_ptr<PrefixCache> prefix_cache_;
  std::vector<Session> sessions_;
  int vocab_ = 0;
  // The drafter tokenizer's vocabulary as constraints mask it; null without a tokenizer.
  std::shared_ptr<const grammar::TokenVocabulary> grammar_vocab_;
  std::string no_grammar_why_;  // why grammar_vocab_ is null
  bool warned_unmasked_ = false;
  zmq::context_t ctx_;
  zmq::socket_t router_;

  int target_pid_ = 0;  // from Hello: the drafter exits when it is gone
  // Cancels of requests with no session, newest last (at most kRememberedCancels): a request's
  // Prefill that went over ZeroMQ (too large for the shared-memory queue, or the queue full) can
  // arrive after its Cancel went through shared memory; such a Prefill is dropped, not given a
  // session that nothing would end.
  static constexpr size_t kRememberedCancels = 256;
  std::deque<uint64_t> cancelled_before_prefill_;
  std::shared_ptr<PoolChannel> nccl_;  // pools over NCCL when the target asked for it
  std::unique_ptr<ShmChannel> shm_;    // messages through shared memory (Hello.shm), see shm_channel.h
  std::string target_identity_;        // the target's ZeroMQ identity (replies to shm messages)
  std::deque<HeldMessage> held_;       // read while drafting ahead, not handled yet
};

}  // namespace rootspec
