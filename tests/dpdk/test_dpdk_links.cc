// Several links per transport (dpdk_links.h): the address with every link's MAC, the link
// probe's header check, a connection's routing over its links, taking one out and back, and
// dpdk.ifaces refused where it cannot work. Striping and a cut link on the bed:
// tests/cluster/test_links_cut.sh (cluster-dpdk-links).
#include <gtest/gtest.h>

#include "dpdk_links.h"
#include "dpdk_wire.h"
#include "gw_transport.h"

namespace gw::drv::dpdk {
namespace {

TEST(DpdkLinks, AddressCarriesEveryLinksMac) {
  for (int links = 1; links <= kMaxLinks; ++links) {
    AddrPayload a;
    a.links = static_cast<uint8_t>(links);
    for (int k = 0; k < links; ++k)
      for (int b = 0; b < 6; ++b) a.mac[k][b] = static_cast<uint8_t>(16 * k + b + 1);
    a.ip = 0x0100000a;
    a.port = 0x1234;
    uint8_t buf[kAddrMax];
    encode_addr(a, buf);
    AddrPayload back;
    ASSERT_TRUE(decode_addr(buf, addr_size(links), &back)) << links;
    EXPECT_EQ(back.links, links);
    EXPECT_EQ(back.ip, a.ip);
    EXPECT_EQ(back.port, a.port);
    EXPECT_EQ(back.ring, kNoRing);
    for (int k = 0; k < links; ++k)
      for (int b = 0; b < 6; ++b) EXPECT_EQ(back.mac[k][b], a.mac[k][b]) << k << " " << b;
    // One byte short or long, or a count the size does not hold: refused.
    EXPECT_FALSE(decode_addr(buf, addr_size(links) - 1, &back));
    EXPECT_FALSE(decode_addr(buf, addr_size(links) + 1, &back));
  }
  uint8_t buf[kAddrMax] = {};
  buf[13] = 0;
  AddrPayload x;
  EXPECT_FALSE(decode_addr(buf, kAddrBase, &x));
  buf[13] = kMaxLinks + 1;
  EXPECT_FALSE(decode_addr(buf, addr_size(kMaxLinks), &x));
}

TEST(DpdkLinks, ProbeHeaderIsChecked) {
  WireHdr h{};
  h.magic = kMagic;
  h.version = kVersion;
  h.type = static_cast<uint8_t>(PktType::kProbe);
  h.offset = 1;
  EXPECT_EQ(check_wire(h, 0, 1 << 20), nullptr);
  h.msg_len = 1;
  EXPECT_EQ(check_wire(h, 0, 1 << 20), nullptr);
  h.msg_len = 2;
  EXPECT_NE(check_wire(h, 0, 1 << 20), nullptr);
  h.msg_len = 0;
  h.offset = kMaxLinks;
  EXPECT_NE(check_wire(h, 0, 1 << 20), nullptr);
  h.offset = 0;
  h.seg_len = 8;
  EXPECT_NE(check_wire(h, 8, 1 << 20), nullptr);
}

TEST(DpdkLinks, PacketsGoWhereFewestAreInFlight) {
  EpLinks l;
  l.init(2);
  int on[2] = {};
  for (int i = 0; i < 100; ++i) {
    const uint8_t k = l.pick();
    ++on[k];
    l.sent(k, 1000);
  }
  EXPECT_EQ(on[0], 50);
  EXPECT_EQ(on[1], 50);
  // Link 1 delivers faster: its packets leave, so it takes the next ones.
  for (int i = 0; i < 10; ++i) l.left(1, true);
  for (int i = 0; i < 10; ++i) {
    const uint8_t k = l.pick();
    EXPECT_EQ(k, 1);
    l.sent(k, 1000);
  }
  EXPECT_EQ(l.inflight(0), 50u);
  EXPECT_EQ(l.inflight(1), 50u);
}

TEST(DpdkLinks, SilentLinkIsTakenOutAndProbedBack) {
  EpLinks l;
  l.init(3);
  const uint64_t ms = 1'000'000, timeout = 500 * ms;
  for (int k = 0; k < 3; ++k) l.sent(static_cast<uint8_t>(k), 1 * ms);
  // The peer acknowledges nothing at all (stopped): no link is to blame.
  EXPECT_EQ(l.overdue(900 * ms, timeout), -1);
  l.left(0, true, 2 * ms);
  l.left(2, true, 2 * ms);
  EXPECT_EQ(l.overdue(400 * ms, timeout), -1);
  EXPECT_EQ(l.overdue(502 * ms, timeout), 1);
  l.set_dead(1, 501 * ms);
  for (int i = 0; i < 20; ++i) EXPECT_NE(l.pick(), 1);
  EXPECT_EQ(l.control(1), 0);
  EXPECT_EQ(l.probe_due(501 * ms, 100 * ms), 1);
  EXPECT_EQ(l.probe_due(550 * ms, 100 * ms), -1);
  EXPECT_EQ(l.probe_due(601 * ms, 100 * ms), 1);
  l.set_live(1);
  EXPECT_EQ(l.probe_due(10'000 * ms, 100 * ms), -1);
  EXPECT_EQ(l.control(1), 1);
}

// A cut link whose packets loss recovery keeps sending again on the other while the connection
// drains between messages: it still owes, and only the busy time counts.
TEST(DpdkLinks, DrainingNeitherClearsNorAgesALinkThatOwes) {
  EpLinks l;
  l.init(2);
  const uint64_t ms = 1'000'000, timeout = 500 * ms;
  l.sent(0, 0);
  l.sent(1, 0);
  l.left(0, true, 1 * ms);
  l.left(1, false);  // its packet goes again on link 0 and is acknowledged there
  l.sent(0, 10 * ms);
  l.left(0, true, 12 * ms);
  l.idle(12 * ms);
  EXPECT_EQ(l.overdue(10'000 * ms, timeout), -1);  // 12 ms owed: the idle time stands still
  l.sent(0, 10'000 * ms);
  l.sent(1, 10'000 * ms);
  EXPECT_EQ(l.overdue(10'400 * ms, timeout), -1);  // 412 ms owed
  l.left(0, true, 10'300 * ms);
  EXPECT_EQ(l.overdue(10'489 * ms, timeout), 1);  // 501 ms owed, link 0 carries
  // A link whose own packet is acknowledged owes nothing, however long the connection idles.
  EpLinks m;
  m.init(2);
  m.sent(0, 0);
  m.sent(1, 0);
  m.left(1, false);
  m.left(0, true, 1 * ms);
  m.sent(1, 2 * ms);
  m.left(1, true, 3 * ms);
  m.idle(3 * ms);
  m.sent(0, 9'000 * ms);
  m.left(0, true, 9'001 * ms);
  EXPECT_EQ(m.overdue(20'000 * ms, timeout), -1);
}

TEST(DpdkLinks, LastLiveLinkIsNeverTakenOut) {
  EpLinks l;
  l.init(2);
  l.sent(0, 1);
  l.sent(1, 1);
  l.left(1, true, 2);
  l.sent(1, 3);
  l.left(1, true, 4);
  EXPECT_EQ(l.overdue(10'000'000'000, 1), 0);
  l.set_dead(0, 0);
  EXPECT_EQ(l.overdue(10'000'000'000, 1), -1);  // the peer's timeout names a dead peer
  EXPECT_EQ(l.pick(), 1);
}

TEST(DpdkLinks, IfacesRefusedWhereTheyCannotWork) {
  struct Case {
    const char* spec;
    const char* says;
  } cases[] = {
      {"dpdk:ring=lk,ifaces=a,b", "not with dpdk.ring"},
      {"dpdk:vdev=net_memif0,ifaces=a,b", "not net_memif"},
      {"dpdk:ifaces=a,b,c,d,e", "give 1 to 4 interfaces"},
      {"dpdk:iface=a,ifaces=a,b", "name the interfaces in dpdk.ifaces only"},
  };
  for (const Case& c : cases) {
    auto t = Transport::open(c.spec);
    ASSERT_FALSE(t.ok()) << c.spec;
    EXPECT_EQ(t.status().code(), Code::kInvalidArgument) << c.spec;
    EXPECT_NE(t.status().to_string().find(c.says), std::string::npos) << t.status().to_string();
  }
}

}  // namespace
}  // namespace gw::drv::dpdk
