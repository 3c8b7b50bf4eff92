/// @file ps_launch.h
/// How the PS apps start their ranks: from launcher variables (GW_RANK/GW_WORLD_SIZE/
/// GW_MASTER_ADDR/GW_MASTER_PORT, torchrun, Open MPI, Slurm), or `--ranks N` on this host, which
/// re-executes this binary N times with the GW_* variables set (rank 0 serves the TCP store),
/// or `--ranks N --threads`, which runs the N ranks as threads of this process over an
/// in-process store (for transports that connect only within a process: dpdk:ring=NAME).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "gw_group.h"

namespace gw::psapp {

/// A launched rank: its rank, the world size and the job's store.
struct Launched {
  int rank = 0;
  int size = 1;
  std::shared_ptr<Store> store;
};

/// Whether this process was started by a launcher (or by spawn_local).
bool launched();

/// Join the job described by the launcher variables. @return as discover_launch and
/// store_for_launch.
Result<Launched> join(Nanos timeout);

/// What main() does once its options are parsed: with `threads`, run_threads(ranks); else,
/// without launcher variables, spawn_local(ranks) (each child comes back here and joins);
/// else join() and run body. @return the exit code (2 for a missing --ranks).
int start(const char* app, int ranks, bool threads, char** argv, Nanos timeout,
          const std::function<int(const Launched&)>& body);

/// Run body(launched) for ranks 0..ranks-1 on as many threads, sharing an in-process store.
/// @return 0, or the first failing rank's code.
int run_threads(int ranks, const std::function<int(const Launched&)>& body);

/// Re-execute this binary as `ranks` local processes and wait for them. When one fails, the
/// others get `grace` to notice (they should see RemoteError) and are then killed.
/// @return the exit code: 0, or the first failing rank's.
int spawn_local(int ranks, char** argv, Nanos grace);

/// A fresh Group over `spec` for one phase of the job (a Group serves one PsServer/PsWorker
/// for its life), named by `prefix` in the store.
Result<std::unique_ptr<Group>> make_group(const Launched& l, const std::string& spec,
                                          const std::string& prefix, Nanos timeout);

/// After a phase, once this rank's Group of the phase is destroyed: wait until every rank's
/// is, so no transport of the phase is left when the next one's connect. (A polling
/// transport's dead transport would otherwise still be talking to a new one that took its
/// address: dpdk ring-bus slots are reused.) @return the store's Timeout.
Status end_phase(const Launched& l, const std::string& prefix, Nanos timeout);

/// Before exiting: say so in the store and, on rank 0 (which serves the store), wait until
/// every rank has, so no rank loses the store while it still needs it.
Status leave(const Launched& l, Nanos timeout);

/// Print "<app>: <status>" on stderr and return 1.
int fail(const char* app, const Status& st);

}  // namespace gw::psapp
