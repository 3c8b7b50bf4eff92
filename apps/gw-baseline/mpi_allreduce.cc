// Open MPI baseline: MPI_Allreduce over the same sizes as gw-coll-perf, rank 0 prints.
//   mpirun -np 2 --mca btl tcp,self --mca btl_tcp_if_include lo gw-baseline-mpi -b 4K -e 64M
#include <mpi.h>

#include <vector>

#include "baseline_common.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const gwb::Options o = gwb::parse(
      argc, argv, "usage: mpirun -np N gw-baseline-mpi [-b B] [-e B] [-f F] [-n N] [-w N]\n");
  if (rank == 0) gwb::print_header("Open MPI MPI_Allreduce");
  std::vector<float> in(o.max_bytes / 4), out(o.max_bytes / 4);
  for (uint64_t bytes : gwb::sizes(o)) {
    const auto count = static_cast<int>(bytes / 4);
    gwb::fill(in, static_cast<size_t>(count), rank);
    for (int i = 0; i < o.warmup; ++i)
      MPI_Allreduce(in.data(), out.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    for (int i = 0; i < o.iters; ++i)
      MPI_Allreduce(in.data(), out.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    const double us = (MPI_Wtime() - t0) * 1e6 / o.iters;
    long long wrong = gwb::count_wrong(out, static_cast<size_t>(count), n), total = 0;
    MPI_Reduce(&wrong, &total, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) gwb::print_row(bytes, us, n, total, "mpi");
  }
  MPI_Finalize();
  return 0;
}
