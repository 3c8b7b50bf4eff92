// The rdma driver's registration with its configuration keys, and read_options.
#include "rdma_options.h"

#include "gw_driver_options.h"
#include "gw_transport_driver.h"
#include "rdma_transport.h"
#include "rdma_wire.h"

namespace gw::drv::rdma {
namespace {

Result<std::unique_ptr<Transport>> open_rdma(const Config& cfg) { return RdmaTransport::open(cfg); }

using Opt = OptionDef<Settings>;
using S = Settings;
constexpr int64_t kNs = 1'000'000;  // per millisecond

constexpr core::CommonOptionText kCommonText{
    .cq_depth_help =
        "completions held before poll() drains them; posting beyond it takes no more requests",
    .unexpected_help =
        "bytes of messages held before their receives are posted; beyond it a message waits in "
        "its receive buffer and the sender runs out of credits (back-pressure)",
    .staging_chunk_help =
        "staging without GPUDirect: bytes per pinned buffer (one receive window, one copy)",
    .staging_slots_help =
        "staging without GPUDirect: pinned buffers per endpoint and direction "
        "(1..256), copies in flight",
    .staging_slots_max = kMaxStagingSlots,
};

constexpr auto kOptions = join(
    core::common_options<S, &S::opts>(kCommonText),
    std::to_array<Opt>({
        Opt::text("dev", "", to<&S::wish, &DeviceWish::name>,
                  "device by name, e.g. rxe0 (empty: first active)"),
        Opt::integer("port", "0", 0, 255, to<&S::wish, &DeviceWish::port>,
                     "port number (0: first active)"),
        Opt::integer(
            "gid_index", "-1", -1, 65535, to<&S::wish, &DeviceWish::gid_index>,
            "GID index (-1: a RoCE v2 GID with an IPv4 address, else any RoCE v2, else 0)"),
        Opt::text("ctrl_iface", "", to<&S::ctrl_iface>,
                  "interface of the TCP control connection (empty: the GID's IPv4 address, else "
                  "as tcp)"),
        Opt::integer("eager_bytes", "8192", 0, 1 << 20, to<&S::opts, &Options::eager_bytes>,
                     "largest message sent eagerly; larger ones use rendezvous (RDMA WRITE with "
                     "immediate); measured on rxe: eager is faster up to 8 KiB, rendezvous from "
                     "16 KiB"),
        Opt::integer("recv_depth", "128", 4, 1 << 15, to<&S::opts, &Options::recv_depth>,
                     "receive buffers per queue pair (credits)"),
        Opt::integer("sq_depth", "256", 4, 1 << 15, to<&S::opts, &Options::sq_depth>,
                     "send work requests per queue pair"),
        Opt::integer("max_inline", "256", 0, 4096, to<&S::opts, &Options::max_inline>,
                     "inline data asked of the device (bytes)"),
        Opt::integer("write_chunk_bytes", "1048576", 4096, 1 << 30,
                     to<&S::opts, &Options::write_chunk>, "bytes per RDMA WRITE"),
        Opt::integer("qps_per_conn", "1", 1, kMaxQps, to<&S::opts, &Options::qps>,
                     "queue pairs per connection (1..8): rendezvous data is striped over them"),
        Opt::boolean("advertise", "true", to<&S::opts, &Options::advertise>,
                     "advertise receives posted ahead, so same-sized sends write into them at "
                     "once"),
        Opt::integer("min_stripe_bytes", "16384", 4096, int64_t{1} << 30,
                     to<&S::opts, &Options::min_stripe>,
                     "smallest stripe: a message is spread over at most len / this queue pairs"),
        Opt::integer("qp_timeout", "16", 1, 30, to<&S::opts, &Options::qp_timeout>,
                     "local ACK timeout exponent: 4.096 us * 2^n (1..30)",
                     " (0 would wait forever)"),
        Opt::integer("retry_cnt", "7", 0, 7, to<&S::opts, &Options::retry_cnt>,
                     "transport retries before a send fails (0..7)"),
        Opt::integer("rnr_retry", "6", 0, 6, to<&S::opts, &Options::rnr_retry>,
                     "receiver-not-ready retries (0..6; 7 would mean forever and is refused)",
                     " (7 means retry forever: refused)"),
        Opt::integer("reg_cache_entries", "256", 1, 1 << 20, to<&S::reg_cache_entries>,
                     "registrations kept in the cache"),
        Opt::integer(
            "spin_us", "100", 0, 1000000,
            [](S& s, const OptionValue& v) { s.opts.spin = Nanos(v.i * 1000); },
            "a blocking wait polls this long before sleeping on the completion channel, while "
            "completions keep coming (0: sleep at once)"),
        Opt::integer("heartbeat_ms", "100", 10, 60'000,
                     scaled<kNs, &S::opts, &Options::heartbeat_ns>,
                     "while the progress thread runs (transport.progress), each control "
                     "connection carries a heartbeat this often"),
        Opt::integer("peer_timeout_ms", "1500", 50, 3'600'000,
                     scaled<kNs, &S::opts, &Options::peer_timeout_ns>,
                     "heartbeat timeout: a peer whose progress thread runs and that sent no "
                     "heartbeat for this long while requests wait on it is named stopped or hung "
                     "(the NIC acks for a stopped process, so nothing else would say so before "
                     "coll.timeout_ms)"),
        Opt::integer("hello_timeout_ms", "5000", 1, 3'600'000,
                     to<&S::opts, &Options::hello_timeout_ms>,
                     "an accepted control connection must send its hello within this time"),
        // Read by probe_gpu (rdma_gpu.cc), which checks the choice.
        Opt::text("gpu", "auto", nullptr,
                  "CUDA memory: auto, dmabuf, peermem or staging (pinned host buffers)"),
        Opt::boolean("gpu_strict", "false", nullptr,
                     "refuse CUDA memory instead of staging it when no GPUDirect path exists"),
    }));

}  // namespace

GW_REGISTER_DRIVER(rdma, 30, open_rdma, kOptions);

Status read_options(const Config& cfg, Settings* s) {
  return gw::read_options(cfg, "rdma", kOptions, s);
}

}  // namespace gw::drv::rdma
