// The call sequences NCCL uses, as test cases run by every rank of one harness run.
#include "harness_cases.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>

namespace gw::nccltest {
namespace {

constexpr int kWaitMs = 20'000;
constexpr size_t kGuard = 16;
constexpr uint8_t kGuardByte = 0xA5;

struct Msg {
  size_t size;
  int tag;
};

/// One round: every peer gets these messages; the receiver groups them as `groups` says.
const Msg kMsgs[] = {{0, 1},      {1, 2},     {7, 3},       {8, 4},       {63, 5},   {4096, 6},
                     {65537, 7},  {3000, 8},  {1 << 20, 9}, {12, 10},     {100, 11}, {257, 12},
                     {9000, 13},  {1, 14},    {2048, 15},   {300000, 16}, {5, 17},   {6, 18},
                     {70000, 19}, {4095, 20}, {1500, 21},   {1501, 22},   {31, 23},  {32, 24}};
constexpr int kNumMsgs = sizeof kMsgs / sizeof kMsgs[0];
const int kGroups[] = {1, 2, 3, 4, 8, 6};  // sums to kNumMsgs; 8 = maxRecvs
constexpr int kSameTag = 8;                // then this many messages with one tag: order

/// Same-tag sizes mix sends the plugin holds for a burst and sends it posts at once
/// (>= 512 KiB): their order must survive both paths.
size_t same_size(int j) { return j % 3 == 1 ? (640 << 10) : 64; }

/// Offset of same-tag message j from the start of the same-tag area.
size_t same_off(int j) {
  size_t o = 0;
  for (int i = 0; i < j; ++i) o += same_size(i) + kGuard;
  return o;
}

size_t total_bytes() {
  size_t t = 0;
  for (const Msg& m : kMsgs) t += m.size + kGuard;
  return t + same_off(kSameTag);
}

struct Buffers {
  std::vector<uint8_t> tx, rx;
  void* tx_mh = nullptr;
  void* rx_mh = nullptr;
};

/// Posts sends until taken (a NULL request means "call again": test the others meanwhile).
void* post_send(Net& net, void* sc, void* data, size_t n, int tag, void* mh) {
  for (int i = 0;; ++i) {
    void* req = nullptr;
    CHECK(net.isend(sc, data, n, tag, mh, &req) == ncclSuccess, "isend tag %d", tag);
    if (req) return req;
    CHECK(i < 1'000'000, "isend never taken");
    usleep(10);
  }
}

void* post_recv(Net& net, void* rc, int n, void** data, size_t* sizes, int* tags, void** mhs) {
  for (int i = 0;; ++i) {
    void* req = nullptr;
    CHECK(net.irecv(rc, n, data, sizes, tags, mhs, &req) == ncclSuccess, "irecv tag %d", tags[0]);
    if (req) return req;
    CHECK(i < 1'000'000, "irecv never taken");
    usleep(10);
  }
}

/// Every rank exchanges kMsgs (+ kSameTag same-tag messages) with every peer, all posted at
/// once, sends within each group in reverse tag order; receives checked byte for byte.
void round_trip(Net& net, Mesh& m, std::vector<Buffers>& bufs, int ranks, int round) {
  const int me = net.rank();
  struct Pending {
    void* req;
    int peer, first, n;  // first message index, parts
  };
  std::vector<Pending> sends, recvs;
  for (int p = 0; p < ranks; ++p) {
    if (p == me) continue;
    Buffers& b = bufs[p];
    std::memset(b.rx.data(), kGuardByte, b.rx.size());
    // Receives first, grouped; capacity = size + guard for odd tags (sizes[] must say the
    // real length), exact otherwise.
    size_t off = 0;
    int k = 0;
    for (int g : kGroups) {
      void* data[8];
      size_t sizes[8];
      int tags[8];
      void* mhs[8];
      for (int j = 0; j < g; ++j, ++k) {
        data[j] = b.rx.data() + off;
        sizes[j] = kMsgs[k].size + (kMsgs[k].tag % 2 ? kGuard : 0);
        tags[j] = kMsgs[k].tag;
        mhs[j] = b.rx_mh;
        off += kMsgs[k].size + kGuard;
      }
      recvs.push_back({post_recv(net, m.recv[p], g, data, sizes, tags, mhs), p, k - g, g});
    }
    for (int j = 0; j < kSameTag; ++j) {
      void* data = b.rx.data() + off + same_off(j);
      size_t size = same_size(j);
      int tag = 100;
      recvs.push_back(
          {post_recv(net, m.recv[p], 1, &data, &size, &tag, &b.rx_mh), p, kNumMsgs + j, 1});
    }
  }
  for (int p = 0; p < ranks; ++p) {
    if (p == me) continue;
    Buffers& b = bufs[p];
    std::vector<size_t> offs(kNumMsgs + kSameTag);
    size_t off = 0;
    for (int k = 0; k < kNumMsgs; ++k, off += kMsgs[k - 1].size + kGuard) {
      offs[k] = off;
      uint32_t seed = seed_of(me, p, kMsgs[k].tag, round);
      for (size_t i = 0; i < kMsgs[k].size; ++i) b.tx[off + i] = pattern(seed, i);
    }
    for (int j = 0; j < kSameTag; ++j) {
      offs[kNumMsgs + j] = off + same_off(j);
      uint32_t seed = seed_of(me, p, 100 + j, round);
      for (size_t i = 0; i < same_size(j); ++i) b.tx[offs[kNumMsgs + j] + i] = pattern(seed, i);
    }
    int k = 0;
    for (int g : kGroups) {
      for (int j = g - 1; j >= 0; --j) {
        const Msg& msg = kMsgs[k + j];
        sends.push_back(
            {post_send(net, m.send[p], b.tx.data() + offs[k + j], msg.size, msg.tag, b.tx_mh), p,
             k + j, 1});
      }
      k += g;
    }
    for (int j = 0; j < kSameTag; ++j) {
      sends.push_back(
          {post_send(net, m.send[p], b.tx.data() + offs[kNumMsgs + j], same_size(j), 100, b.tx_mh),
           p, kNumMsgs + j, 1});
    }
  }
  for (auto& s : sends) {
    int size = -1;
    CHECK(wait(net, s.req, &size, false, kWaitMs) == ncclSuccess, "send to %d failed", s.peer);
  }
  for (auto& r : recvs) {
    int sizes[8];
    CHECK(wait(net, r.req, sizes, false, kWaitMs) == ncclSuccess, "recv from %d failed", r.peer);
    Buffers& b = bufs[r.peer];
    for (int j = 0; j < r.n; ++j) {
      int k = r.first + j;
      bool same = k >= kNumMsgs;
      size_t want = same ? same_size(k - kNumMsgs) : kMsgs[k].size;
      int tag = same ? 100 + (k - kNumMsgs) : kMsgs[k].tag;
      CHECK(sizes[j] == static_cast<int>(want), "from %d tag %d: size %d, want %zu", r.peer, tag,
            sizes[j], want);
      size_t off = 0;
      for (int q = 0; q < std::min(k, kNumMsgs); ++q) off += kMsgs[q].size + kGuard;
      if (same) off += same_off(k - kNumMsgs);
      uint32_t seed = seed_of(r.peer, me, tag, round);
      for (size_t i = 0; i < want; ++i) {
        CHECK(b.rx[off + i] == pattern(seed, i), "from %d tag %d: byte %zu is %u, want %u", r.peer,
              tag, i, b.rx[off + i], pattern(seed, i));
      }
      for (size_t i = want; i < want + kGuard; ++i)
        CHECK(b.rx[off + i] == kGuardByte, "from %d tag %d: wrote past the message", r.peer, tag);
    }
  }
}

void* one_send(Net& net, void* sc, std::vector<uint8_t>& buf, int tag, uint32_t seed) {
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = pattern(seed, i);
  return post_send(net, sc, buf.data(), buf.size(), tag, nullptr);
}

/// A second set of comms (another NCCL channel) to every peer, used at the same time as the
/// first with the same tags: each message must land on its own comm.
void two_channels(Net& net, Mesh& m, const Ctx& ctx) {
  const int me = net.rank();
  Mesh m2 = connect_mesh(net, ctx.dir, ctx.ranks, 20'000, "ch2");
  std::vector<uint8_t> rx(ctx.ranks * 2 * 64), tx(ctx.ranks * 2 * 64);
  std::vector<void*> reqs;
  for (int p = 0; p < ctx.ranks; ++p) {
    if (p == me) continue;
    for (int ch = 0; ch < 2; ++ch) {
      void* data = rx.data() + (p * 2 + ch) * 64;
      size_t size = 64;
      int tag = 5;
      reqs.push_back(post_recv(net, (ch ? m2 : m).recv[p], 1, &data, &size, &tag, nullptr));
    }
  }
  for (int p = 0; p < ctx.ranks; ++p) {
    if (p == me) continue;
    for (int ch = 1; ch >= 0; --ch) {  // channel 2 first: its message must not fill channel 1
      uint8_t* b = tx.data() + (p * 2 + ch) * 64;
      for (size_t i = 0; i < 64; ++i) b[i] = pattern(seed_of(me, p, 5, 50 + ch), i);
      reqs.push_back(post_send(net, (ch ? m2 : m).send[p], b, 64, 5, nullptr));
    }
  }
  for (void* r : reqs) CHECK(wait(net, r, nullptr, false, kWaitMs) == ncclSuccess, "channel 2");
  for (int p = 0; p < ctx.ranks; ++p) {
    if (p == me) continue;
    for (int ch = 0; ch < 2; ++ch) {
      for (size_t i = 0; i < 64; ++i) {
        CHECK(rx[(p * 2 + ch) * 64 + i] == pattern(seed_of(p, me, 5, 50 + ch), i),
              "from %d: channel %d got another channel's message (byte %zu)", p, ch + 1, i);
      }
    }
  }
  barrier(ctx.dir, "ch2-done", me, ctx.ranks, kWaitMs);
  close_mesh(net, m2);
}

}  // namespace

void case_basic(Net& net, Mesh& m, const Ctx& ctx) {
  std::vector<Buffers> bufs(ctx.ranks);
  for (int p = 0; p < ctx.ranks; ++p) {
    if (p == net.rank()) continue;
    bufs[p].tx.resize(total_bytes());
    bufs[p].rx.resize(total_bytes());
    CHECK(net.reg_mr(m.send[p], bufs[p].tx.data(), bufs[p].tx.size(), GW_NCCL_PTR_HOST,
                     &bufs[p].tx_mh) == ncclSuccess,
          "regMr tx");
    CHECK(net.reg_mr(m.recv[p], bufs[p].rx.data(), bufs[p].rx.size(), GW_NCCL_PTR_HOST,
                     &bufs[p].rx_mh) == ncclSuccess,
          "regMr rx");
  }
  for (int round = 0; round < ctx.rounds; ++round) round_trip(net, m, bufs, ctx.ranks, round);
  two_channels(net, m, ctx);
  // iflush on host memory: nothing to do, NULL request.
  if (net.rank() != 0) {
    void* data = bufs[0].rx.data();
    int size = 1;
    void* req = &size;
    CHECK(net.iflush(m.recv[0], 1, &data, &size, &bufs[0].rx_mh, &req) == ncclSuccess && !req,
          "iflush should return a NULL request for host memory");
  }
  barrier(ctx.dir, "basic-done", net.rank(), ctx.ranks, kWaitMs);
  for (int p = 0; p < ctx.ranks; ++p) {
    if (p == net.rank()) continue;
    CHECK(net.dereg_mr(m.send[p], bufs[p].tx_mh) == ncclSuccess, "deregMr tx");
    CHECK(net.dereg_mr(m.recv[p], bufs[p].rx_mh) == ncclSuccess, "deregMr rx");
  }
}

void case_mismatch(Net& net, Mesh& m, const Ctx& ctx) {
  const int me = net.rank(), peer = 1 - me;
  std::vector<uint8_t> big(8192), small(100);
  if (me == 0) {
    void* a = one_send(net, m.send[peer], big, 1, 11);
    void* b = one_send(net, m.send[peer], small, 2, 22);
    // The sender's side of a truncated message is not an error: the receiver reports it.
    ncclResult_t ra = wait(net, a, nullptr, false, kWaitMs);
    CHECK(wait(net, b, nullptr, false, kWaitMs) == ncclSuccess, "send of the small message");
    std::fprintf(stderr, "[rank 0] send of the oversized message: result %d\n", ra);
  } else {
    std::vector<uint8_t> rx(4096 + kGuard, kGuardByte);
    void* data = rx.data();
    size_t size = 4096;
    int tag = 1;
    void* req = post_recv(net, m.recv[peer], 1, &data, &size, &tag, nullptr);
    int got = 0;
    auto t0 = std::chrono::steady_clock::now();
    ncclResult_t r = wait(net, req, &got, false, kWaitMs);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CHECK(r != ncclSuccess, "a 8192-byte message into a 4096-byte receive reported success");
    for (size_t i = 4096; i < rx.size(); ++i)
      CHECK(rx[i] == kGuardByte, "the oversized message wrote past the receive buffer");
    std::fprintf(stderr, "[rank 1] size mismatch: result %d after %.3f s (ok)\n", r, s);
    // The endpoint stays usable in gradwire; NCCL would abort, but the next message arrives.
    std::vector<uint8_t> rx2(100);
    data = rx2.data();
    size = 100;
    tag = 2;
    req = post_recv(net, m.recv[peer], 1, &data, &size, &tag, nullptr);
    CHECK(wait(net, req, &got, false, kWaitMs) == ncclSuccess && got == 100, "next message");
    for (size_t i = 0; i < 100; ++i) CHECK(rx2[i] == pattern(22, i), "next message byte %zu", i);
  }
  barrier(ctx.dir, "mismatch-done", me, ctx.ranks, kWaitMs);
}

void case_death(Net& net, Mesh& m, const Ctx&) {
  // Rank 1 streams 1 MiB messages to rank 0 and is killed (SIGKILL) mid-stream, while rank 0
  // still has receives posted and sends outstanding to it: every pending request must fail
  // within a bounded time, never hang.
  const int me = net.rank(), peer = 1 - me;
  constexpr int kMsgsN = 16;
  constexpr size_t kSize = 1 << 20;
  std::vector<uint8_t> buf(kSize * kMsgsN);
  if (me == 1) {
    // Keeps polling while it waits (a DPDK peer that stops polling looks dead) until rank 0
    // has the first message, then puts more in flight and is SIGKILLed.
    uint8_t go = 0;
    void* gop = &go;
    size_t one = 1;
    int go_tag = 77;
    void* go_req = post_recv(net, m.recv[peer], 1, &gop, &one, &go_tag, nullptr);
    for (int i = 0; i < 4; ++i)
      post_send(net, m.send[peer], buf.data() + i * kSize, kSize, i, nullptr);
    CHECK(wait(net, go_req, nullptr, false, kWaitMs) == ncclSuccess, "rank 0's go");
    for (int i = 4; i < kMsgsN; ++i)
      post_send(net, m.send[peer], buf.data() + i * kSize, kSize, i, nullptr);
    kill(getpid(), SIGKILL);
  }
  std::vector<void*> reqs;
  for (int i = 0; i < kMsgsN; ++i) {
    void* data = buf.data() + i * kSize;
    size_t size = kSize;
    int tag = i;
    reqs.push_back(post_recv(net, m.recv[peer], 1, &data, &size, &tag, nullptr));
  }
  {  // a receive rank 1 never answers: it must fail however cleanly the connection ends
    uint8_t* data = buf.data();
    size_t size = 8;
    int tag = 999;
    void* d = data;
    reqs.push_back(post_recv(net, m.recv[peer], 1, &d, &size, &tag, nullptr));
  }
  std::vector<uint8_t> tx(4 * kSize);
  for (int i = 0; i < 4; ++i)
    reqs.push_back(post_send(net, m.send[peer], tx.data() + i * kSize, kSize, 50 + i, nullptr));
  CHECK(wait(net, reqs[0], nullptr, false, kWaitMs) == ncclSuccess, "first message");
  uint8_t go = 1;
  post_send(net, m.send[peer], &go, 1, 77, nullptr);  // rank 1 dies once it has this
  auto t0 = std::chrono::steady_clock::now();
  int failed = 0;
  for (size_t i = 1; i < reqs.size(); ++i) {
    if (wait(net, reqs[i], nullptr, false, kWaitMs) != ncclSuccess) ++failed;
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(failed > 0, "no request failed although the peer was killed");
  // A new request on the dead comm fails at once (sticky error), or at its first test.
  void* req = nullptr;
  ncclResult_t r = net.isend(m.send[peer], tx.data(), 8, 99, nullptr, &req);
  if (r == ncclSuccess && req) r = wait(net, req, nullptr, false, kWaitMs);
  CHECK(r != ncclSuccess, "a send to the dead peer succeeded");
  std::fprintf(stderr,
               "[rank 0] peer killed: %d of %zu pending requests failed, all settled "
               "in %.3f s (ok)\n",
               failed, reqs.size() - 1, s);
  CHECK(s < 10, "took %.1f s to settle (bound: 10 s)", s);
}

void case_badreg(Net& net, Mesh& m, const Ctx& ctx) {
  const int me = net.rank(), peer = 1 - me;
  void* comm = m.send[peer];
  void* mh = nullptr;
  std::vector<uint8_t> buf(1 << 16);
  if (me == 0) {
    CHECK(net.reg_mr(comm, nullptr, 4096, GW_NCCL_PTR_HOST, &mh) != ncclSuccess, "NULL accepted");
    void* gone = mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(gone != MAP_FAILED, "mmap");
    munmap(gone, 8192);
    CHECK(net.reg_mr(comm, gone, 8192, GW_NCCL_PTR_HOST, &mh) != ncclSuccess,
          "an unmapped range was accepted");
    CHECK(net.reg_mr(comm, buf.data(), SIZE_MAX - 8, GW_NCCL_PTR_HOST, &mh) != ncclSuccess,
          "a wrapping range was accepted");
    CHECK(net.reg_mr(comm, buf.data(), buf.size() * 1024, GW_NCCL_PTR_HOST, &mh) != ncclSuccess,
          "a range past the end of the mapping was accepted");
    CHECK(net.reg_mr(comm, buf.data(), buf.size(), 0x40, &mh) != ncclSuccess,
          "an unknown memory type was accepted");
    std::string name;
    int ptr = 0, speed = 0, max_recvs = 0;
    CHECK(net.props(0, &name, &ptr, &speed, &max_recvs) == ncclSuccess, "getProperties");
    if (!(ptr & GW_NCCL_PTR_CUDA)) {
      CHECK(net.reg_mr(comm, buf.data(), buf.size(), GW_NCCL_PTR_CUDA, &mh) != ncclSuccess,
            "CUDA registration accepted although ptrSupport lacks NCCL_PTR_CUDA");
    }
    // The same range twice shares one registration (regIsGlobal); each needs its deregMr.
    void *a = nullptr, *b = nullptr;
    CHECK(net.reg_mr(comm, buf.data(), buf.size(), GW_NCCL_PTR_HOST, &a) == ncclSuccess, "reg");
    CHECK(net.reg_mr(m.recv[peer], buf.data(), buf.size(), GW_NCCL_PTR_HOST, &b) == ncclSuccess &&
              a == b,
          "second registration of one range");
    void* d = nullptr;
    CHECK(net.reg_mr_dmabuf(comm, buf.data(), 4096, GW_NCCL_PTR_HOST, -1, &d) == ncclSuccess,
          "regMrDmaBuf of host memory");
    CHECK(net.dereg_mr(comm, d) == ncclSuccess, "dereg dmabuf");
    // A send whose buffer lies outside its registration is refused.
    void* req = nullptr;
    std::vector<uint8_t> other(64);
    CHECK(net.isend(comm, other.data(), 64, 1, a, &req) != ncclSuccess,
          "isend outside its registration accepted");
    CHECK(net.dereg_mr(comm, a) == ncclSuccess && net.dereg_mr(comm, b) == ncclSuccess, "dereg");
    CHECK(net.dereg_mr(comm, a) != ncclSuccess, "a third deregMr of a twice-registered range");
    // The comm still works after refused calls.
    req = one_send(net, comm, buf, 7, 77);
    CHECK(wait(net, req, nullptr, false, kWaitMs) == ncclSuccess, "send after bad calls");
  } else {
    void* data = buf.data();
    size_t size = buf.size();
    int tag = 7, got = 0;
    void* req = post_recv(net, m.recv[peer], 1, &data, &size, &tag, nullptr);
    CHECK(wait(net, req, &got, false, kWaitMs) == ncclSuccess && got == int(buf.size()), "recv");
    for (size_t i = 0; i < buf.size(); ++i) CHECK(buf[i] == pattern(77, i), "byte %zu", i);
  }
  barrier(ctx.dir, "badreg-done", me, ctx.ranks, kWaitMs);
}

}  // namespace gw::nccltest
