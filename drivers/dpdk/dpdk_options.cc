// The dpdk driver's registration with its configuration keys, and read_options.
#include "dpdk_target.h"  // first: the ISA of DPDK's inline functions

#include "dpdk_options.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "dpdk_transport.h"
#include "gw_transport_driver.h"

namespace gw::drv::dpdk {
namespace {

// The rank a launcher gave this process (gradwire's, torchrun, Open MPI, Slurm); 0 if none.
int launcher_rank() {
  for (const char* v : {"GW_RANK", "RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"})
    if (const char* s = std::getenv(v)) return std::atoi(s);
  return 0;
}

Result<std::unique_ptr<Transport>> open_dpdk(const Config& cfg) { return DpdkTransport::open(cfg); }

}  // namespace

GW_REGISTER_DRIVER(
    dpdk, 20, open_dpdk,
    {"dpdk.vdev", ConfigType::kString, "",
     "virtual device with its arguments, ';' between them, e.g. "
     "net_memif0;role=server;socket=/run/gw.sock or net_af_packet0;iface=veth0"},
    {"dpdk.role", ConfigType::kString, "",
     "memif role appended to dpdk.vdev (server|client|auto: server on launcher rank 0, client "
     "elsewhere; for two-rank memif runs such as gw-coll-perf --ranks 2)"},
    {"dpdk.socket", ConfigType::kString, "", "memif socket path appended to dpdk.vdev"},
    {"dpdk.iface", ConfigType::kString, "", "af_packet interface appended to dpdk.vdev"},
    {"dpdk.ring", ConfigType::kString, "",
     "in-process ring bus name: every transport of this process on the bus can reach the others"},
    {"dpdk.device", ConfigType::kString, "", "a probed device (PCI address) instead of a vdev"},
    {"dpdk.lcores", ConfigType::kString, "auto",
     "EAL --lcores (auto: lcore 0 may float on every CPU this process may use)"},
    {"dpdk.memory_mb", ConfigType::kInt, "512", "EAL -m: memory reserved at start (MiB)"},
    {"dpdk.no_huge", ConfigType::kBool, "true", "EAL --no-huge (false: use hugepages)"},
    {"dpdk.pci", ConfigType::kBool, "false", "probe PCI devices (false: EAL --no-pci)"},
    {"dpdk.file_prefix", ConfigType::kString, "",
     "EAL --file-prefix (empty: gw<pid>, unique per process so ranks share a host)"},
    {"dpdk.iova_mode", ConfigType::kString, "va", "EAL --iova-mode (va|pa|empty)"},
    {"dpdk.log_level", ConfigType::kInt, "4", "EAL --log-level (1 critical .. 8 debug)"},
    {"dpdk.eal_args", ConfigType::kString, "", "extra EAL arguments, space separated"},
    {"dpdk.ip", ConfigType::kString, "",
     "this transport's IPv4 address in frames (empty: 10.x.y.z from the MAC)"},
    {"dpdk.udp_port", ConfigType::kInt, "47592", "UDP port of this transport's frames"},
    {"dpdk.mtu", ConfigType::kInt, "0",
     "MTU to set (0: the device's, 32860 on memif (32 KiB of payload per packet); 9000 for "
     "jumbo frames elsewhere; memif takes up to 65000, both sides the same)"},
    {"dpdk.rx_desc", ConfigType::kInt, "1024", "receive descriptors"},
    {"dpdk.tx_desc", ConfigType::kInt, "1024", "transmit descriptors"},
    {"dpdk.mbufs", ConfigType::kInt, "8191", "mbufs per pool (one pool each for rx and tx)"},
    {"dpdk.window", ConfigType::kInt, "0",
     "packets in flight per connection (power of two, 64..4096; 0: 1024, 256 on a ring bus, "
     "128 above MTU 9000 (memif's default)); the receive buffer holds twice as many"},
    {"dpdk.held_max", ConfigType::kInt, "4096",
     "out-of-order packets held per transport before new ones are dropped"},
    {"dpdk.max_outstanding", ConfigType::kInt, "1024", "posted sends (and receives) per endpoint"},
    {"dpdk.max_endpoints", ConfigType::kInt, "1024", "connections per transport"},
    {"dpdk.cq_depth", ConfigType::kInt, "65536", "completions held before poll() drains them"},
    {"dpdk.unexpected_bytes", ConfigType::kInt, "67108864",
     "buffer for messages that arrive before their receive; beyond it the sender waits"},
    {"dpdk.max_message_bytes", ConfigType::kInt, "1099511627776", "largest message accepted"},
    {"dpdk.rto_min_us", ConfigType::kInt, "2000", "smallest retransmission timeout"},
    {"dpdk.rto_max_ms", ConfigType::kInt, "200", "largest retransmission timeout (back-off cap)"},
    {"dpdk.peer_timeout_ms", ConfigType::kInt, "1500",
     "heartbeat timeout: a peer silent this long while requests are pending is stopped, hung "
     "or gone (RemoteError naming it); its progress thread (transport.progress) keeps a rank "
     "that computes outside gradwire heard"},
    {"dpdk.heartbeat_ms", ConfigType::kInt, "100",
     "idle connections send an ack this often (the heartbeat; sent by the progress thread "
     "while the application computes)"},
    {"dpdk.linger_ms", ConfigType::kInt, "50",
     "a closing transport keeps its port this long when a peer had not closed, so that its "
     "last acks and FIN are read (memif frames vanish with the port)"},
    {"dpdk.checksum", ConfigType::kString, "auto",
     "compute and check UDP checksums (auto: on, except on memif, shared memory between two "
     "processes of one host, where loopback TCP checks none either, unless corruption is "
     "injected; on|off, true|false)"},
    {"dpdk.zero_copy", ConfigType::kString, "auto",
     "send payload as external mbufs (auto: where the port takes chained mbufs; on|off)"},
    {"dpdk.zero_copy_min", ConfigType::kInt, "512", "smallest segment sent zero-copy"},
    {"dpdk.staging_chunk_bytes", ConfigType::kInt, "262144",
     "CUDA device memory is sent from pinned host windows of this size"},
    {"dpdk.staging_slots", ConfigType::kInt, "8", "pinned send windows per endpoint"},
    {"dpdk.staging_rx_slots", ConfigType::kInt, "64",
     "pinned packet-sized slots per transport for receives into device memory"},
    {"dpdk.fault_seed", ConfigType::kInt, "1", "seed of the fault injector"},
    {"dpdk.rx_drop", ConfigType::kDouble, "0", "probability to drop a received packet"},
    {"dpdk.rx_dup", ConfigType::kDouble, "0", "probability to duplicate a received packet"},
    {"dpdk.rx_reorder", ConfigType::kDouble, "0", "probability to delay a received packet"},
    {"dpdk.rx_corrupt", ConfigType::kDouble, "0", "probability to flip a byte on receive"},
    {"dpdk.tx_drop", ConfigType::kDouble, "0", "probability to drop a sent packet"},
    {"dpdk.tx_dup", ConfigType::kDouble, "0", "probability to duplicate a sent packet"},
    {"dpdk.tx_reorder", ConfigType::kDouble, "0", "probability to delay a sent packet"},
    {"dpdk.tx_corrupt", ConfigType::kDouble, "0", "probability to flip a byte on send"});

Status read_options(const Config& cfg, PortOptions* po, Options* o, Choices* c) {
  ConfigReader r(cfg);
  po->vdev = r.str("dpdk.vdev");
  for (auto [key, arg] : {std::pair{"dpdk.role", "role"}, std::pair{"dpdk.socket", "socket"},
                          std::pair{"dpdk.iface", "iface"}}) {
    std::string v = r.str(key);
    if (v == "auto" && std::string(arg) == "role") v = launcher_rank() == 0 ? "server" : "client";
    if (!v.empty()) po->vdev += std::string(";") + arg + "=" + v;
  }
  po->mtu = static_cast<int>(r.in("dpdk.mtu", 0, 65000));
  po->ring_bus = r.str("dpdk.ring");
  po->device = r.str("dpdk.device");
  po->rx_desc = static_cast<int>(r.in("dpdk.rx_desc", 64, 16384));
  po->tx_desc = static_cast<int>(r.in("dpdk.tx_desc", 64, 16384));
  po->mbufs = static_cast<int>(r.in("dpdk.mbufs", 1023, 1 << 20));
  c->window = r.in("dpdk.window", 0, 4096);
  o->held_max = static_cast<int>(r.in("dpdk.held_max", 0, 1 << 20));
  o->max_outstanding = static_cast<int>(r.in("dpdk.max_outstanding", 1, 1 << 20));
  o->max_endpoints = static_cast<int>(r.in("dpdk.max_endpoints", 1, 65535));
  o->cq_depth = static_cast<int>(r.in("dpdk.cq_depth", 16, 1 << 24));
  o->unexpected_bytes = static_cast<uint64_t>(r.at_least("dpdk.unexpected_bytes", 0));
  o->max_message = static_cast<uint64_t>(r.at_least("dpdk.max_message_bytes", 1));
  constexpr int64_t kHour = 3'600'000;
  o->rto_min_ns = static_cast<uint64_t>(r.in("dpdk.rto_min_us", 50, kHour * 1000)) * 1000;
  o->rto_max_ns = std::max<uint64_t>(
      o->rto_min_ns, static_cast<uint64_t>(r.in("dpdk.rto_max_ms", 1, kHour)) * 1'000'000);
  o->peer_timeout_ns = static_cast<uint64_t>(r.in("dpdk.peer_timeout_ms", 10, kHour)) * 1'000'000;
  o->linger_ns = static_cast<uint64_t>(r.in("dpdk.linger_ms", 0, 60'000)) * 1'000'000;
  o->heartbeat_ns = static_cast<uint64_t>(r.in("dpdk.heartbeat_ms", 1, kHour)) * 1'000'000;
  // true/false: what the key took before "auto".
  c->checksum = r.one_of("dpdk.checksum", {"auto", "on", "off", "true", "false", "1", "0"});
  if (c->checksum == "true" || c->checksum == "1") c->checksum = "on";
  if (c->checksum == "false" || c->checksum == "0") c->checksum = "off";
  o->zero_copy_min = static_cast<uint32_t>(r.in("dpdk.zero_copy_min", 1, 1 << 30));
  c->zero_copy = r.one_of("dpdk.zero_copy", {"auto", "on", "off"});
  o->udp_port = htons(static_cast<uint16_t>(r.in("dpdk.udp_port", 1, 65535)));
  c->ip = r.str("dpdk.ip");
  c->rx = {r.prob("dpdk.rx_drop"), r.prob("dpdk.rx_dup"), r.prob("dpdk.rx_reorder"),
           r.prob("dpdk.rx_corrupt")};
  c->tx = {r.prob("dpdk.tx_drop"), r.prob("dpdk.tx_dup"), r.prob("dpdk.tx_reorder"),
           r.prob("dpdk.tx_corrupt")};
  c->fault_seed = static_cast<uint64_t>(r.at_least("dpdk.fault_seed", 0));
  o->staging.chunk_bytes =
      static_cast<size_t>(r.in("dpdk.staging_chunk_bytes", 4096, int64_t{1} << 30));
  o->staging.slots = static_cast<uint32_t>(r.in("dpdk.staging_slots", 1, 4096));
  o->staging_rx_slots = static_cast<uint32_t>(r.in("dpdk.staging_rx_slots", 1, 65536));
  return r.status();
}

}  // namespace gw::drv::dpdk
