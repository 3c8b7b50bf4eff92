// Rank discovery from launcher environment variables, and the job's TCP store.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <fstream>
#include <random>

#include "gw_store.h"
#include "log.h"

namespace gw {
namespace {

struct Vars {
  const char* source;
  const char* rank;
  const char* size;
};

// In order of precedence. Open MPI and Slurm do not say where rank 0 is: the master address
// and port come from GW_MASTER_* or MASTER_* then.
constexpr Vars kLaunchers[] = {
    {"gradwire", "GW_RANK", "GW_WORLD_SIZE"},
    {"torchrun", "RANK", "WORLD_SIZE"},
    {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
    {"Slurm", "SLURM_PROCID", "SLURM_NTASKS"},
};

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

Result<int64_t> parse_int(const char* name, const char* source, int64_t lo, int64_t hi) {
  const char* text = env(name);
  if (!text) {
    return Status(Code::kInvalidArgument, std::string(name) + " is not set, but the " + source +
                                              " launcher variables are; set it");
  }
  std::string_view s(text);
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < lo || v > hi) {
    return Status(Code::kInvalidArgument, std::string(name) + "='" + text +
                                              "' is not an integer in [" + std::to_string(lo) +
                                              ", " + std::to_string(hi) + "]");
  }
  return v;
}

// Binds `port` (0: any) on every interface as the store server will (SO_REUSEADDR, IPv6 dual
// stack, else IPv4). @return the port bound, or 0 with errno set.
uint16_t try_bind(uint16_t port) {
  const int one = 1, zero = 0;
  for (int family : {AF_INET6, AF_INET}) {
    int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;  // no IPv6 here: try IPv4
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_storage ss{};
    socklen_t len;
    if (family == AF_INET6) {
      ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
      auto& a = reinterpret_cast<sockaddr_in6&>(ss);
      a.sin6_family = AF_INET6;
      a.sin6_addr = in6addr_any;
      a.sin6_port = htons(port);
      len = sizeof a;
    } else {
      auto& a = reinterpret_cast<sockaddr_in&>(ss);
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_ANY);
      a.sin_port = htons(port);
      len = sizeof a;
    }
    bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&ss), len) == 0 &&
              ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) == 0;
    int err = errno;
    ::close(fd);
    if (!ok && family == AF_INET6 && err != EADDRINUSE) continue;  // IPv6 off: IPv4 then
    if (!ok) {
      errno = err;
      return 0;
    }
    return ntohs(family == AF_INET6 ? reinterpret_cast<sockaddr_in6&>(ss).sin6_port
                                    : reinterpret_cast<sockaddr_in&>(ss).sin_port);
  }
  return 0;
}

}  // namespace

Result<uint16_t> pick_store_port() {
  int low = 32768, high = 60999;
  if (std::ifstream f("/proc/sys/net/ipv4/ip_local_port_range"); !(f >> low >> high)) low = 32768;
  // 12,000 ports below the range (never below 1024): 64 tries fail only on a crowded host.
  const int lo = std::max(1024, low - 12000), n = low - lo;
  if (n > 0) {
    std::mt19937 rng(std::random_device{}() ^ static_cast<unsigned>(::getpid()));
    for (int i = 0; i < 64; ++i) {
      const auto p = static_cast<uint16_t>(lo + static_cast<int>(rng() % static_cast<unsigned>(n)));
      if (try_bind(p) == p) return p;
    }
  }
  if (uint16_t p = try_bind(0)) return p;
  return Status(Code::kSystemError, "no free TCP port for the store on this host", errno);
}

Result<LaunchInfo> discover_launch() {
  const Vars* found = nullptr;
  for (auto& l : kLaunchers) {
    if (env(l.rank) || env(l.size)) {
      found = &l;
      break;
    }
  }
  if (!found) {
    return Status(Code::kUnavailable,
                  "no launcher variables found: set GW_RANK, GW_WORLD_SIZE, GW_MASTER_ADDR and "
                  "GW_MASTER_PORT, or start under torchrun, mpirun (Open MPI) or srun (Slurm)");
  }
  LaunchInfo info;
  info.source = found->source;
  constexpr int64_t kMaxRanks = 1 << 24;
  GW_ASSIGN_OR_RETURN(int64_t size, parse_int(found->size, found->source, 1, kMaxRanks));
  GW_ASSIGN_OR_RETURN(int64_t rank, parse_int(found->rank, found->source, 0, kMaxRanks));
  if (rank >= size) {
    return Status(Code::kInvalidArgument, std::string(found->rank) + "=" + std::to_string(rank) +
                                              " must be less than " + found->size + "=" +
                                              std::to_string(size));
  }
  info.rank = static_cast<int>(rank);
  info.world_size = static_cast<int>(size);

  // gradwire's own variables win, then torchrun's names (also used with mpirun/srun).
  const char* addr_var = env("GW_MASTER_ADDR") ? "GW_MASTER_ADDR" : "MASTER_ADDR";
  const char* port_var = env("GW_MASTER_PORT") ? "GW_MASTER_PORT" : "MASTER_PORT";
  if (env(addr_var)) info.master_addr = env(addr_var);
  if (env(port_var)) {
    GW_ASSIGN_OR_RETURN(int64_t port, parse_int(port_var, info.source.c_str(), 1, 65535));
    info.master_port = static_cast<uint16_t>(port);
  }
  if (info.world_size > 1 && (info.master_addr.empty() || info.master_port == 0)) {
    return Status(Code::kInvalidArgument,
                  std::string(info.master_addr.empty() ? "GW_MASTER_ADDR (or MASTER_ADDR)"
                                                       : "GW_MASTER_PORT (or MASTER_PORT)") +
                      " is not set: with " + info.source + " and " + std::to_string(size) +
                      " ranks every rank must be told where rank 0 serves the store");
  }
  // A job of one needs no master; its store is served on a free local port.
  if (info.master_addr.empty()) info.master_addr = "127.0.0.1";
  return info;
}

namespace {

/// The job's store on rank 0: the client plus the server it talks to, which lives as long as
/// this store does. Thread-safety: as the client.
class ServingStore final : public Store {
 public:
  ServingStore(std::unique_ptr<TcpStoreServer> server, std::shared_ptr<Store> client)
      : server_(std::move(server)), client_(std::move(client)) {}
  Status set(std::string_view key, std::string_view value) override {
    return client_->set(key, value);
  }
  Result<std::string> get(std::string_view key, Nanos timeout) override {
    return client_->get(key, timeout);
  }
  Result<int64_t> add(std::string_view key, int64_t delta) override {
    return client_->add(key, delta);
  }
  Status wait(std::span<const std::string> keys, Nanos timeout) override {
    return client_->wait(keys, timeout);
  }
  Result<bool> check(std::span<const std::string> keys) override { return client_->check(keys); }

 private:
  std::unique_ptr<TcpStoreServer> server_;  // declared first: the client closes before it stops
  std::shared_ptr<Store> client_;
};

}  // namespace

Result<std::shared_ptr<Store>> store_for_launch(const LaunchInfo& info, Nanos timeout) {
  const StoreIdentity who{info.rank, 0};
  if (info.rank != 0) return connect_tcp_store(info.master_addr, info.master_port, timeout, who);
  // Every interface: the master address names this host as the other ranks see it.
  GW_ASSIGN_OR_RETURN(auto server, TcpStoreServer::start("", info.master_port));
  log::get("gw.store")
      ->info("rank 0 of {} ({}): tcp store serving on port {}", info.world_size, info.source,
             server->port());
  // A job of one may have no master port (port 0 = any); it connects to itself locally.
  std::string host = info.master_port == 0 ? "127.0.0.1" : info.master_addr;
  auto client = connect_tcp_store(host, server->port(), timeout, who);
  if (!client.ok()) {
    return client.status().with_context("rank 0 cannot reach its own store at master address " +
                                        host + " (does it name this host?)");
  }
  return std::shared_ptr<Store>(
      std::make_shared<ServingStore>(std::move(server), std::move(*client)));
}

}  // namespace gw
