/// @file perf_launch.h
/// How a gw-perf process finds its peer: as server or client of a TCP store (two hosts), from
/// launcher variables (GW_RANK..., torchrun, Open MPI, Slurm), or as one of two processes
/// forked on this host (--ranks 2).
#pragma once

#include "perf_options.h"

namespace gw::perf {

/// Connect the 2-rank Group this process belongs to and run its role.
/// @return the process exit code (errors are printed on stderr).
int run_process(const Options& opt);

/// --ranks 2: fork rank 0 and rank 1 over 127.0.0.1 and wait for both. If one fails, the
/// other gets --timeout (plus a grace period) to notice and is then killed.
/// @return 0 if both succeeded, else the first failing rank's exit code (1 if killed).
int run_forked(const Options& opt);

}  // namespace gw::perf
