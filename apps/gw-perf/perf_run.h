/// @file perf_run.h
/// The two roles over a connected 2-rank Group: the client (rank 1) plans every phase, runs
/// the timed loops and prints; the server (rank 0) follows the client's plans.
#pragma once

#include "gw_group.h"
#include "perf_options.h"

namespace gw::perf {

/// @return process exit code: 0, 1 on a transport/protocol error (printed), 3 on --check
///         errors.
int run_client(Group& group, const Options& opt);
int run_server(Group& group, const Options& opt);

}  // namespace gw::perf
