// Open MPI baseline: MPI_Allreduce (float32 sum) or MPI_Alltoall over the same sizes as
// gw-coll-perf, rank 0 prints in its columns. Alltoall sizes are the whole buffer of a rank, as
// gw-coll-perf --coll alltoall counts them: each pair exchanges size / N bytes.
//   mpirun -np 2 --mca btl tcp,self --mca btl_tcp_if_include lo gw-baseline-mpi -b 4K -e 64M
//   mpirun -np 4 ... gw-baseline-mpi --coll alltoall -b 4K -e 64M
#include <mpi.h>

#include <cstdio>
#include <vector>

#include "baseline_common.h"

namespace {

// One size: fill, run once and check element by element, warm up, time. @return rank's wrong.
long long one_size(const gwb::Options& o, uint64_t bytes, int rank, int n, std::vector<float>& in,
                   std::vector<float>& out, double* us) {
  const bool a2a = o.coll == "alltoall";
  const auto count = static_cast<int>(bytes / 4);
  const int block = count / n;
  auto call = [&] {
    if (a2a)
      MPI_Alltoall(in.data(), block, MPI_FLOAT, out.data(), block, MPI_FLOAT, MPI_COMM_WORLD);
    else
      MPI_Allreduce(in.data(), out.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  };
  if (a2a) {
    for (size_t j = 0; j < static_cast<size_t>(count); ++j) in[j] = gwb::a2a_value(rank, j);
  } else {
    gwb::fill(in, static_cast<size_t>(count), rank);
  }
  call();
  const long long wrong = a2a ? gwb::a2a_wrong(out, static_cast<size_t>(block), n, rank)
                              : gwb::count_wrong(out, static_cast<size_t>(count), n);
  for (int i = 0; i < o.warmup; ++i) call();
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  for (int i = 0; i < o.iters; ++i) call();
  *us = (MPI_Wtime() - t0) * 1e6 / o.iters;
  return wrong;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const gwb::Options o = gwb::parse(
      argc, argv,
      "usage: mpirun -np N gw-baseline-mpi [--coll allreduce|alltoall] [-b B] [-e B] [-f F] "
      "[-n N] [-w N]\n");
  if (o.coll != "allreduce" && o.coll != "alltoall") {
    if (rank == 0) std::fprintf(stderr, "gw-baseline-mpi: unknown --coll %s\n", o.coll.c_str());
    MPI_Finalize();
    return 2;
  }
  const char* label = o.coll == "alltoall" ? "Open MPI MPI_Alltoall" : "Open MPI MPI_Allreduce";
  if (rank == 0) gwb::print_header(label, o.coll.c_str());
  std::vector<float> in(o.max_bytes / 4), out(o.max_bytes / 4);
  for (uint64_t bytes : gwb::sizes(o)) {
    double us = 0;
    long long wrong = one_size(o, bytes, rank, n, in, out, &us), total = 0;
    MPI_Reduce(&wrong, &total, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) gwb::print_row(bytes, us, n, total, "mpi", o.coll.c_str());
  }
  MPI_Finalize();
  return 0;
}
