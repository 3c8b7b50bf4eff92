// Plugin set-up: logging into NCCL, opening one Transport per selected spec, properties.
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "nccl_plugin.h"

namespace gw::nccl {
namespace {

ncclDebugLogger_t g_logger = nullptr;

/// Devices live until process exit: a DPDK EAL cannot be initialised twice in one process,
/// so a finalize (v12) does not close them.
struct Global {
  std::mutex mu;
  bool opened = false;
  Status open_error;
  std::vector<std::unique_ptr<Device>> devs;
};

Global& global() {
  static Global g;
  return g;
}

std::vector<std::string> split_specs(std::string_view s) {
  std::vector<std::string> out;
  while (!s.empty()) {
    size_t semi = s.find(';');
    std::string_view one = s.substr(0, semi);
    if (!one.empty()) out.emplace_back(one);
    if (semi == std::string_view::npos) break;
    s.remove_prefix(semi + 1);
  }
  return out;
}

Status open_devices(Global& g) {
  const char* env = std::getenv("GW_NCCL_TRANSPORT");
  auto specs = split_specs(env && *env ? env : "tcp");
  if (specs.empty()) return Status(Code::kInvalidArgument, "GW_NCCL_TRANSPORT lists no transport");
  for (const auto& spec : specs) {
    auto t = Transport::open(spec);
    if (!t.ok()) {
      return t.status().with_context("gradwire NCCL plugin: opening transport '" + spec +
                                     "' (GW_NCCL_TRANSPORT)");
    }
    auto d = std::make_unique<Device>();
    d->index = static_cast<int>(g.devs.size());
    d->spec = spec;
    d->t = std::move(*t);
    const auto& p = d->t->properties();
    d->name = "gradwire-" + p.name;
    GW_NCCL_INFO("NET/gradwire: device %d = transport '%s' (%s on %s, %llu Mbps%s)", d->index,
                 spec.c_str(), p.name.c_str(), p.device.c_str(),
                 static_cast<unsigned long long>(p.link_speed_mbps),
                 p.link_speed_mbps ? "" : ": unknown, reported as 10000");
    g.devs.push_back(std::move(d));
  }
  return Status();
}

}  // namespace

void logf(ncclDebugLogLevel level, const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (g_logger) {
    g_logger(level, GW_NCCL_SUBSYS_NET, "gradwire", 0, "%s", buf);
  } else if (level <= NCCL_LOG_WARN) {
    std::fprintf(stderr, "%s\n", buf);  // no NCCL logger (init not called yet)
  }
}

ncclResult_t fail(const Status& s) {
  GW_NCCL_WARN("NET/gradwire: %s", s.to_string().c_str());
  switch (s.code()) {
    case Code::kOk:
      return ncclSuccess;
    case Code::kInvalidArgument:
      return ncclInvalidArgument;
    case Code::kRemoteError:
    case Code::kTimeout:
    case Code::kProtocolError:
    case Code::kAborted:
      return ncclRemoteError;
    case Code::kSystemError:
    case Code::kUnavailable:
    case Code::kResourceExhausted:
      return ncclSystemError;
    case Code::kNotSupported:
    case Code::kInternal:
      return ncclInternalError;
  }
  return ncclInternalError;
}

ncclResult_t init(ncclDebugLogger_t logger) noexcept {
  if (logger) g_logger = logger;
  Global& g = global();
  std::lock_guard lk(g.mu);
  if (!g.opened) {
    g.opened = true;
    try {
      g.open_error = open_devices(g);
    } catch (const std::exception& e) {
      g.open_error = Status(Code::kInternal, std::string("opening transports: ") + e.what());
    }
    if (!g.open_error.ok()) g.devs.clear();
    if (g_logger) route_gradwire_logs();
  }
  if (!g.open_error.ok()) return fail(g.open_error);
  return ncclSuccess;
}

ncclResult_t devices(int* ndev) noexcept {
  if (!ndev) return ncclInvalidArgument;
  Global& g = global();
  std::lock_guard lk(g.mu);
  *ndev = static_cast<int>(g.devs.size());
  return ncclSuccess;
}

Device* device(int dev) {
  Global& g = global();
  std::lock_guard lk(g.mu);
  if (dev < 0 || static_cast<size_t>(dev) >= g.devs.size()) return nullptr;
  return g.devs[static_cast<size_t>(dev)].get();
}

ncclResult_t properties(int dev, Props* out) noexcept {
  Device* d = device(dev);
  if (!d || !out) {
    GW_NCCL_WARN("NET/gradwire: getProperties(dev %d): no such device", dev);
    return ncclInvalidArgument;
  }
  std::lock_guard lk(d->mu);
  const auto& p = d->t->properties();
  out->name = d->name.c_str();
  out->ptr_support = GW_NCCL_PTR_HOST;
  // CUDA memory only where the transport moves it without staging (rdma with GPUDirect live);
  // no DMABUF: the transport interface takes no dma-buf fd.
  for (MemKind k : p.zero_copy_kinds)
    if (k == MemKind::kCudaDevice) out->ptr_support |= GW_NCCL_PTR_CUDA;
  uint64_t mbps = p.link_speed_mbps ? p.link_speed_mbps : 10000;
  out->speed_mbps = static_cast<int>(std::min<uint64_t>(mbps, 1u << 30));
  out->latency_us = 0;  // unknown: NCCL then uses its defaults
  out->max_comms = 65536;
  size_t max = p.max_message_size ? p.max_message_size : GW_NCCL_MAX_NET_SIZE;
  out->max_bytes = std::min<size_t>(max, GW_NCCL_MAX_NET_SIZE);
  return ncclSuccess;
}

void Device::progress() {
  if (!holding.empty()) post_held();
  auto got = t->cq().poll(burst);
  if (!got.ok()) {
    if (error.ok()) error = got.status();
    return;
  }
  for (size_t i = 0; i < *got; ++i) {
    const Completion& c = burst[i];
    if (c.op == Op::kEndpointError || c.wr_id == 0) continue;  // ep->status() tells
    auto* q = request_of(c.wr_id);
    unsigned part = static_cast<unsigned>(c.wr_id & 15);
    q->sizes[part] = c.len;
    if (c.code != Code::kOk && q->code == Code::kOk) q->code = c.code;
    if (--q->left == 0 && (q->abandoned || q->comm->closed)) {  // nobody will test() it any more
      q->used = false;
      --q->comm->in_flight;
    }
  }
}

}  // namespace gw::nccl
