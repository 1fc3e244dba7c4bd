#include "target_channel.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <boost/asio/post.hpp>
#include <memory>
#include <system_error>

#include "transport.h"

namespace rootspec {

TargetChannel::TargetChannel(boost::asio::io_context& io, zmq::context_t& ctx, const std::string& endpoint)
    : io_(io), ctx_(ctx), endpoint_(endpoint) {
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) throw std::system_error(errno, std::generic_category(), "eventfd");
  // Stop signals belong to the io thread (its signal_set): the channel's thread never takes them.
  sigset_t block, previous;
  sigemptyset(&block);
  sigaddset(&block, SIGTERM);
  sigaddset(&block, SIGINT);
  pthread_sigmask(SIG_BLOCK, &block, &previous);
  thread_ = std::thread([this] { run(); });
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
}

TargetChannel::~TargetChannel() {
  stopping_ = true;
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof one);
  thread_.join();
  close(wake_fd_);
}

void TargetChannel::listen(uint64_t request, Listener listener) { listeners_[request] = std::move(listener); }

void TargetChannel::forget(uint64_t request) { listeners_.erase(request); }

void TargetChannel::send(uint64_t request, std::string bytes) {
  {
    std::lock_guard<std::mutex> lock(outbox_mutex_);
    outbox_.emplace_back(request, std::move(bytes));
  }
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof one);
}

void TargetChannel::run() {
  zmq::socket_t socket(ctx_, zmq::socket_type::dealer);
  socket.set(zmq::sockopt::linger, 100);    // a Cancel sent just before stopping still goes out
  socket.set(zmq::sockopt::immediate, 1);   // no queueing for a target that is not there
  socket.set(zmq::sockopt::rcvhwm, 0);      // every request's Deltas share this one pipe
  socket.set(zmq::sockopt::sndhwm, 0);
  DisconnectWatch watch(ctx_, socket, "gateway-target");
  socket.connect(endpoint_);
  std::vector<std::pair<uint64_t, std::string>> sending;
  while (!stopping_) {
    zmq::pollitem_t items[] = {{socket.handle(), 0, ZMQ_POLLIN, 0},
                               {nullptr, wake_fd_, ZMQ_POLLIN, 0},
                               {watch.events().handle(), 0, ZMQ_POLLIN, 0}};
    try {
      zmq::poll(items, 3, std::chrono::milliseconds(100));
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) continue;
      throw;
    }
    uint64_t count;
    (void)!read(wake_fd_, &count, sizeof count);
    {
      std::lock_guard<std::mutex> lock(outbox_mutex_);
      sending.swap(outbox_);
    }
    std::vector<uint64_t> unsent;
    for (auto& [request, bytes] : sending)
      if (!socket.send(zmq::buffer(bytes), zmq::send_flags::dontwait)) unsent.push_back(request);
    sending.clear();
    std::vector<zmq::message_t> received;
    for (;;) {
      zmq::message_t m;
      if (!socket.recv(m, zmq::recv_flags::dontwait)) break;
      received.push_back(std::move(m));
    }
    const bool gone = watch.poll_disconnected();
    if (!received.empty() || !unsent.empty() || gone) deliver(std::move(received), std::move(unsent), gone);
  }
  // What was queued last (the Cancels of a stopping gateway) still goes out, within the linger.
  std::lock_guard<std::mutex> lock(outbox_mutex_);
  for (auto& [request, bytes] : outbox_) (void)socket.send(zmq::buffer(bytes), zmq::send_flags::dontwait);
  outbox_.clear();
}

void TargetChannel::deliver(std::vector<zmq::message_t> received, std::vector<uint64_t> unsent, bool gone) {
  // Decoded here, off the io thread; a body is decoded where it is read (Message::delta, …).
  auto messages = std::make_shared<std::vector<Message>>();
  for (zmq::message_t& m : received) {
    try {
      messages->emplace_back(m.data(), m.size());
    } catch (const ProtocolError& e) {
      spdlog::error("a message from the target that cannot be read: {}", e.what());
    }
  }
  boost::asio::post(io_, [this, messages, unsent = std::move(unsent), gone] {
    for (Message& m : *messages) {
      const auto it = listeners_.find(m.header().request);
      if (it == listeners_.end()) continue;  // a request that ended (a late Delta after a Cancel)
      TargetEvent event{TargetEvent::Kind::Message, std::move(m)};
      Listener listener = it->second;  // it may forget itself
      listener(event);
    }
    for (uint64_t request : unsent) {
      const auto it = listeners_.find(request);
      if (it == listeners_.end()) continue;
      TargetEvent event{TargetEvent::Kind::Unsent, std::nullopt};
      Listener listener = it->second;
      listener(event);
    }
    if (gone) {
      std::vector<Listener> all;
      for (auto& [request, listener] : listeners_) all.push_back(listener);
      for (Listener& listener : all) {
        TargetEvent event{TargetEvent::Kind::TargetGone, std::nullopt};
        listener(event);
      }
    }
  });
}

}  // namespace rootspec
