/// @file harness_net.h
/// The NCCL-side view of the plugin for the harness: dlopen()s libnccl-net-gradwire.so, finds
/// ncclNetPlugin_v8 and ncclNetPlugin_v12 as NCCL does, and offers one call set over either
/// table (the version a run uses is chosen on the command line). Also the out-of-band handle
/// exchange (files in a directory), the connect/accept polling loop NCCL runs, and waits.
/// Thread-safety: one thread per process, as the harness runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "nccl_abi.h"

namespace gw::nccltest {

[[noreturn]] void die(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
#define CHECK(cond, ...)                           \
  do {                                             \
    if (!(cond)) ::gw::nccltest::die(__VA_ARGS__); \
  } while (0)

class Net {
 public:
  /// Loads `path` and selects version 8 or 12; dies with the reason on failure.
  Net(const std::string& path, int version, int rank);
  int version() const { return version_; }
  int rank() const { return rank_; }

  ncclResult_t init();
  ncclResult_t devices(int* n);
  /// name, ptrSupport, speed, maxRecvs of device 0, for checks and the report.
  ncclResult_t props(int dev, std::string* name, int* ptr, int* speed, int* max_recvs);
  ncclResult_t listen(int dev, void* handle, void** lc);
  ncclResult_t connect(int dev, void* handle, void** sc);
  ncclResult_t accept(void* lc, void** rc);
  ncclResult_t reg_mr(void* comm, void* data, size_t size, int type, void** mh);
  ncclResult_t reg_mr_dmabuf(void* comm, void* data, size_t size, int type, int fd, void** mh);
  ncclResult_t dereg_mr(void* comm, void* mh);
  ncclResult_t isend(void* sc, void* data, size_t size, int tag, void* mh, void** req);
  ncclResult_t irecv(void* rc, int n, void** data, const size_t* sizes, const int* tags, void** mhs,
                     void** req);
  ncclResult_t iflush(void* rc, int n, void** data, int* sizes, void** mhs, void** req);
  ncclResult_t test(void* req, int* done, int* sizes);
  ncclResult_t close_send(void* sc);
  ncclResult_t close_recv(void* rc);
  ncclResult_t close_listen(void* lc);

 private:
  int version_;
  int rank_;
  ncclNet_v8_t* v8_ = nullptr;
  ncclNet_v12_t* v12_ = nullptr;
  void* ctx_ = nullptr;
};

/// Comms of one rank to every other rank: send[p] sends to p, recv[p] receives from p.
struct Mesh {
  std::vector<void*> send, recv, listen;
};

/// Listens for every peer, publishes handles as files in `dir`, and polls connect/accept
/// until all comms exist (dies after `timeout_ms`).
/// `name` tells the handle files of several meshes (NCCL's channels) apart.
Mesh connect_mesh(Net& net, const std::string& dir, int ranks, int timeout_ms,
                  const std::string& name = "h");
void close_mesh(Net& net, Mesh& m);

/// File barrier in `dir`: every rank creates NAME.r and waits for all.
void barrier(const std::string& dir, const std::string& name, int rank, int ranks, int timeout_ms);

/// Tests `req` until done. spin: test back to back (benchmarks); else sleep a little after a
/// while (2 cores are shared). @return the first non-success result of test().
ncclResult_t wait(Net& net, void* req, int* sizes, bool spin, int timeout_ms);

/// The byte a message carries at offset i.
inline uint8_t pattern(uint32_t seed, size_t i) {
  return static_cast<uint8_t>(seed * 131u + i * 7u + (i >> 8) + 1u);
}
inline uint32_t seed_of(int src, int dst, int tag, int round) {
  return static_cast<uint32_t>(src * 7919 + dst * 104729 + tag * 31 + round * 1000003);
}

}  // namespace gw::nccltest
