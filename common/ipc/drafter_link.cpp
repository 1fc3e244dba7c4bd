#include "drafter_link.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>
#include <chrono>
#include <fstream>

namespace rootspec {

namespace {
double ms_since(int64_t start_ns) { return (monotonic_ns() - start_ns) / 1e6; }
}  // namespace

DrafterLink::DrafterLink(zmq::context_t& ctx, DrafterLinkOptions options)
    : opt_(std::move(options)), socket_(ctx, zmq::socket_type::dealer) {
  socket_.set(zmq::sockopt::linger, 0);
  watch_ = std::make_unique<DisconnectWatch>(ctx, socket_, "target-drafter");
}

DrafterLink::~DrafterLink() = default;

const char* DrafterLink::transport_name() const {
  return shm_open_ ? "shared memory" : nccl_ ? "NCCL" : "ZeroMQ";
}

ReadyBody DrafterLink::connect() {
  begin_connect();
  const int64_t deadline = monotonic_ns() + static_cast<int64_t>(opt_.peer_timeout_s * 1e9);
  while (monotonic_ns() < deadline)
    if (auto ready = poll_ready(200)) return *ready;
  throw DrafterGone("no answer from the drafter at " + opt_.endpoint + " within " +
                    std::to_string(opt_.peer_timeout_s) + " s");
}

void DrafterLink::begin_connect() {
  socket_.connect(opt_.endpoint);
  HelloBody hello{static_cast<int32_t>(getpid()), opt_.vocab, "", ""};
  // Pools over NCCL only when asked for: a pool is host data at both ends (encoded on the
  // drafter's host, selected from on the target's), so between processes of one host shared
  // memory moves it with one copy where NCCL needs four (docs/design.md#processes-and-messages);
  // `auto` takes shared memory whatever devices the two processes use.
  const int target_device = cuda_device_index(opt_.target_device);
  const bool want_nccl = opt_.pool_transport == "nccl";
#ifdef ROOTSPEC_WITH_NCCL
  if (want_nccl) {
    if (target_device < 0) throw DrafterGone("pool_transport nccl needs the target on a CUDA device");
    hello.nccl_id = PoolChannel::new_unique_id();
  }
#else
  if (opt_.pool_transport == "nccl")
    throw DrafterGone("pool_transport nccl: this build has no NCCL (ROOTSPEC_WITH_NCCL)");
  (void)want_nccl;
#endif
  // Messages through shared memory when both processes are on this host and NCCL does not carry
  // the pool, on the CPU or on GPUs (the pool, ~14 KB, comes back to the host anyway: the target
  // selects its tree on the CPU).
  const bool want_shm = opt_.pool_transport == "shm" ||
                        (opt_.pool_transport == "auto" && !want_nccl && same_host_endpoint(opt_.endpoint));
  if (want_shm) {
    try {
      shm_ = ShmChannel::create(ShmChannel::Side::kTarget);
      hello.shm = shm_->name();
    } catch (const std::exception& e) {
      if (opt_.pool_transport == "shm") throw DrafterGone(e.what());
      spdlog::warn("{}; using ZeroMQ", e.what());
    }
  }
  Header h;
  h.type = MessageType::Hello;
  send(encode(h, hello));
#ifdef ROOTSPEC_WITH_NCCL
  if (!hello.nccl_id.empty())  // collective: the drafter joins when it reads the Hello
    nccl_ = std::make_shared<PoolChannel>(hello.nccl_id, PoolChannel::kTargetRank, target_device,
                                          opt_.peer_timeout_s);
#endif
}

std::optional<ReadyBody> DrafterLink::poll_ready(int wait_ms) {
  zmq::message_t reply;
  zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
  zmq::poll(&item, 1, std::chrono::milliseconds(wait_ms));
  if (!socket_.recv(reply, zmq::recv_flags::dontwait)) return std::nullopt;
  try {
    const Message m(reply.data(), reply.size());
    if (m.header().type == MessageType::Error) throw DrafterGone("the drafter refused: " + m.error().message);
    const ReadyBody ready = m.ready();
    drafter_pid_ = ready.pid;
    if (shm_) {
      shm_->unlink();  // the drafter has it mapped: nothing to leave behind
      shm_open_ = true;
    }
    return ready;
  } catch (const ProtocolError& e) {
    throw DrafterGone(std::string("bad reply from the drafter: ") + e.what());
  }
}

bool DrafterLink::kill_unresponsive() {
  if (drafter_pid_ <= 0 || !same_host_endpoint(opt_.endpoint) || !process_alive(drafter_pid_)) return false;
  // The pid may have been reused since the Ready: only a rootspec-drafter is killed.
  std::ifstream comm("/proc/" + std::to_string(drafter_pid_) + "/comm");
  std::string name;
  std::getline(comm, name);
  if (name.rfind("rootspec-drafte", 0) != 0) return false;  // comm keeps 15 characters
  return ::kill(drafter_pid_, SIGKILL) == 0;
}

void DrafterLink::send(const std::string& bytes,
                       const std::function<void(std::function<void()>)>& ring_from) {
  if (shm_open_ && ring_from && shm_->post(bytes)) {
    ring_from([shm = shm_] { shm->ring(); });
    return;
  }
  if (shm_open_ && shm_->send(bytes)) return;
  if (!socket_.send(zmq::buffer(bytes), zmq::send_flags::dontwait))
    throw DrafterGone("the drafter does not take messages");
  if (shm_) shm_->ring();  // it may sleep on the doorbell
}

std::function<bool()> DrafterLink::rung_after_now() const {
  if (!shm_ || !shm_open_) return nullptr;
  return [shm = shm_, seen = shm_->bell()] { return shm->bell() != seen; };
}

bool DrafterLink::alive() {
  // A closed connection wakes the poll at once; the pid check (zombies count as dead) decides.
  watch_->poll_disconnected();
  return drafter_pid_ == 0 || process_alive(drafter_pid_);
}

std::optional<PoolBody> DrafterLink::read_pool(const Message& m, uint64_t request, uint32_t round) {
  const Header& h = m.header();
  // An Error about any open request: the drafter failed (the server degrades every request).
  if (h.type == MessageType::Error && (h.request == request || early_.count(h.request)))
    throw DrafterGone("the drafter failed: " + m.error().message);
  if (h.type != MessageType::Pool) return std::nullopt;
  if (h.request == request && h.round == round) return m.pool();
  const auto open = early_.find(h.request);
  if (open != early_.end()) open->second.emplace(h.round, m.pool());  // another member's, for later
  return std::nullopt;  // or a stale pool of a request that ended
}

PoolBody DrafterLink::wait_pool(uint64_t request, uint32_t round, zmq::socket_t& clients,
                                const std::function<void()>& idle) {
  // With shared memory the target spins this long for the pool (its core has nothing else to
  // do: drafting takes about a root pass), then sleeps on the doorbell in slices.
  constexpr int64_t kSpinNs = 5000000, kSleepSliceNs = 20000000;
  const int64_t start = monotonic_ns();
  const int64_t deadline = start + static_cast<int64_t>(opt_.peer_timeout_s * 1e9);
  bool rang = false;  // the last doorbell wait ended with a ring
  bool spun = false;  // the first spin for the pool is over
  if (const auto open = early_.find(request); open != early_.end()) {
    if (const auto it = open->second.find(round); it != open->second.end()) {
      PoolBody pool = std::move(it->second);
      open->second.erase(it);
      return pool;
    }
  }
  for (;;) {
    const uint32_t bell = shm_ ? shm_->bell() : 0;  // before looking: a later ring ends the wait
    try {
      if (shm_) {  // every queued message: other members' pools may come first
        while (const auto bytes = shm_->receive())
          if (auto pool = read_pool(Message(bytes->data(), bytes->size()), request, round))
            return std::move(*pool);
      }
      zmq::message_t reply;
      while (socket_.recv(reply, zmq::recv_flags::dontwait)) {
        std::optional<Message> over_nccl;  // the Pool itself, when ZeroMQ only announced it
        const Message announced(reply.data(), reply.size());
        if (announced.is_nccl_announcement()) {
          if (!nccl_) throw DrafterGone("the drafter announced an NCCL pool on a ZeroMQ pair");
#ifdef ROOTSPEC_WITH_NCCL
          std::string bytes;
          try {
            bytes = nccl_->receive(announced.nccl_bytes());
          } catch (const std::runtime_error& e) {  // a timeout, an NCCL or CUDA failure: the link is lost
            throw DrafterGone(e.what());
          }
          over_nccl.emplace(bytes.data(), bytes.size());
          const Header& sent = over_nccl->header();
          if (sent.request != announced.header().request || sent.round != announced.header().round)
            throw DrafterGone("the pool over NCCL is not the one announced (request " +
                              std::to_string(sent.request) + " round " + std::to_string(sent.round) +
                              " for request " + std::to_string(announced.header().request) + " round " +
                              std::to_string(announced.header().round) + ")");
#endif
        }
        if (auto pool = read_pool(over_nccl ? *over_nccl : announced, request, round))
          return std::move(*pool);
      }
    } catch (const ProtocolError& e) {
      throw DrafterGone(std::string("bad pool from the drafter: ") + e.what());
    } catch (const std::runtime_error& e) {  // a corrupt shared-memory queue (DrafterGone passes through)
      if (dynamic_cast<const DrafterGone*>(&e)) throw;
      throw DrafterGone(e.what());
    }
    if (shm_ && !spun) {
      // The pool is due about now (drafting takes about a root pass): spin for it before the
      // checks below, which read /proc and would hold up a pool that came meanwhile.
      spun = true;
      shm_->wait(bell, kSpinNs, kSpinNs);
      if (shm_->bell() != bell) continue;
    }
    if (!alive()) throw DrafterGone("the drafter process is gone");
    if (monotonic_ns() > deadline)
      throw DrafterGone("no pool from the drafter within " + std::to_string(opt_.peer_timeout_s) + " s (" +
                            std::to_string(ms_since(start)) + " ms)",
                        /*silent=*/true);
    if (shm_ && !rang) {
      idle();  // a Cancel is seen within a sleep slice
      shm_->wait(bell, kSleepSliceNs, kSpinNs);
      rang = shm_->bell() != bell;
      continue;
    }
    // Without shared memory, or after a ring that brought no pool: a ZeroMQ message (an Error)
    // is on its way, the drafter rings right after sending it.
    zmq::pollitem_t items[] = {{socket_.handle(), 0, ZMQ_POLLIN, 0},
                               {clients.handle(), 0, ZMQ_POLLIN, 0},
                               {watch_->events().handle(), 0, ZMQ_POLLIN, 0}};
    zmq::poll(items, 3, std::chrono::milliseconds(shm_ ? 5 : 100));
    rang = false;
    if (items[1].revents & ZMQ_POLLIN) idle();
  }
}

}  // namespace rootspec
