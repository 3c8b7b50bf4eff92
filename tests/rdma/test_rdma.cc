// Suite 'rdma', run inside the soft-RoCE VM (run_in_vm.sh): the conformance exchanges on rxe0
// with 2..4 ranks, the eager/rendezvous boundary, many outstanding requests, the registration
// cache, bad registrations, bounded-retry settings, junk on the control port, a killed peer.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "conformance.h"
#include "gw_config.h"
#include "gw_socket.h"
#include "rdma_test_util.h"
#include "rdma_wire.h"

namespace gw::conformance {
namespace {

const TransportCase kRxeSmallCache{"rxe_cache4", "rdma", "rdma:dev=rxe0,reg_cache_entries=4"};

void run_and_verify(Exchange& x) {
  Status s = x.run();
  ASSERT_TRUE(s.ok()) << s.to_string();
  x.verify();
  EXPECT_TRUE(x.endpoint_errors().empty());
}

class RdmaRanks : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { require_rxe(); }
};

// Every rank sends every size to every peer (exact and roomy receive buffers); each
// connection stripes `striped` of the sizes.
void all_pairs(const TransportCase& c, int ranks, const std::vector<size_t>& sizes,
               uint64_t striped) {
  run_ranks(c, ranks, [&](Group& g) {
    Exchange x(g);
    for (int p = 0; p < g.size(); ++p) {
      if (p == g.rank()) continue;
      for (uint64_t k = 0; k < sizes.size(); ++k) {
        x.recv(p, k, sizes[k] + (k % 2 ? 0 : 100), k, sizes[k]);
        x.send(p, k, sizes[k], k);
      }
    }
    run_and_verify(x);
    EXPECT_EQ(g.transport().stats()["striped_sends"],
              striped * static_cast<uint64_t>(g.size() - 1));
  });
}

TEST_P(RdmaRanks, AllPairsAllSizes) {
  all_pairs(kRxe, GetParam(),
            {0, 1, 3, 255, 4097, kEager - 1, kEager, kEager + 1, 65537, (size_t{1} << 20) + 7}, 0);
}

// Two queue pairs per connection: 32 KiB, 64 KiB + 1 and 1 MiB + 7 are striped.
TEST_P(RdmaRanks, AllPairsAllSizesTwoQps) {
  all_pairs(kRxeQps2, GetParam(), {0, 1, 4097, kEager + 1, 32768, 65537, (size_t{1} << 20) + 7}, 3);
}
INSTANTIATE_TEST_SUITE_P(Rxe, RdmaRanks, ::testing::Range(2, 5));

class Rdma : public ::testing::Test {
 protected:
  void SetUp() override { require_rxe(); }
};

// eager_bytes - 1 and eager_bytes go eagerly, eager_bytes + 1 by rendezvous; counted.
TEST_F(Rdma, EagerRendezvousBoundary) {
  run_ranks(kRxe, 2, [&](Group& g) {
    Exchange x(g);
    int peer = 1 - g.rank();
    const size_t sizes[] = {kEager - 1, kEager, kEager + 1};
    for (uint64_t k = 0; k < 3; ++k) {
      x.recv(peer, k, sizes[k], k, sizes[k]);
      x.send(peer, k, sizes[k], k);
    }
    run_and_verify(x);
    auto st = g.transport().stats();
    EXPECT_EQ(st["eager_sent"], 2u);
    EXPECT_EQ(st["rndv_sent"], 1u);
  });
}

// Compact eager messages (SEND with immediate: the tag's low half, no header) carry the high
// half of the last tag that went with a header. Tags that switch high halves back and forth,
// sizes below and above the inline limit (above it registered buffers go without a copy), the
// MTU exactly and the eager limit, receives posted before and after the messages arrive.
TEST_F(Rdma, CompactEagerTagsAcrossHighHalves) {
  const uint64_t tags[] = {5, (uint64_t{1} << 40) | 5, (uint64_t{1} << 40) | 6, 5,
                           7, (uint64_t{3} << 33) | 5, (uint64_t{1} << 40) | 5, 0xC0ull << 56};
  const size_t sizes[] = {0, 2, 300, 4096, kEager, 1000, kEager + 1, 64};
  for (bool late : {false, true}) {
    run_ranks(kRxe, 2, [&](Group& g) {
      int peer = 1 - g.rank();
      if (late && g.rank() == 1) {  // take the messages in before any receive is posted
        for (int i = 0; i < 60; ++i) {
          Completion c[1];
          (void)g.transport().cq().poll(std::span<Completion>(c, 0));
          std::this_thread::sleep_for(Millis(5));
        }
      }
      Exchange x(g);
      for (uint64_t round = 0; round < 3; ++round) {
        for (size_t k = 0; k < std::size(tags); ++k) {
          const size_t len = sizes[(k + round) % std::size(sizes)];
          if (g.rank() == 1) x.recv(peer, tags[k], len, round, len);
          if (g.rank() == 0) x.send(peer, tags[k], len, round);
        }
      }
      run_and_verify(x);
      if (g.rank() == 0) {
        EXPECT_GT(g.transport().stats()["zero_copy_sends"], 0u);
      }
      if (g.rank() == 1 && late) {
        EXPECT_GT(g.transport().stats()["unexpected_msgs"], 0u);
      }
    });
  }
}

// Sends that go straight onto the send queue (inline, zero-copy) must not overtake sends
// queued for want of credits: with 4 receive buffers, the sender posts one message per
// millisecond while the receiver takes them in slowly, so credits come back one at a time
// while the queue is not empty. Same tag throughout: message i must land in receive i.
TEST_F(Rdma, DirectSendsKeepOrderBehindCreditStalls) {
  const TransportCase depth4{"rxe_depth4", "rdma", "rdma:dev=rxe0,recv_depth=4"};
  const size_t sizes[] = {2, 4096, 0, 300, 20000, 100, kEager, 17};
  constexpr uint64_t kCount = 96;
  auto len_of = [&](uint64_t i) { return sizes[i % std::size(sizes)]; };
  run_ranks(depth4, 2, [&](Group& g) {
    Exchange x(g);
    x.reqs().reserve(kCount);  // requests (and their MemoryRegions) must not move once posted
    const int peer = 1 - g.rank();
    Completion none[1];
    auto progress = [&] { (void)g.transport().cq().poll(std::span<Completion>(none, 0)); };
    if (g.rank() == 1) std::this_thread::sleep_for(Millis(30));
    for (uint64_t i = 0; i < kCount; ++i) {
      if (g.rank() == 0) x.send(peer, 9, len_of(i), i);
      if (g.rank() == 1) x.recv(peer, 9, len_of(i), i, len_of(i));
      ASSERT_TRUE(x.post().ok());
      progress();
      std::this_thread::sleep_for(Millis(g.rank() == 0 ? 1 : 2));
    }
    run_and_verify(x);
    if (g.rank() == 0) {
      auto st = g.transport().stats();
      EXPECT_GT(st["credit_stalls"], 0u) << "the test needs sends that waited for credits";
      EXPECT_GT(st["inline_sends"], 0u);
      EXPECT_GT(st["zero_copy_sends"], 0u);
    }
  });
}

// Credits go back by RDMA WRITE only once the peer may be down to half of them, not every few
// reposts: a ping-pong over 8 receive buffers makes about one credit write per 4 messages each
// way (it made one per 2, between a message and its answer), and no send waits for credits.
TEST_F(Rdma, PingPongReturnsCreditsPerHalfWindow) {
  const TransportCase depth8{"rxe_depth8", "rdma", "rdma:dev=rxe0,recv_depth=8"};
  constexpr uint64_t kRounds = 200;
  run_ranks(depth8, 2, [&](Group& g) {
    const int peer = 1 - g.rank();
    for (uint64_t i = 0; i < kRounds; ++i) {
      for (int turn = 0; turn < 2; ++turn) {  // rank 0 sends first, rank 1 answers
        Exchange x(g);
        const size_t len = 2 + i % 3;
        if ((turn == 0) == (g.rank() == 0))
          x.send(peer, 5, len, i);
        else
          x.recv(peer, 5, 8, i, len);
        run_and_verify(x);
      }
    }
    auto st = g.transport().stats();
    EXPECT_GT(st["credit_writes"], 0u) << "200 messages into 8 buffers need credits back";
    EXPECT_LE(st["credit_writes"], kRounds / 4 + 2);
    EXPECT_EQ(st["credit_stalls"], 0u);
  });
}

// 400 sends and receives each way, sizes around the boundary, posted before any polling.
TEST_F(Rdma, ManyOutstanding) {
  run_ranks(kRxe, 2, [&](Group& g) {
    Exchange x(g);
    int peer = 1 - g.rank();
    for (uint64_t i = 0; i < 400; ++i) {
      size_t len = (i % 3 == 0) ? kEager + 1 + i : i * 7;
      x.recv(peer, i % 5, len, i, len);
      x.send(peer, i % 5, len, i);
    }
    run_and_verify(x);
  });
}

// Buffered early messages are bounded in number too (2 x (recv_depth + max_outstanding)), not
// only in bytes: zero- and few-byte messages cost the byte budget nothing. Beyond the bound they
// wait in their receive buffers (back-pressure, the sender's credits run down), and once
// receives are posted every message arrives, in order, with its bytes; nobody fails.
TEST_F(Rdma, UnexpectedCountIsBoundedByBackPressure) {
  const TransportCase small{"rxe_small", "rdma", "rdma:dev=rxe0,recv_depth=4,max_outstanding=8"};
  constexpr uint64_t kCount = 120, kBound = 2 * (4 + 8);
  auto len_of = [](uint64_t i) { return static_cast<size_t>(i * 3 % 40); };
  run_ranks(small, 2, [&](Group& g) {
    Exchange x(g);
    x.reqs().reserve(kCount);
    const int peer = 1 - g.rank();
    if (g.rank() == 1) {  // let every message that can arrive early do so
      Completion none[1];
      const auto end = Clock::now() + Millis(400);
      while (Clock::now() < end) (void)g.transport().cq().poll(std::span<Completion>(none, 0));
      auto st = g.transport().stats();
      EXPECT_EQ(st["unexpected_msgs"], kBound) << "buffered beyond the bound";
      EXPECT_GT(st["held_stalls"], 0u) << "the rest must wait in their receive buffers";
    }
    for (uint64_t i = 0; i < kCount; ++i) {
      if (g.rank() == 0) x.send(peer, i % 3, len_of(i), i);
      if (g.rank() == 1) x.recv(peer, i % 3, 40, i, len_of(i));
    }
    run_and_verify(x);
  });
}

// A receive smaller than the message fails with its length; the endpoint stays usable.
TEST_F(Rdma, TooSmallReceiveEagerAndRendezvous) {
  run_ranks(kRxe, 2, [&](Group& g) {
    Exchange x(g);
    int peer = 1 - g.rank();
    x.recv(peer, 1, 10, 0, 100, Code::kInvalidArgument);
    x.send(peer, 1, 100, 0);
    x.recv(peer, 2, kEager, 0, 3 * kEager, Code::kInvalidArgument);
    x.send(peer, 2, 3 * kEager, 0);
    x.recv(peer, 3, 70000, 0, 70000);
    x.send(peer, 3, 70000, 0);
    Status s = x.run();
    ASSERT_TRUE(s.ok()) << s.to_string();
    auto& r = x.reqs();
    for (auto& q : r) {
      if (q.is_send || q.tag == 3) continue;
      EXPECT_EQ(q.c.code, Code::kInvalidArgument);
      EXPECT_EQ(q.c.len, q.exp_len);
    }
    Exchange::verify_recv(r[4], peer, g.rank(), 3, 0, 70000);
    EXPECT_TRUE(g.endpoint(peer).status().ok());
  });
}

// Rendezvous sends complete before their receives exist: rank 1 pulls them into bounce
// buffers (striped over two queue pairs); receives posted later get every byte, a too-small
// one fails alone.
TEST_F(Rdma, UnexpectedRendezvousIsPulled) {
  auto groups = make_groups(kRxeQps2, 2);
  ASSERT_EQ(groups.size(), 2u);
  constexpr size_t kLen = 100000;
  std::vector<std::vector<uint8_t>> out(3, std::vector<uint8_t>(kLen));
  for (size_t i = 0; i < 3; ++i) {
    fill_pattern(out[i].data(), kLen, msg_seed(0, 1, 5, i));
    SendRequest s{out[i].data(), kLen, 5, i, nullptr};
    ASSERT_EQ(taken(groups[0]->endpoint(1).post_send({&s, 1})), 1u);
  }
  auto pump = [&](int want_rank, size_t want) {
    size_t got = 0;
    std::vector<Completion> seen;
    auto end = Clock::now() + std::chrono::seconds(20);
    while (got < want && Clock::now() < end) {
      Completion c[4];
      for (int r = 0; r < 2; ++r) {
        size_t n = taken(groups[static_cast<size_t>(r)]->transport().cq().poll(c));
        for (size_t k = 0; k < n; ++k) {
          EXPECT_EQ(r, want_rank) << "unexpected completion on rank " << r;
          seen.push_back(c[k]);
          ++got;
        }
      }
    }
    return seen;
  };
  auto sends = pump(0, 3);
  ASSERT_EQ(sends.size(), 3u) << "sends must complete before any receive is posted";
  for (auto& c : sends) EXPECT_EQ(c.code, Code::kOk);
  EXPECT_EQ(groups[1]->transport().stats()["unexpected_pulls"], 3u);
  std::vector<std::vector<uint8_t>> in(3, std::vector<uint8_t>(kLen + kGuard, kGuardByte));
  const size_t caps[] = {kLen, kLen + kGuard, kLen / 2};
  for (size_t i = 0; i < 3; ++i) {
    RecvRequest r{in[i].data(), caps[i], 5, 10 + i, nullptr};
    ASSERT_EQ(taken(groups[1]->endpoint(0).post_recv({&r, 1})), 1u);
  }
  auto recvs = pump(1, 3);
  ASSERT_EQ(recvs.size(), 3u);
  for (auto& c : recvs) {
    size_t i = c.wr_id - 10;
    ASSERT_LT(i, 3u);
    EXPECT_EQ(c.len, kLen);
    if (i == 2) {
      EXPECT_EQ(c.code, Code::kInvalidArgument);
      EXPECT_EQ(in[2][0], kGuardByte) << "a too-small receive gets no bytes";
      continue;
    }
    EXPECT_EQ(c.code, Code::kOk);
    EXPECT_EQ(check_pattern(in[i].data(), kLen, msg_seed(0, 1, 5, i)), "");
    EXPECT_EQ(in[i][kLen], kGuardByte);
  }
  EXPECT_EQ(groups[1]->transport().stats()["unexpected_bytes_now"], 0u);
}

// Pulls reuse the store's buffers and their registrations: a second round of early rendezvous
// messages registers nothing (every bounce buffer is a cache hit), and the data is right.
TEST_F(Rdma, UnexpectedPullsReuseRegistrations) {
  auto groups = make_groups(kRxe, 2);
  ASSERT_EQ(groups.size(), 2u);
  constexpr size_t kLen = 100000, kMsgs = 3;
  uint64_t misses_first = 0;
  for (uint64_t round = 0; round < 2; ++round) {
    std::vector<std::vector<uint8_t>> out(kMsgs, std::vector<uint8_t>(kLen));
    for (size_t i = 0; i < kMsgs; ++i) {
      fill_pattern(out[i].data(), kLen, msg_seed(0, 1, 7, round * kMsgs + i));
      SendRequest s{out[i].data(), kLen, 7, i, nullptr};
      ASSERT_EQ(taken(groups[0]->endpoint(1).post_send({&s, 1})), 1u);
    }
    size_t sent = 0;
    for (auto end = Clock::now() + std::chrono::seconds(20); sent < kMsgs && Clock::now() < end;) {
      Completion c[4];
      sent += taken(groups[0]->transport().cq().poll(c));
      (void)groups[1]->transport().cq().poll(std::span<Completion>(c, 0));
    }
    ASSERT_EQ(sent, kMsgs) << "pulled sends complete before their receives are posted";
    std::vector<std::vector<uint8_t>> in(kMsgs, std::vector<uint8_t>(kLen + kGuard, kGuardByte));
    for (size_t i = 0; i < kMsgs; ++i) {
      RecvRequest r{in[i].data(), kLen + kGuard, 7, i, nullptr};
      ASSERT_EQ(taken(groups[1]->endpoint(0).post_recv({&r, 1})), 1u);
    }
    size_t got = 0;
    for (auto end = Clock::now() + std::chrono::seconds(20); got < kMsgs && Clock::now() < end;) {
      Completion c[4];
      const size_t n = taken(groups[1]->transport().cq().poll(c));
      for (size_t k = 0; k < n; ++k) {
        EXPECT_EQ(c[k].code, Code::kOk);
        EXPECT_EQ(c[k].len, kLen);
      }
      got += n;
    }
    ASSERT_EQ(got, kMsgs);
    for (size_t i = 0; i < kMsgs; ++i) {
      EXPECT_EQ(check_pattern(in[i].data(), kLen, msg_seed(0, 1, 7, round * kMsgs + i)), "");
      EXPECT_EQ(in[i][kLen], kGuardByte);
    }
    auto st = groups[1]->transport().stats();
    EXPECT_EQ(st["unexpected_pulls"], (round + 1) * kMsgs);
    if (round == 0) {
      misses_first = st["reg_cache_misses"];
      EXPECT_GT(misses_first, 0u) << "the first pulls register their bounce buffers";
    } else {
      EXPECT_EQ(st["reg_cache_misses"], misses_first) << "the second round registered again";
      EXPECT_GE(st["reg_cache_hits"], kMsgs);
    }
  }
}

// A peer that sent and then left (its transport destroyed): eager messages and rendezvous ones
// pulled unexpectedly stay receivable after its control connection closes.
TEST_F(Rdma, MessagesSentBeforeACleanCloseStayReceivable) { close_then_receive(kRxe); }
TEST_F(Rdma, CleanCloseTwoQps) { close_then_receive(kRxeQps2); }

// Registration cache: the same range hits, a sub-range hits, deregistration invalidates.
TEST_F(Rdma, RegistrationCacheHitsAndInvalidation) {
  auto t = Transport::open(kRxe.spec);
  ASSERT_TRUE(t.ok());
  std::vector<uint8_t> buf(1 << 20);
  auto s0 = (*t)->stats();
  {
    auto a = (*t)->register_memory(buf.data(), buf.size(), MemKind::kHost);
    ASSERT_TRUE(a.ok()) << a.status().to_string();
    auto b = (*t)->register_memory(buf.data() + 4096, 8192, MemKind::kHost);
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(a->remote_key(), b->remote_key());
    auto s1 = (*t)->stats();
    EXPECT_EQ(s1["reg_cache_misses"] - s0["reg_cache_misses"], 1u);
    EXPECT_EQ(s1["reg_cache_hits"] - s0["reg_cache_hits"], 1u);
  }
  auto s2 = (*t)->stats();
  EXPECT_GE(s2["reg_cache_invalidations"], 1u);
  EXPECT_EQ(s2["reg_cache_entries"], 0u);
}

// Unregistered rendezvous buffers are registered through the cache; with 4 entries, 8
// distinct buffers evict, and every byte still arrives.
TEST_F(Rdma, RegistrationCacheEviction) {
  run_ranks(kRxeSmallCache, 2, [&](Group& g) {
    int peer = 1 - g.rank();
    constexpr size_t kLen = 3 * kEager;
    std::vector<std::vector<uint8_t>> bufs(8, std::vector<uint8_t>(kLen));
    std::vector<std::vector<uint8_t>> rbufs(8, std::vector<uint8_t>(kLen));
    for (int round = 0; round < 2; ++round) {
      for (size_t i = 0; i < 8; ++i) {
        fill_pattern(bufs[i].data(), kLen, msg_seed(g.rank(), peer, i, round));
        RecvRequest r{rbufs[i].data(), kLen, i, 100 + i, nullptr};
        ASSERT_EQ(taken(g.endpoint(peer).post_recv({&r, 1})), 1u);
        SendRequest s{bufs[i].data(), kLen, i, i, nullptr};
        ASSERT_EQ(taken(g.endpoint(peer).post_send({&s, 1})), 1u);
        int done = 0;
        while (done < 2) {
          Completion c[4];
          auto n = g.transport().cq().wait(c, kStepTimeout);
          ASSERT_TRUE(n.ok()) << n.status().to_string();
          for (size_t k = 0; k < *n; ++k) {
            ASSERT_EQ(c[k].code, Code::kOk);
            ++done;
          }
        }
        EXPECT_EQ(check_pattern(rbufs[i].data(), kLen, msg_seed(peer, g.rank(), i, round)), "");
      }
    }
    auto st = g.transport().stats();
    EXPECT_GT(st["reg_cache_evictions"], 0u);
    EXPECT_GT(st["reg_cache_misses"], 4u);
    EXPECT_LE(st["reg_cache_entries"], 4u);
  });
}

TEST_F(Rdma, BadRegistrationSaysWhat) {
  auto t = Transport::open(kRxe.spec);
  ASSERT_TRUE(t.ok());
  auto a = (*t)->register_memory(nullptr, 4096, MemKind::kHost);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), Code::kInvalidArgument);
  // A range no mapping covers: the kernel refuses to pin it.
  auto b =
      (*t)->register_memory(reinterpret_cast<void*>(uintptr_t{0x10000}), 1 << 16, MemKind::kHost);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), Code::kInvalidArgument) << b.status().to_string();
  EXPECT_NE(b.status().to_string().find("rxe0"), std::string::npos) << b.status().to_string();
  // A valid start with a length past the mapping, and a range that wraps the address space.
  std::vector<uint8_t> small(4096);
  auto d = (*t)->register_memory(small.data(), size_t{1} << 40, MemKind::kHost);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().to_string().find("rxe0"), std::string::npos) << d.status().to_string();
  auto e = (*t)->register_memory(small.data(), SIZE_MAX - 100, MemKind::kHost);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), Code::kInvalidArgument) << e.status().to_string();
  int x = 0;
  auto c = (*t)->register_memory(&x, sizeof x, MemKind::kCudaDevice);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Code::kNotSupported) << c.status().to_string();
}

TEST_F(Rdma, UnboundedRetriesRefused) {
  auto t = Transport::open("rdma:dev=rxe0,rnr_retry=7");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), Code::kInvalidArgument);
  EXPECT_NE(t.status().to_string().find("forever"), std::string::npos);
  auto u = Transport::open("rdma:dev=rxe0,qp_timeout=0");
  EXPECT_FALSE(u.ok());
  auto v = Transport::open("rdma:dev=nosuchdev");
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), Code::kUnavailable);
  EXPECT_NE(v.status().to_string().find("rxe0"), std::string::npos) << v.status().to_string();
}

// Junk and silence on the control port are refused; the transport then still connects.
TEST_F(Rdma, MalformedControlMessages) {
  auto groups = make_groups(kRxe, 2);
  ASSERT_EQ(groups.size(), 2u);
  Transport& t1 = groups[1]->transport();
  auto remote = decode_addr(t1.address().payload().data(), t1.address().payload().size());
  ASSERT_TRUE(remote.ok());
  auto fd = dial(SockAddr{}, *remote, {}, Deadline(Millis(5000)));
  ASSERT_TRUE(fd.ok()) << fd.status().to_string();
  char junk[sizeof(drv::rdma::Hello)];
  std::memset(junk, 0x5a, sizeof junk);
  ASSERT_TRUE(write_all(fd->get(), junk, sizeof junk, Deadline(Millis(1000))).ok());
  auto before = t1.stats()["rejected_conns"];
  for (int i = 0; i < 100 && t1.stats()["rejected_conns"] == before; ++i) {
    Completion c[1];
    (void)t1.cq().poll(std::span<Completion>(c, 0));
    std::this_thread::sleep_for(Millis(10));
  }
  EXPECT_EQ(t1.stats()["rejected_conns"], before + 1);
  // The group still works both ways.
  std::vector<uint8_t> out(100, 7), in(100);
  SendRequest s{out.data(), out.size(), 5, 1, nullptr};
  RecvRequest r{in.data(), in.size(), 5, 2, nullptr};
  ASSERT_EQ(taken(groups[1]->endpoint(0).post_recv({&r, 1})), 1u);
  ASSERT_EQ(taken(groups[0]->endpoint(1).post_send({&s, 1})), 1u);
  int done = 0;
  for (int i = 0; i < 3000 && done < 2; ++i) {
    Completion c[2];
    for (auto& g : groups) done += static_cast<int>(taken(g->transport().cq().poll(c)));
  }
  EXPECT_EQ(done, 2);
  EXPECT_EQ(in, out);
}

// A peer process killed while a receive waits on it: the receive fails, in bounded time,
// naming the peer.
TEST_F(Rdma, PeerKilledMidTransfer) {
  char dir[] = "/tmp/gw-rdma-store-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto st = make_file_store(dir);
    auto t = Transport::open(kRxe.spec);
    if (!st.ok() || !t.ok()) ::_exit(3);
    auto g = Group::create(*st, std::move(*t), 1, 2, kStepTimeout);
    if (!g.ok()) ::_exit(4);
    std::vector<uint8_t> big(4 << 20, 1);
    SendRequest s{big.data(), big.size(), 1, 1, nullptr};
    (void)(*g)->endpoint(0).post_send({&s, 1});
    ::pause();  // killed by the parent
    ::_exit(0);
  }
  auto st = make_file_store(dir);
  ASSERT_TRUE(st.ok());
  auto t = Transport::open(kRxe.spec);
  ASSERT_TRUE(t.ok());
  auto g = Group::create(*st, std::move(*t), 0, 2, kStepTimeout);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  std::vector<uint8_t> small(1 << 20);
  RecvRequest r{small.data(), small.size(), 9, 1, nullptr};  // tag 9: never sent
  ASSERT_EQ(taken((*g)->endpoint(1).post_recv({&r, 1})), 1u);
  std::this_thread::sleep_for(Millis(200));
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  bool recv_failed = false, ep_error = false;
  auto end = Clock::now() + std::chrono::seconds(20);
  while (Clock::now() < end && !(recv_failed && ep_error)) {
    Completion c[4];
    auto n = (*g)->transport().cq().wait(c, Millis(500));
    if (!n.ok()) continue;
    for (size_t i = 0; i < *n; ++i) {
      if (c[i].op == Op::kRecv && c[i].wr_id == 1) recv_failed = c[i].code != Code::kOk;
      if (c[i].op == Op::kEndpointError) ep_error = true;
      EXPECT_EQ(c[i].peer_id, 1u);
    }
  }
  EXPECT_TRUE(recv_failed);
  EXPECT_TRUE(ep_error);
  Status es = (*g)->endpoint(1).status();
  EXPECT_FALSE(es.ok());
  EXPECT_NE(es.to_string().find("rank 1"), std::string::npos) << es.to_string();
  SendRequest s{small.data(), 10, 1, 1, nullptr};
  auto after = (*g)->endpoint(1).post_send({&s, 1});
  EXPECT_FALSE(after.ok()) << "the error must be sticky";
}

}  // namespace
}  // namespace gw::conformance
