// Gateway: rootspec-http, the OpenAI-compatible HTTP front end of a target process (DESIGN §5;
// as vLLM's API server sits in front of its engine core). It speaks the client protocol to the
// target over ZeroMQ, one DEALER socket per HTTP request, and holds no model: the target
// tokenizes, applies the chat template, cuts stop strings and queues.
//
//   POST /v1/completions, /v1/chat/completions   (stream: server-sent events ending "data: [DONE]")
//   GET  /v1/models, /health (200 "ok" or "degraded": no drafter, ar only; 503 without a
//        target), /metrics (Prometheus text)
//
// A request is first checked here (openai.h), then by the target, which answers Accepted (it
// waits in the queue) or an Error (400, 404, 429 with Retry-After, 503, 504 in OpenAI's error
// shape). A client that goes away, streaming or not, queued or decoding, has its request
// cancelled: the gateway watches its connection (PeerWatch) while it waits. While the target is
// down every request is answered 503 at once (after the first that found it so); a request whose
// target goes away while it waits is answered 503 when the connection drops.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <zmq.hpp>

#include "chat_template.h"
#include "daemon_config.h"
#include "metrics.h"
#include "tokenizer.h"

namespace rootspec {

class Gateway {
 public:
  explicit Gateway(const DaemonConfig& config);
  // Binds [http] listen, logs "listening on http://host:port", serves until stop() or a signal.
  // Returns 0, or 1 when the address cannot be bound.
  int run();

 private:
  const DaemonConfig& config_;
  zmq::context_t ctx_;
  Metrics metrics_;
  std::string model_name_, api_key_;
  int64_t started_unix_ = 0;
  std::atomic<uint64_t> next_id_{1};
  std::atomic<bool> stopping_{false};     // a stop signal came: waiting requests end
  std::atomic<bool> target_down_{false};  // the last request found no target: probe first
  // Requests with tools are rendered here (the protocol's chat turns carry no calls): the model's
  // chat template (null: target.model has none the gateway can read) and, loaded at the first such
  // request, its tokenizer, which turns the rendered text into the ids the target decodes from.
  std::unique_ptr<ChatTemplate> chat_template_;
  std::mutex tokenizer_mutex_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  std::shared_ptr<const Tokenizer> tokenizer();
};

}  // namespace rootspec
