/// @file dpdk_test_util.h
/// Shared by the DPDK test binaries and their peer helper: a transfer plan (messages of many
/// sizes both ways between two ranks, each checked byte by byte against the conformance
/// pattern, with guard bytes after every receive buffer) and process helpers.
/// Thread-safety: functions are reentrant; a plan runs on one rank's thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gw_group.h"
#include "gw_status.h"

namespace gw::dpdktest {

/// Message sizes around the segment boundaries of a 1500-byte MTU, and large ones.
std::vector<size_t> default_sizes();
/// Sizes around the segment boundaries of memif's jumbo frames (32 KiB of payload; 32662 at
/// MTU 32754), odd ones, 1 MiB and 8 MiB.
std::vector<size_t> jumbo_sizes();

/// Rank g.rank() sends every size `reps` times to `peer` and receives as many from it.
/// @return OK, or what went wrong (a failed request, a wrong length, the first wrong byte).
Status run_plan(Group& g, int peer, const std::vector<size_t>& sizes, int reps, Nanos timeout);

/// Marks this rank done in the store and waits (polling, to answer retransmissions) until
/// `peer` is done too. @return the store's Timeout.
Status finish(Group& g, int peer, Nanos timeout);

/// Sends `count` messages of `len` bytes to `peer` (no receives); for the peer-death test.
Status stream_sends(Group& g, int peer, size_t len, int count, Nanos timeout);

/// Path of the peer helper binary (next to the test binary).
std::string helper_path();
/// fork + exec of the helper with `args` (optionally under `ip netns exec ns`). @return pid.
pid_t spawn_helper(const std::vector<std::string>& args, const std::string& netns = "");
/// Waits for `pid`; @return its exit status, or -signal.
int wait_helper(pid_t pid);
/// Runs a shell command; @return its exit status.
int sh(const std::string& cmd);

/// Two network namespaces joined by a veth pair, addresses (10.251.0.1/30, .2) only inside
/// them; removed on destruction. Names: namespaces gw<tag>N<id>, interfaces gw<tag><i><id>
/// (i = 0, 1), so a spec can name rank r's interface with "{rank}". Needs root and `ip`.
class Veth {
 public:
  Veth(const std::string& tag, const std::string& id);
  ~Veth();
  Veth(const Veth&) = delete;
  Veth& operator=(const Veth&) = delete;
  /// Empty when the pair exists, else why not.
  const std::string& why() const { return why_; }
  std::string ns[2], iface[2];

 private:
  std::string why_;
};

}  // namespace gw::dpdktest
