// Liveness of the peer's process, not of its data: while a rank's progress thread runs it
// sends each peer a heartbeat every tcp.heartbeat_ms (the kernel acknowledges data for a
// stopped process, so TCP itself never says). A peer that said it sends them and then falls
// silent for tcp.peer_timeout_ms while requests wait on it is stopped or hung.
#include <string>

#include "log.h"
#include "tcp_endpoint.h"

namespace gw::drv::tcp {
namespace {
constexpr uint64_t kCheckNs = 10'000'000;
}  // namespace

void TcpTransport::liveness() {
  const bool live = background();
  const uint64_t now = now_ns();
  if (live == live_ && now - last_liveness_ < kCheckNs) return;
  last_liveness_ = now;
  live_ = live;
  // An endpoint may fail (and its failure may not remove it) while iterating.
  for (size_t i = 0; i < eps_.size(); ++i) eps_[i]->liveness(now, live);
}

void TcpEndpoint::liveness(uint64_t now, bool live) {
  if (failed() || streams_.empty()) return;
  // A stream this side stopped reading (back-pressure) may hold the peer's heartbeats unread.
  for (auto& s : streams_) heard_ |= s->rx == Stream::Rx::kStalled;
  if (heard_ || last_rx_ns_ == 0) {
    heard_ = false;
    last_rx_ns_ = now;
  }
  const auto& o = t_->opts();
  const bool pending = free_sends_.size() != sends_.size() || core_.posted() > 0 ||
                       t_->core().any_posted() > 0 || core_.has_pending();
  if (peer_live_ && pending && now - last_rx_ns_ > o.peer_timeout_ns) {
    ++t_->counters_.peer_timeouts;
    fail(Status(Code::kRemoteError,
                "tcp: peer " + peer_name_ + " (" + remote_ + ") sent nothing for " +
                    std::to_string((now - last_rx_ns_) / 1'000'000) +
                    " ms although its progress thread sends a heartbeat every " +
                    std::to_string(o.heartbeat_ns / 1'000'000) +
                    " ms (tcp.peer_timeout_ms): its process is stopped (SIGSTOP, a debugger) "
                    "or hung — check it"));
    return;
  }
  if (live == live_sent_ && (!live || now - last_hb_ns_ < o.heartbeat_ns)) return;
  Stream& s = *streams_[0];
  if (s.txq.full()) return;  // data is queued: the next check tries again
  s.txq.push(Chunk{make_heartbeat(live), nullptr, -1, 0, nullptr, -1});
  last_hb_ns_ = now;
  live_sent_ = live;
  ++t_->counters_.heartbeats_sent;
  if (s.writable) flush(s);
}

}  // namespace gw::drv::tcp
