// Transfer plans and process helpers of the DPDK tests.
#include "dpdk_test_util.h"

#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "conformance.h"

namespace gw::dpdktest {
namespace {

constexpr size_t kGuard = 32;
constexpr uint8_t kGuardByte = 0x5A;

struct Msg {
  bool send = false;
  size_t len = 0;
  uint64_t tag = 0;
  std::vector<uint8_t> buf;
  bool done = false;
};

// Posts what the endpoint takes, from index `next` on; returns the new index.
Result<size_t> post_from(Endpoint& ep, std::vector<Msg>& msgs, size_t next, bool sends) {
  while (next < msgs.size()) {
    Msg& m = msgs[next];
    Result<size_t> took =
        sends ? ep.post_send(std::span<const SendRequest>(
                    std::vector<SendRequest>{{m.buf.data(), m.len, m.tag, next, nullptr}}))
              : ep.post_recv(std::span<const RecvRequest>(
                    std::vector<RecvRequest>{{m.buf.data(), m.len, m.tag, next, nullptr}}));
    if (!took.ok()) return took.status();
    if (*took == 0) break;
    ++next;
  }
  return next;
}

Status run_msgs(Group& g, int peer, std::vector<Msg>& sends, std::vector<Msg>& recvs,
                Nanos timeout) {
  Endpoint& ep = g.endpoint(peer);
  size_t ns = 0, nr = 0, left = sends.size() + recvs.size();
  Deadline dl(timeout);
  Completion c[64];
  while (left > 0) {
    GW_ASSIGN_OR_RETURN(nr, post_from(ep, recvs, nr, false));
    GW_ASSIGN_OR_RETURN(ns, post_from(ep, sends, ns, true));
    if (dl.expired()) {
      return Status(Code::kTimeout, std::to_string(left) + " requests still pending (posted " +
                                        std::to_string(ns) + " sends, " + std::to_string(nr) +
                                        " receives)");
    }
    auto got = g.transport().cq().wait(c, std::chrono::milliseconds(100));
    if (!got.ok()) {
      if (got.status().code() == Code::kTimeout) continue;
      return got.status();
    }
    for (size_t i = 0; i < *got; ++i) {
      if (c[i].op == Op::kEndpointError) return ep.status();
      if (c[i].code != Code::kOk) {
        return Status(c[i].code, std::string(c[i].op == Op::kSend ? "send" : "receive") + " #" +
                                     std::to_string(c[i].wr_id) +
                                     " failed: " + ep.status().to_string());
      }
      auto& list = c[i].op == Op::kSend ? sends : recvs;
      if (c[i].wr_id >= list.size() || list[c[i].wr_id].done)
        return Status(Code::kInternal,
                      "completion with unknown wr_id " + std::to_string(c[i].wr_id));
      Msg& m = list[c[i].wr_id];
      m.done = true;
      --left;
      if (c[i].op == Op::kRecv && (c[i].len != m.len || c[i].tag != m.tag)) {
        return Status(Code::kInternal, "receive #" + std::to_string(c[i].wr_id) + ": length " +
                                           std::to_string(c[i].len) + " tag " +
                                           std::to_string(c[i].tag) + ", expected " +
                                           std::to_string(m.len) + " / " + std::to_string(m.tag));
      }
    }
  }
  for (size_t i = 0; i < recvs.size(); ++i) {
    const Msg& m = recvs[i];
    uint64_t seed = conformance::msg_seed(peer, g.rank(), m.tag, i);
    std::string bad = conformance::check_pattern(m.buf.data(), m.len, seed);
    if (!bad.empty())
      return Status(Code::kInternal,
                    "receive #" + std::to_string(i) + " (" + std::to_string(m.len) + " B): " + bad);
    for (size_t k = m.len; k < m.buf.size(); ++k)
      if (m.buf[k] != kGuardByte)
        return Status(Code::kInternal,
                      "receive #" + std::to_string(i) + ": guard byte written past its buffer");
  }
  return Status();
}

}  // namespace

std::vector<size_t> default_sizes() {
  return {0, 1, 64, 1407, 1408, 1409, 4096, 65536, 1 << 20, (3 << 20) + 17};
}

std::vector<size_t> jumbo_sizes() {
  return {0,     1,     257,           32661,   32662,         32663,     32767,
          32768, 32769, (1 << 20) - 1, 1 << 20, (1 << 20) + 1, (8 << 20), (8 << 20) + 13};
}

Status run_plan(Group& g, int peer, const std::vector<size_t>& sizes, int reps, Nanos timeout) {
  std::vector<Msg> sends, recvs;
  for (int r = 0; r < reps; ++r) {
    for (size_t s : sizes) {
      uint64_t tag = s * 7 + static_cast<uint64_t>(r % 3);
      Msg m;
      m.send = true;
      m.len = s;
      m.tag = tag;
      m.buf.resize(s);
      conformance::fill_pattern(m.buf.data(), s,
                                conformance::msg_seed(g.rank(), peer, tag, sends.size()));
      sends.push_back(std::move(m));
      Msg q;
      q.len = s;
      q.tag = tag;
      q.buf.assign(s + kGuard, kGuardByte);
      recvs.push_back(std::move(q));
    }
  }
  return run_msgs(g, peer, sends, recvs, timeout);
}

Status finish(Group& g, int peer, Nanos timeout) {
  GW_RETURN_IF_ERROR(g.store().set("done/" + std::to_string(g.rank()), "1"));
  Deadline dl(timeout);
  Completion c[4];
  for (;;) {
    (void)g.transport().cq().poll(c);
    auto other = g.store().get("done/" + std::to_string(peer), std::chrono::milliseconds(5));
    if (other.ok()) return Status();
    if (dl.expired()) return other.status();
  }
}

Status stream_sends(Group& g, int peer, size_t len, int count, Nanos timeout) {
  std::vector<Msg> sends(static_cast<size_t>(count)), none;
  for (auto& m : sends) {
    m.send = true;
    m.len = len;
    m.buf.assign(len, 1);
  }
  return run_msgs(g, peer, sends, none, timeout);
}

std::string helper_path() {
  char self[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  std::string p = n > 0 ? std::string(self, static_cast<size_t>(n)) : "";
  return p.substr(0, p.rfind('/') + 1) + "gw_dpdk_peer";
}

pid_t spawn_helper(const std::vector<std::string>& args, const std::string& netns) {
  std::vector<std::string> all;
  if (!netns.empty()) all = {"/usr/sbin/ip", "netns", "exec", netns};
  all.push_back(helper_path());
  all.insert(all.end(), args.begin(), args.end());
  pid_t pid = ::fork();
  if (pid == 0) {
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

int wait_helper(pid_t pid) {
  int st = 0;
  if (::waitpid(pid, &st, 0) < 0) return -1000;
  return WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st);
}

int sh(const std::string& cmd) {
  int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

Veth::Veth(const std::string& tag, const std::string& id) {
  for (int i = 0; i < 2; ++i) {
    ns[i] = "gw" + tag + "N" + std::to_string(i) + id;
    iface[i] = "gw" + tag + std::to_string(i) + id;
  }
  if (::geteuid() != 0) {
    why_ = "needs root to create network namespaces";
    return;
  }
  if (sh("command -v ip >/dev/null") != 0) {
    why_ = "the ip tool (iproute2) is missing";
    return;
  }
  const std::string cmd = "ip netns add " + ns[0] + " && ip netns add " + ns[1] +
                          " && ip link add " + iface[0] + " type veth peer name " + iface[1] +
                          " && ip link set " + iface[0] + " netns " + ns[0] + " && ip link set " +
                          iface[1] + " netns " + ns[1] + " && ip -n " + ns[0] + " link set " +
                          iface[0] + " up && ip -n " + ns[1] + " link set " + iface[1] +
                          " up && ip -n " + ns[0] + " addr add 10.251.0.1/30 dev " + iface[0] +
                          " && ip -n " + ns[1] + " addr add 10.251.0.2/30 dev " + iface[1];
  if (sh(cmd + " 2>&1") != 0) why_ = "creating the veth pair between namespaces failed";
}

Veth::~Veth() {
  if (::geteuid() == 0)
    sh("ip netns del " + ns[0] + " 2>/dev/null; ip netns del " + ns[1] + " 2>/dev/null");
}

}  // namespace gw::dpdktest
