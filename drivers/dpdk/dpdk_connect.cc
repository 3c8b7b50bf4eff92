// Connection set-up: DpdkTransport::connect, the SYN of a dialling peer, and the endpoint's
// handshake (SYN, SYN-ACK with the job key's challenge, proof).
#include "dpdk_target.h"  // first: the ISA of DPDK's inline functions

#include <arpa/inet.h>
#include <rte_ethdev.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_udp.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <thread>

#include "dpdk_endpoint.h"
#include "dpdk_transport.h"
#include "log.h"

namespace gw::drv::dpdk {

Result<std::unique_ptr<Endpoint>> DpdkTransport::connect(const ConnectParams& p,
                                                         Deadline deadline) {
  const std::string who = p.peer_name.empty() ? "peer" : p.peer_name;
  GW_ASSIGN_OR_RETURN(const PeerAddr peer, peer_of(p, who));
  char ipbuf[INET_ADDRSTRLEN] = "?";
  inet_ntop(AF_INET, &peer.ip, ipbuf, sizeof ipbuf);
  std::string remote = std::string(ipbuf) + ":" + std::to_string(ntohs(peer.port));
  if (free_conns_.empty()) {
    return Status(Code::kResourceExhausted,
                  "dpdk: all dpdk.max_endpoints = " + std::to_string(opts_.max_endpoints) +
                      " connections in use; cannot connect to " + who);
  }
  now_ = now_ns();
  if (p.active) {
    prefault_shared(deadline);
    auto ep = new_endpoint(p, peer, remote);
    ep->start_active(p.key, deadline);
    flush_tx();
    return std::unique_ptr<Endpoint>(std::move(ep));
  }
  GW_ASSIGN_OR_RETURN(const ParkedSyn syn, await_syn(p, who, remote, deadline));
  prefault_shared(deadline);
  auto ep = new_endpoint(p, peer, remote);
  ep->start_passive(p.key, syn);
  GW_RETURN_IF_ERROR(ep->await_proof(deadline));
  return std::unique_ptr<Endpoint>(std::move(ep));
}

// The peer's Address as a PeerAddr. @return InvalidArgument (another driver or version, or a
// ring bus on one side only).
Result<PeerAddr> DpdkTransport::peer_of(const ConnectParams& p, const std::string& who) {
  AddrPayload a;
  if (p.remote.driver() != "dpdk" || p.remote.version() != kAddrVersion ||
      !decode_addr(p.remote.payload().data(), p.remote.payload().size(), &a)) {
    return Status(Code::kInvalidArgument, "dpdk: address of " + who + " is for driver '" +
                                              std::string(p.remote.driver()) + "' version " +
                                              std::to_string(p.remote.version()) +
                                              " (both sides must use the same transport and "
                                              "gradwire version)");
  }
  PeerAddr peer;
  std::memcpy(peer.mac.addr_bytes, a.mac[0], 6);
  // Link k faces the peer's link k: as many links as both have.
  peer.links = static_cast<uint8_t>(std::min<int>(a.links, links()));
  for (int k = 0; k < peer.links; ++k) std::memcpy(peer.macs[k].addr_bytes, a.mac[k], 6);
  if (a.links != links()) {
    log_->warn("dpdk: {} has {} links and this transport {}: {} used (dpdk.ifaces)", who, a.links,
               links(), peer.links);
  }
  peer.ip = a.ip;
  peer.port = a.port;
  if (a.ring != kNoRing) {
    if (!port_->is_ring() || a.ring >= txq_.size()) {
      return Status(Code::kInvalidArgument, "dpdk: " + who +
                                                " is on a ring bus and this transport is not "
                                                "(both must set the same dpdk.ring)");
    }
    peer.txq = a.ring;
  }
  return peer;
}

// A free connection slot (the caller checked there is one), its generation bumped.
std::unique_ptr<DpdkEndpoint> DpdkTransport::new_endpoint(const ConnectParams& p,
                                                          const PeerAddr& peer,
                                                          const std::string& remote) {
  int idx = free_conns_.back();
  free_conns_.pop_back();
  ConnSlot& cs = conns_[static_cast<size_t>(idx)];
  cs.gen = static_cast<uint16_t>(cs.gen + 1 == 0 ? 1 : cs.gen + 1);
  uint32_t conn = static_cast<uint32_t>(idx) | (uint32_t{cs.gen} << 16);
  auto ep = std::make_unique<DpdkEndpoint>(this, p, conn, peer, remote);
  cs.ep = ep.get();
  eps_.push_back(ep.get());
  return ep;
}

// The peer dials us: progress until its SYN (with our key) is here.
Result<ParkedSyn> DpdkTransport::await_syn(const ConnectParams& p, const std::string& who,
                                           const std::string& remote, Deadline deadline) {
  Completion none[1];
  Nanos backoff(1000);
  for (;;) {
    auto it = parked_.find(p.key);
    if (it != parked_.end()) {
      ParkedSyn syn = it->second;
      parked_.erase(it);
      return syn;
    }
    if (p.give_up) GW_RETURN_IF_ERROR(p.give_up());
    if (deadline.expired()) {
      return Status(Code::kTimeout, "dpdk: " + who + " (" + remote + ") did not connect to " +
                                        port_->name() +
                                        " in time; is it running, on the same device pair, "
                                        "using the same store?");
    }
    GW_RETURN_IF_ERROR(progress({none, 0}).status());
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, Nanos(200'000));
  }
}

void DpdkTransport::handle_syn(const WireHdr& h, const uint8_t* f, const uint8_t* pay) {
  const auto* ip = reinterpret_cast<const rte_ipv4_hdr*>(f + kEthLen);
  const auto* udp = reinterpret_cast<const rte_udp_hdr*>(f + kEthLen + kIpLen);
  // A repeated SYN of a connection already accepted: its SYN-ACK was lost, send it again.
  for (DpdkEndpoint* ep : eps_) {
    if (!ep->active() && ep->key() == h.tag && ep->remote_conn() == h.src_conn &&
        ep->peer().ip == ip->src_addr && ep->peer().port == udp->src_port) {
      ep->last_rx_ = now_;
      if (h.seg_len == kSynProof)
        ep->on_proof(pay);
      else
        ep->send_control(PktType::kSynAck);
      return;
    }
  }
  if (h.seg_len != kSynHello || (parked_.size() >= 4096 && !parked_.count(h.tag))) {
    ++counters_.syn_dropped;  // a proof for no connection, or too many waiting
    return;
  }
  ++counters_.syn_parked;
  ParkedSyn& syn = parked_[h.tag];
  syn.src_conn = h.src_conn;
  syn.wnd = h.wnd;
  std::memcpy(syn.hello, pay, kSynHello);
}

void DpdkEndpoint::start_active(uint64_t key, Deadline deadline) {
  key_ = key;
  active_ = true;
  auto left = static_cast<uint64_t>(deadline.remaining().count());
  connect_deadline_ = t_->now() + left;
  syn_interval_ = 1'000'000;
  next_syn_ = t_->now() + syn_interval_;
  // The connection key is the hello the MACs bind: a proof fits one connection only.
  auth_.cli = std::make_unique<auth::Client>(t_->key_, "dpdk", &key_, sizeof key_, peer_name_);
  set_auth_out(auth_.cli->hello(), kSynHello);
  send_control(PktType::kSyn);
}

void DpdkEndpoint::start_passive(uint64_t key, const ParkedSyn& syn) {
  key_ = key;
  remote_conn_ = syn.src_conn;
  connected(syn.wnd);
  auth_.srv = std::make_unique<auth::Server>(t_->key_, "dpdk",
                                             reinterpret_cast<const uint8_t*>(&key_), sizeof key_);
  uint8_t out[kSynAckHello];
  const auto next = auth_.srv->on_hello(syn.hello, out);
  set_auth_out(out, sizeof out);
  send_control(PktType::kSynAck);
  auth_.authed = next == auth::Server::Next::kAccept;
  if (!auth_.authed) t_->conns_[conn_ & 0xffff].ep = nullptr;  // deaf to the peer until its proof
  if (next == auth::Server::Next::kRefuse) {
    connected_ = false;  // no FIN: the peer was never in
    auth_.error = Status(Code::kUnavailable,
                         "dpdk: refused " + peer_name_ + " (" + remote_ + "): " + auth_.srv->why());
  }
}

void DpdkEndpoint::on_proof(const uint8_t* p) {
  if (!auth_.srv || !auth_.error.ok()) return;
  if (!auth_.authed) {
    uint8_t out[kSynAckVerdict];
    const auto next = auth_.srv->on_proof(p, out);
    set_auth_out(out, sizeof out);
    if (next == auth::Server::Next::kRefuse) {
      auth_.error = Status(Code::kUnavailable, "dpdk: refused " + peer_name_ + " (" + remote_ +
                                                   "): " + auth_.srv->why());
    } else {
      auth_.authed = true;
      t_->conns_[conn_ & 0xffff].ep = this;
    }
  }
  send_control(PktType::kSynAck);  // the verdict (again, if the last one was lost)
}

Status DpdkEndpoint::await_proof(Deadline deadline) {
  Completion none[1];
  Nanos backoff(1000);
  for (;;) {
    t_->flush_tx();
    if (!auth_.error.ok()) return auth_.error;
    if (auth_.authed) return Status();
    if (deadline.expired()) {
      return Status(Code::kTimeout, "dpdk: " + peer_name_ + " (" + remote_ +
                                        ") did not prove the job's key in time");
    }
    GW_RETURN_IF_ERROR(t_->progress({none, 0}).status());
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, Nanos(200'000));
  }
}

void DpdkEndpoint::on_synack(const WireHdr& h, const uint8_t* p) {
  if (!active_ || connected_ || failed()) return;
  if (h.seg_len == kSynAckVerdict) {
    if (!auth_.proof_sent) return;
    if (Status st = auth_.cli->on_verdict(p); !st.ok()) return fail(st);
    return connected(auth_.synack_wnd);
  }
  if (auth_.proof_sent) return;  // a repeated SYN-ACK: the proof is on its way again
  remote_conn_ = h.src_conn;
  uint8_t proof[kSynProof];
  bool send_proof = false;
  Status st = auth_.cli->on_server_hello(p, proof, &send_proof);
  if (send_proof) {  // SYNs carry it from now on, until the verdict comes
    set_auth_out(proof, sizeof proof);
    send_control(PktType::kSyn);
    auth_.proof_sent = true;
    auth_.synack_wnd = h.wnd;
  }
  if (!st.ok()) return fail(st);
  if (!send_proof) connected(h.wnd);
}

void DpdkEndpoint::connected(uint32_t wnd) {
  connected_ = true;
  win_ = std::min(win_, std::max<uint32_t>(1, wnd));
  rwin_ = kRecvWindows * win_;
  if (active_) t_->log_->debug("dpdk: connected to {} ({})", peer_name_, remote_);
}

void DpdkEndpoint::set_auth_out(const uint8_t* p, size_t n) {
  std::memcpy(auth_.out, p, n);
  auth_.len = static_cast<uint16_t>(n);
}

}  // namespace gw::drv::dpdk
