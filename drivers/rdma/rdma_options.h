/// @file rdma_options.h
/// The rdma transport's settings (read from [rdma] at open by one table of keys,
/// rdma_options.cc) and how a work request's wr_id says what completed.
#pragma once

#include <cstdint>
#include <string>

#include "gw_config.h"
#include "gw_staging.h"
#include "gw_status.h"
#include "gw_time.h"
#include "rdma_device.h"

namespace gw::drv::rdma {

/// The transport's settings.
struct Options {
  uint32_t eager_bytes = 0;  // largest eager payload; larger messages use rendezvous
  uint32_t recv_depth = 0;   // receive buffers per QP (the peer's credits)
  uint32_t sq_depth = 0;     // send work requests per QP
  uint32_t max_outstanding = 0;
  uint32_t max_inline = 0;
  uint64_t write_chunk = 0;
  uint32_t qps = 1;         // queue pairs per connection
  uint64_t min_stripe = 0;  // smallest stripe of a rendezvous message
  bool advertise = true;    // advertise receives posted ahead (rdma_recv.cc)
  uint64_t unexpected_bytes = 0;
  uint64_t max_message = 0;  // largest message accepted
  size_t cq_depth = 0;       // completions held before poll() drains them
  uint8_t qp_timeout = 0, retry_cnt = 0, rnr_retry = 0;
  int hello_timeout_ms = 0;
  uint64_t heartbeat_ns = 0, peer_timeout_ns = 0;  // rdma_liveness.cc
  Nanos spin{0};                 // polling before a blocking wait sleeps, while traffic flows
  StagingPool::Options staging;  // CUDA memory without GPUDirect (rdma_staging.cc)
};
/// What RdmaTransport::init reads: the transport's settings, the device and the control
/// connection's interface.
struct Settings {
  Options opts;
  DeviceWish wish;
  std::string ctrl_iface;
  size_t reg_cache_entries = 0;
};

/// Every [rdma] key but rdma.gpu and rdma.gpu_strict (probe_gpu's), range-checked.
/// @return InvalidArgument naming the first bad key, where its value came from and its range.
Status read_options(const Config& cfg, Settings* s);

/// Pinned staging buffers per endpoint at most (their index fits a work request id).
inline constexpr int64_t kMaxStagingSlots = 256;

/// Kinds of work request, in the top byte of wr_id: | kind 8 | endpoint 24 | index 32 |.
/// Writes carry | lane 8 | send slot 24 | in the index; lane receives carry the lane; staged
/// writes (from a pinned buffer) | lane 3 | with immediate 1 | buffer 8 | send slot 20 |.
enum class WrKind : uint8_t {
  kRecv = 1,
  kMsg = 2,
  kWrite = 3,
  kWriteImm = 4,
  kCredit = 5,
  kLaneRecv = 6,
  kStaged = 7,
  kZeroCopy = 8,  // compact eager SEND straight from the caller's registered buffer
};
inline uint64_t make_wr(WrKind k, uint32_t ep, uint32_t idx) {
  return (uint64_t{static_cast<uint8_t>(k)} << 56) | (uint64_t{ep & 0xFFFFFF} << 32) | idx;
}

}  // namespace gw::drv::rdma
