// TargetChannel: the gateway's one connection to the target's client endpoint
// (docs/design.md#processes-and-messages), a DEALER socket that every HTTP request shares, each of
// its Generates under a request id of its own. ZeroMQ sockets belong to one thread, so a thread of
// the channel's own owns it: it sends what the gateway queues and hands every message it receives
// to the gateway's thread (the io_context's), where the listener of that request id reads it.
//
// The socket is ZMQ_IMMEDIATE: while no target is connected a send fails at once (the listener
// hears Unsent, and may send again) instead of queueing a Generate for a target that may come back
// much later. When the
// connection drops (the target died or restarted: it knows nothing of the requests it had), every
// listener hears TargetGone.
#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>
#include <zmq.hpp>

#include "protocol.h"

namespace rootspec {

struct TargetEvent {
  enum class Kind { Message, Unsent, TargetGone };
  Kind kind = Kind::Message;
  std::optional<Message> message;  // Kind::Message
};

class TargetChannel {
 public:
  using Listener = std::function<void(TargetEvent&)>;
  TargetChannel(boost::asio::io_context& io, zmq::context_t& ctx, const std::string& endpoint);
  ~TargetChannel();
  TargetChannel(const TargetChannel&) = delete;
  TargetChannel& operator=(const TargetChannel&) = delete;

  // On the io thread: `listener` hears the messages whose header names `request` (and Unsent
  // when the message sent for it could not go out) until forget(request).
  void listen(uint64_t request, Listener listener);
  void forget(uint64_t request);
  // From any thread: queues `bytes` (an encoded message about `request`) for the target.
  void send(uint64_t request, std::string bytes);

 private:
  void run();  // the channel's thread
  void deliver(std::vector<zmq::message_t> received, std::vector<uint64_t> unsent, bool gone);
  boost::asio::io_context& io_;
  zmq::context_t& ctx_;
  std::string endpoint_;
  int wake_fd_ = -1;  // eventfd: the channel's thread polls it beside the socket
  std::mutex outbox_mutex_;
  std::vector<std::pair<uint64_t, std::string>> outbox_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
  std::unordered_map<uint64_t, Listener> listeners_;  // io thread only
};

}  // namespace rootspec
