// The device arguments gradwire adds to a vdev string (dpdk_memif.h): af_xdp gets gradwire's
// XDP program, which passes only the default UDP port; a user's program is taken as given.
#include <gtest/gtest.h>

#include "dpdk_memif.h"
#include "dpdk_xdp_prog.h"

namespace gw::drv::dpdk {
namespace {

TEST(DpdkVdev, AfXdpGetsGradwiresXdpProgram) {
  int mtu = 0;
  const std::string v = vdev_with_defaults("net_af_xdp0,iface=veth0", &mtu);
  if (gw_xdp_prog().empty()) GTEST_SKIP() << "gw_xdp.o not built (needs clang, libbpf-dev)";
  EXPECT_EQ(gw_xdp_prog(), GW_XDP_PROG_BUILD);
  EXPECT_EQ(vdev_arg(v, "xdp_prog"), gw_xdp_prog()) << v;
  EXPECT_EQ(vdev_arg(v, "iface"), "veth0");
  EXPECT_TRUE(check_xdp_prog(v, GW_XDP_UDP_PORT).ok());
  const Status st = check_xdp_prog(v, 5000);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.to_string().find("dpdk.udp_port = 5000"), std::string::npos) << st.to_string();
  // The user's own program: as given, any port.
  const std::string own = vdev_with_defaults("net_af_xdp0,iface=veth0,xdp_prog=/x.o", &mtu);
  EXPECT_EQ(vdev_arg(own, "xdp_prog"), "/x.o");
  EXPECT_TRUE(check_xdp_prog(own, 5000).ok());
  // Other devices: nothing of it.
  const std::string pk = vdev_with_defaults("net_af_packet0,iface=veth0", &mtu);
  EXPECT_EQ(vdev_arg(pk, "xdp_prog"), "");
  EXPECT_TRUE(check_xdp_prog(pk, 5000).ok());
}

}  // namespace
}  // namespace gw::drv::dpdk
