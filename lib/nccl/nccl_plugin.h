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
#include "nccl_comm.h"

namespace gw::nccl {

/// Logs through NCCL's callback (set by init); printf-style, as NCCL's own INFO/WARN.
void logf(ncclDebugLogLevel level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
#define GW_NCCL_WARN(...) ::gw::nccl::logf(NCCL_LOG_WARN, __VA_ARGS__)
#define GW_NCCL_INFO(...) ::gw::nccl::logf(NCCL_LOG_INFO, __VA_ARGS__)

/// Sends gradwire's spdlog loggers ("gw.*") through NCCL's logger (nccl_log.cc); called once
/// the transports are open, so the loggers they made exist.
void route_gradwire_logs();

/// Status -> ncclResult_t, logging the message at WARN (setup and error paths only).
ncclResult_t fail(const Status& s);

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
