/// @file nccl_plugin.h
/// The plugin's version-neutral core: one Device per gradwire Transport the user selects
/// (GW_NCCL_TRANSPORT, ';'-separated specs, default "tcp"), comms over its Endpoints, requests
/// from fixed per-comm pools. nccl_exports.cc adapts it to each ncclNet_vN_t table.
///
/// Thread-safety: NCCL calls the plugin from its main and proxy threads; every entry point that
/// touches a Device takes Device::mu (a Transport is single-threaded). Lock order: the global
/// state mutex (setup only) before any Device::mu. No exception crosses the C ABI: entry points
/// are noexcept and turn Status into ncclResult_t.
#pragma once

#include <array>
#include <cstdarg>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gw_transport.h"
#include "nccl_abi.h"

namespace gw::nccl {

inline constexpr int kMaxRecvs = 8;  ///< grouped receives per irecv (maxRecvs)
inline constexpr int kBurst = 64;    ///< completions taken per CQ poll
inline constexpr int kHeld = 64;     ///< sends a Link holds for its next post_send burst
/// Sends this big are posted at once, not held (between the sizes measured: holding won at
/// 64 and 256 KiB, lost at 1 MiB).
inline constexpr size_t kHoldMax = 512 << 10;

/// Logs through NCCL's callback (set by init); printf-style, as NCCL's own INFO/WARN.
void logf(ncclDebugLogLevel level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
#define GW_NCCL_WARN(...) ::gw::nccl::logf(NCCL_LOG_WARN, __VA_ARGS__)
#define GW_NCCL_INFO(...) ::gw::nccl::logf(NCCL_LOG_INFO, __VA_ARGS__)

/// Sends gradwire's spdlog loggers ("gw.*") through NCCL's logger (nccl_log.cc); called once
/// the transports are open, so the loggers they made exist.
void route_gradwire_logs();

/// Status -> ncclResult_t, logging the message at WARN (setup and error paths only).
ncclResult_t fail(const Status& s);

struct Device;

/// A registration (mhandle). Shared by identical regMr calls (refs), since regIsGlobal lets
/// NCCL register one buffer for many comms.
struct Mr {
  Device* dev = nullptr;
  MemoryRegion region;
  int refs = 0;
};

struct Comm;

/// One isend, or one irecv of up to kMaxRecvs buffers. wr_id = address | part index.
struct alignas(16) Request {
  Comm* comm = nullptr;
  bool used = false;
  bool send = false;
  bool abandoned = false;  ///< failed to NCCL while parts were in flight: freed by progress
  uint8_t n = 0;           ///< parts
  uint8_t posted = 0;      ///< parts handed to the transport (the rest wait for room)
  uint8_t left = 0;        ///< parts not yet completed
  Code code = Code::kOk;
  size_t sizes[kMaxRecvs] = {};
  RecvRequest parts[kMaxRecvs];  ///< kept for parts not yet posted
};

inline Request* request_of(uint64_t wr_id) {
  return reinterpret_cast<Request*>(wr_id & ~uint64_t{15});
}

/// The one Endpoint between this process's transport and one peer's. Every comm between the
/// two processes rides on it (NCCL's comms are one-directional; separate endpoints would double
/// the connections each busy poll visits), told apart by the comm id in the upper tag bits.
struct Link {
  std::unique_ptr<Endpoint> ep;
  /// isend holds its send here and the next progress() posts the Link's held sends as one
  /// burst: NCCL posts one send at a time, and one post_send per send cost tcp a sendmsg per
  /// 64 KiB message (0.62x gw-perf's bandwidth, which posts bursts).
  std::array<SendRequest, kHeld> held;
  uint32_t nheld = 0;
  bool listed = false;  ///< in Device::holding
};

/// A send or receive comm: a Link, its comm id, its request pool.
struct Comm {
  Device* dev = nullptr;
  std::shared_ptr<Link> link;
  uint64_t tag_hi = 0;  ///< comm id << 32; NCCL's tag fills the low 32 bits
  bool send = false;
  bool closed = false;  ///< closeSend/closeRecv called; freed when nothing is in flight
  bool warned = false;  ///< the endpoint's error was logged once
  int in_flight = 0;
  std::array<Request, GW_NCCL_MAX_REQUESTS> reqs;
  std::string peer;  ///< for messages
};

/// One gradwire Transport as one NCCL net device.
struct Device {
  std::mutex mu;
  int index = 0;
  std::string spec;
  std::string name;  ///< "gradwire-tcp": props.name points here
  std::unique_ptr<Transport> t;
  std::map<std::pair<uintptr_t, size_t>, std::unique_ptr<Mr>> regs;  ///< registration cache
  std::vector<std::unique_ptr<Comm>> zombies;          ///< closed with requests in flight
  std::map<std::string, std::shared_ptr<Link>> links;  ///< by the peer's Address bytes
  Status error;                                        ///< sticky: the transport itself failed
  std::array<Completion, kBurst> burst;
  std::vector<Link*> holding;  ///< links with held sends; capacity reserved per link made

  /// Post the held sends, poll the CQ once and route completions to their requests. Caller
  /// holds mu.
  void progress();
  /// Hand the held sends to the transport (as many as it takes). Caller holds mu.
  void post_held();
};

/// Properties common to every ABI version, filled from the transport.
struct Props {
  const char* name;
  int ptr_support;
  int speed_mbps;
  float latency_us;
  int max_comms;
  size_t max_bytes;
};

// Setup (nccl_setup.cc, nccl_connect.cc).
ncclResult_t init(ncclDebugLogger_t logger) noexcept;
ncclResult_t devices(int* ndev) noexcept;
ncclResult_t properties(int dev, Props* p) noexcept;
ncclResult_t listen(int dev, void* handle, void** listen_comm) noexcept;
ncclResult_t connect(int dev, void* handle, void** send_comm) noexcept;
ncclResult_t accept(void* listen_comm, void** recv_comm) noexcept;
ncclResult_t close_comm(void* comm) noexcept;
ncclResult_t close_listen(void* listen_comm) noexcept;
Device* device(int dev);

// Data path (nccl_datapath.cc).
ncclResult_t reg_mr(void* comm, void* data, size_t size, int type, void** mhandle) noexcept;
ncclResult_t reg_mr_dmabuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                           void** mhandle) noexcept;
ncclResult_t dereg_mr(void* comm, void* mhandle) noexcept;
ncclResult_t isend(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                   void** request) noexcept;
ncclResult_t irecv(void* recv_comm, int n, void** data, const size_t* sizes, const int* tags,
                   void** mhandles, void** request) noexcept;
ncclResult_t iflush(void* recv_comm, int n, void** request) noexcept;
/// @param sizes int per part (NCCL's test() reports int sizes in every version); may be null.
ncclResult_t test(void* request, int* done, int* sizes) noexcept;
/// Called by close_comm with dev->mu held: frees the comm now or parks it as a zombie.
void retire(Comm* c);
/// Take a send the transport has not yet taken back from its Link (the request failed).
void unhold(Request* q);

}  // namespace gw::nccl
