// Group::create: exchange addresses through the store, then connect every pair.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <vector>

#include "gw_group.h"
#include "log.h"
#include "store_util.h"

namespace gw {
namespace {

constexpr int kMaxSize = 1 << 16;  // lo * size + hi must fit in the key's low 32 bits

// Both ends of a pair must compute the same key, and two groups (prefixes) must not collide:
// the pair's index in the low 32 bits, a hash of the prefix in the high 32.
uint64_t pair_key(const std::string& prefix, int a, int b, int size) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : prefix) h = (h ^ c) * 0x100000001b3ULL;
  auto lo = static_cast<uint64_t>(std::min(a, b)), hi = static_cast<uint64_t>(std::max(a, b));
  return (h << 32) ^ (lo * static_cast<uint64_t>(size) + hi);
}

constexpr Millis kGiveUpEvery{50};

// Another rank's "<prefix>/failed" notice, "<culprit rank>\n<its error>", as this rank's error.
Status failure_notice(const std::string& where, const std::string& value) {
  auto nl = value.find('\n');
  int culprit = nl == std::string::npos ? -1 : std::atoi(value.substr(0, nl).c_str());
  std::string text = nl == std::string::npos ? value : value.substr(nl + 1);
  return Status(Code::kRemoteError,
                where + ": set-up failed on another rank, so this one " + "stops too: " + text)
      .with_rank(culprit);
}

// GW_HOST, else hostname + network namespace: namespaces of one machine share its hostname
// but not its links, so a namespace test bed's hosts stay apart.
std::string host_label(const std::string& given) {
  if (!given.empty()) return given;
  const char* env = std::getenv("GW_HOST");
  if (env && *env) return env;
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) name[0] = 0;
  std::error_code ec;
  auto ns = std::filesystem::read_symlink("/proc/self/ns/net", ec);
  return std::string(name) + "/" + (ec ? std::string("?") : ns.string());
}

// FNV-1a of rank 0's address: the job's name for tools.
uint64_t job_hash(std::string_view a) {
  uint64_t h = 1469598103934665603ull;
  for (char c : a) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return h;
}

// Waits for every rank's address key; a timeout names the ranks that never published.
Status wait_addresses(Store& st, const std::vector<std::string>& keys, const Deadline& deadline,
                      Nanos timeout, const std::string& where, const std::string& prefix) {
  Status waited = st.wait(keys, deadline.remaining());
  if (waited.code() == Code::kTimeout) {
    GW_ASSIGN_OR_RETURN(auto missing, store::missing_ranks(st, keys));
    if (missing.empty()) return Status();
    auto ms = std::chrono::duration_cast<Millis>(timeout).count();
    return Status(Code::kTimeout,
                  where + ": " + (missing.size() == 1 ? "rank " : "ranks ") +
                      store::join_ranks(missing) +
                      (missing.size() == 1 ? " never published its" : " never published their") +
                      " address to the store within " + std::to_string(ms) + " ms (prefix " +
                      prefix + "): check " + (missing.size() == 1 ? "it was" : "they were") +
                      " started, with the same world size and master address/port")
        .with_rank(missing.front());
  }
  if (!waited.ok()) return waited.with_context(where + ": waiting for the other ranks' addresses");
  return Status();
}

// Every other rank's address, each checked to be for this rank's driver.
Result<std::vector<Address>> read_addresses(Store& st, const std::vector<std::string>& keys,
                                            int rank, std::string_view driver,
                                            const Deadline& deadline, const std::string& where) {
  std::vector<Address> addrs(keys.size());
  for (size_t p = 0; p < keys.size(); ++p) {
    if (static_cast<int>(p) == rank) continue;
    std::string ctx = where + ": address of rank " + std::to_string(p);
    GW_ASSIGN_OR_RETURN(auto bytes, st.get(keys[p], deadline.remaining()));
    auto addr = Address::from_bytes(bytes);
    if (!addr.ok()) return addr.status().with_context(ctx);
    if (addr->driver() != driver) {
      return Status(Code::kInvalidArgument,
                    ctx + " is for driver '" + std::string(addr->driver()) +
                        "' but this rank uses '" + std::string(driver) +
                        "': every rank of a group must open the same transport");
    }
    addrs[p] = *addr;
  }
  return addrs;
}

// Numbers the hosts by first appearance in rank order (hosts[r]); returns their count.
Result<int> number_hosts(Store& st, const std::string& prefix, int size, const Deadline& deadline,
                         std::vector<int>& hosts) {
  std::map<std::string, int> host_ids;
  for (int p = 0; p < size; ++p) {
    GW_ASSIGN_OR_RETURN(auto h,
                        st.get(prefix + "/host/" + std::to_string(p), deadline.remaining()));
    auto it = host_ids.emplace(h, static_cast<int>(host_ids.size())).first;
    hosts[static_cast<size_t>(p)] = it->second;
  }
  return static_cast<int>(host_ids.size());
}

}  // namespace

Result<std::unique_ptr<Group>> Group::create(std::shared_ptr<Store> store,
                                             std::unique_ptr<Transport> transport, int rank,
                                             int size, Nanos timeout, const std::string& prefix,
                                             const std::string& host) {
  if (!store || !transport) {
    return Status(Code::kInvalidArgument, "group: store and transport must not be null");
  }
  if (size < 1 || size > kMaxSize || rank < 0 || rank >= size) {
    return Status(Code::kInvalidArgument,
                  "group: rank " + std::to_string(rank) + " of size " + std::to_string(size) +
                      " is invalid (need 0 <= rank < size <= " + std::to_string(kMaxSize) + ")");
  }
  auto lg = log::get("gw.group");
  Deadline deadline(store::bounded(timeout));
  std::unique_ptr<Group> g(new Group());
  g->rank_ = rank;
  g->size_ = size;
  g->store_ = std::move(store);
  g->transport_ = std::move(transport);
  g->prefix_ = prefix;
  g->eps_.resize(static_cast<size_t>(size));
  g->hosts_.assign(static_cast<size_t>(size), 0);
  if (size == 1) {
    g->job_id_ = job_hash(g->transport_->address().bytes());
    return g;
  }

  std::string where = "group rank " + std::to_string(rank);
  std::vector<std::string> keys;
  for (int p = 0; p < size; ++p) keys.push_back(prefix + "/addr/" + std::to_string(p));
  Transport& tr = *g->transport_;
  // Set before the address: a rank whose address is there has published its host too.
  g->label_ = host_label(host);
  GW_RETURN_IF_ERROR(
      g->store_->set(prefix + "/host/" + std::to_string(rank), g->label_).with_context(where));
  GW_RETURN_IF_ERROR(
      g->store_->set(keys[static_cast<size_t>(rank)], tr.address().bytes()).with_context(where));

  GW_RETURN_IF_ERROR(wait_addresses(*g->store_, keys, deadline, timeout, where, prefix));
  GW_ASSIGN_OR_RETURN(
      auto addrs, read_addresses(*g->store_, keys, rank, tr.address().driver(), deadline, where));
  // The job's name for tools (health sockets): rank 0's address is unique while it runs.
  g->job_id_ = job_hash(rank == 0 ? tr.address().bytes() : addrs[0].bytes());
  GW_ASSIGN_OR_RETURN(g->num_hosts_, number_hosts(*g->store_, prefix, size, deadline, g->hosts_));
  GW_RETURN_IF_ERROR(g->connect_missing(addrs, deadline, where));
  lg->debug("{}: connected to {} peers over {}", where, size - 1, tr.address().driver());
  return g;
}

Status Group::connect_missing(const std::vector<Address>& addrs, Deadline deadline,
                              const std::string& where) {
  // An active connect waits for the peer's answer to its authentication (gw_auth.h), but
  // answers the peers that dial this rank meanwhile: dialling every higher rank first and
  // then accepting every lower one cannot deadlock. A rank whose connect fails tells the
  // others through "<prefix>/failed"; one that waits for a peer to dial it looks there every
  // kGiveUpEvery, so a rank killed or failed during set-up stops the others within about
  // that, not at the timeout. Only check() there: it never blocks on any store, whereas a
  // zero-timeout get means "wait forever" to c10d's stores (the torch backend's), and a timed
  // out c10d wait may leave its TCPStore connection out of step.
  const std::string failed_key = prefix_ + "/failed";
  Clock::time_point next_look{};
  auto give_up = [&]() -> Status {
    auto now = Clock::now();
    if (now < next_look) return Status();
    next_look = now + kGiveUpEvery;
    GW_ASSIGN_OR_RETURN(bool failed, store_->check({&failed_key, 1}));
    if (!failed) return Status();
    GW_ASSIGN_OR_RETURN(auto notice, store_->get(failed_key, deadline.remaining()));
    return failure_notice(where, notice);
  };
  auto connect = [&](int p) -> Status {
    ConnectParams params;
    params.remote = addrs[static_cast<size_t>(p)];
    params.key = pair_key(prefix_, rank_, p, size_);
    params.active = rank_ < p;
    params.peer_id = static_cast<uint32_t>(p);
    params.peer_name = "rank " + std::to_string(p);
    params.give_up = give_up;
    auto ep = transport_->connect(params, deadline);
    if (!ep.ok()) {
      Status st = ep.status().with_context(where + ": connect to rank " + std::to_string(p));
      if (st.rank() < 0) st = st.with_rank(p);
      // Best effort: the others learn who, or time out as before.
      (void)store_->set(failed_key, std::to_string(st.rank()) + "\n" + st.to_string());
      return st;
    }
    eps_[static_cast<size_t>(p)] = std::move(*ep);
    return Status();
  };
  for (int p = rank_ + 1; p < size_; ++p)
    if (!eps_[static_cast<size_t>(p)]) GW_RETURN_IF_ERROR(connect(p));
  for (int p = 0; p < rank_; ++p)
    if (!eps_[static_cast<size_t>(p)]) GW_RETURN_IF_ERROR(connect(p));
  return Status();
}

Result<std::unique_ptr<Group>> Group::shrink(std::span<const int> keep) {
  int me = -1;
  for (size_t i = 0; i < keep.size(); ++i) {
    if (keep[i] < 0 || keep[i] >= size_ || (i > 0 && keep[i] <= keep[i - 1])) {
      return Status(Code::kInvalidArgument, "group rank " + std::to_string(rank_) +
                                                ": shrink needs sorted ranks below " +
                                                std::to_string(size_));
    }
    if (keep[i] == rank_) me = static_cast<int>(i);
  }
  if (me < 0) {
    return Status(Code::kInvalidArgument,
                  "group rank " + std::to_string(rank_) + ": shrink without this rank");
  }
  std::unique_ptr<Group> g(new Group());
  g->rank_ = me;
  g->size_ = static_cast<int>(keep.size());
  g->job_id_ = job_id_;
  g->epoch_ = epoch_ + 1;
  // "<root>.s<epoch>": the epoch is unique along a group's line, so a long job's shrinks do
  // not nest suffixes (the prefix stays bounded).
  const size_t s = prefix_.rfind(".s");
  const bool ours = s != std::string::npos && s + 2 < prefix_.size() &&
                    prefix_.find_first_not_of("0123456789", s + 2) == std::string::npos;
  g->prefix_ = prefix_.substr(0, ours ? s : prefix_.size()) + ".s" + std::to_string(g->epoch_);
  g->store_ = store_;
  g->transport_ = transport_;
  g->label_ = label_;
  g->parents_.assign(keep.begin(), keep.end());
  g->eps_.resize(keep.size());
  std::map<int, int> host_ids;  // renumbered in the order of each host's lowest rank
  for (size_t i = 0; i < keep.size(); ++i) {
    const auto old = static_cast<size_t>(keep[i]);
    g->hosts_.push_back(
        host_ids.emplace(hosts_[old], static_cast<int>(host_ids.size())).first->second);
    if (static_cast<int>(i) == me) continue;
    g->eps_[i] = eps_[old];
    g->eps_[i]->rename(static_cast<uint32_t>(i), "rank " + std::to_string(i));
  }
  g->num_hosts_ = static_cast<int>(host_ids.size());
  return g;
}

// --- grow ---
// Keys under the grow's name: "info" (the members' rank 0: "<members> <added> <epoch> <job>"),
// "joined" (a counter: the new ranks' tickets), "addr/<r>" and "host/<r>" of every rank of
// the grown group, "failed" as in create().

Status Group::link(Deadline deadline) {
  const std::string where = "group rank " + std::to_string(rank_) + " (" + prefix_ + ")";
  const std::string me = std::to_string(rank_);
  GW_RETURN_IF_ERROR(store_->set(prefix_ + "/host/" + me, label_).with_context(where));
  GW_RETURN_IF_ERROR(
      store_->set(prefix_ + "/addr/" + me, transport_->address().bytes()).with_context(where));
  std::vector<std::string> keys;
  for (int p = 0; p < size_; ++p) keys.push_back(prefix_ + "/addr/" + std::to_string(p));
  // Polled: a TCP store fails every wait of the job once one of its ranks was killed.
  GW_ASSIGN_OR_RETURN(bool all,
                      store::poll_until([&] { return store_->check(keys); }, deadline.remaining()));
  if (!all) {
    GW_ASSIGN_OR_RETURN(auto missing, store::missing_ranks(*store_, keys));
    return Status(Code::kTimeout, where + ": rank(s) " + store::join_ranks(missing) +
                                      " did not join in time (did every member call grow, "
                                      "and every new rank join, with this name?)")
        .with_rank(missing.empty() ? -1 : missing.front());
  }
  std::vector<Address> addrs(static_cast<size_t>(size_));
  std::map<std::string, int> host_ids;
  hosts_.assign(static_cast<size_t>(size_), 0);
  for (int p = 0; p < size_; ++p) {
    GW_ASSIGN_OR_RETURN(auto h, store_->get(prefix_ + "/host/" + std::to_string(p), Millis(1000)));
    hosts_[static_cast<size_t>(p)] =
        host_ids.emplace(h, static_cast<int>(host_ids.size())).first->second;
    if (p == rank_ || eps_[static_cast<size_t>(p)]) continue;
    GW_ASSIGN_OR_RETURN(auto bytes, store_->get(keys[static_cast<size_t>(p)], Millis(1000)));
    auto addr = Address::from_bytes(bytes);
    if (!addr.ok())
      return addr.status().with_context(where + ": address of rank " + std::to_string(p));
    if (addr->driver() != transport_->address().driver()) {
      return Status(Code::kInvalidArgument, where + ": rank " + std::to_string(p) +
                                                " uses driver '" + std::string(addr->driver()) +
                                                "', this rank '" +
                                                std::string(transport_->address().driver()) + "'");
    }
    addrs[static_cast<size_t>(p)] = *addr;
  }
  num_hosts_ = static_cast<int>(host_ids.size());
  return connect_missing(addrs, deadline, where);
}

Result<std::unique_ptr<Group>> Group::grow(int added, const std::string& name, Nanos timeout) {
  if (added < 1 || size_ + added > kMaxSize || name.empty()) {
    return Status(Code::kInvalidArgument, "group rank " + std::to_string(rank_) +
                                              ": grow needs added >= 1, at most " +
                                              std::to_string(kMaxSize) + " ranks, and a name");
  }
  Deadline deadline(store::bounded(timeout));
  std::unique_ptr<Group> g(new Group());
  g->rank_ = rank_;
  g->size_ = size_ + added;
  g->job_id_ = job_id_;
  g->epoch_ = epoch_ + 1;
  g->prefix_ = name;
  g->store_ = store_;
  g->transport_ = transport_;
  g->label_ = label_;
  g->eps_.resize(static_cast<size_t>(g->size_));
  for (int p = 0; p < g->size_; ++p) g->parents_.push_back(p < size_ ? p : -1);
  for (int p = 0; p < size_; ++p) g->eps_[static_cast<size_t>(p)] = eps_[static_cast<size_t>(p)];
  if (rank_ == 0) {
    GW_RETURN_IF_ERROR(
        store_->set(name + "/info", std::to_string(size_) + " " + std::to_string(added) + " " +
                                        std::to_string(g->epoch_) + " " + std::to_string(job_id_)));
  }
  GW_RETURN_IF_ERROR(g->link(deadline));
  return g;
}

Result<std::unique_ptr<Group>> Group::join(std::shared_ptr<Store> store,
                                           std::unique_ptr<Transport> transport,
                                           const std::string& name, Nanos timeout,
                                           const std::string& host) {
  if (!store || !transport || name.empty())
    return Status(Code::kInvalidArgument, "group join: store, transport and name are needed");
  Deadline deadline(store::bounded(timeout));
  const std::string info_key = name + "/info";
  GW_ASSIGN_OR_RETURN(bool there, store::poll_until(
                                      [&] {
                                        return store->check({&info_key, 1});
                                      },
                                      deadline.remaining()));
  if (!there) {
    return Status(Code::kTimeout,
                  "group join (" + name + "): no group called grow with this name in time");
  }
  GW_ASSIGN_OR_RETURN(auto info, store->get(info_key, Millis(1000)));
  long long members = 0, added = 0, epoch = 0;
  unsigned long long job = 0;
  if (std::sscanf(info.c_str(), "%lld %lld %lld %llu", &members, &added, &epoch, &job) != 4 ||
      members < 1 || added < 1 || members + added > kMaxSize) {
    return Status(Code::kProtocolError, "group join (" + name + "): bad info '" + info + "'");
  }
  GW_ASSIGN_OR_RETURN(int64_t ticket, store->add(name + "/joined", 1));
  if (ticket > added) {
    return Status(Code::kInvalidArgument, "group join (" + name + "): " + std::to_string(added) +
                                              " rank(s) were added, and this is joiner " +
                                              std::to_string(ticket));
  }
  std::unique_ptr<Group> g(new Group());
  g->rank_ = static_cast<int>(members + ticket - 1);
  g->size_ = static_cast<int>(members + added);
  g->job_id_ = job;
  g->epoch_ = static_cast<uint32_t>(epoch);
  g->prefix_ = name;
  g->store_ = std::move(store);
  g->transport_ = std::move(transport);
  g->label_ = host_label(host);
  g->eps_.resize(static_cast<size_t>(g->size_));
  for (int p = 0; p < g->size_; ++p) g->parents_.push_back(-1);
  GW_RETURN_IF_ERROR(g->link(deadline));
  return g;
}

}  // namespace gw
