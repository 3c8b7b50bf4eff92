// Device, port and GID choice.
#include "rdma_device.h"

#include <arpa/inet.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <vector>

namespace gw::drv::rdma {
namespace {

struct DeviceList {
  ibv_device** list = nullptr;
  int n = 0;
  DeviceList() { list = ibv_get_device_list(&n); }
  ~DeviceList() {
    if (list) ibv_free_device_list(list);
  }
};

std::string read_line(const std::string& path) {
  std::ifstream f(path);
  std::string s;
  std::getline(f, s);
  return s;
}

bool is_ipv4_mapped(const ibv_gid& g) {
  static const uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(g.raw, kPrefix, 12) == 0;
}

bool gid_empty(const ibv_gid& g) {
  for (uint8_t b : g.raw)
    if (b) return false;
  return true;
}

// Mbit/s of a port from its width and speed codes.
uint64_t port_speed(const ibv_port_attr& a) {
  int lanes = a.active_width == 1    ? 1
              : a.active_width == 2  ? 4
              : a.active_width == 4  ? 8
              : a.active_width == 8  ? 12
              : a.active_width == 16 ? 2
                                     : 1;
  uint64_t per = a.active_speed == 1                          ? 2500
                 : a.active_speed == 2                        ? 5000
                 : a.active_speed == 4 || a.active_speed == 8 ? 10000
                 : a.active_speed == 16                       ? 14000
                 : a.active_speed == 32                       ? 25000
                 : a.active_speed == 64                       ? 50000
                 : a.active_speed == 128                      ? 100000
                                                              : 0;
  return per * static_cast<uint64_t>(lanes);
}

// Picks the GID: RoCE v2 with an IPv4 address, else any RoCE v2, else index 0.
int auto_gid(ibv_context* ctx, const std::string& dev, int port, int table_len, std::string* why) {
  int v2_any = -1;
  for (int i = 0; i < table_len; ++i) {
    ibv_gid g{};
    if (ibv_query_gid(ctx, static_cast<uint8_t>(port), i, &g) != 0 || gid_empty(g)) continue;
    std::string type = read_line("/sys/class/infiniband/" + dev + "/ports/" + std::to_string(port) +
                                 "/gid_attrs/types/" + std::to_string(i));
    if (type != "RoCE v2") continue;
    if (is_ipv4_mapped(g)) {
      *why = "RoCE v2 GID with an IPv4 address";
      return i;
    }
    if (v2_any < 0) v2_any = i;
  }
  *why = v2_any >= 0 ? "RoCE v2 GID" : "GID 0 (no RoCE v2 GID)";
  return v2_any >= 0 ? v2_any : 0;
}

}  // namespace

std::string gid_to_string(const ibv_gid& g) {
  char buf[INET6_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET6, g.raw, buf, sizeof buf);
  return buf;
}

int mtu_bytes(ibv_mtu m) { return 128 << static_cast<int>(m); }

Status register_buffer(ibv_pd* pd, void* p, size_t n, int access, const std::string& dev,
                       MrPtr* out) {
  out->reset(ibv_reg_mr(pd, p, n, access));
  if (*out) return Status();
  int err = errno;
  return Status(err == ENOMEM || err == EPERM ? Code::kResourceExhausted : Code::kSystemError,
                "rdma: ibv_reg_mr(" + std::to_string(n) + " bytes of buffers) on " + dev +
                    " failed (raise the locked-memory limit: `ulimit -l unlimited`)",
                err);
}

namespace {

// The first device (named, or any) with a port as wished into `c`. @return Unavailable or
// SystemError for a named device that cannot be used; ok with no c->ctx when none matched.
Status find_port(const DeviceList& devs, const DeviceWish& wish, DeviceChoice* c) {
  for (int i = 0; i < devs.n && !c->ctx; ++i) {
    std::string name = ibv_get_device_name(devs.list[i]);
    if (!wish.name.empty() && name != wish.name) continue;
    ContextPtr ctx(ibv_open_device(devs.list[i]));
    if (!ctx) {
      if (!wish.name.empty())
        return Status(Code::kSystemError, "rdma: ibv_open_device(" + name + ")", errno);
      continue;
    }
    ibv_device_attr da{};
    if (ibv_query_device(ctx.get(), &da) != 0) continue;
    for (int p = 1; p <= da.phys_port_cnt; ++p) {
      if (wish.port > 0 && p != wish.port) continue;
      ibv_port_attr pa{};
      if (ibv_query_port(ctx.get(), static_cast<uint8_t>(p), &pa) != 0) continue;
      if (pa.state != IBV_PORT_ACTIVE && (wish.name.empty() || wish.port == 0)) continue;
      c->ctx = std::move(ctx);
      c->name = name;
      c->port = p;
      c->attr = da;
      c->port_attr = pa;
      break;
    }
    if (!c->ctx && !wish.name.empty()) {
      return Status(Code::kUnavailable, "rdma: device " + name + " has no active port" +
                                            (wish.port ? " " + std::to_string(wish.port) : ""));
    }
  }
  return Status();
}

// The port's GID (given, or chosen: auto_gid) and what follows from it.
Status choose_gid(const DeviceWish& wish, DeviceChoice* c) {
  const auto& pa = c->port_attr;
  if (wish.gid_index >= 0) {
    if (wish.gid_index >= pa.gid_tbl_len) {
      return Status(Code::kInvalidArgument, "rdma: gid_index " + std::to_string(wish.gid_index) +
                                                " out of range (" + c->name + " port " +
                                                std::to_string(c->port) + " has " +
                                                std::to_string(pa.gid_tbl_len) + " GIDs)");
    }
    c->gid_index = wish.gid_index;
    c->why = "gid_index given";
  } else {
    c->gid_index = c->roce ? auto_gid(c->ctx.get(), c->name, c->port, pa.gid_tbl_len, &c->why) : 0;
    if (!c->roce) c->why = "InfiniBand port: GID 0";
  }
  if (ibv_query_gid(c->ctx.get(), static_cast<uint8_t>(c->port), c->gid_index, &c->gid) != 0)
    return Status(Code::kSystemError, "rdma: ibv_query_gid on " + c->name, errno);
  if (c->roce && gid_empty(c->gid)) {
    return Status(Code::kUnavailable, "rdma: GID " + std::to_string(c->gid_index) + " of " +
                                          c->name + " is empty (no IP address on its netdev?)");
  }
  if (is_ipv4_mapped(c->gid)) std::memcpy(&c->ipv4, c->gid.raw + 12, 4);
  return Status();
}

}  // namespace

Result<DeviceChoice> open_device(const DeviceWish& wish) {
  DeviceList devs;
  if (!devs.list || devs.n == 0) {
    return Status(Code::kUnavailable,
                  "rdma: no RDMA device (ibv_get_device_list found none; load a driver, e.g. "
                  "`rdma link add rxe0 type rxe netdev eth0` for soft-RoCE)");
  }
  std::string present;
  for (int i = 0; i < devs.n; ++i)
    present += (i ? ", " : "") + std::string(ibv_get_device_name(devs.list[i]));
  DeviceChoice c;
  GW_RETURN_IF_ERROR(find_port(devs, wish, &c));
  if (!c.ctx) {
    return Status(Code::kUnavailable,
                  wish.name.empty()
                      ? "rdma: no device with an active port (devices: " + present + ")"
                      : "rdma: device '" + wish.name + "' not found (devices: " + present + ")");
  }
  const auto& pa = c.port_attr;
  c.roce = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
  c.lid = pa.lid;
  c.mtu = pa.active_mtu;
  c.speed_mbps = port_speed(pa);
  GW_RETURN_IF_ERROR(choose_gid(wish, &c));
  return c;
}

}  // namespace gw::drv::rdma
