// memif socket handling around rte_vdev_init: the file-system socket is the rendezvous of
// the two processes, so its life outlasts a killed run unless cleared.
#pragma once

#include <string>

#include "gw_status.h"

namespace gw::drv::dpdk {

/// The socket path of a net_memif vdev argument string ("net_memif0;role=...;socket=P"),
/// empty when the vdev is not memif or uses the default abstract socket.
std::string memif_socket_path(const std::string& vdev);

/// A memif client whose server has not made its socket yet would start unconnected and may
/// stay so; ranks started together race for it. Waits up to 10 s for the socket to appear.
void wait_for_memif_server(const std::string& vdev);

/// A jumbo "MTU" on memif: the PMD carries a frame of any length in one descriptor chain and
/// checks no frame length, so 32 KiB of payload per packet (MTU 32860) needs only buffers that
/// hold a frame. Loopback TCP, which memif is held against, moves 64 KiB segments; 1500-byte
/// frames cost memif ~22x the per-packet work (headers, acks, descriptors, mbufs) per byte.
inline constexpr int kMemifJumboMtu = 32768 + 92;
/// The largest MTU gradwire uses on memif: IPv4's 16-bit length, and an mbuf's data room
/// (uint16) must hold a frame plus headroom.
inline constexpr int kMemifMaxMtu = 65000;

/// The device arguments gradwire adds to a vdev string where the user gave none: on memif a
/// file-system socket (socket-abstract=no), a ring size and, for `mtu` (0: kMemifJumboMtu), a
/// buffer size that holds one frame; on af_packet a frame count; on af_xdp gradwire's XDP
/// program. `*mtu` becomes the MTU to use.
std::string vdev_with_defaults(const std::string& vdev, int* mtu);

/// gradwire's XDP program (drivers/dpdk/gw_xdp.c) as installed or built; "" when not built.
std::string gw_xdp_prog();
/// net_af_xdp: InvalidArgument when gradwire's XDP program would not pass `udp_port` (host
/// order); a warning when the PMD's own program is used.
Status check_xdp_prog(const std::string& vdev, uint16_t udp_port);

/// Maps every page of this process's memif regions (the PMD's shared rings and buffers) now,
/// with MADV_POPULATE_WRITE, contents untouched. Left to first use, a jumbo region (64 MiB)
/// cost each process a page fault per 4 KiB on the first pass through the rings: a collective's
/// first few hundred 64 KiB operations took 3-6x longer. No-op without mapped regions or on
/// kernels before 5.14.
void prefault_memif_regions();

/// The value of device argument `key` in a vdev string ("net_memif0;bsize=2048;..."), or "".
std::string vdev_arg(const std::string& vdev, const std::string& key);

/// For a memif server: a socket file left by a killed run (nothing listens) is removed; one
/// with a live listener, or a path that is not a socket, is an error saying what to do.
Status claim_memif_socket(const std::string& vdev);

}  // namespace gw::drv::dpdk
