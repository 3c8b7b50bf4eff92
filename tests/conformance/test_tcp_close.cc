// tcp: a peer that sends its last messages and closes cleanly (its transport destroyed, as a
// rank that finished its part does) leaves them receivable: receives posted after the close
// get every byte, and the next one fails naming the peer. A close inside a frame still fails
// the message (test_tcp_junk.cc). Over one stream and over four (messages striped).
#include "conformance.h"

namespace gw::conformance {
namespace {

TEST(TcpClose, MessagesSentBeforeACleanCloseStayReceivable) {
  close_then_receive({"tcp", "tcp", "tcp:iface=lo"});
}

TEST(TcpClose, StripedOverFourStreams) {
  close_then_receive({"tcp_streams4", "tcp", "tcp:iface=lo,streams=4"});
}

}  // namespace
}  // namespace gw::conformance
