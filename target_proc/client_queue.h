// ClientQueue: the target's clients (rootspec-client, the HTTP gateway, the harness) on its
// ROUTER socket, and the requests waiting for a place in the batch. read() takes every waiting
// message and answers at once what it can: a Generate is checked and Accepted (then queued, FIFO,
// at most [http] queue_depth) or refused with an Error; a Status is answered; a Cancel of a
// queued request, or a queued request past its deadline, ends it. What only the server can act on
// is kept for it to take between rounds: a Cancel of a decoding request (take_cancels), a
// Shutdown (shutdown_requested). read() never touches the batch, so the server can read its
// clients while a round waits for the drafter's pools without the round's members changing under it.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <utility>
#include <vector>
#include <zmq.hpp>

#include "generate_request.h"
#include "protocol.h"

namespace rootspec {

// A request accepted and waiting, as it joins the batch.
struct QueuedRequest {
  std::string client;  // ROUTER identity
  uint64_t id = 0;     // the client's request id (replies carry it)
  ResolvedRequest request;
  int64_t received_ns = 0;
  int64_t deadline_ns = 0;  // 0: none
};

class ClientQueue {
 public:
  // What the queue needs from the server, read-only: a Generate's checks (throwing ProtocolError
  // naming the field), the Status of everything past the queue (running requests, the drafter,
  // the prefix caches; the queue fills in its own figures), and whether the batch is full (an
  // accepted request then waits for one more).
  struct Server {
    std::function<ResolvedRequest(const GenerateBody&)> resolve;
    std::function<StatusBody()> status;
    std::function<bool()> batch_full;
  };
  ClientQueue(zmq::socket_t& socket, int queue_depth, Server server);

  // Reads and answers every waiting client message, then ends the queued requests whose deadline
  // passed.
  void read();

  bool empty() const { return queue_.empty(); }
  size_t size() const { return queue_.size(); }
  // The oldest queued request, removed from the queue.
  QueuedRequest pop();
  // The decoding requests (client, id) whose client sent a Cancel since the last call.
  std::vector<std::pair<std::string, uint64_t>> take_cancels();
  // A Shutdown came: every queued request was refused, and later Generates are.
  bool shutdown_requested() const { return shutdown_; }
  // Done messages sent.
  int64_t served() const { return served_; }

  // Replies. send() is false where the client has gone.
  bool send(const std::string& client, const std::string& bytes);
  void reply_error(const std::string& client, uint64_t id, const std::string& field,
                   const std::string& message);
  void reply_done(const std::string& client, uint64_t id, DoneBody done);

 private:
  void accept(const std::string& client, uint64_t id, const GenerateBody& body);
  void cancel(const std::string& client, uint64_t id);
  void end_past_deadline();

  zmq::socket_t& socket_;  // ROUTER, bound by the server
  const int queue_depth_;
  Server server_;
  std::deque<QueuedRequest> queue_;
  std::vector<std::pair<std::string, uint64_t>> cancels_;
  int64_t served_ = 0;
  bool shutdown_ = false;
};

}  // namespace rootspec
