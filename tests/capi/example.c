/* The C API example: every rank joins the job from its launcher's environment and allreduces
 * float32 (ring and small-message sizes) and int64 vectors; every element is checked against
 * a reference computed here, on every rank. Run as `capi_example 2 4`: forks the ranks of a
 * 2-rank and a 4-rank job on loopback TCP. Built with -std=c11 -Wall -Werror, also through
 * pkg-config by install_test.sh. */
#define _POSIX_C_SOURCE 200809L
#include <gradwire.h>
#include <stdlib.h>

#include "capi_test_util.h"

static float value(int rank, size_t i) { return (float)(rank + 1) * (float)(i % 251); }

static int run_rank(int rank, int size, void* arg) {
  (void)arg;
  gw_transport_t* t = NULL;
  gw_comm_t* comm = NULL;
  CHECK_OK(rank, gw_init(GW_API_VERSION));
  CHECK_OK(rank, gw_transport_open("tcp:iface=lo", &t));
  CHECK_OK(rank, gw_comm_init_env(t, 20000, &comm)); /* takes t */
  int r = -1, n = 0;
  CHECK_OK(rank, gw_comm_rank(comm, &r));
  CHECK_OK(rank, gw_comm_size(comm, &n));
  CHECK(rank, r == rank && n == size);

  const size_t counts[] = {1, 1000, 300007}; /* recursive doubling and ring */
  for (size_t k = 0; k < sizeof counts / sizeof counts[0]; ++k) {
    size_t count = counts[k];
    float* x = malloc(count * sizeof *x);
    long long* y = malloc(count * sizeof *y);
    CHECK(rank, x && y);
    for (size_t i = 0; i < count; ++i) {
      x[i] = value(rank, i);
      y[i] = (long long)(i * 7919u % 100003u) * (rank % 2 ? -1 : 1) + rank;
    }
    CHECK_OK(rank, gw_allreduce(comm, x, x, count, GW_FLOAT32, GW_SUM)); /* in place */
    CHECK_OK(rank, gw_allreduce(comm, y, y, count, GW_INT64, GW_MAX));
    for (size_t i = 0; i < count; ++i) {
      float want = 0;
      long long most = 0;
      for (int p = 0; p < size; ++p) {
        long long v = (long long)(i * 7919u % 100003u) * (p % 2 ? -1 : 1) + p;
        want += value(p, i); /* small integers: exact in float32, any order */
        most = p == 0 || v > most ? v : most;
      }
      if (x[i] != want || y[i] != most) {
        fprintf(stderr, "rank %d: count %zu element %zu: sum %g (want %g), max %lld (want %lld)\n",
                rank, count, i, (double)x[i], (double)want, y[i], most);
        return 1;
      }
    }
    free(x);
    free(y);
  }
  CHECK_OK(rank, gw_comm_destroy(comm));
  return 0;
}

int main(int argc, char** argv) {
  for (int a = 1; a < argc; ++a) {
    int size = atoi(argv[a]);
    if (run_ranks(size, run_rank, NULL, 60) != 0) {
      fprintf(stderr, "capi example: %d ranks FAILED\n", size);
      return 1;
    }
    printf("capi example: %d ranks ok\n", size);
  }
  return argc > 1 ? 0 : 2;
}
