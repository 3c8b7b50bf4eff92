// The tcp driver's registration with its configuration keys, and read_options.
#include "tcp_options.h"

#include "gw_driver_options.h"
#include "gw_transport_driver.h"
#include "tcp_transport.h"
#include "tcp_wire.h"

namespace gw::drv::tcp {
namespace {

Result<std::unique_ptr<Transport>> open_tcp(const Config& cfg) { return TcpTransport::open(cfg); }

using Opt = OptionDef<Settings>;
constexpr int64_t kNs = 1'000'000;  // per millisecond

constexpr auto kOptions = join(
    core::common_options<Settings, &Settings::opts>({}),
    std::to_array<Opt>({
        Opt::text("iface", "", to<&Settings::iface>, "interface by name (empty: see tcp.subnet)"),
        Opt::text("ifaces", "", to<&Settings::ifaces>,
                  "several links: interfaces by name, comma-separated (e.g. eth0,eth1); each "
                  "peer pair gets tcp.streams streams per link and stripes every message over "
                  "them by what each delivers; a link that stops is taken out and its data "
                  "re-sent on the others (empty: one link, tcp.iface)"),
        Opt::integer("link_chunk_bytes", "262144", 4096, 1 << 30,
                     to<&Settings::opts, &Options::link_chunk>,
                     "several links: messages are striped in chunks of this size"),
        Opt::integer("link_window_bytes", "2097152", 65536, 1 << 30,
                     to<&Settings::opts, &Options::link_window>,
                     "several links: unacknowledged bytes per stream; a slower link takes "
                     "fewer chunks"),
        Opt::integer("link_timeout_ms", "500", 20, 3'600'000,
                     scaled<kNs, &Settings::opts, &Options::link_timeout_ns>,
                     "several links: a link whose data has not been acknowledged for this long "
                     "is taken out (its data re-sent on the others) and dialled again each "
                     "second until it carries again"),
        Opt::integer("link_fault_ms", "0", 0, 3'600'000,
                     scaled<kNs, &Settings::opts, &Options::link_fault_ns>,
                     "several links, for tests: take a stream out this often, as if its link "
                     "failed (0: never)"),
        Opt::text("subnet", "", to<&Settings::subnet>,
                  "interface by subnet, e.g. 10.0.0.0/8 (empty: first up non-loopback, else lo)"),
        Opt::text("family", "auto", to<&Settings::family>, "inet, inet6 or auto",
                  "auto|inet|inet6"),
        Opt::integer("port", "0", 0, 65535, to<&Settings::port>,
                     "listening port (0: any free port)"),
        Opt::integer("streams", "1", 1, kMaxStreams, to<&Settings::opts, &Options::streams>,
                     "TCP connections per peer (1..64)"),
        Opt::integer("stripe_min_bytes", "262144", 1, INT64_MAX,
                     to<&Settings::opts, &Options::stripe_min>,
                     "messages at least this big are striped across the streams"),
        Opt::integer("sndbuf", "0", 0, INT32_MAX,
                     to<&Settings::opts, &Options::sock, &StreamOptions::sndbuf>,
                     "SO_SNDBUF bytes (0: kernel autotuning)"),
        Opt::integer("rcvbuf", "0", 0, INT32_MAX,
                     to<&Settings::opts, &Options::sock, &StreamOptions::rcvbuf>,
                     "SO_RCVBUF bytes (0: kernel autotuning)"),
        Opt::integer("user_timeout_ms", "10000", 0, INT32_MAX,
                     to<&Settings::opts, &Options::sock, &StreamOptions::user_timeout_ms>,
                     "TCP_USER_TIMEOUT: unacknowledged data this long means the peer is dead"),
        Opt::integer("keepalive_s", "2", 0, 32767,
                     to<&Settings::opts, &Options::sock, &StreamOptions::keepalive_s>,
                     "keepalive probe interval, so an idle dead peer is found (0: off)"),
        Opt::integer("hello_timeout_ms", "5000", 1, 3'600'000,
                     to<&Settings::opts, &Options::hello_timeout_ms>,
                     "an accepted connection must identify itself within this time"),
        Opt::integer("heartbeat_ms", "100", 10, 60'000,
                     scaled<kNs, &Settings::opts, &Options::heartbeat_ns>,
                     "while its progress thread runs (transport.progress), a rank sends each peer "
                     "a heartbeat this often"),
        Opt::integer("peer_timeout_ms", "1500", 100, 3'600'000,
                     scaled<kNs, &Settings::opts, &Options::peer_timeout_ns>,
                     "a peer whose progress thread runs and that sent nothing for this long while "
                     "requests wait on it is stopped or hung: its endpoint fails naming it"),
        Opt::text(
            "tls", "off", [](Settings& s, const OptionValue& v) { s.opts.tls = v.s == "on"; },
            "on: TLS 1.3 on every stream, keyed by the job's GW_AUTH_KEY (pre-shared key); "
            "every rank must set it alike",
            "off|on"),
    }));

}  // namespace

GW_REGISTER_DRIVER(tcp, 10, open_tcp, kOptions);

Status read_options(const Config& cfg, Settings* s) {
  return gw::read_options(cfg, "tcp", kOptions, s);
}

}  // namespace gw::drv::tcp
