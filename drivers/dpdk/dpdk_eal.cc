// EAL initialisation from configuration, once per process; the in-process ring bus.
#include "dpdk_target.h"  // first: the ISA of DPDK's inline functions

#include "dpdk_eal.h"

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ether.h>
#include <rte_mbuf.h>
#include <rte_ring.h>
#include <sched.h>
#include <unistd.h>

#include <map>
#include <mutex>
#include <sstream>

#include "dpdk_options.h"
#include "log.h"

namespace gw::drv::dpdk {
namespace {

std::mutex g_mu;
bool g_done = false;
Status g_status;
std::vector<std::string> g_args;

// "0@(0-1)": the main lcore may run on every CPU this process may use, so two ranks on a
// 2-core machine are not both pinned to CPU 0.
std::string default_lcores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::string cpus;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cpus += (cpus.empty() ? "" : ",") + std::to_string(c);
  }
  return cpus.empty() ? "0" : "0@(" + cpus + ")";
}

struct Bus {
  std::vector<rte_ring*> rings;
  rte_mempool* pool = nullptr;
  std::string id;
  bool used[kRingBusMax] = {};
};
std::map<std::string, Bus>& buses() {
  static std::map<std::string, Bus> b;
  return b;
}

}  // namespace

Result<std::vector<std::string>> eal_args(const Config& cfg) {
  EalOptions e;
  GW_RETURN_IF_ERROR(read_eal_options(cfg, &e));
  std::vector<std::string> a = {"gradwire"};
  a.push_back("--lcores=" + (e.lcores.empty() || e.lcores == "auto" ? default_lcores() : e.lcores));
  a.push_back("--file-prefix=" +
              (e.file_prefix.empty() ? "gw" + std::to_string(::getpid()) : e.file_prefix));
  if (e.no_huge) a.push_back("--no-huge");
  a.push_back("-m");
  a.push_back(std::to_string(e.memory_mb));
  if (!e.pci) a.push_back("--no-pci");
  if (!e.iova_mode.empty()) a.push_back("--iova-mode=" + e.iova_mode);
  a.push_back("--log-level=" + std::to_string(e.log_level));
  std::istringstream extra(e.extra);
  for (std::string w; extra >> w;) a.push_back(w);
  return a;
}

Status eal_init(const Config& cfg) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto lg = log::get("gw.drv.dpdk");
  GW_ASSIGN_OR_RETURN(auto args, eal_args(cfg));
  if (g_done) {
    if (args != g_args && g_status.ok())
      lg->warn(
          "dpdk: the EAL is already initialised in this process; EAL keys of this "
          "transport are ignored");
    return g_status;
  }
  g_done = true;
  g_args = args;
  std::string joined;
  for (auto& a : args) joined += (joined.empty() ? "" : " ") + a;
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int rc = rte_eal_init(static_cast<int>(argv.size() - 1), argv.data());
  if (rc < 0) {
    g_status = Status(Code::kUnavailable,
                      std::string("dpdk: rte_eal_init failed: ") + rte_strerror(rte_errno) +
                          " (arguments: " + joined +
                          "); check dpdk.* keys, memory (-m) and that no other process uses "
                          "the same --file-prefix");
    lg->warn("{}", g_status.to_string());
  } else {
    lg->info("dpdk: EAL initialised: {}", joined);
  }
  return g_status;
}

Result<RingSlot> ring_bus_join(const std::string& bus, int mbufs, int mtu) {
  std::lock_guard<std::mutex> lock(g_mu);
  Bus& b = buses()[bus];
  if (b.id.empty()) b.id = "gwb" + std::to_string(buses().size()) + "_";
  const std::string& id = b.id;
  // One pool for every ring bus of the process: frames cross ports, so it outlives them all.
  // Every rank thread allocates and frees here (and enqueues to the bus rings), usually more
  // threads than cores. The default MP/MC rings make a thread wait until every thread that
  // reserved ring space before it has finished; one preempted inside a get or put holds the
  // others spinning through their time slices (lock-waiter preemption), and with 5 ranks on 2
  // cores progress collapses until peers time out. RTS ("relaxed tail sync") rings let the
  // others finish without waiting for it.
  // Jumbo MTUs get a pool of their own with mbufs that hold a whole frame (and a quarter as
  // many of them).
  static std::map<uint32_t, rte_mempool*> pools;
  const bool jumbo = mtu > RTE_ETHER_MTU;
  const uint32_t room = jumbo
                            ? RTE_PKTMBUF_HEADROOM + RTE_ETHER_HDR_LEN + static_cast<uint32_t>(mtu)
                            : RTE_MBUF_DEFAULT_BUF_SIZE;
  const unsigned count = static_cast<unsigned>(mbufs) * (jumbo ? 1 : 4);
  rte_mempool*& pool = pools[room];
  if (!pool) {
    pool = rte_pktmbuf_pool_create_by_ops(("gwb_pool" + std::to_string(room)).c_str(), count, 256,
                                          0, static_cast<uint16_t>(room), 0, "ring_mt_rts");
    if (!pool) {
      return Status(Code::kResourceExhausted,
                    "dpdk: mempool of " + std::to_string(count) + " mbufs of " +
                        std::to_string(room) + " B for ring bus '" + bus +
                        "': " + rte_strerror(rte_errno) + " (raise dpdk.memory_mb)");
    }
  }
  b.pool = pool;
  if (b.rings.empty()) {
    for (int i = 0; i < kRingBusMax; ++i) {
      std::string name = id + std::to_string(i);
      rte_ring* r = rte_ring_lookup(name.c_str());
      if (!r) r = rte_ring_create(name.c_str(), 4096, 0, RING_F_MP_RTS_ENQ | RING_F_SC_DEQ);
      if (!r) {
        return Status(Code::kSystemError, "dpdk: rte_ring_create(" + name + ") for ring bus '" +
                                              bus + "': " + rte_strerror(rte_errno) +
                                              " (raise dpdk.memory_mb)");
      }
      b.rings.push_back(r);
    }
  }
  for (int i = 0; i < kRingBusMax; ++i) {
    if (b.used[i]) continue;
    b.used[i] = true;
    rte_ring* rx = b.rings[static_cast<size_t>(i)];
    // Frames a previous user of this slot left behind are not for the new one.
    void* stale[64];
    while (unsigned n = rte_ring_dequeue_burst(rx, stale, 64, nullptr))
      for (unsigned k = 0; k < n; ++k) rte_pktmbuf_free(static_cast<rte_mbuf*>(stale[k]));
    return RingSlot{i, rx, b.rings, b.pool};
  }
  return Status(Code::kResourceExhausted, "dpdk: ring bus '" + bus + "' has all " +
                                              std::to_string(kRingBusMax) +
                                              " ports in use in this process");
}

rte_ring* ring_bus_rx(const std::string& bus, int index) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = buses().find(bus);
  if (it == buses().end() || index < 0 || index >= static_cast<int>(it->second.rings.size()))
    return nullptr;
  return it->second.rings[static_cast<size_t>(index)];
}

void ring_bus_leave(const std::string& bus, int index) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = buses().find(bus);
  if (it != buses().end() && index >= 0 && index < kRingBusMax) it->second.used[index] = false;
}

}  // namespace gw::drv::dpdk
