// Liveness of the peer's process, not of its data: the NIC acknowledges for a stopped process
// and the kernel keeps its control connection open, so only a heartbeat says it still runs.
// While a rank's progress thread runs it writes one byte on each control connection every
// rdma.heartbeat_ms; a peer that said it does and then falls silent for rdma.peer_timeout_ms
// while requests wait on it is stopped or hung.
#include <sys/socket.h>

#include <cerrno>
#include <string>

#include "gw_time.h"
#include "rdma_endpoint.h"

namespace gw::drv::rdma {

void RdmaTransport::liveness() {
  const bool live = background();
  const uint64_t now = now_ns();
  if (!live_tick_.due(live, now)) return;
  // An endpoint may fail (and its failure may not remove it) while iterating.
  for (size_t i = 0; i < eps_.size(); ++i)
    if (eps_[i] && eps_[i]->bound_) eps_[i]->liveness(now, live);
}

void RdmaEndpoint::read_ctrl() {
  uint8_t buf[64];
  while (ctrl_) {
    const ssize_t r = ::recv(ctrl_.get(), buf, sizeof buf, MSG_DONTWAIT);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    if (r <= 0) return t_->ctrl_closed(this);
    for (ssize_t i = 0; i < r; ++i) {
      if (buf[i] != kBeatLive && buf[i] != kBeatQuiet) {
        ++t_->counters_.protocol_errors;
        fail(Status(Code::kProtocolError, "rdma: byte " + std::to_string(buf[i]) + " from " +
                                              peer_name_ +
                                              " on its control connection, where only "
                                              "heartbeats may come (another gradwire version?)"));
        return;
      }
      live_.peer_says(buf[i] == kBeatLive);
    }
    live_.heard();
    t_->counters_.heartbeats_received += static_cast<uint64_t>(r);
    if (static_cast<size_t>(r) < sizeof buf) return;
  }
}

void RdmaEndpoint::liveness(uint64_t now, bool live) {
  if (failed() || !ctrl_) return;
  const auto& o = t_->opts();
  const bool pending = free_sends_.size() != sends_.size() || !rndv_.idle() || core_.posted() > 0 ||
                       t_->core().any_posted() > 0 || core_.has_pending();
  if (live_.silent(now, pending, o.peer_timeout_ns)) {
    read_ctrl();  // this side may not have looked for a while (a busy poll loop)
    if (failed()) return;
    if (live_.silent(now, pending, o.peer_timeout_ns)) {
      ++t_->counters_.peer_timeouts;
      fail(Status(Code::kRemoteError, live_.silence(now, "rdma: peer " + peer_name_, o.heartbeat_ns,
                                                    "rdma.peer_timeout_ms")));
      return;
    }
  }
  if (!live_.beat_due(now, live, o.heartbeat_ns)) return;
  const uint8_t beat = live ? kBeatLive : kBeatQuiet;
  // One byte into a socket buffer that holds only heartbeats: it fails only when the peer
  // stopped reading for minutes; the next check tries again.
  if (::send(ctrl_.get(), &beat, 1, MSG_DONTWAIT | MSG_NOSIGNAL) != 1) return;
  live_.beat_sent(now, live);
  ++t_->counters_.heartbeats_sent;
}

}  // namespace gw::drv::rdma
