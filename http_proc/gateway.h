// Gateway: rootspec-http, the OpenAI-compatible HTTP front end of a target process
// (docs/design.md#processes-and-messages; as vLLM's API server sits in front of its engine core).
// It speaks the client protocol to the target over ZeroMQ (TargetChannel: one DEALER socket that
// every HTTP request shares, each under its own request id) and holds no model: the target
// tokenizes, applies the chat template, cuts stop strings and queues. One thread serves every
// connection and every request (http_server.h); a request waiting on the target costs memory, not a
// thread.
//
//   POST /v1/completions, /v1/chat/completions   (stream: server-sent events ending "data: [DONE]")
//   GET  /v1/models, /health (200 "ok" or "degraded": no drafter, ar only; 503 without a
//        target), /metrics (Prometheus text)
//
// A request is first checked here (openai.h), then by the target, which answers Accepted (it
// waits in the queue) or an Error (400, 404, 429 with Retry-After, 503, 504 in OpenAI's error
// shape). A client that goes away, streaming or not, queued or decoding, has its request
// cancelled: the front end watches its connection while it waits. While no target is connected
// every request is answered 503 within a second; a request whose target goes away while it waits is
// answered 503 when the connection drops. SIGTERM or SIGINT stops the gateway gracefully: it
// stops accepting, every request in progress is cancelled at the target and answered (503, or
// a stream's error event and [DONE]), and it exits 0 once its connections have closed.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <zmq.hpp>

#include "chat_template.h"
#include "daemon_config.h"
#include "http_server.h"
#include "metrics.h"
#include "protocol.h"
#include "target_channel.h"

namespace rootspec {

class Gateway {
 public:
  explicit Gateway(const DaemonConfig& config);
  ~Gateway();
  // Binds [http] listen, logs "listening on http://host:port", serves until a stop signal.
  // Returns 0, or 1 when the address cannot be bound.
  int run();

 private:
  class GenerateCall;  // one completion request: its n Generates, their answers, its response
  void handle(const std::shared_ptr<HttpExchange>& exchange);
  void generate(const std::shared_ptr<HttpExchange>& exchange, int endpoint);
  // The target's Status within `timeout_ms` (nullopt: it did not answer).
  void ask_status(int timeout_ms, std::function<void(std::optional<StatusBody>)> done);
  void housekeep();  // the requests' accept and silence deadlines
  void stop();

  const DaemonConfig& config_;
  boost::asio::io_context io_;
  zmq::context_t ctx_;
  std::unique_ptr<TargetChannel> channel_;
  std::unique_ptr<HttpServer> server_;
  boost::asio::steady_timer housekeeping_;
  Metrics metrics_;
  std::string model_name_, api_key_;
  int64_t started_unix_ = 0;
  uint64_t next_id_ = 1;
  bool stopping_ = false;
  std::unordered_map<GenerateCall*, std::shared_ptr<GenerateCall>> calls_;  // in progress
  // The model's chat template (null: target.model has none the gateway can read): the target
  // applies it; the gateway reads its tool-call format, to force calls and to parse them.
  std::unique_ptr<ChatTemplate> chat_template_;
};

}  // namespace rootspec
