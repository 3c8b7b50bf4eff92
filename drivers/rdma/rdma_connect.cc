// RdmaTransport: connection set-up. The active side dials the peer's control listener and
// swaps Hellos; the passive side answers from the core's HelloListener and parks the endpoint
// until connect() asks for its key. The control connection then stays open (its EOF reports
// a dead peer).
#include <poll.h>
#include <sys/epoll.h>

#include "log.h"
#include "rdma_endpoint.h"

namespace gw::drv::rdma {

Result<std::unique_ptr<Endpoint>> RdmaTransport::connect(const ConnectParams& p,
                                                         Deadline deadline) {
  const std::string who = p.peer_name.empty() ? "peer" : p.peer_name;
  if (p.remote.driver() != "rdma" || p.remote.version() != 1) {
    return Status(Code::kInvalidArgument, "rdma: address of " + who + " is for driver '" +
                                              std::string(p.remote.driver()) +
                                              "' (both sides must use the same transport)");
  }
  GW_ASSIGN_OR_RETURN(SockAddr remote,
                      decode_addr(p.remote.payload().data(), p.remote.payload().size()));
  if (!p.active) return take_parked(p, who, remote, deadline);
  const int per_ep = cq_per_endpoint();
  if (cq_used_ + per_ep > cq_size_) {
    return Status(Code::kResourceExhausted,
                  "rdma: completion queue of " + std::to_string(cq_size_) +
                      " entries is full; lower rdma.recv_depth, rdma.sq_depth, "
                      "rdma.max_outstanding or rdma.qps_per_conn");
  }
  auto ep = std::make_unique<RdmaEndpoint>(this, static_cast<uint32_t>(eps_.size()));
  eps_.push_back(ep.get());
  cq_used_ += per_ep;
  GW_RETURN_IF_ERROR(ep->create());
  auto fd = dial(SockAddr{}, remote, StreamOptions{}, deadline);
  if (!fd.ok()) return fd.status().with_context("rdma: control connection to " + who);
  Hello mine = ep->local_hello(p.key), theirs;
  Completion none[1];
  GW_RETURN_IF_ERROR(auth::client_handshake(fd->get(), listener_.key(), "rdma", &mine, sizeof mine,
                                            who, deadline, [&] {
                                              service_events();
                                              return progress({none, 0}).status();
                                            }));
  GW_RETURN_IF_ERROR(wait_reply(fd->get(), &theirs, who, deadline));
  if (theirs.reject) {
    return Status(Code::kUnavailable, "rdma: " + who + " refused the connection (see its log)");
  }
  GW_RETURN_IF_ERROR(ep->connect_qp(theirs, who));
  ep->bind(p, std::move(*fd));
  log_->debug("rdma: connected to {} (QPN {} -> {})", who, ep->qpn(), theirs.qpn);
  return std::unique_ptr<Endpoint>(std::move(ep));
}

Result<std::unique_ptr<Endpoint>> RdmaTransport::take_parked(const ConnectParams& p,
                                                             const std::string& who,
                                                             const SockAddr& remote,
                                                             Deadline deadline) {
  Completion none[1];
  for (;;) {
    auto it = parked_.find(p.key);
    if (it != parked_.end()) {
      std::unique_ptr<RdmaEndpoint> ep = std::move(it->second);
      parked_.erase(it);
      ep->bind(p, Fd());
      log_->debug("rdma: {} connected (QPN {})", who, ep->qpn());
      return std::unique_ptr<Endpoint>(std::move(ep));
    }
    GW_RETURN_IF_ERROR(listener_.auth_refusal(p.key, who + " (" + remote.to_string() + ")"));
    if (p.give_up) GW_RETURN_IF_ERROR(p.give_up());
    if (deadline.expired()) {
      return Status(Code::kTimeout, "rdma: " + who + " (" + remote.to_string() +
                                        ") did not connect to " + ctrl_local_.to_string() +
                                        " in time; is it running and using the same store?");
    }
    service_events();
    GW_RETURN_IF_ERROR(progress({none, 0}).status());
    pollfd pf{epfd_.get(), POLLIN, 0};
    ::poll(&pf, 1, std::min(10, deadline.remaining_ms()));
  }
}

// Reads the passive side's hello, answering other ranks' hellos meanwhile.
Status RdmaTransport::wait_reply(int fd, Hello* reply, const std::string& who, Deadline deadline) {
  size_t got = 0;
  Completion none[1];
  while (got < sizeof *reply) {
    ssize_t r =
        ::recv(fd, reinterpret_cast<uint8_t*>(reply) + got, sizeof *reply - got, MSG_DONTWAIT);
    if (r > 0) {
      got += static_cast<size_t>(r);
      continue;
    }
    if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
      return Status(Code::kUnavailable, "rdma: " + who +
                                            " closed the control connection "
                                            "before answering (it refused the hello; see its log)");
    }
    if (deadline.expired())
      return Status(Code::kTimeout, "rdma: " + who + " did not answer the hello in time");
    service_events();
    GW_RETURN_IF_ERROR(progress({none, 0}).status());
    pollfd pf[2] = {{fd, POLLIN, 0}, {epfd_.get(), POLLIN, 0}};
    ::poll(pf, 2, std::min(10, deadline.remaining_ms()));
  }
  return Status();
}

void RdmaTransport::answer(Fd fd, const Hello& h) {
  const std::string who = "the peer with key " + std::to_string(h.key);
  auto refuse = [&](const Status& st) { listener_.refuse(st.to_string()); };
  if (parked_.count(h.key)) {
    return refuse(Status(Code::kProtocolError,
                         "a second connection with key " + std::to_string(h.key) +
                             " while the first waits to be taken (two jobs sharing a store "
                             "prefix? give each its own)"));
  }
  const int per_ep = cq_per_endpoint();
  if (cq_used_ + per_ep > cq_size_) {
    return refuse(Status(Code::kResourceExhausted,
                         "rdma: completion queue of " + std::to_string(cq_size_) +
                             " entries is full; lower rdma.recv_depth, rdma.sq_depth, "
                             "rdma.max_outstanding or rdma.qps_per_conn"));
  }
  auto ep = std::make_unique<RdmaEndpoint>(this, static_cast<uint32_t>(eps_.size()));
  eps_.push_back(ep.get());
  cq_used_ += per_ep;
  Status st = ep->create();
  if (st.ok()) st = ep->connect_qp(h, who);
  if (!st.ok()) return refuse(st);
  Hello mine = ep->local_hello(h.key);
  st = write_all(fd.get(), &mine, sizeof mine, Deadline(Millis(1000)));
  if (!st.ok()) return refuse(st);
  ep->ctrl_ = std::move(fd);
  parked_.emplace(h.key, std::move(ep));
}

void RdmaTransport::watch_ctrl(RdmaEndpoint* ep, int fd) {
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.ptr = static_cast<PollItem*>(&ep->ctrl_item_);
  ::epoll_ctl(epfd_.get(), EPOLL_CTL_ADD, fd, &ev);
}

}  // namespace gw::drv::rdma
