// Liveness of the peer's process, not of its data: while a rank's progress thread runs it
// sends each peer a heartbeat every tcp.heartbeat_ms (the kernel acknowledges data for a
// stopped process, so TCP itself never says). A peer that said it sends them and then falls
// silent for tcp.peer_timeout_ms while requests wait on it is stopped or hung.
#include <string>

#include "log.h"
#include "tcp_endpoint.h"

namespace gw::drv::tcp {

void TcpTransport::liveness() {
  const bool live = background();
  const uint64_t now = now_ns();
  if (!live_tick_.due(live, now)) return;
  // An endpoint may fail (and its failure may not remove it) while iterating.
  for (size_t i = 0; i < eps_.size(); ++i) {
    eps_[i]->liveness(now, live);
    eps_[i]->links_check(now);
  }
}

void TcpEndpoint::liveness(uint64_t now, bool live) {
  if (failed() || streams_.empty()) return;
  // A stream this side stopped reading (back-pressure) may hold the peer's heartbeats unread.
  for (auto& s : streams_)
    if (s->rx == Stream::Rx::kStalled) live_.heard();
  const auto& o = t_->opts();
  const bool pending = free_sends_.size() != sends_.size() || core_.posted() > 0 ||
                       t_->core().any_posted() > 0 || core_.has_pending();
  if (live_.silent(now, pending, o.peer_timeout_ns)) {
    ++t_->counters_.peer_timeouts;
    fail(Status(Code::kRemoteError,
                live_.silence(now, "tcp: peer " + peer_name_ + " (" + remote_ + ")", o.heartbeat_ns,
                              "tcp.peer_timeout_ms")));
    return;
  }
  if (!live_.beat_due(now, live, o.heartbeat_ns)) return;
  // Several links: on every stream, so that a link gone quiet shows as unacknowledged bytes.
  for (auto& sp : streams_) {
    Stream& s = *sp;
    if (s.state != Stream::Link::kUp || s.txq.full()) continue;  // the next check tries again
    push_frame(s, Chunk{make_heartbeat(live), nullptr, -1, 0, nullptr, -1, 0});
    ++t_->counters_.heartbeats_sent;
    if (s.writable) flush(s);
    if (!links() || failed()) break;
  }
  live_.beat_sent(now, live);
}

}  // namespace gw::drv::tcp
