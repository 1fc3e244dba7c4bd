// IPC round trip of one pool message, as the drafter sends it and the target reads it: encode
// a 710-node EAGLE-3 pool (or a Rheo pool with its sparse top-128 rows), send it over ZeroMQ
// (ipc:// or tcp:// loopback) to an echo peer, receive it back and decode it.
#include <benchmark/benchmark.h>

#include <thread>
#include <zmq.hpp>

#include "protocol.h"
#include "rows.h"

namespace {

using namespace rootspec;

constexpr int kVocab = 32000;

class RandomDrafter : public DraftModel {
 public:
  int vocab_size() const override { return kVocab; }
  void draft_rows(const Pool&, const std::vector<int>& nodes, std::vector<float>& out) override {
    out.resize(nodes.size() * kVocab);
    for (size_t i = 0; i < nodes.size(); ++i) {
      std::vector<float> logits(kVocab);
      for (float& x : logits) x = static_cast<float>(rng_.uniform() * 4.0);
      probs_from_logits(logits.data(), kVocab, 1.0, &out[i * kVocab]);
    }
  }

 private:
  Rng rng_{1};
};

std::string pool_message(bool rheo) {
  RandomDrafter drafter;
  Rng rng(2);
  PoolShape shape;
  if (rheo) shape.rheo_m = 1, shape.sparse = 128;
  PoolBody body;
  grow_pool(drafter, shape, body.pool, &rng);
  Header h;
  h.type = MessageType::Pool;
  return encode(h, body);
}

void BM_PoolRoundTrip(benchmark::State& state) {
  const bool tcp = state.range(0) == 1, rheo = state.range(1) == 1;
  const std::string endpoint = tcp ? "tcp://127.0.0.1:5799" : "ipc:///tmp/rootspec_bench_pool_ipc.sock";
  const std::string bytes = pool_message(rheo);
  zmq::context_t ctx;
  zmq::socket_t echo(ctx, zmq::socket_type::pair), peer(ctx, zmq::socket_type::pair);
  echo.bind(endpoint);
  peer.connect(endpoint);
  std::thread echo_thread([&] {
    for (;;) {
      zmq::message_t m;
      if (!echo.recv(m) || m.size() == 0) return;
      echo.send(m, zmq::send_flags::none);
    }
  });
  for (auto _ : state) {
    peer.send(zmq::buffer(bytes), zmq::send_flags::none);
    zmq::message_t back;
    (void)peer.recv(back);
    const Message m(back.data(), back.size());
    benchmark::DoNotOptimize(m.pool().pool.size());
  }
  peer.send(zmq::message_t(), zmq::send_flags::none);
  echo_thread.join();
  state.SetLabel(std::string(tcp ? "tcp" : "ipc") + (rheo ? ", rheo pool" : ", top-k pool") + ", " +
                 std::to_string(bytes.size()) + " bytes");
}
BENCHMARK(BM_PoolRoundTrip)->ArgsProduct({{0, 1}, {0, 1}})->Unit(benchmark::kMicrosecond);

void BM_PoolEncodeDecode(benchmark::State& state) {
  const std::string bytes = pool_message(false);
  const PoolBody body = Message(bytes.data(), bytes.size()).pool();
  Header h;
  h.type = MessageType::Pool;
  for (auto _ : state) {
    const std::string b = encode(h, body);
    benchmark::DoNotOptimize(Message(b.data(), b.size()).pool().pool.size());
  }
}
BENCHMARK(BM_PoolEncodeDecode)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
