#include "client_queue.h"

#include <spdlog/spdlog.h>

#include <optional>

#include "clock.h"
#include "transport.h"

namespace rootspec {

ClientQueue::ClientQueue(zmq::socket_t& socket, int queue_depth, Server server)
    : socket_(socket), queue_depth_(queue_depth), server_(std::move(server)) {}

bool ClientQueue::send(const std::string& client, const std::string& bytes) {
  return send_routed(socket_, client, bytes);
}

void ClientQueue::reply_error(const std::string& client, uint64_t id, const std::string& field,
                              const std::string& message) {
  Header h;
  h.type = MessageType::Error;
  h.request = id;
  send_routed(socket_, client, encode(h, ErrorBody{field, message}));
}

void ClientQueue::reply_done(const std::string& client, uint64_t id, DoneBody done) {
  Header h;
  h.type = MessageType::Done;
  h.request = id;
  h.round = static_cast<uint32_t>(done.rounds);
  send_routed(socket_, client, encode(h, done));
  ++served_;
}

QueuedRequest ClientQueue::pop() {
  QueuedRequest front = std::move(queue_.front());
  queue_.pop_front();
  return front;
}

std::vector<std::pair<std::string, uint64_t>> ClientQueue::take_cancels() {
  std::vector<std::pair<std::string, uint64_t>> taken;
  taken.swap(cancels_);
  return taken;
}

void ClientQueue::accept(const std::string& client, uint64_t id, const GenerateBody& body) {
  if (shutdown_) return reply_error(client, id, "shutdown", "the target is shutting down");
  QueuedRequest p;
  p.client = client;
  p.id = id;
  try {
    p.request = server_.resolve(body);
  } catch (const ProtocolError& e) {
    spdlog::info("request {}: refused: {}", id, e.what());
    return reply_error(client, id, e.field, e.what());
  }
  if (static_cast<int>(queue_.size()) >= queue_depth_) {
    spdlog::warn("request {}: refused: the queue holds {} requests", id, queue_.size());
    return reply_error(client, id, "queue",
                       "the queue is full (" + std::to_string(queue_.size()) + " requests wait)");
  }
  p.received_ns = monotonic_ns();
  if (p.request.deadline_ms > 0)
    p.deadline_ns = p.received_ns + static_cast<int64_t>(p.request.deadline_ms) * 1000000;
  Header h;
  h.type = MessageType::Accepted;
  h.request = id;
  // Requests ahead of this one: the queue's, and one more when the batch has no room.
  const int32_t position = static_cast<int32_t>(queue_.size()) + (server_.batch_full() ? 1 : 0);
  if (!send_routed(socket_, client, encode(h, AcceptedBody{position}))) {
    spdlog::info("request {}: its client is gone; not queued", id);
    return;
  }
  spdlog::debug("request {}: accepted, {} prompt tokens, {} ahead", id, p.request.prompt.size(), position);
  queue_.push_back(std::move(p));
}

// A queued request ends here with its Done; any other is the server's to end (a decoding one),
// or already ended (then the server finds nothing to cancel).
void ClientQueue::cancel(const std::string& client, uint64_t id) {
  for (auto it = queue_.begin(); it != queue_.end(); ++it)
    if (it->client == client && it->id == id) {
      spdlog::info("request {}: cancelled while queued", id);
      DoneBody done;
      done.stop_reason = "cancelled";
      done.prompt_tokens = static_cast<int32_t>(it->request.prompt.size());
      reply_done(it->client, it->id, std::move(done));
      queue_.erase(it);
      return;
    }
  cancels_.emplace_back(client, id);
}

void ClientQueue::read() {
  while (auto frame = recv_routed(socket_)) {
    std::optional<Message> msg;
    try {
      msg.emplace(frame->payload.data(), frame->payload.size());
    } catch (const ProtocolError& e) {
      reply_error(frame->identity, 0, e.field, e.what());
      continue;
    }
    const Header& h = msg->header();
    try {
      switch (h.type) {
        case MessageType::Generate:
          accept(frame->identity, h.request, msg->generate());
          break;
        case MessageType::Cancel:
          msg->empty_body();
          cancel(frame->identity, h.request);
          break;
        case MessageType::Status: {
          msg->empty_body();
          StatusBody st = server_.status();
          st.waiting = static_cast<int32_t>(queue_.size());
          st.queue_limit = queue_depth_;
          st.served = served_;
          send_routed(socket_, frame->identity, encode(h, st));
          break;
        }
        case MessageType::Shutdown:
          msg->empty_body();
          shutdown_ = true;
          for (const QueuedRequest& q : queue_)
            reply_error(q.client, q.id, "shutdown", "the target is shutting down");
          queue_.clear();
          break;
        default:
          reply_error(frame->identity, h.request, "type",
                      std::string("the target does not accept ") + message_type_name(h.type) + " messages");
      }
    } catch (const ProtocolError& e) {
      reply_error(frame->identity, h.request, e.field, e.what());
    }
  }
  end_past_deadline();
}

// Queued requests past their deadline end now, not when they reach the front.
void ClientQueue::end_past_deadline() {
  const int64_t now = monotonic_ns();
  for (auto it = queue_.begin(); it != queue_.end();) {
    if (it->deadline_ns == 0 || now < it->deadline_ns) {
      ++it;
      continue;
    }
    spdlog::info("request {}: its deadline of {} ms passed in the queue", it->id, it->request.deadline_ms);
    reply_error(it->client, it->id, "deadline",
                "the request waited past its deadline of " + std::to_string(it->request.deadline_ms) + " ms");
    it = queue_.erase(it);
  }
}

}  // namespace rootspec
