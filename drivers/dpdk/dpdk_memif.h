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

/// For a memif server: a socket file left by a killed run (nothing listens) is removed; one
/// with a live listener, or a path that is not a socket, is an error saying what to do.
Status claim_memif_socket(const std::string& vdev);

}  // namespace gw::drv::dpdk
