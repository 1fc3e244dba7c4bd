#include "shm_channel.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <stdexcept>

#include "spin.h"
#include "transport.h"

namespace rootspec {

namespace {

constexpr uint64_t kMagic = 0x726f6f7473686d32ull;  // "rootshm2": mailboxes are queues
constexpr uint64_t kWrap = ~0ull;                   // a record length: the next record is at offset 0
constexpr uint64_t kLengthBytes = 8;                // each record: its length, then its bytes

// A record's bytes in the ring: the length word and the message, 8-byte aligned.
uint64_t record_bytes(uint64_t n) { return kLengthBytes + ((n + 7) & ~uint64_t{7}); }

static_assert(std::atomic<uint32_t>::is_always_lock_free, "the doorbell must be a plain futex word");

long futex(std::atomic<uint32_t>* word, int op, uint32_t value, const timespec* timeout) {
  // Shared (not FUTEX_PRIVATE) operations: the two processes map the word at different addresses.
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, value, timeout, nullptr, 0);
}

}  // namespace

struct ShmChannel::Segment {
  struct alignas(64) Doorbell {
    std::atomic<uint32_t> count{0};
    std::atomic<uint32_t> sleepers{0};
  };
  // A single-producer single-consumer ring of records; head and tail count bytes since the
  // start (the offset is the count modulo its size).
  struct alignas(64) Mailbox {
    alignas(64) std::atomic<uint64_t> head{0};  // written by the sender
    alignas(64) std::atomic<uint64_t> tail{0};  // read by the receiver
    alignas(64) char data[kMailboxBytes + kLengthBytes];
  };
  uint64_t magic = kMagic;
  Doorbell bells[2];  // [side]: rung by the other side
  Mailbox boxes[2];   // [side]: messages for that side
};

ShmChannel::ShmChannel(std::string name, Segment* segment, Side side, bool owner)
    : name_(std::move(name)), seg_(segment), me_(static_cast<int>(side)), peer_(1 - me_), named_(owner) {}

std::unique_ptr<ShmChannel> ShmChannel::create(Side side) {
  static std::atomic<int> counter{0};
  const std::string name = "/rootspec-" + std::to_string(getpid()) + "-" +
                           std::to_string(monotonic_ns() % 1000000007) + "-" +
                           std::to_string(counter.fetch_add(1));
  const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) throw std::runtime_error("shared memory " + name + ": " + std::strerror(errno));
  if (ftruncate(fd, sizeof(Segment)) != 0) {
    const int err = errno;
    close(fd);
    shm_unlink(name.c_str());
    throw std::runtime_error("shared memory " + name + ": " + std::strerror(err));
  }
  void* p = mmap(nullptr, sizeof(Segment), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    shm_unlink(name.c_str());
    throw std::runtime_error("shared memory " + name + ": mmap: " + std::strerror(errno));
  }
  // A fresh segment reads as zeros: counts and sequence numbers start at 0; set the magic.
  auto* seg = static_cast<Segment*>(p);
  seg->magic = kMagic;
  return std::unique_ptr<ShmChannel>(new ShmChannel(name, seg, side, true));
}

std::unique_ptr<ShmChannel> ShmChannel::open(const std::string& name, Side side) {
  const int fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0)
    throw std::runtime_error("shared memory " + name + " cannot be opened: " + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != sizeof(Segment)) {
    close(fd);
    throw std::runtime_error("shared memory " + name + " has the wrong size (another rootspec version?)");
  }
  void* p = mmap(nullptr, sizeof(Segment), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) throw std::runtime_error("shared memory " + name + ": mmap: " + std::strerror(errno));
  auto* seg = static_cast<Segment*>(p);
  if (seg->magic != kMagic) {
    munmap(p, sizeof(Segment));
    throw std::runtime_error("shared memory " + name + " is not a rootspec channel");
  }
  return std::unique_ptr<ShmChannel>(new ShmChannel(name, seg, side, false));
}

ShmChannel::~ShmChannel() {
  unlink();
  munmap(seg_, sizeof(Segment));
}

void ShmChannel::unlink() {
  if (named_) shm_unlink(name_.c_str());
  named_ = false;
}

bool ShmChannel::send(const std::string& bytes) {
  if (!post(bytes)) return false;
  ring();
  return true;
}

bool ShmChannel::post(const std::string& bytes) {
  if (bytes.size() > kMailboxBytes) return false;
  constexpr uint64_t cap = kMailboxBytes + kLengthBytes;  // a multiple of 8: records never straddle the end
  Segment::Mailbox& box = seg_->boxes[peer_];
  uint64_t head = box.head.load(std::memory_order_relaxed);  // this side is the only writer
  const uint64_t tail = box.tail.load(std::memory_order_acquire);
  const uint64_t need = record_bytes(bytes.size());
  const uint64_t at = head % cap;
  const uint64_t skip = cap - at < need ? cap - at : 0;  // a record is whole: it starts over at 0
  if (cap - (head - tail) < skip + need) return false;   // the queue is full: the caller uses ZeroMQ
  if (skip) {
    std::memcpy(box.data + at, &kWrap, kLengthBytes);
    head += skip;
  }
  const uint64_t n = bytes.size();
  char* record = box.data + head % cap;
  std::memcpy(record, &n, kLengthBytes);
  std::memcpy(record + kLengthBytes, bytes.data(), n);
  box.head.store(head + need, std::memory_order_release);
  return true;
}

void ShmChannel::ring() {
  Segment::Doorbell& b = seg_->bells[peer_];
  b.count.fetch_add(1, std::memory_order_seq_cst);
  if (b.sleepers.load(std::memory_order_seq_cst) > 0) futex(&b.count, FUTEX_WAKE, INT32_MAX, nullptr);
}

std::optional<std::string> ShmChannel::receive() {
  constexpr uint64_t cap = kMailboxBytes + kLengthBytes;
  Segment::Mailbox& box = seg_->boxes[me_];
  uint64_t tail = box.tail.load(std::memory_order_relaxed);  // this side is the only reader
  const uint64_t head = box.head.load(std::memory_order_acquire);
  if (tail == head) return std::nullopt;
  uint64_t n = 0;
  std::memcpy(&n, box.data + tail % cap, kLengthBytes);
  if (n == kWrap) {
    tail += cap - tail % cap;
    std::memcpy(&n, box.data + tail % cap, kLengthBytes);
  }
  if (n > kMailboxBytes) {
    box.tail.store(head, std::memory_order_release);  // the queue is dropped, not read again
    throw std::runtime_error("shared memory " + name_ + ": a corrupt record");
  }
  const char* record = box.data + tail % cap + kLengthBytes;
  std::string out(record, record + n);
  box.tail.store(tail + record_bytes(n), std::memory_order_release);
  return out;
}

uint32_t ShmChannel::bell() const { return seg_->bells[me_].count.load(std::memory_order_seq_cst); }

void ShmChannel::wait(uint32_t seen, int64_t timeout_ns, int64_t spin_ns) {
  Segment::Doorbell& b = seg_->bells[me_];
  const int64_t start = monotonic_ns(), deadline = start + timeout_ns,
                spin_end = start + std::min(spin_ns, timeout_ns);
  for (int i = 0; b.count.load(std::memory_order_acquire) == seen; ++i) {
    if ((i & 63) == 0 && monotonic_ns() >= spin_end) break;
    cpu_relax();
  }
  b.sleepers.fetch_add(1, std::memory_order_seq_cst);
  for (;;) {
    if (b.count.load(std::memory_order_seq_cst) != seen) break;
    const int64_t left = deadline - monotonic_ns();
    if (left <= 0) break;
    const timespec ts{static_cast<time_t>(left / 1000000000), static_cast<long>(left % 1000000000)};
    futex(&b.count, FUTEX_WAIT, seen, &ts);  // returns at once if the count moved
  }
  b.sleepers.fetch_sub(1, std::memory_order_seq_cst);
}

}  // namespace rootspec
