// ShmChannel: messages both ways, queued mailboxes (in order, none lost, wrapping around, full
// ones refused), the size limit, doorbell wake-ups
// across threads and across processes (fork), and names that cannot be opened.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <stdexcept>
#include <string>
#include <thread>

#include "shm_channel.h"
#include "transport.h"

namespace rootspec {
namespace {

constexpr int64_t kLong = 30'000'000'000;  // a wait that only a missing wake-up would reach

TEST(ShmChannel, CarriesMessagesBothWays) {
  auto target = ShmChannel::create(ShmChannel::Side::kTarget);
  auto drafter = ShmChannel::open(target->name(), ShmChannel::Side::kDrafter);
  EXPECT_FALSE(drafter->receive().has_value());
  EXPECT_FALSE(target->receive().has_value());

  const std::string commit("commit\0with a zero byte", 23);
  ASSERT_TRUE(target->send(commit));
  EXPECT_FALSE(target->receive().has_value());  // its own message is for the peer
  auto got = drafter->receive();
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, commit);
  EXPECT_FALSE(drafter->receive().has_value());  // read once

  ASSERT_TRUE(drafter->send(""));  // an empty message is still a message
  got = target->receive();
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, "");
}

// The pools of a batch's requests come back to back: every one is read, in order.
TEST(ShmChannel, MessagesQueueInOrderAndLargeOnesAreRefused) {
  auto target = ShmChannel::create(ShmChannel::Side::kTarget);
  auto drafter = ShmChannel::open(target->name(), ShmChannel::Side::kDrafter);
  ASSERT_TRUE(drafter->send("pool of request 1"));
  ASSERT_TRUE(drafter->send("pool of request 2"));
  ASSERT_TRUE(drafter->send(""));
  EXPECT_EQ(target->receive().value_or("none"), "pool of request 1");
  EXPECT_EQ(target->receive().value_or("none"), "pool of request 2");
  EXPECT_EQ(target->receive().value_or("none"), "");
  EXPECT_FALSE(target->receive().has_value());

  EXPECT_FALSE(target->send(std::string(ShmChannel::kMailboxBytes + 1, 'x')));
  EXPECT_FALSE(drafter->receive().has_value());  // nothing written
  const std::string full(ShmChannel::kMailboxBytes, 'y');
  ASSERT_TRUE(target->send(full));
  EXPECT_FALSE(target->send("z")) << "a full queue took another message";
  EXPECT_EQ(drafter->receive().value_or(""), full);
  ASSERT_TRUE(target->send("z"));
  EXPECT_EQ(drafter->receive().value_or(""), "z");
}

// Messages of many sizes, sent faster than read, wrap around the ring many times: each is read
// whole and in order, and a message that does not fit is refused until the reader makes room.
TEST(ShmChannel, QueueWrapsAroundAndKeepsEveryMessageWhole) {
  auto target = ShmChannel::create(ShmChannel::Side::kTarget);
  auto drafter = ShmChannel::open(target->name(), ShmChannel::Side::kDrafter);
  uint64_t sent = 0, read = 0, refused = 0;
  auto message = [](uint64_t i) {
    const size_t n = (i * 7919) % 700000 + (i % 3);  // up to ~0.7 MB, odd sizes among them
    return std::string(n, static_cast<char>('a' + i % 26)) + std::to_string(i);
  };
  while (read < 200) {
    if (sent < 200 && target->send(message(sent))) {
      ++sent;
      continue;
    }
    refused += sent < 200;
    const auto got = drafter->receive();
    ASSERT_TRUE(got.has_value()) << "nothing to read, yet message " << sent << " was refused";
    ASSERT_EQ(*got, message(read)) << "message " << read;
    ++read;
  }
  EXPECT_FALSE(drafter->receive().has_value());
  EXPECT_GT(refused, 0u) << "the queue never filled: the test did not wrap around";
}

TEST(ShmChannel, DoorbellWakesASleeperAndTimesOut) {
  auto target = ShmChannel::create(ShmChannel::Side::kTarget);
  auto drafter = ShmChannel::open(target->name(), ShmChannel::Side::kDrafter);
  for (int64_t spin_ns : {int64_t{0}, int64_t{1'000'000'000}}) {  // asleep at once, or spinning
    const uint32_t seen = drafter->bell();
    std::thread writer([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      target->send("commit");
    });
    drafter->wait(seen, kLong, spin_ns);
    EXPECT_NE(drafter->bell(), seen) << "woke without a ring (spin " << spin_ns << ")";
    EXPECT_EQ(drafter->receive().value_or(""), "commit");
    writer.join();
  }
  // post() writes without ringing: a sleeper wakes at the ring its sender then sends (from
  // another thread, as the daemon's target rings from its helper).
  {
    const uint32_t seen = drafter->bell();
    ASSERT_TRUE(target->post("commit posted"));
    EXPECT_EQ(drafter->bell(), seen);
    std::thread helper([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      target->ring();
    });
    drafter->wait(seen, kLong, 0);
    EXPECT_NE(drafter->bell(), seen);
    EXPECT_EQ(drafter->receive().value_or(""), "commit posted");
    helper.join();
    EXPECT_FALSE(target->post(std::string(ShmChannel::kMailboxBytes + 1, 'x')));
  }
  // A ring without a message (a ZeroMQ message was sent) wakes the sleeper too.
  const uint32_t seen = target->bell();
  std::thread ringer([&] { drafter->ring(); });
  target->wait(seen, kLong, 0);
  EXPECT_NE(target->bell(), seen);
  EXPECT_FALSE(target->receive().has_value());
  ringer.join();
  // No ring: wait returns after its timeout.
  const uint32_t quiet = target->bell();
  target->wait(quiet, 5'000'000, 1'000'000);
  EXPECT_EQ(target->bell(), quiet);
}

TEST(ShmChannel, EchoesAcrossProcesses) {
  auto target = ShmChannel::create(ShmChannel::Side::kTarget);
  constexpr int kRounds = 200;
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // the drafter: echo each message reversed
    int status = 1;
    try {
      auto drafter = ShmChannel::open(target->name(), ShmChannel::Side::kDrafter);
      for (int i = 0; i < kRounds;) {
        const uint32_t seen = drafter->bell();
        if (auto m = drafter->receive()) {
          drafter->send(std::string(m->rbegin(), m->rend()));
          ++i;
          continue;
        }
        drafter->wait(seen, kLong, i % 2 ? 0 : 100000);  // alternate sleeping and spinning
      }
      status = 0;
    } catch (...) {
    }
    _exit(status);
  }
  for (int i = 0; i < kRounds; ++i) {
    const std::string msg = "round " + std::to_string(i) + std::string(i * 37 % 3000, 'p');
    ASSERT_TRUE(target->send(msg));
    std::optional<std::string> reply;
    while (!reply) {
      const uint32_t seen = target->bell();
      reply = target->receive();
      if (!reply) target->wait(seen, kLong, i % 3 ? 50000 : 0);
    }
    ASSERT_EQ(*reply, std::string(msg.rbegin(), msg.rend())) << "round " << i;
  }
  int status = -1;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST(ShmChannel, NamesThatCannotBeOpened) {
  EXPECT_THROW(ShmChannel::open("/rootspec-no-such-channel", ShmChannel::Side::kDrafter), std::runtime_error);
  auto target = ShmChannel::create(ShmChannel::Side::kTarget);
  const std::string name = target->name();
  auto early = ShmChannel::open(name, ShmChannel::Side::kDrafter);
  target->unlink();  // once the peer has it, the name goes
  EXPECT_THROW(ShmChannel::open(name, ShmChannel::Side::kDrafter), std::runtime_error);
  ASSERT_TRUE(target->send("still mapped"));
  EXPECT_EQ(early->receive().value_or(""), "still mapped");
}

TEST(ShmChannel, OnlySameHostEndpointsShareMemory) {
  for (const char* e : {"ipc:///tmp/d.sock", "inproc://d", "tcp://127.0.0.1:5601", "tcp://localhost:5601",
                        "tcp://[::1]:5601"})
    EXPECT_TRUE(same_host_endpoint(e)) << e;
  for (const char* e : {"tcp://10.0.0.2:5601", "tcp://drafter-host:5601", "tcp://*:5601", ""})
    EXPECT_FALSE(same_host_endpoint(e)) << e;
}

}  // namespace
}  // namespace rootspec
