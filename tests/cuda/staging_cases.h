/// @file staging_cases.h
/// TCP send/recv of device memory, written against the DeviceOps table only, so the same
/// cases run on the emulated table (CI: staging logic) and on CUDA (a GPU machine: the real
/// copies). Two transports on loopback, driven from one thread.
/// Thread-safety: one test thread.
#pragma once

#include <thread>

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gw_device.h"
#include "gw_transport.h"

namespace gw::cuda_test {

/// Device memory owned by a test, filled and read through the table's copies.
class DevMem {
 public:
  DevMem(DeviceOps* ops, size_t n) : ops_(ops), n_(n) {
    auto p = ops->alloc_device(n);
    EXPECT_TRUE(p.ok()) << p.status().to_string();
    p_ = p.ok() ? static_cast<uint8_t*>(*p) : nullptr;
  }
  ~DevMem() {
    if (p_) ops_->free_device(p_);
  }
  DevMem(const DevMem&) = delete;
  DevMem& operator=(const DevMem&) = delete;
  uint8_t* get() const { return p_; }
  void write(const std::vector<uint8_t>& v) {
    ASSERT_TRUE(ops_->copy_async(p_, v.data(), v.size(), nullptr).ok());
    ASSERT_TRUE(ops_->synchronize(nullptr).ok());
  }
  std::vector<uint8_t> read() const {
    std::vector<uint8_t> v(n_);
    EXPECT_TRUE(ops_->copy_async(v.data(), p_, n_, nullptr).ok());
    EXPECT_TRUE(ops_->synchronize(nullptr).ok());
    return v;
  }

 private:
  DeviceOps* ops_;
  uint8_t* p_ = nullptr;
  size_t n_;
};

inline std::vector<uint8_t> pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& b : v) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    b = static_cast<uint8_t>(x);
  }
  return v;
}

/// Two connected TCP transports in one thread.
struct Pair {
  std::unique_ptr<Transport> a, b;
  std::unique_ptr<Endpoint> ab, ba;

  static std::unique_ptr<Pair> make(const std::string& spec) {
    auto p = std::make_unique<Pair>();
    auto ta = Transport::open(spec), tb = Transport::open(spec);
    EXPECT_TRUE(ta.ok() && tb.ok()) << ta.status().to_string() << tb.status().to_string();
    if (!ta.ok() || !tb.ok()) return nullptr;
    p->a = std::move(ta).value();
    p->b = std::move(tb).value();
    // The dialling side waits for the other's answer to the authentication: one thread each.
    Result<std::unique_ptr<Endpoint>> e2 = Status(Code::kInternal, "not run");
    std::thread passive([&] {
      e2 = p->b->connect(ConnectParams{p->a->address(), 7, false, 0, "a"},
                         Deadline::after_ms(10000));
    });
    auto e1 =
        p->a->connect(ConnectParams{p->b->address(), 7, true, 1, "b"}, Deadline::after_ms(10000));
    passive.join();
    EXPECT_TRUE(e1.ok()) << e1.status().to_string();
    EXPECT_TRUE(e2.ok()) << e2.status().to_string();
    if (!e1.ok() || !e2.ok()) return nullptr;
    p->ab = std::move(e1).value();
    p->ba = std::move(e2).value();
    return p;
  }

  /// Polls both sides until `sends` send and `recvs` receive completions arrived.
  std::vector<Completion> drain(size_t sends, size_t recvs, int timeout_ms = 20000) {
    std::vector<Completion> got;
    Completion c[16];
    Deadline dl = Deadline::after_ms(timeout_ms);
    size_t s = 0, r = 0;
    while ((s < sends || r < recvs) && !dl.expired()) {
      for (Transport* t : {a.get(), b.get()}) {
        auto n = t->cq().poll(c);
        EXPECT_TRUE(n.ok()) << n.status().to_string();
        if (!n.ok()) return got;
        for (size_t i = 0; i < *n; ++i) {
          got.push_back(c[i]);
          if (c[i].op == Op::kSend) ++s;
          if (c[i].op == Op::kRecv) ++r;
        }
      }
    }
    EXPECT_TRUE(s >= sends && r >= recvs)
        << "timed out: " << s << "/" << sends << " sends, " << r << "/" << recvs << " receives";
    return got;
  }
};

enum class Where { kHost, kDevice };

/// One message a -> b of `len` bytes from/to host or device memory, checked byte for byte.
inline void one_message(DeviceOps* ops, Pair& p, size_t len, Where from, Where to, bool recv_first,
                        uint32_t seed) {
  const auto data = pattern(len, seed);
  DevMem dsrc(ops, len), ddst(ops, len);
  std::vector<uint8_t> hdst(len, 0xEE);
  if (from == Where::kDevice) dsrc.write(data);
  if (to == Where::kDevice) ddst.write(std::vector<uint8_t>(len, 0xEE));
  const void* src = from == Where::kDevice ? dsrc.get() : data.data();
  void* dst = to == Where::kDevice ? static_cast<void*>(ddst.get()) : hdst.data();
  auto smr = p.a->register_memory(const_cast<void*>(src), len,
                                  from == Where::kDevice ? MemKind::kCudaDevice : MemKind::kHost);
  auto rmr =
      p.b->register_memory(dst, len, to == Where::kDevice ? MemKind::kCudaDevice : MemKind::kHost);
  ASSERT_TRUE(smr.ok() && rmr.ok()) << smr.status().to_string() << rmr.status().to_string();
  SendRequest s{src, len, 42, 1, &*smr};
  RecvRequest r{dst, len, 42, 2, &*rmr};
  if (recv_first) {
    ASSERT_EQ(p.ba->post_recv({&r, 1}).value(), 1u);
  }
  ASSERT_EQ(p.ab->post_send({&s, 1}).value(), 1u);
  if (!recv_first) {
    p.drain(1, 0);  // the message is buffered as unexpected at b before its receive exists
    ASSERT_EQ(p.ba->post_recv({&r, 1}).value(), 1u);
  }
  auto got = p.drain(recv_first ? 1 : 0, 1);
  for (auto& c : got) {
    EXPECT_EQ(c.code, Code::kOk) << (c.ep ? c.ep->status().to_string() : "");
    if (c.op == Op::kRecv) {
      EXPECT_EQ(c.len, len);
    }
  }
  const auto out = to == Where::kDevice ? ddst.read() : hdst;
  ASSERT_EQ(out.size(), data.size());
  for (size_t i = 0; i < len; ++i)
    ASSERT_EQ(out[i], data[i]) << "first wrong byte at " << i << " of " << len;
}

/// Many device messages in flight at once (more chunks than staging slots).
inline void many_messages(DeviceOps* ops, Pair& p, int count, size_t len) {
  std::vector<std::unique_ptr<DevMem>> src, dst;
  std::vector<SendRequest> s;
  std::vector<RecvRequest> r;
  for (int i = 0; i < count; ++i) {
    src.push_back(std::make_unique<DevMem>(ops, len));
    dst.push_back(std::make_unique<DevMem>(ops, len));
    src.back()->write(pattern(len, 100 + static_cast<uint32_t>(i)));
    // No memory region: the transport asks the device runtime what the pointer is.
    s.push_back(SendRequest{src.back()->get(), len, 9, static_cast<uint64_t>(i), nullptr});
    r.push_back(RecvRequest{dst.back()->get(), len, 9, static_cast<uint64_t>(i), nullptr});
  }
  ASSERT_EQ(p.ba->post_recv(r).value(), r.size());
  ASSERT_EQ(p.ab->post_send(s).value(), s.size());
  auto got = p.drain(s.size(), r.size());
  std::vector<int> seen(static_cast<size_t>(count), 0);
  for (auto& c : got) {
    ASSERT_EQ(c.code, Code::kOk);
    if (c.op == Op::kRecv) ++seen.at(c.wr_id);
  }
  for (int n : seen) EXPECT_EQ(n, 1);
  for (int i = 0; i < count; ++i)
    ASSERT_EQ(dst[static_cast<size_t>(i)]->read(), pattern(len, 100 + static_cast<uint32_t>(i)))
        << "message " << i;
}

}  // namespace gw::cuda_test
