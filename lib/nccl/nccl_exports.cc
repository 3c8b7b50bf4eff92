// The exported tables: ncclNetPlugin_v8 and ncclNetPlugin_v12 (the newest in NCCL's
// src/include/plugin/net/). NCCL dlsym()s the newest symbol it knows and falls back to older
// ones, so one .so serves NCCL releases from v8 (2.19) on. Everything here adapts argument
// types to the version-neutral core in nccl_plugin.h.
#include <atomic>

#include "nccl_plugin.h"

namespace gw::nccl {
namespace {

ncclResult_t not_supported(const char* what) {
  GW_NCCL_WARN("NET/gradwire: %s is not supported (no device offload, no virtual NICs)", what);
  return ncclInternalError;
}

/// The fields v8 and v12 share, at their own offsets in each struct.
template <class P>
void fill_common(P* out, const Props& p, int dev) {
  *out = {};
  out->name = const_cast<char*>(p.name);
  out->pciPath = nullptr;  // not a PCI device NCCL could place in its topology
  out->guid = static_cast<uint64_t>(dev);
  out->ptrSupport = p.ptr_support;
  out->regIsGlobal = 1;
  out->speed = p.speed_mbps;
  out->port = 0;
  out->latency = p.latency_us;
  out->maxComms = p.max_comms;
  out->maxRecvs = kMaxRecvs;
  out->netDeviceType = NCCL_NET_DEVICE_HOST;
  out->netDeviceVersion = 0;
}

// ---- v8 ----
ncclResult_t init_v8(ncclDebugLogger_t logger) { return init(logger); }

ncclResult_t props_v8(int dev, ncclNetProperties_v8_t* out) {
  Props p;
  if (ncclResult_t r = properties(dev, &p); r != ncclSuccess) return r;
  fill_common(out, p, dev);
  return ncclSuccess;
}

ncclResult_t listen_v8(int dev, void* handle, void** lc) { return listen(dev, handle, lc); }

ncclResult_t connect_v8(int dev, void* handle, void** sc, ncclNetDeviceHandle_v8_t** dc) {
  if (dc) *dc = nullptr;  // no offload
  return connect(dev, handle, sc);
}

ncclResult_t accept_v8(void* lc, void** rc, ncclNetDeviceHandle_v8_t** dc) {
  if (dc) *dc = nullptr;
  return accept(lc, rc);
}

ncclResult_t isend_v8(void* sc, void* data, int size, int tag, void* mh, void** req) {
  if (size < 0) return ncclInvalidArgument;
  return isend(sc, data, static_cast<size_t>(size), tag, mh, req);
}

ncclResult_t irecv_v8(void* rc, int n, void** data, int* sizes, int* tags, void** mh, void** req) {
  if (n < 1 || n > kMaxRecvs) return irecv(rc, n, data, nullptr, tags, mh, req);  // error path
  size_t s[kMaxRecvs];
  for (int i = 0; i < n; ++i) s[i] = sizes[i] < 0 ? 0 : static_cast<size_t>(sizes[i]);
  return irecv(rc, n, data, s, tags, mh, req);
}

ncclResult_t iflush_any(void* rc, int n, void**, int*, void**, void** req) {
  return iflush(rc, n, req);
}

ncclResult_t get_device_mr(void*, void*, void**) { return not_supported("getDeviceMr"); }
ncclResult_t irecv_consumed(void*, int, void*) { return not_supported("irecvConsumed"); }

// ---- v12 ----
std::atomic<int> g_ctx_refs{0};

ncclResult_t init_v12(void** ctx, uint64_t, ncclNetCommConfig_v12_t*, ncclDebugLogger_t logger,
                      ncclProfilerCallback_t) {
  if (ncclResult_t r = init(logger); r != ncclSuccess) return r;
  ++g_ctx_refs;
  if (ctx) *ctx = &g_ctx_refs;  // one process-wide state; the ctx only counts communicators
  return ncclSuccess;
}

ncclResult_t finalize_v12(void*) {
  --g_ctx_refs;  // transports stay open: a DPDK EAL cannot start twice in one process
  return ncclSuccess;
}

ncclResult_t props_v12(int dev, ncclNetProperties_v12_t* out) {
  Props p;
  if (ncclResult_t r = properties(dev, &p); r != ncclSuccess) return r;
  fill_common(out, p, dev);
  out->forceFlush = 0;
  out->vProps.ndevs = 1;
  out->vProps.devs[0] = dev;
  out->maxP2pBytes = p.max_bytes;
  out->maxCollBytes = p.max_bytes;
  out->maxMultiRequestSize = 1;
  out->railId = GW_NCCL_ID_UNDEF;
  out->planeId = GW_NCCL_ID_UNDEF;
  return ncclSuccess;
}

ncclResult_t listen_v12(void*, int dev, void* handle, void** lc) { return listen(dev, handle, lc); }

ncclResult_t connect_v12(void*, int dev, void* handle, void** sc, ncclNetDeviceHandle_v12_t** dc) {
  if (dc) *dc = nullptr;
  return connect(dev, handle, sc);
}

ncclResult_t accept_v12(void* lc, void** rc, ncclNetDeviceHandle_v12_t** dc) {
  if (dc) *dc = nullptr;
  return accept(lc, rc);
}

ncclResult_t isend_v12(void* sc, void* data, size_t size, int tag, void* mh, void*, void** req) {
  return isend(sc, data, size, tag, mh, req);
}

ncclResult_t irecv_v12(void* rc, int n, void** data, size_t* sizes, int* tags, void** mh, void**,
                       void** req) {
  return irecv(rc, n, data, sizes, tags, mh, req);
}

ncclResult_t make_vdevice(int*, ncclNetVDeviceProps_v12_t*) { return not_supported("makeVDevice"); }
ncclResult_t set_net_attr(void*, ncclNetAttr_v12_t*) { return ncclSuccess; }  // a hint

}  // namespace
}  // namespace gw::nccl

using namespace gw::nccl;  // NOLINT: the tables below only name this plugin's functions

extern "C" {

__attribute__((visibility("default"))) ncclNet_v8_t ncclNetPlugin_v8 = {
    "gradwire", init_v8,       devices,      props_v8,      listen_v8,      connect_v8, accept_v8,
    reg_mr,     reg_mr_dmabuf, dereg_mr,     isend_v8,      irecv_v8,       iflush_any, test,
    close_comm, close_comm,    close_listen, get_device_mr, irecv_consumed,
};

__attribute__((visibility("default"))) ncclNet_v12_t ncclNetPlugin_v12 = {
    "gradwire",     init_v12,     devices,       props_v12,    listen_v12,   connect_v12,
    accept_v12,     reg_mr,       reg_mr_dmabuf, dereg_mr,     isend_v12,    irecv_v12,
    iflush_any,     test,         close_comm,    close_comm,   close_listen, get_device_mr,
    irecv_consumed, make_vdevice, finalize_v12,  set_net_attr,
};

}  // extern "C"
