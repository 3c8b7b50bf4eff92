/* The capi suite's `a2a` case (test_capi.c runs it): 3 ranks, started alltoall, alltoallv with
 * uneven and empty parts, gather and scatter at every root, each checked element by element. */
#include <gradwire.h>
#include <stdint.h>
#include <string.h>

#include "capi_test_util.h"

int a2a_case(int rank, int n, void* arg);

/* Element k of what rank src sends rank dst. */
static int32_t val(int src, int dst, size_t k) { return src * 100000 + dst * 1000 + (int32_t)k; }

static int alltoalls(gw_comm_t* c, int rank, int n) {
  enum { kB = 300, kMax = 8 };
  int32_t send[kMax * kB], recv[kMax * kB];
  CHECK(rank, n <= kMax);
  for (int j = 0; j < n; ++j)
    for (size_t k = 0; k < kB; ++k) send[j * kB + k] = val(rank, j, k);
  gw_request_t* r = NULL;
  CHECK_OK(rank, gw_alltoall_start(c, send, recv, kB, GW_INT32, &r));
  CHECK_OK(rank, gw_wait(&r, -1));
  for (int i = 0; i < n; ++i)
    for (size_t k = 0; k < kB; ++k) CHECK(rank, recv[i * kB + k] == val(i, rank, k));
  /* alltoallv: rank s sends (s + d) % 3 * 7 elements to d (zero when s + d is 3 or 0). */
  size_t sc[kMax], sd[kMax], rc[kMax], rd[kMax], so = 0, ro = 0;
  for (int j = 0; j < n; ++j) {
    sc[j] = (size_t)((rank + j) % 3) * 7;
    rc[j] = (size_t)((j + rank) % 3) * 7;
    sd[j] = so;
    rd[j] = ro + 1; /* a gap before each part */
    so += sc[j];
    ro += rc[j] + 1;
    for (size_t k = 0; k < sc[j]; ++k) send[sd[j] + k] = val(rank, j, k);
  }
  CHECK_OK(rank, gw_alltoallv(c, send, sc, sd, recv, rc, rd, GW_INT32));
  for (int i = 0; i < n; ++i)
    for (size_t k = 0; k < rc[i]; ++k) CHECK(rank, recv[rd[i] + k] == val(i, rank, k));
  return 0;
}

static int rooted(gw_comm_t* c, int rank, int n) {
  enum { kB = 500, kMax = 8 };
  int32_t mine[kB], all[kMax * kB];
  for (int root = 0; root < n; ++root) {
    for (size_t k = 0; k < kB; ++k) mine[k] = val(rank, root, k);
    gw_request_t* r = NULL;
    CHECK_OK(rank, gw_gather_start(c, mine, rank == root ? all : NULL, kB, GW_INT32, root, &r));
    CHECK_OK(rank, gw_wait(&r, -1));
    for (int i = 0; rank == root && i < n; ++i)
      for (size_t k = 0; k < kB; ++k) CHECK(rank, all[i * kB + k] == val(i, root, k));
    for (int j = 0; rank == root && j < n; ++j)
      for (size_t k = 0; k < kB; ++k) all[j * kB + k] = val(root, j, k);
    CHECK_OK(rank, gw_scatter(c, rank == root ? all : NULL, mine, kB, GW_INT32, root));
    for (size_t k = 0; k < kB; ++k) CHECK(rank, mine[k] == val(root, rank, k));
  }
  return 0;
}

int a2a_case(int rank, int n, void* arg) {
  (void)arg;
  gw_transport_t* t = NULL;
  gw_comm_t* c = NULL;
  CHECK_OK(rank, gw_init(GW_API_VERSION));
  CHECK_OK(rank, gw_transport_open("tcp:iface=lo", &t));
  CHECK_OK(rank, gw_comm_init_env(t, 20000, &c));
  if (alltoalls(c, rank, n) != 0 || rooted(c, rank, n) != 0) return 1;
  CHECK_OK(rank, gw_comm_destroy(c));
  return 0;
}
