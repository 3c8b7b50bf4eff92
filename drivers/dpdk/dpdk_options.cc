// The dpdk driver's registration with its configuration keys, and read_options.
#include "dpdk_target.h"  // first: the ISA of DPDK's inline functions

#include "dpdk_options.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "dpdk_transport.h"
#include "gw_driver_options.h"
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

// What read_options fills; role, socket and iface are appended to port.vdev.
struct Settings {
  PortOptions port;
  Options opts;
  Choices choices;
  std::string role, socket, iface;
};

using Opt = OptionDef<Settings>;
constexpr int64_t kHour = 3'600'000;  // ms
constexpr auto kFaultTx = &Choices::tx;
constexpr auto kFaultRx = &Choices::rx;

// The EAL's arguments (eal_args, dpdk_eal.cc): a table of their own, read at EAL start.
using EalOpt = OptionDef<EalOptions>;
constexpr auto kEalOptions = std::to_array<EalOpt>({
    EalOpt::text("lcores", "auto", to<&EalOptions::lcores>,
                 "EAL --lcores (auto: lcore 0 may float on every CPU this process may use)"),
    EalOpt::integer("memory_mb", "512", 16, 1 << 20, to<&EalOptions::memory_mb>,
                    "EAL -m: memory reserved at start (MiB)"),
    EalOpt::boolean("no_huge", "true", to<&EalOptions::no_huge>,
                    "EAL --no-huge (false: use hugepages)"),
    EalOpt::boolean("pci", "false", to<&EalOptions::pci>,
                    "probe PCI devices (false: EAL --no-pci)"),
    EalOpt::text("file_prefix", "", to<&EalOptions::file_prefix>,
                 "EAL --file-prefix (empty: gw<pid>, unique per process so ranks share a host)"),
    EalOpt::text("iova_mode", "va", to<&EalOptions::iova_mode>, "EAL --iova-mode (va|pa|empty)",
                 "va|pa|"),
    EalOpt::integer("log_level", "4", 1, 8, to<&EalOptions::log_level>,
                    "EAL --log-level (1 critical .. 8 debug)"),
    EalOpt::text("eal_args", "", to<&EalOptions::extra>, "extra EAL arguments, space separated"),
});
const OptionKeys kEalKeys{"dpdk", kEalOptions};

constexpr auto kPortOptions = std::to_array<Opt>({
    Opt::text("vdev", "", to<&Settings::port, &PortOptions::vdev>,
              "virtual device with its arguments, ';' between them, e.g. "
              "net_memif0;role=server;socket=/run/gw.sock or net_af_packet0;iface=veth0"),
    Opt::text("role", "", to<&Settings::role>,
              "memif role appended to dpdk.vdev (server|client|auto: server on launcher rank 0, "
              "client elsewhere; for two-rank memif runs such as gw-coll-perf --ranks 2)"),
    Opt::text("socket", "", to<&Settings::socket>, "memif socket path appended to dpdk.vdev"),
    Opt::text("iface", "", to<&Settings::iface>, "af_packet interface appended to dpdk.vdev"),
    Opt::text("ifaces", "", to<&Settings::choices, &Choices::ifaces>,
              "several links: one port per interface (comma-separated, at most 4), of the "
              "kind dpdk.vdev names (net_af_packet if empty; its arguments apply to each); "
              "link k faces the peer's link k, and each message is sprayed over all of them"),
    Opt::integer("link_timeout_ms", "500", 10, kHour,
                 scaled<1'000'000, &Settings::opts, &Options::link_timeout_ns>,
                 "several links: one whose packets go unacknowledged this long while it "
                 "carries data is taken out and its packets sent again on the others"),
    Opt::integer("link_probe_ms", "100", 1, kHour,
                 scaled<1'000'000, &Settings::opts, &Options::link_probe_ns>,
                 "several links: how often a link taken out is probed (it carries again once "
                 "a probe comes back)"),
    Opt::text("ring", "", to<&Settings::port, &PortOptions::ring_bus>,
              "in-process ring bus name: every transport of this process on the bus can reach "
              "the others"),
    Opt::text("device", "", to<&Settings::port, &PortOptions::device>,
              "a probed device (PCI address) instead of a vdev"),
    Opt::text("ip", "", to<&Settings::choices, &Choices::ip>,
              "this transport's IPv4 address in frames (empty: 10.x.y.z from the MAC)"),
    Opt::integer(
        "udp_port", "47592", 1, 65535,
        [](Settings& s, const OptionValue& v) {
          s.opts.udp_port = htons(static_cast<uint16_t>(v.i));
        },
        "UDP port of this transport's frames"),
    Opt::integer("mtu", "0", 0, 65000, to<&Settings::port, &PortOptions::mtu>,
                 "MTU to set (0: the device's, 32860 on memif (32 KiB of payload per packet); "
                 "9000 for jumbo frames elsewhere; memif takes up to 65000, both sides the same)"),
    Opt::integer("rx_desc", "0", 0, 16384, to<&Settings::port, &PortOptions::rx_desc>,
                 "receive descriptors (0: 1024; on net_af_xdp twice dpdk.window, as its fill "
                 "ring drops what does not fit while the process is not polling, a FIN too)"),
    Opt::integer("tx_desc", "1024", 64, 16384, to<&Settings::port, &PortOptions::tx_desc>,
                 "transmit descriptors"),
    Opt::integer("mbufs", "0", 0, 1 << 20, to<&Settings::port, &PortOptions::mbufs>,
                 "mbufs per pool (one pool each for rx and tx; 0: 8191, on net_af_xdp 32767: "
                 "its receive pool is the AF_XDP umem, whose fill, receive and transmit rings "
                 "hold thousands, and it stops receiving when the pool runs dry)"),
});

constexpr auto kTransportOptions = std::to_array<Opt>({
    Opt::integer("window", "0", 0, 4096, to<&Settings::choices, &Choices::window>,
                 "packets in flight per connection (power of two, 64..4096; 0: 1024, 256 on a "
                 "ring bus, 128 above MTU 9000 (memif's default)); the receive buffer holds "
                 "twice as many"),
    Opt::text(
        "incast_credits", "on",
        [](Settings& s, const OptionValue& v) { s.opts.incast_credits = v.s == "on"; },
        "on: a receiver that several peers send to shares one budget of packets in flight "
        "among them, learnt from its own losses (dpdk_credit.h); off: each window alone",
        "on|off"),
    Opt::integer("held_max", "4096", 0, 1 << 20, to<&Settings::opts, &Options::held_max>,
                 "out-of-order packets held per transport before new ones are dropped"),
    Opt::integer("max_endpoints", "1024", 1, 65535, to<&Settings::opts, &Options::max_endpoints>,
                 "connections per transport"),
    Opt::integer("rto_min_us", "2000", 50, kHour * 1000,
                 scaled<1000, &Settings::opts, &Options::rto_min_ns>,
                 "smallest retransmission timeout"),
    Opt::integer("rto_max_ms", "200", 1, kHour,
                 scaled<1'000'000, &Settings::opts, &Options::rto_max_ns>,
                 "largest retransmission timeout (back-off cap)"),
    Opt::integer("peer_timeout_ms", "1500", 10, kHour,
                 scaled<1'000'000, &Settings::opts, &Options::peer_timeout_ns>,
                 "heartbeat timeout: a peer silent this long while requests are pending is "
                 "stopped, hung or gone (RemoteError naming it); its progress thread "
                 "(transport.progress) keeps a rank that computes outside gradwire heard"),
    Opt::integer("heartbeat_ms", "100", 1, kHour,
                 scaled<1'000'000, &Settings::opts, &Options::heartbeat_ns>,
                 "idle connections send an ack this often (the heartbeat; sent by the progress "
                 "thread while the application computes)"),
    Opt::integer("linger_ms", "50", 0, 60'000,
                 scaled<1'000'000, &Settings::opts, &Options::linger_ns>,
                 "a closing transport keeps its port this long when a peer had not closed, so "
                 "that its last acks and FIN are read (memif frames vanish with the port)"),
    // true/false: what the key took before "auto".
    Opt::text("checksum", "auto", to<&Settings::choices, &Choices::checksum>,
              "compute and check UDP checksums (auto: on, except on memif, shared memory "
              "between two processes of one host, where loopback TCP checks none either, unless "
              "corruption is injected; on|off, true|false)",
              "auto|on|off|true|false|1|0"),
    Opt::text("zero_copy", "auto", to<&Settings::choices, &Choices::zero_copy>,
              "send payload as external mbufs (auto: where the port takes chained mbufs; on|off)",
              "auto|on|off"),
    Opt::integer("zero_copy_min", "512", 1, 1 << 30, to<&Settings::opts, &Options::zero_copy_min>,
                 "smallest segment sent zero-copy"),
    Opt::integer("staging_rx_slots", "64", 1, 65536,
                 to<&Settings::opts, &Options::staging_rx_slots>,
                 "pinned packet-sized slots per transport for receives into device memory"),
    Opt::integer("fault_seed", "1", 0, INT64_MAX, to<&Settings::choices, &Choices::fault_seed>,
                 "seed of the fault injector"),
    Opt::prob("rx_drop", to<&Settings::choices, kFaultRx, &FaultProbs::drop>,
              "probability to drop a received packet"),
    Opt::prob("rx_dup", to<&Settings::choices, kFaultRx, &FaultProbs::dup>,
              "probability to duplicate a received packet"),
    Opt::prob("rx_reorder", to<&Settings::choices, kFaultRx, &FaultProbs::reorder>,
              "probability to delay a received packet"),
    Opt::prob("rx_corrupt", to<&Settings::choices, kFaultRx, &FaultProbs::corrupt>,
              "probability to flip a byte on receive"),
    Opt::prob("tx_drop", to<&Settings::choices, kFaultTx, &FaultProbs::drop>,
              "probability to drop a sent packet"),
    Opt::prob("tx_dup", to<&Settings::choices, kFaultTx, &FaultProbs::dup>,
              "probability to duplicate a sent packet"),
    Opt::prob("tx_reorder", to<&Settings::choices, kFaultTx, &FaultProbs::reorder>,
              "probability to delay a sent packet"),
    Opt::prob("tx_corrupt", to<&Settings::choices, kFaultTx, &FaultProbs::corrupt>,
              "probability to flip a byte on send"),
});

constexpr core::CommonOptionText kCommonText{
    .staging_chunk_default = "262144",
    .staging_chunk_help = "CUDA device memory is sent from pinned host windows of this size",
    .staging_slots_help = "pinned send windows per endpoint",
};

constexpr auto kOptions =
    join(join(core::common_options<Settings, &Settings::opts>(kCommonText), kPortOptions),
         kTransportOptions);

}  // namespace

GW_REGISTER_DRIVER(dpdk, 20, open_dpdk, kOptions);

Status read_eal_options(const Config& cfg, EalOptions* e) {
  return gw::read_options(cfg, "dpdk", kEalOptions, e);
}

Status read_options(const Config& cfg, PortOptions* po, Options* o, Choices* c) {
  Settings s{*po, *o, *c, {}, {}, {}};
  GW_RETURN_IF_ERROR(gw::read_options(cfg, "dpdk", kOptions, &s));
  if (s.role == "auto") s.role = launcher_rank() == 0 ? "server" : "client";
  for (auto [arg, v] :
       {std::pair{"role", &s.role}, std::pair{"socket", &s.socket}, std::pair{"iface", &s.iface}})
    if (!v->empty()) s.port.vdev += std::string(";") + arg + "=" + *v;
  s.opts.rto_max_ns = std::max(s.opts.rto_min_ns, s.opts.rto_max_ns);
  std::string& cks = s.choices.checksum;
  if (cks == "true" || cks == "1") cks = "on";
  if (cks == "false" || cks == "0") cks = "off";
  *po = std::move(s.port);
  *o = s.opts;
  *c = std::move(s.choices);
  return Status();
}

}  // namespace gw::drv::dpdk
