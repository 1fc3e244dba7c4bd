// Transport: ZeroMQ plumbing shared by the target, the drafter and the client
// (docs/design.md#processes-and-messages). Messages are single frames of protocol.h bytes; ROUTER
// sockets add the peer identity frame.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <zmq.hpp>

#include "clock.h"

namespace rootspec {

// True when a peer bound at `endpoint` must be on this host (ipc://, inproc://, tcp:// on a
// loopback address), so the two can share memory.
bool same_host_endpoint(const std::string& endpoint);

// True while process `pid` exists and is not a zombie (the peer-death check of both daemons).
bool process_alive(int pid);

// Watches a socket for its connections closing (a peer process died or went away). The socket
// must outlive the watch (declare the watch after it).
//
// ZeroMQ's I/O thread sends each event to the watch with a blocking send: were the watch's end
// closed while the socket still reported events, or its queue full, that thread would block for
// good and every socket of the context with it. So the queue is unbounded and the destructor
// stops the monitor before closing its end.
class DisconnectWatch {
 public:
  DisconnectWatch(zmq::context_t& ctx, zmq::socket_t& socket, const std::string& name);
  ~DisconnectWatch();
  DisconnectWatch(const DisconnectWatch&) = delete;
  DisconnectWatch& operator=(const DisconnectWatch&) = delete;
  // Drains pending events; true if a connection closed since the last call.
  bool poll_disconnected();
  zmq::socket_t& events() { return events_; }

 private:
  void* watched_;         // the socket's handle
  zmq::socket_t events_;  // PAIR, connected to the monitor's
};

// A frame received on a ROUTER socket: the peer identity and the payload.
struct RoutedFrame {
  std::string identity;
  zmq::message_t payload;
};
// Receives [identity][payload] from a ROUTER socket without blocking; nullopt if none.
// Frames of other shapes are drained and reported as an empty payload.
std::optional<RoutedFrame> recv_routed(zmq::socket_t& router);
// Sends [identity][bytes]; false if the peer is gone (ROUTER_MANDATORY: EHOSTUNREACH).
bool send_routed(zmq::socket_t& router, const std::string& identity, const std::string& bytes);

}  // namespace rootspec
