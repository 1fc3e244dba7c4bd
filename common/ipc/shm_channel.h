// ShmChannel: the same-host fast path between the target and the drafter
// (docs/design.md#processes-and-messages). Once the drafter has the segment, every target → drafter
// message (Prefill, Commit, Cancel, Shutdown) and the drafter's Pools travel through shared memory
// instead of ZeroMQ, whose path through both processes' I/O threads costs a noticeable share of a
// round (rootspec-round-bench --detail shows it). The Hello (which names the
// segment), the drafter's Ready and Errors, and any message larger than a mailbox stay on
// ZeroMQ.
//
// One mailbox per direction is a queue of messages (a single-producer single-consumer ring of
// kMailboxBytes): the requests of a batch have their Prefills, Commits and Pools in flight at
// once, and none may be lost. A message that does not fit (the queue is full, or it is larger
// than the ring) goes over ZeroMQ instead: messages of one request never overtake each other
// (the protocol alternates Commit and Pool within a request), and those of different requests
// need no order. Each side has a doorbell, a futex word that the peer bumps after every message
// it sends, over either transport, so a side asleep in wait() also wakes for ZeroMQ messages.
//
// The target creates the segment and sends its name in the Hello; once the drafter has opened
// it (Ready), the target unlinks the name, so nothing is left behind when either process dies.
// Linux only (futex).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace rootspec {

class ShmChannel {
 public:
  enum class Side { kTarget = 0, kDrafter = 1 };
  static constexpr size_t kMailboxBytes = 4u << 20;

  // A new segment under a fresh name (the target's side).
  static std::unique_ptr<ShmChannel> create(Side side);
  // The peer's segment by name; throws std::runtime_error naming it when it cannot be opened.
  static std::unique_ptr<ShmChannel> open(const std::string& name, Side side);
  ~ShmChannel();
  ShmChannel(const ShmChannel&) = delete;
  ShmChannel& operator=(const ShmChannel&) = delete;

  const std::string& name() const { return name_; }
  void unlink();  // removes the name (the mapping stays); idempotent

  // Queues `bytes` in the peer's mailbox and rings its doorbell; false, writing nothing, when
  // it does not fit (larger than kMailboxBytes, or the queue is full).
  bool send(const std::string& bytes);
  // send() without the ring: the caller rings (a peer asleep sees the message at the ring).
  bool post(const std::string& bytes);
  // Rings the peer's doorbell (after sending it a message over ZeroMQ).
  void ring();
  // The peer's oldest message not read yet, if any. Throws std::runtime_error (dropping what is
  // queued) when the queue does not hold a well-formed record.
  std::optional<std::string> receive();

  // This side's doorbell count: take it before checking for messages, then wait(count, …).
  uint32_t bell() const;
  // Returns once the doorbell has rung past `seen` or after timeout_ns: busy for up to
  // spin_ns (a message is then noticed within a microsecond), then asleep on the futex.
  void wait(uint32_t seen, int64_t timeout_ns, int64_t spin_ns);

 private:
  struct Segment;
  ShmChannel(std::string name, Segment* segment, Side side, bool owner);

  std::string name_;
  Segment* seg_ = nullptr;
  int me_ = 0, peer_ = 1;  // mailbox / doorbell index of this side and of the peer
  bool named_ = false;     // this side created the name and has not unlinked it
};

}  // namespace rootspec
