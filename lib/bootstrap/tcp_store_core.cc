// The TCP store server's request handling (tcp_store_core.h): authentication, frames,
// requests, parked waits and rank liveness over the clients' buffered bytes. Malformed or
// oversized frames close that client, never the server, and nothing is allocated from a
// length before it was checked against kMaxFrame.
#include "tcp_store_core.h"

#include <algorithm>

namespace gw::store {
namespace {

constexpr auto kOkReply = static_cast<uint8_t>(wire::Reply::kOk);
constexpr auto kErrorReply = static_cast<uint8_t>(wire::Reply::kError);
constexpr auto kTimeoutReply = static_cast<uint8_t>(wire::Reply::kTimeout);
constexpr auto kLeftReply = static_cast<uint8_t>(wire::Reply::kLeft);

}  // namespace

Client& StoreCore::add_client(Fd fd, std::string peer) {
  auto c = std::make_unique<Client>();
  c->fd = std::move(fd);
  c->peer = std::move(peer);
  c->auth = std::make_unique<auth::Server>(key_, "store", nullptr, 0);
  clients_.push_back(std::move(c));
  return *clients_.back();
}

void StoreCore::received(Client& c, std::string_view bytes) {
  c.in.append(bytes);
  if (c.in.size() - c.in_off > wire::kHeader + wire::kMaxFrame) {
    drop(c, "sent more than one maximal frame while its request was pending");
  }
}

void StoreCore::expire(Clock::time_point now) {
  for (auto& c : clients_) {
    if (c->waiting && !c->closed && c->deadline <= now)
      finish_wait(*c, satisfied(*c) ? End::kDone : End::kTimeout);
  }
}

void StoreCore::sweep() {
  std::erase_if(clients_, [](auto& c) { return c->closed; });
}

bool StoreCore::authenticate(Client& c) {
  const size_t need = c.proof_due ? auth::kMac : auth::kClientHello;
  const auto* in = reinterpret_cast<const uint8_t*>(c.in.data() + c.in_off);
  if (!c.proof_due && !auth::plausible_hello(in, c.in.size() - c.in_off)) {
    drop(c, "no authentication hello (not a gradwire store client, or another version)");
    return false;
  }
  if (c.in.size() - c.in_off < need) return false;
  c.in_off += need;
  uint8_t out[auth::kServerHello];
  auto next = c.proof_due ? c.auth->on_proof(in, out) : c.auth->on_hello(in, out);
  const size_t n = c.proof_due ? auth::kVerdict : auth::kServerHello;
  if (next == auth::Server::Next::kRefuse) {
    // Say why before closing: a few bytes on a fresh socket, sent whole or not at all.
    send_last(c, out, n);
    drop(c, c.auth->why());
    return false;
  }
  c.proof_due = next == auth::Server::Next::kProof;
  if (!c.proof_due) c.auth.reset();
  reply(c, std::string(reinterpret_cast<const char*>(out), n));
  return !c.auth;
}

void StoreCore::handle_frames(Client& c) {
  while (!c.closed && c.auth && c.out_off == c.out.size())
    if (!authenticate(c)) break;
  while (!c.closed && !c.auth && !c.waiting && c.out_off == c.out.size()) {
    std::string_view in(c.in.data() + c.in_off, c.in.size() - c.in_off);
    if (in.size() < wire::kHeader) break;
    auto magic = wire::get_le(in.data(), 4);
    auto len = wire::get_le(in.data() + 4, 4);
    if (magic != wire::kMagic) return drop(c, "bad magic (not a gradwire store client?)");
    if (len > wire::kMaxFrame) {
      return drop(c, "frame of " + std::to_string(len) + " bytes exceeds the limit of " +
                         std::to_string(wire::kMaxFrame));
    }
    if (in.size() < wire::kHeader + len) break;
    if (!handle(c, in.substr(wire::kHeader, len))) return drop(c, "malformed request");
    c.in_off += wire::kHeader + len;
  }
  if (c.in_off == c.in.size()) {
    c.in.clear();
    c.in_off = 0;
  } else if (c.in_off > (1u << 20)) {
    c.in.erase(0, c.in_off);
    c.in_off = 0;
  }
}

bool StoreCore::handle(Client& c, std::string_view payload) {
  wire::Reader r(payload);
  auto op = static_cast<wire::Op>(r.u8());
  auto read_keys = [&](uint32_t n) {
    c.keys.clear();
    for (uint32_t i = 0; i < n && r.ok(); ++i) c.keys.emplace_back(r.str());
  };
  switch (op) {
    case wire::Op::kSet: {
      auto key = r.str();
      auto value = r.str();
      if (!r.ok() || !r.at_end()) return false;
      data_.insert_or_assign(std::string(key), std::string(value));
      reply(c, wire::Writer().u8(kOkReply).finish());
      wake_waiters();
      return true;
    }
    case wire::Op::kGet: {
      c.keys.assign(1, std::string(r.str()));
      int64_t timeout_ms = r.i64();
      if (!r.ok() || !r.at_end()) return false;
      park(c, op, timeout_ms);
      return true;
    }
    case wire::Op::kAdd:
      return handle_add(c, r);
    case wire::Op::kWait: {
      int64_t timeout_ms = r.i64();
      read_keys(r.u32());
      if (!r.ok() || !r.at_end()) return false;
      park(c, op, timeout_ms);
      return true;
    }
    case wire::Op::kCheck: {
      read_keys(r.u32());
      if (!r.ok() || !r.at_end()) return false;
      c.next = 0;
      bool all = satisfied(c);
      c.keys.clear();
      reply(c, wire::Writer().u8(kOkReply).u8(all ? 1 : 0).finish());
      return true;
    }
    case wire::Op::kHello: {
      uint32_t rank = r.u32();
      if (!r.ok() || !r.at_end() || rank > wire::kMaxRank || c.rank >= 0) return false;
      c.rank = static_cast<int>(rank);
      reply(c, wire::Writer().u8(kOkReply).finish());
      return true;
    }
    case wire::Op::kBye:
      if (!r.at_end()) return false;
      c.bye = true;
      return true;
  }
  return false;
}

bool StoreCore::handle_add(Client& c, wire::Reader& r) {
  auto key = r.str();
  int64_t delta = r.i64();
  if (!r.ok() || !r.at_end()) return false;
  int64_t old = 0;
  Status bad;
  if (auto it = data_.find(key); it != data_.end()) {
    auto parsed = store::parse_counter("tcp store " + where_, key, it->second);
    if (parsed.ok())
      old = *parsed;
    else
      bad = parsed.status();
  }
  Result<int64_t> v =
      bad.ok() ? store::add_checked("tcp store " + where_, key, old, delta) : Result<int64_t>(bad);
  if (!v.ok()) {
    reply(c, wire::Writer().u8(kErrorReply).str(v.status().message()).finish());
    return true;
  }
  data_.insert_or_assign(std::string(key), std::to_string(*v));
  reply(c, wire::Writer().u8(kOkReply).i64(*v).finish());
  wake_waiters();
  return true;
}

void StoreCore::park(Client& c, wire::Op op, int64_t timeout_ms) {
  c.waiting = true;
  c.wait_op = op;
  c.next = 0;
  c.deadline = Clock::now() + Millis(std::clamp<int64_t>(timeout_ms, 0, kMaxWaitMs));
  if (satisfied(c))
    finish_wait(c, End::kDone);
  else if (left_rank_ >= 0)
    finish_wait(c, End::kLeft);
}

bool StoreCore::satisfied(Client& c) {
  while (c.next < c.keys.size() && data_.contains(c.keys[c.next])) ++c.next;
  return c.next == c.keys.size();
}

void StoreCore::finish_wait(Client& c, End end) {
  c.waiting = false;
  wire::Writer w;
  if (end == End::kDone) {
    w.u8(kOkReply);
    if (c.wait_op == wire::Op::kGet) w.str(data_.find(c.keys[0])->second);
  } else {
    if (end == End::kLeft)
      w.u8(kLeftReply).u32(static_cast<uint32_t>(left_rank_));
    else
      w.u8(kTimeoutReply);
    std::vector<const std::string*> missing;
    for (size_t i = c.next; i < c.keys.size(); ++i)
      if (!data_.contains(c.keys[i])) missing.push_back(&c.keys[i]);
    w.u32(static_cast<uint32_t>(missing.size()));
    for (auto* k : missing) w.str(*k);
  }
  c.keys.clear();
  reply(c, w.finish());
}

void StoreCore::wake_waiters() {
  for (auto& c : clients_) {
    if (c->waiting && !c->closed && satisfied(*c)) finish_wait(*c, End::kDone);
  }
}

void StoreCore::rank_left(int rank, const std::string& why) {
  lg_->warn(
      "tcp store server on {}: rank {} closed its store session without a goodbye{}{}; "
      "{}",
      where_, rank, why.empty() ? " (killed or crashed?)" : ": ", why,
      left_rank_ < 0 ? "failing the store waits of the other ranks" : "already failing");
  if (left_rank_ >= 0) return;
  left_rank_ = rank;
  for (auto& c : clients_) {
    if (c->waiting && !c->closed) finish_wait(*c, satisfied(*c) ? End::kDone : End::kLeft);
  }
}

void StoreCore::reply(Client& c, std::string frame) {
  if (c.out_off == c.out.size()) {
    c.out = std::move(frame);
    c.out_off = 0;
  } else {
    c.out += frame;
  }
  flush(c);
}

void StoreCore::drop(Client& c, const std::string& why) {
  if (c.closed) return;
  if (!why.empty()) {
    lg_->warn("tcp store server on {}: closing client {}: {}", where_, c.peer, why);
  }
  c.closed = true;
  c.waiting = false;
  c.fd.reset();
  if (c.rank >= 0 && !c.bye) rank_left(c.rank, why);
}

}  // namespace gw::store
