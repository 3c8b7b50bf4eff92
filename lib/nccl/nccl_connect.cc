// listen/connect/accept without blocking. Transport::connect needs the peer's Address on both
// sides, and the acceptor learns it only from the connector; the interface has no accept call
// and a passive connect() waits. So each listen comm opens a small non-blocking TCP side
// channel: its host:port, a listen key and the listener's gradwire Address go in the NCCL
// handle; the connector sends back (listen key, connection key, its Address). Both then put
// the comm on the one Endpoint ("link") between the two processes, made on first use by the
// side with the smaller Address (active) while the other polls a passive connect with an
// expired deadline (the transports park early arrivals by key): connect() and accept() return
// NULL until it is there. The connector's state lives behind a pointer inside the handle (NCCL
// calls connect() again with the same handle, as net_ib relies on).
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>

#include "nccl_plugin.h"

namespace gw::nccl {
namespace {

constexpr uint32_t kMagic = 0x4e315747;  // "GW1N"
constexpr size_t kAddrRoom = 88;

/// The NCCL handle (NCCL_NET_HANDLE_MAXSIZE bytes). `stage` is 0 as sent.
struct Handle {
  uint32_t magic;
  uint8_t family;
  uint8_t addr_len;
  uint16_t port;  // network order
  uint64_t listen_key;
  uint8_t ip[16];
  uint64_t stage;  // connector's ConnectState*, in the connector's copy only
  uint8_t addr[kAddrRoom];
};
static_assert(sizeof(Handle) == GW_NCCL_HANDLE_MAXSIZE);

/// What the connector sends on the side channel.
struct Hello {
  uint32_t magic;
  uint32_t addr_len;
  uint64_t listen_key;
  uint64_t conn_key;
  uint8_t addr[Address::kMaxSize];
};

/// Move-only socket owner. Not lib/bootstrap's store::Socket: that one is internal to
/// libgradwire and its symbols are not part of what the library promises to export.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }
  ~Fd() { reset(); }
  void reset() {
    if (fd_ >= 0) ::close(std::exchange(fd_, -1));
  }
  int get() const { return fd_; }

 private:
  int fd_ = -1;
};

struct ListenComm {
  Device* dev = nullptr;
  Fd lfd;
  uint64_t key = 0;
  Fd conn;  // the side channel of the connector being accepted
  Hello hello{};
  size_t got = 0;
  std::string peer;
  Clock::time_point since;
};

struct ConnectState {
  Fd fd;
  bool writable = false;
  Hello hello{};
  size_t sent = 0;
  Clock::time_point start = Clock::now();
  std::string peer;
};

uint64_t random_key() {
  static std::mutex mu;
  static std::mt19937_64 rng(std::random_device{}() ^ (uint64_t(::getpid()) << 32));
  std::lock_guard lk(mu);
  uint64_t k;
  do k = rng();
  while (k == 0);
  return k;
}

Nanos setup_timeout() {
  const char* e = std::getenv("GW_NCCL_CONNECT_TIMEOUT_MS");
  long ms = e ? std::atol(e) : 0;
  return Millis(ms > 0 ? ms : 60'000);
}

/// The side channel's address: GW_NCCL_OOB_IFACE, else the transport's kernel interface,
/// else the first non-loopback interface that is up, else loopback. IPv4.
in_addr oob_ip(const Device& d) {
  const char* e = std::getenv("GW_NCCL_OOB_IFACE");
  std::string want = e && *e ? e : d.t->properties().device;
  in_addr lo{htonl(INADDR_LOOPBACK)}, first = lo, named{0};
  ifaddrs* ifs = nullptr;
  if (::getifaddrs(&ifs) != 0) return lo;
  for (ifaddrs* i = ifs; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP)) continue;
    in_addr a = reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr;
    if (want == i->ifa_name && named.s_addr == 0) named = a;
    if (!(i->ifa_flags & IFF_LOOPBACK) && first.s_addr == lo.s_addr) first = a;
  }
  ::freeifaddrs(ifs);
  return named.s_addr ? named : first;
}

std::string ip_port(const void* ip, uint16_t port_net) {
  char buf[INET_ADDRSTRLEN] = "?";
  inet_ntop(AF_INET, ip, buf, sizeof buf);
  return std::string(buf) + ":" + std::to_string(ntohs(port_net));
}

Status sys(const std::string& what) { return Status(Code::kSystemError, what, errno); }

/// The key both sides compute alike for their link: FNV-1a of the two Addresses, smaller first.
uint64_t link_key(std::string_view a, std::string_view b) {
  if (b < a) std::swap(a, b);
  uint64_t h = 1469598103934665603ull;
  for (std::string_view part : {a, b}) {
    for (char ch : part) h = (h ^ static_cast<uint8_t>(ch)) * 1099511628211ull;
  }
  return h;
}

/// The Link to `peer`, made once per peer process: the side with the smaller Address dials,
/// whichever direction the comm goes, so both agree without a round trip. Caller holds d->mu.
/// @return Timeout while the peer has not dialled yet (call again); the link's sticky error.
Status get_link(Device* d, const Address& peer, const std::string& who, Nanos left,
                std::shared_ptr<Link>* out) {
  std::string key(peer.bytes());
  auto it = d->links.find(key);
  if (it != d->links.end()) {
    Status s = it->second->ep->status();
    if (!s.ok()) return s.with_context("link to " + who);
    *out = it->second;
    return Status();
  }
  std::string_view me = d->t->address().bytes();
  if (me == key) {
    return Status(Code::kNotSupported,
                  "a comm from a transport to itself (one process): NCCL does not use the net "
                  "plugin for that");
  }
  const bool active = me < std::string_view(key);
  ConnectParams p{peer, link_key(me, key), active, 0, who};
  if (!active) d->progress();  // lets the transport take the peer's dial/SYN
  // Active connects wait only for the peer's transport to answer the authentication (tcp,
  // rdma: on the peer's next plugin call that makes progress; dpdk sends its SYN and finishes
  // the handshake in the background within the deadline); passive ones poll. The cap bounds
  // a tcp dial to a peer whose listener is gone (refused, retried).
  Nanos bound = std::clamp(left, Nanos(1'000'000'000), Nanos(10'000'000'000));
  auto ep = d->t->connect(p, active ? Deadline(bound) : Deadline(Nanos(0)));
  if (!ep.ok()) return ep.status();
  auto link = std::make_shared<Link>();
  link->ep = std::move(*ep);
  d->links.emplace(key, link);
  d->holding.reserve(d->links.size());  // post_held's list never allocates on the data path
  *out = std::move(link);
  return Status();
}

/// A comm over the link to `peer`. The comm id comes from the connector's key, so both ends
/// tag alike; never 0xffffffff, so no tag is kAnyTag.
Status make_comm(Device* d, const Address& peer, const std::string& who, uint64_t conn_key,
                 Nanos left, bool send, Comm** out) {
  std::shared_ptr<Link> link;
  GW_RETURN_IF_ERROR(get_link(d, peer, who, left, &link));
  auto c = std::make_unique<Comm>();
  c->dev = d;
  c->link = std::move(link);
  c->tag_hi = ((conn_key >> 32) & 0x7fffffffu) << 32;
  c->send = send;
  c->peer = who;
  for (auto& r : c->reqs) r.comm = c.get();
  *out = c.release();
  return Status();
}

Status do_listen(Device* d, Handle* h, ListenComm** out) {
  auto l = std::make_unique<ListenComm>();
  l->dev = d;
  l->key = random_key();
  l->lfd = Fd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (l->lfd.get() < 0) return sys("side channel socket()");
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr = oob_ip(*d);
  socklen_t len = sizeof sa;
  if (::bind(l->lfd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 ||
      ::listen(l->lfd.get(), 64) != 0 ||
      ::getsockname(l->lfd.get(), reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
    return sys("side channel bind/listen on " + ip_port(&sa.sin_addr, 0));
  }
  std::string_view a;
  {
    std::lock_guard lk(d->mu);
    a = d->t->address().bytes();
  }
  if (a.size() > kAddrRoom) {
    return Status(Code::kNotSupported, "transport address of " + std::to_string(a.size()) +
                                           " bytes does not fit the NCCL handle");
  }
  std::memset(h, 0, sizeof *h);
  h->magic = kMagic;
  h->family = AF_INET;
  h->addr_len = static_cast<uint8_t>(a.size());
  h->port = sa.sin_port;
  h->listen_key = l->key;
  std::memcpy(h->ip, &sa.sin_addr, 4);
  std::memcpy(h->addr, a.data(), a.size());
  *out = l.release();
  return Status();
}

/// One step of the connector. Sets *out once the endpoint exists.
// connect_step's first call: checks the handle, starts the side channel's connect and
// prepares the hello. @return the state (the caller owns it), InvalidArgument, SystemError.
Result<ConnectState*> start_connect(Device* d, const Handle* h) {
  if (h->magic != kMagic || h->family != AF_INET || h->addr_len > kAddrRoom)
    return Status(Code::kInvalidArgument, "handle was not made by this plugin's listen()");
  auto fresh = std::make_unique<ConnectState>();
  fresh->peer = "listener at " + ip_port(h->ip, h->port);
  fresh->fd = Fd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (fresh->fd.get() < 0) return sys("side channel socket()");
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = h->port;
  std::memcpy(&sa.sin_addr, h->ip, 4);
  if (::connect(fresh->fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 &&
      errno != EINPROGRESS) {
    return sys("side channel connect to " + fresh->peer);
  }
  std::string_view a;
  {
    std::lock_guard lk(d->mu);
    a = d->t->address().bytes();
  }
  fresh->hello.magic = kMagic;
  fresh->hello.addr_len = static_cast<uint32_t>(a.size());
  fresh->hello.listen_key = h->listen_key;
  fresh->hello.conn_key = random_key();
  std::memcpy(fresh->hello.addr, a.data(), a.size());
  return fresh.release();
}

Status connect_step(Device* d, Handle* h, Comm** out) {
  auto* st = reinterpret_cast<ConnectState*>(h->stage);
  if (!st) {
    GW_ASSIGN_OR_RETURN(st, start_connect(d, h));
    h->stage = reinterpret_cast<uint64_t>(st);
  }
  std::unique_ptr<ConnectState> owner(st);  // released again below while still in progress
  auto keep = [&] {
    owner.release();
    return Status();
  };
  if (Clock::now() - st->start > setup_timeout()) {
    h->stage = 0;
    return Status(Code::kTimeout, "connect to " + st->peer + " did not finish in " +
                                      std::to_string(setup_timeout().count() / 1'000'000) +
                                      " ms (GW_NCCL_CONNECT_TIMEOUT_MS)");
  }
  if (!st->writable) {
    pollfd pf{st->fd.get(), POLLOUT, 0};
    if (::poll(&pf, 1, 0) <= 0) return keep();
    int err = 0;
    socklen_t el = sizeof err;
    ::getsockopt(st->fd.get(), SOL_SOCKET, SO_ERROR, &err, &el);
    if (err) {
      h->stage = 0;
      errno = err;
      return sys("side channel connect to " + st->peer);
    }
    st->writable = true;
  }
  if (st->sent < sizeof st->hello) {
    ssize_t n = ::send(st->fd.get(), reinterpret_cast<char*>(&st->hello) + st->sent,
                       sizeof st->hello - st->sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno != EAGAIN && errno != EINTR) {
      h->stage = 0;
      return sys("side channel send to " + st->peer);
    }
    if (n > 0) st->sent += static_cast<size_t>(n);
    if (st->sent < sizeof st->hello) return keep();
  }
  auto remote = Address::from_bytes(
      {reinterpret_cast<const char*>(h->addr), static_cast<size_t>(h->addr_len)});
  Status s = remote.status();
  if (s.ok()) {
    std::lock_guard lk(d->mu);
    s = make_comm(d, *remote, st->peer, st->hello.conn_key,
                  setup_timeout() - (Clock::now() - st->start), true, out);
  }
  if (s.code() == Code::kTimeout) return keep();  // the peer dials the link: call again
  h->stage = 0;
  return s;
}

/// One step of the acceptor.
Status accept_step(ListenComm* l, Comm** out) {
  if (l->conn.get() < 0) {
    sockaddr_in from{};
    socklen_t len = sizeof from;
    int fd = ::accept4(l->lfd.get(), reinterpret_cast<sockaddr*>(&from), &len,
                       SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED) return Status();
      return sys("side channel accept");
    }
    l->conn = Fd(fd);
    l->got = 0;
    l->since = Clock::now();
    l->peer = "connector at " + ip_port(&from.sin_addr, from.sin_port);
  }
  if (l->got < sizeof l->hello) {
    ssize_t n = ::recv(l->conn.get(), reinterpret_cast<char*>(&l->hello) + l->got,
                       sizeof l->hello - l->got, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
      l->conn.reset();
      return Status(Code::kRemoteError, l->peer + " closed the side channel during set-up");
    }
    if (n > 0) l->got += static_cast<size_t>(n);
    if (l->got < sizeof l->hello) return Status();
    if (l->hello.magic != kMagic || l->hello.listen_key != l->key ||
        l->hello.addr_len > Address::kMaxSize) {
      l->conn.reset();
      return Status(Code::kProtocolError, l->peer + " sent a hello for another listen handle");
    }
  }
  auto remote = Address::from_bytes(
      {reinterpret_cast<const char*>(l->hello.addr), static_cast<size_t>(l->hello.addr_len)});
  if (!remote.ok()) return remote.status();
  Device* d = l->dev;
  std::lock_guard lk(d->mu);
  Status s = make_comm(d, *remote, l->peer, l->hello.conn_key,
                       setup_timeout() - (Clock::now() - l->since), false, out);
  if (s.code() == Code::kTimeout) {
    if (Clock::now() - l->since < setup_timeout()) return Status();
    s = s.with_context("accept: no connection " +
                       std::to_string(setup_timeout().count() / 1'000'000) +
                       " ms after the side channel (GW_NCCL_CONNECT_TIMEOUT_MS)");
  }
  l->conn.reset();  // done with this connector; the listen comm may accept another
  return s;
}

}  // namespace

ncclResult_t listen(int dev, void* handle, void** listen_comm) noexcept {
  Device* d = device(dev);
  if (!d || !handle || !listen_comm)
    return fail(Status(Code::kInvalidArgument, "listen: bad args"));
  try {
    ListenComm* l = nullptr;
    Status s = do_listen(d, static_cast<Handle*>(handle), &l);
    if (!s.ok()) return fail(s.with_context("listen on device " + std::to_string(dev)));
    *listen_comm = l;
    return ncclSuccess;
  } catch (const std::exception& e) {
    return fail(Status(Code::kInternal, std::string("listen: ") + e.what()));
  }
}

ncclResult_t connect(int dev, void* handle, void** send_comm) noexcept {
  Device* d = device(dev);
  if (!d || !handle || !send_comm) return fail(Status(Code::kInvalidArgument, "connect: bad args"));
  *send_comm = nullptr;
  try {
    Comm* c = nullptr;
    Status s = connect_step(d, static_cast<Handle*>(handle), &c);
    if (!s.ok()) return fail(s.with_context("connect on device " + std::to_string(dev)));
    *send_comm = c;
    return ncclSuccess;
  } catch (const std::exception& e) {
    return fail(Status(Code::kInternal, std::string("connect: ") + e.what()));
  }
}

ncclResult_t accept(void* listen_comm, void** recv_comm) noexcept {
  if (!listen_comm || !recv_comm) return fail(Status(Code::kInvalidArgument, "accept: bad args"));
  *recv_comm = nullptr;
  try {
    Comm* c = nullptr;
    Status s = accept_step(static_cast<ListenComm*>(listen_comm), &c);
    if (!s.ok()) return fail(s.with_context("accept"));
    *recv_comm = c;
    return ncclSuccess;
  } catch (const std::exception& e) {
    return fail(Status(Code::kInternal, std::string("accept: ") + e.what()));
  }
}

ncclResult_t close_listen(void* listen_comm) noexcept {
  delete static_cast<ListenComm*>(listen_comm);
  return ncclSuccess;
}

ncclResult_t close_comm(void* comm) noexcept {
  auto* c = static_cast<Comm*>(comm);
  if (!c) return ncclSuccess;
  Device* d = c->dev;
  std::lock_guard lk(d->mu);
  retire(c);
  return ncclSuccess;
}

}  // namespace gw::nccl
