/* capi shrink and grow (API 1.4): rank 2 of 4 dies mid-job; the three others get an error,
 * shrink, and go on over the same connections: an allreduce checked element by element, the
 * parent ranks, a send/receive on the new communicator. Then process 4 joins (gw_comm_join_env)
 * and the three grow back to four: an allreduce over the four, checked. */
#define _POSIX_C_SOURCE 200809L /* setenv, also in a build that is not a unity build */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capi_test_util.h"

#define N 4096

int shrink_case(int rank, int n, void* arg) {
  static double x[N], y[N];
  gw_transport_t* t = NULL;
  gw_comm_t *c = NULL, *s = NULL;
  (void)arg;
  (void)n;
  CHECK(rank, gw_init(GW_API_VERSION) == GW_OK && gw_transport_open("tcp:iface=lo", &t) == GW_OK);
  if (rank == 4) { /* the newcomer */
    gw_comm_t* j = NULL;
    int r = -1, parent = 0;
    CHECK_OK(rank, gw_comm_join_env(t, "capi/grow", 20000, &j));
    CHECK_OK(rank, gw_comm_rank(j, &r));
    CHECK_OK(rank, gw_comm_parent_rank(j, 3, &parent));
    CHECK(rank, r == 3 && parent == -1);
    for (size_t i = 0; i < N; ++i) x[i] = (double)(50 + (int)(i % 7));
    CHECK_OK(rank, gw_allreduce(j, x, y, N, GW_FLOAT64, GW_SUM));
    for (size_t i = 0; i < N; ++i) CHECK(rank, y[i] == 10 + 20 + 40 + 50 + 4.0 * (int)(i % 7));
    CHECK_OK(rank, gw_barrier(j));
    CHECK_OK(rank, gw_comm_destroy(j));
    return 0;
  }
  setenv("GW_WORLD_SIZE", "4", 1); /* the newcomer is not in the first group */
  CHECK_OK(rank, gw_comm_init_env(t, 20000, &c));
  gw_status_t st = gw_barrier(c);
  if (rank == 2) {
    CHECK(rank, st == GW_OK);
    _exit(0); /* no goodbye, no notice: as a crash */
  }
  for (size_t i = 0; i < N; ++i) x[i] = (double)((rank + 1) * 10 + (int)(i % 7));
  /* Rank 2 leaves as soon as its barrier returns: a rank still in the barrier may learn of the
   * failure there (a neighbour's notice breaks the communicator before the barrier's last
   * message is matched), as ULFM allows; else the allreduce reports it. */
  if (st == GW_OK) st = gw_allreduce(c, x, y, N, GW_FLOAT64, GW_SUM);
  CHECK(rank, st == GW_ERR_REMOTE || st == GW_ERR_TIMEOUT);
  CHECK(rank, gw_last_error_rank() == 2);
  double t0 = now_ms();
  CHECK_OK(rank, gw_comm_shrink(c, NULL, 0, &s));
  int r = -1, size = 0, parent[3];
  CHECK_OK(rank, gw_comm_rank(s, &r));
  CHECK_OK(rank, gw_comm_size(s, &size));
  CHECK(rank, size == 3 && r == (rank < 2 ? rank : rank - 1));
  for (int i = 0; i < 3; ++i) CHECK_OK(rank, gw_comm_parent_rank(s, i, &parent[i]));
  CHECK(rank, parent[0] == 0 && parent[1] == 1 && parent[2] == 3);
  CHECK_OK(rank, gw_allreduce(s, x, y, N, GW_FLOAT64, GW_SUM));
  fprintf(stderr, "rank %d: shrink + allreduce %.1f ms\n", rank, now_ms() - t0);
  for (size_t i = 0; i < N; ++i) {
    double ref = 0;
    for (int p = 0; p < 3; ++p) ref += (double)((parent[p] + 1) * 10 + (int)(i % 7));
    CHECK(rank, y[i] == ref);
  }
  /* Point-to-point on the new communicator: new rank 0 sends to new rank 2 (old rank 3). */
  if (r == 0) CHECK_OK(rank, gw_send(s, x, 64, 2, 5));
  if (r == 2) {
    int from = -1;
    size_t got = 0;
    CHECK_OK(rank, gw_recv(s, y, sizeof y, GW_ANY_SOURCE, 5, &got, &from));
    CHECK(rank,
          from == 0 && got == 64 && memcmp(y, (double[]){10, 11, 12, 13, 14, 15, 16, 10}, 64) == 0);
  }
  CHECK(rank, gw_barrier(c) != GW_OK); /* the old one stays broken */
  CHECK_OK(rank, gw_comm_destroy(c));
  CHECK_OK(rank, gw_barrier(s));
  gw_comm_t* g = NULL;
  CHECK_OK(rank, gw_comm_grow(s, 1, "capi/grow", 20000, &g));
  CHECK_OK(rank, gw_comm_destroy(s));
  CHECK_OK(rank, gw_comm_size(g, &size));
  CHECK(rank, size == 4);
  for (size_t i = 0; i < N; ++i) x[i] = (double)((rank + 1) * 10 + (int)(i % 7));
  CHECK_OK(rank, gw_allreduce(g, x, y, N, GW_FLOAT64, GW_SUM));
  for (size_t i = 0; i < N; ++i) CHECK(rank, y[i] == 10 + 20 + 40 + 50 + 4.0 * (int)(i % 7));
  CHECK_OK(rank, gw_barrier(g));
  CHECK_OK(rank, gw_comm_destroy(g));
  return 0;
}
