/* The capi suite: `test_capi CASE`, one meson test per case. Ranks are forked processes on
 * loopback TCP; every result is checked against a reference computed here.
 *   colls   3 ranks: started collectives (test/wait), fused bucket, reduce-scatter,
 *           allgather, broadcast, barrier
 *   a2a     3 ranks: alltoall, alltoallv, gather, scatter (test_capi_a2a.c)
 *   p2p     3 ranks: ring exchange, any-source, truncation, p2p/collective exclusion
 *   rdzv    2 ranks joined through file-backed rendezvous callbacks, allreduce
 *   faults  2 ranks: mismatched dtypes fail on both; a dead peer fails the survivor quickly
 *   abort   3 ranks: gw_comm_abort from another thread ends every rank's blocked call
 *   errors  1 process: version, NULL and bad arguments, rendezvous timeout; error texts
 *   gap     2 ranks: one makes no call for 10 s with an allreduce of its own in flight while
 *           the other waits on it (transport: GW_TEST_CAPI_TRANSPORT, "{dir}" replaced by a
 *           temporary directory; default tcp) */
#define _POSIX_C_SOURCE 200809L
#include <gradwire.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "capi_test_util.h"

#define HAS(text) (strstr(gw_last_error(), (text)) != NULL)

/* A communicator of `size` ranks through the file rendezvous in `dir` (callbacks of the
 * test, not a gradwire store). */
static gw_comm_t* join_files(const char* dir, int rank, int size, int64_t timeout_ms) {
  static file_rdzv f;
  gw_transport_t* t = NULL;
  gw_comm_t* c = NULL;
  snprintf(f.dir, sizeof f.dir, "%s", dir);
  gw_rendezvous_t r = file_rendezvous(&f);
  if (gw_init(GW_API_VERSION) != GW_OK || gw_transport_open("tcp:iface=lo", &t) != GW_OK ||
      gw_comm_init_rendezvous(t, &r, rank, size, timeout_ms, &c) != GW_OK) {
    fprintf(stderr, "rank %d: joining through %s: %s\n", rank, dir, gw_last_error());
    return NULL;
  }
  return c;
}

static gw_comm_t* join_env(int rank) {
  gw_transport_t* t = NULL;
  gw_comm_t* c = NULL;
  if (gw_init(GW_API_VERSION) != GW_OK || gw_transport_open("tcp:iface=lo", &t) != GW_OK ||
      gw_comm_init_env(t, 20000, &c) != GW_OK) {
    fprintf(stderr, "rank %d: %s\n", rank, gw_last_error());
    return NULL;
  }
  return c;
}

/* ---- gap: background progress (issue 39) ----------------------------------------------- */

static char g_spec[512] = "tcp:iface=lo";

static double gap_value(int rank, size_t i) { return (double)((rank + 1) * (int)(i % 997)); }

static int gap(int rank, int n, void* arg) {
  (void)arg;
  gw_transport_t* t = NULL;
  gw_comm_t* c = NULL;
  if (gw_init(GW_API_VERSION) != GW_OK || gw_transport_open(g_spec, &t) != GW_OK ||
      gw_comm_init_env(t, 60000, &c) != GW_OK) {
    fprintf(stderr, "rank %d: %s: %s\n", rank, g_spec, gw_last_error());
    return 1;
  }
  enum { kN = 50000, kM = 1000 };
  double* a = malloc(kN * sizeof *a);
  int64_t* b = malloc(kM * sizeof *b);
  CHECK(rank, a && b);
  for (size_t i = 0; i < kN; ++i) a[i] = gap_value(rank, i);
  gw_request_t* req = NULL;
  CHECK(rank, gw_allreduce_start(c, a, a, kN, GW_FLOAT64, GW_SUM, &req) == GW_OK);
  if (rank == 1) sleep(10); /* computes: no call into gradwire */
  if (gw_wait(&req, 60000) != GW_OK) {
    fprintf(stderr, "rank %d after the gap: %s\n", rank, gw_last_error());
    return 1;
  }
  for (size_t i = 0; i < kN; ++i) {
    double want = 0;
    for (int r = 0; r < n; ++r) want += gap_value(r, i);
    CHECK(rank, a[i] == want);
  }
  for (size_t i = 0; i < kM; ++i) b[i] = (int64_t)(rank * 1000 + (int)i);
  CHECK(rank, gw_allreduce(c, b, b, kM, GW_INT64, GW_MAX) == GW_OK);
  for (size_t i = 0; i < kM; ++i) CHECK(rank, b[i] == (int64_t)((n - 1) * 1000 + (int)i));
  free(a);
  free(b);
  CHECK(rank, gw_comm_destroy(c) == GW_OK);
  return 0;
}

/* ---- colls ---------------------------------------------------------------------------- */

static double f64(int rank, size_t i) { return (double)((rank + 3) * (int)(i % 1009)); }

static int colls(int rank, int n, void* arg) {
  (void)arg;
  gw_comm_t* c = join_env(rank);
  CHECK(rank, c != NULL);
  enum { kBig = 70001, kAg = 777, kRs = 1000, kBc = 10000 };
  double* a = malloc(kBig * sizeof *a);
  int64_t* ag = malloc((size_t)n * kAg * sizeof *ag);
  int64_t mine[kAg];
  CHECK(rank, a && ag);
  for (size_t i = 0; i < kBig; ++i) a[i] = f64(rank, i);
  for (size_t i = 0; i < kAg; ++i) mine[i] = (int64_t)rank * 1000000 + (int64_t)i;

  /* Two collectives in flight: the allreduce finished by polling gw_test, then gw_wait. */
  gw_request_t *r1 = NULL, *r2 = NULL;
  CHECK_OK(rank, gw_allreduce_start(c, a, a, kBig, GW_FLOAT64, GW_SUM, &r1));
  CHECK_OK(rank, gw_allgather_start(c, mine, ag, kAg, GW_INT64, &r2));
  int done = 0, polls = 0;
  while (!done) {
    CHECK_OK(rank, gw_test(&r1, &done));
    if (!done) sleep_ms(1);
    CHECK(rank, ++polls < 30000);
  }
  CHECK(rank, r1 == NULL);
  CHECK_OK(rank, gw_wait(&r2, -1));
  CHECK(rank, r2 == NULL);
  for (size_t i = 0; i < kBig; ++i) {
    double want = 0;
    for (int p = 0; p < n; ++p) want += f64(p, i);
    CHECK(rank, a[i] == want);
  }
  for (int p = 0; p < n; ++p)
    for (size_t i = 0; i < kAg; ++i)
      CHECK(rank, ag[(size_t)p * kAg + i] == (int64_t)p * 1000000 + (int64_t)i);

  /* Fused bucket: three int32 tensors, one in place, one empty; MIN. */
  int32_t b0[5], b1[300], out1[300], b2[1];
  for (int i = 0; i < 5; ++i) b0[i] = (rank + 1) * (i - 2);
  for (int i = 0; i < 300; ++i) b1[i] = (i * 31 + rank * 17) % 97 - 40;
  gw_tensor_t ts[3] = {{b0, b0, 5}, {b1, out1, 300}, {b2, b2, 0}};
  CHECK_OK(rank, gw_allreduce_bucket(c, ts, 3, GW_INT32, GW_MIN));
  for (int i = 0; i < 300; ++i) {
    int32_t want0 = INT32_MAX, want1 = INT32_MAX;
    for (int p = 0; p < n; ++p) {
      int32_t v0 = (p + 1) * (i - 2), v1 = (i * 31 + p * 17) % 97 - 40;
      want0 = v0 < want0 ? v0 : want0;
      want1 = v1 < want1 ? v1 : want1;
    }
    CHECK(rank, i >= 5 || b0[i] == want0);
    CHECK(rank, out1[i] == want1);
  }

  /* Reduce-scatter (float32 AVG of integers divisible by n) and broadcast from the last rank. */
  float* rs = malloc((size_t)n * kRs * sizeof *rs);
  float rsout[kRs];
  uint8_t bc[kBc];
  CHECK(rank, rs != NULL);
  for (size_t i = 0; i < (size_t)n * kRs; ++i) rs[i] = (float)(n * (rank + (int)(i % 13)));
  CHECK_OK(rank, gw_reduce_scatter(c, rs, rsout, kRs, GW_FLOAT32, GW_AVG));
  for (size_t i = 0; i < kRs; ++i) {
    size_t g = (size_t)rank * kRs + i;
    float want = 0;
    for (int p = 0; p < n; ++p) want += (float)(p + (int)(g % 13));
    CHECK(rank, rsout[i] == want);
  }
  for (size_t i = 0; i < kBc; ++i) bc[i] = (uint8_t)(rank == n - 1 ? i * 7 : 0xEE);
  CHECK_OK(rank, gw_broadcast(c, bc, kBc, GW_UINT8, n - 1));
  for (size_t i = 0; i < kBc; ++i) CHECK(rank, bc[i] == (uint8_t)(i * 7));

  /* Barrier: nobody leaves before the last rank arrives (it sleeps 300 ms first). */
  double t0 = now_ms();
  if (rank == n - 1) sleep_ms(300);
  CHECK_OK(rank, gw_barrier(c));
  CHECK(rank, now_ms() - t0 >= 150); /* 300 ms less the skew of leaving the broadcast */
  /* gw_wait's own timeout leaves the request running: the last rank comes 300 ms late. */
  gw_request_t* rb = NULL;
  if (rank == n - 1) sleep_ms(300);
  CHECK_OK(rank, gw_barrier_start(c, &rb));
  if (rank == 0) CHECK(rank, gw_wait(&rb, 20) == GW_ERR_TIMEOUT && rb != NULL);
  CHECK_OK(rank, gw_wait(&rb, -1));
  CHECK(rank, rb == NULL);
  CHECK_OK(rank, gw_comm_destroy(c));
  free(a);
  free(ag);
  free(rs);
  return 0;
}

/* ---- p2p ------------------------------------------------------------------------------ */

static int p2p(int rank, int n, void* arg) {
  (void)arg;
  gw_comm_t* c = join_env(rank);
  CHECK(rank, c != NULL);
  enum { kLen = 100000 };
  static uint8_t out[kLen], in[kLen];
  const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  for (size_t i = 0; i < kLen; ++i) out[i] = (uint8_t)(i * 13 + (size_t)rank);
  gw_mr_t* mr = NULL;
  CHECK_OK(rank, gw_mem_register(c, in, kLen, &mr));

  /* Ring: receive from prev while sending to next (started, then waited). */
  gw_request_t *rr = NULL, *rs = NULL;
  size_t got = 0;
  int src = -2;
  CHECK_OK(rank, gw_recv_start(c, in, kLen, prev, 7, &got, &src, &rr));
  CHECK_OK(rank, gw_send_start(c, out, kLen, next, 7, &rs));
  /* A collective while send/receive is in flight is refused, and breaks nothing. */
  CHECK(rank, gw_barrier(c) == GW_ERR_INVALID_ARGUMENT && HAS("in flight"));
  CHECK_OK(rank, gw_wait(&rs, -1));
  CHECK_OK(rank, gw_wait(&rr, -1));
  CHECK(rank, got == kLen && src == prev);
  for (size_t i = 0; i < kLen; ++i) CHECK(rank, in[i] == (uint8_t)(i * 13 + (size_t)prev));
  CHECK_OK(rank, gw_mem_deregister(mr));

  /* Any-source: rank 0 hears from every other rank once, each message naming its sender. */
  if (rank == 0) {
    int seen = 0;
    for (int k = 1; k < n; ++k) {
      int32_t msg = -1;
      CHECK_OK(rank, gw_recv(c, &msg, sizeof msg, GW_ANY_SOURCE, 9, &got, &src));
      CHECK(rank, got == sizeof msg && src >= 1 && src < n && msg == 1000 + src);
      seen |= 1 << src;
    }
    CHECK(rank, seen == (1 << n) - 2);
  } else {
    int32_t msg = 1000 + rank;
    CHECK_OK(rank, gw_send(c, &msg, sizeof msg, 0, 9));
  }

  /* Truncation: a 100-byte message into a 10-byte buffer fails that receive only. */
  if (rank == 0) {
    CHECK(rank, gw_recv(c, in, 10, 1, 11, &got, NULL) == GW_ERR_INVALID_ARGUMENT);
    CHECK(rank, HAS("longer than the buffer") && HAS("rank 1"));
  } else if (rank == 1) {
    CHECK_OK(rank, gw_send(c, out, 100, 0, 11));
  }
  /* A receive whose message comes late: gw_wait times out, the request stays, then finishes. */
  if (rank == 0) {
    int32_t late = 0;
    CHECK_OK(rank, gw_recv_start(c, &late, sizeof late, 1, 13, &got, NULL, &rr));
    CHECK(rank, gw_wait(&rr, 20) == GW_ERR_TIMEOUT && rr != NULL && HAS("still running"));
    CHECK_OK(rank, gw_wait(&rr, -1));
    CHECK(rank, rr == NULL && late == 4242 && got == sizeof late);
  } else if (rank == 1) {
    int32_t late = 4242;
    sleep_ms(300);
    CHECK_OK(rank, gw_send(c, &late, sizeof late, 0, 13));
  }
  /* Collectives work again once send/receive is done. */
  int64_t one = 1, sum = 0;
  CHECK_OK(rank, gw_allreduce(c, &one, &sum, 1, GW_INT64, GW_SUM));
  CHECK(rank, sum == n);
  CHECK_OK(rank, gw_comm_destroy(c));
  return 0;
}

/* ---- rdzv ----------------------------------------------------------------------------- */

static int rdzv(int rank, int n, void* arg) {
  gw_comm_t* c = join_files(arg, rank, n, 20000);
  CHECK(rank, c != NULL);
  uint16_t h[4096]; /* float16 of small integers: 1.0 = 0x3C00; sums stay exact */
  static const uint16_t half[] = {0x0000, 0x3C00, 0x4000, 0x4200, 0x4400, 0x4500, 0x4600, 0x4700};
  for (int i = 0; i < 4096; ++i) h[i] = half[(i + rank) % 4];
  CHECK_OK(rank, gw_allreduce(c, h, h, 4096, GW_FLOAT16, GW_SUM));
  for (int i = 0; i < 4096; ++i) {
    int want = 0;
    for (int p = 0; p < n; ++p) want += (i + p) % 4;
    CHECK(rank, want < 8 && h[i] == half[want]);
  }
  CHECK_OK(rank, gw_comm_destroy(c));
  return 0;
}

/* ---- faults --------------------------------------------------------------------------- */

static int faults(int rank, int n, void* arg) {
  char dir[300];
  float x[64] = {0};
  (void)n;
  /* Mismatch: rank 0 reduces float32, rank 1 int32: both get InvalidArgument naming it. */
  snprintf(dir, sizeof dir, "%s/a", (const char*)arg);
  gw_comm_t* c = join_files(dir, rank, 2, 10000);
  CHECK(rank, c != NULL);
  gw_status_t st = gw_allreduce(c, x, x, 64, rank == 0 ? GW_FLOAT32 : GW_INT32, GW_SUM);
  CHECK(rank, st == GW_ERR_INVALID_ARGUMENT && HAS("every rank must call the same"));
  CHECK(rank, HAS(rank == 0 ? "int32" : "float32"));
  /* The communicator stays broken with that error. */
  CHECK(rank, gw_barrier(c) == GW_ERR_INVALID_ARGUMENT && HAS("earlier error"));
  CHECK_OK(rank, gw_comm_destroy(c));

  /* Dead peer: rank 1 leaves after a barrier; rank 0's allreduce fails fast, naming it. */
  snprintf(dir, sizeof dir, "%s/b", (const char*)arg);
  c = join_files(dir, rank, 2, 10000);
  CHECK(rank, c != NULL);
  CHECK_OK(rank, gw_barrier(c));
  if (rank == 1) _exit(0); /* no goodbye: the process just ends */
  double t0 = now_ms();
  st = gw_allreduce(c, x, x, 64, GW_FLOAT32, GW_SUM);
  double took = now_ms() - t0;
  CHECK(rank, st == GW_ERR_REMOTE || st == GW_ERR_TIMEOUT);
  CHECK(rank, HAS("rank 1") && HAS("gw_allreduce [rank 0/2]"));
  CHECK(rank, gw_last_error_rank() == 1); /* the culprit as a number, too */
  CHECK(rank, took < 9000); /* before the 10 s timeout: the close is seen, not waited out */
  fprintf(stderr, "rank 0: dead peer reported after %.0f ms: %s\n", took, gw_last_error());
  CHECK(rank, gw_send(c, x, 4, 1, 1) != GW_OK);
  CHECK_OK(rank, gw_comm_destroy(c));
  return 0;
}

/* ---- abort ---------------------------------------------------------------------------- */

static void* abort_later(void* c) {
  struct timespec ts = {0, 300 * 1000 * 1000};
  nanosleep(&ts, NULL);
  gw_comm_abort((gw_comm_t*)c, "test abort");
  return NULL;
}

/* Ranks 1 and 2 block in an allreduce rank 0 never joins; rank 0 blocks in a receive no one
 * sends, and its second thread aborts after 300 ms: every rank returns GW_ERR_ABORTED
 * naming rank 0, long before the 20 s timeout. */
static int abort_case(int rank, int n, void* arg) {
  float x[16] = {0};
  pthread_t th;
  (void)n;
  (void)arg;
  gw_comm_t* c = join_env(rank);
  CHECK(rank, c != NULL);
  CHECK_OK(rank, gw_barrier(c));
  double t0 = now_ms();
  gw_status_t st;
  if (rank == 0) {
    CHECK(rank, pthread_create(&th, NULL, abort_later, c) == 0);
    st = gw_recv(c, x, sizeof x, 1, 9, NULL, NULL);
    pthread_join(th, NULL);
  } else {
    st = gw_allreduce(c, x, x, 16, GW_FLOAT32, GW_SUM);
  }
  double took = now_ms() - t0;
  fprintf(stderr, "rank %d: returned after %.0f ms: %s\n", rank, took, gw_last_error());
  CHECK(rank, st == GW_ERR_ABORTED && HAS("test abort"));
  CHECK(rank, gw_last_error_rank() == 0);
  CHECK(rank, took < 300 + 1000); /* 200 ms after the abort, and the ranks' start skew */
  CHECK(rank, gw_barrier(c) == GW_ERR_ABORTED && gw_last_error_rank() == 0);
  CHECK_OK(rank, gw_comm_destroy(c));
  return 0;
}

/* ---- errors (one process) ------------------------------------------------------------- */

static int errors(const char* dir) {
  const int me = 0;
  gw_transport_t* t = NULL;
  CHECK(me, gw_transport_open("tcp", &t) == GW_ERR_INVALID_ARGUMENT && HAS("gw_init"));
  CHECK(me, gw_init(GW_API_VERSION + (1u << 16)) == GW_ERR_NOT_SUPPORTED);
  CHECK(me, HAS("gw_init") && HAS("C API 2.4") && HAS("implements 1.4"));
  CHECK(me, gw_init(GW_API_VERSION + 1) == GW_ERR_NOT_SUPPORTED && HAS("1.5"));
  CHECK_OK(me, gw_init(GW_API_VERSION));
  CHECK(me, gw_last_error()[0] == '\0' && gw_api_version() == GW_API_VERSION);
  CHECK(me, strcmp(gw_status_name(GW_ERR_TIMEOUT), "Timeout") == 0);
  CHECK(me, gw_comm_dump_flight(NULL, NULL, 0) == GW_ERR_INVALID_ARGUMENT);
  CHECK(me, gw_transport_open(NULL, &t) == GW_ERR_INVALID_ARGUMENT && HAS("spec is NULL"));
  CHECK(me, gw_transport_open("tcp", NULL) == GW_ERR_INVALID_ARGUMENT && HAS("out is NULL"));
  CHECK(me, gw_transport_open("nosuchdriver", &t) == GW_ERR_INVALID_ARGUMENT);
  CHECK(me, HAS("nosuchdriver"));
  CHECK(me, gw_comm_init_env(NULL, 0, NULL) == GW_ERR_INVALID_ARGUMENT && HAS("transport"));
  CHECK_OK(me, gw_transport_open("tcp:iface=lo", &t));
  CHECK_OK(me, gw_transport_close(t)); /* one no communicator took */
  CHECK(me, gw_transport_close(NULL) == GW_ERR_INVALID_ARGUMENT);
  CHECK(me, gw_mem_deregister(NULL) == GW_ERR_INVALID_ARGUMENT);
  CHECK_OK(me, gw_transport_open("tcp:iface=lo", &t));
  CHECK(me, gw_comm_init_env(t, 1000, NULL) == GW_ERR_INVALID_ARGUMENT); /* t taken anyway */
  CHECK_OK(me, gw_transport_open("tcp:iface=lo", &t));
  gw_rendezvous_t half = {NULL, NULL, NULL, NULL};
  gw_comm_t* c = NULL;
  CHECK(me, gw_comm_init_rendezvous(t, &half, 0, 1, 0, &c) == GW_ERR_INVALID_ARGUMENT);
  CHECK(me, HAS("rdzv->set"));

  /* Launch discovery: no launcher; torchrun's names with a missing master; a job of one. */
  CHECK_OK(me, gw_transport_open("tcp:iface=lo", &t));
  CHECK(me, gw_comm_init_env(t, 5000, &c) == GW_ERR_UNAVAILABLE && HAS("no launcher"));
  setenv("RANK", "0", 1);
  setenv("WORLD_SIZE", "2", 1);
  CHECK_OK(me, gw_transport_open("tcp:iface=lo", &t));
  CHECK(me, gw_comm_init_env(t, 5000, &c) == GW_ERR_INVALID_ARGUMENT && HAS("MASTER_ADDR"));
  setenv("WORLD_SIZE", "1", 1);
  int rk = -1, sz = -1;
  CHECK_OK(me, gw_transport_open("tcp:iface=lo", &t));
  CHECK_OK(me, gw_comm_init_env(t, 5000, &c));
  CHECK_OK(me, gw_comm_rank(c, &rk));
  CHECK_OK(me, gw_comm_size(c, &sz));
  CHECK(me, rk == 0 && sz == 1);
  CHECK_OK(me, gw_comm_destroy(c));
  unsetenv("RANK");
  unsetenv("WORLD_SIZE");

  /* Nobody else comes: Timeout naming the missing rank. */
  char sub[300];
  snprintf(sub, sizeof sub, "%s/alone", dir);
  file_rdzv f;
  snprintf(f.dir, sizeof f.dir, "%s", dir);
  gw_rendezvous_t r = file_rendezvous(&f);
  double t0 = now_ms();
  CHECK_OK(me, gw_transport_open("tcp:iface=lo", &t));
  CHECK(me, gw_comm_init_rendezvous(t, &r, 0, 2, 300, &c) == GW_ERR_TIMEOUT);
  CHECK(me, HAS("rank 1") && now_ms() - t0 < 5000);

  /* A one-rank communicator for the argument checks. */
  c = join_files(sub, 0, 1, 5000);
  CHECK(me, c != NULL);
  float x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, y[8];
  gw_request_t* req = NULL;
  CHECK(me, gw_allreduce(NULL, x, y, 8, GW_FLOAT32, GW_SUM) == GW_ERR_INVALID_ARGUMENT);
  CHECK(me, HAS("gw_allreduce: InvalidArgument: comm is NULL"));
  CHECK(me, gw_allreduce(c, x, NULL, 8, GW_FLOAT32, GW_SUM) == GW_ERR_INVALID_ARGUMENT);
  CHECK(me, HAS("recv buffer is NULL") && HAS("[rank 0/1]"));
  CHECK(me, gw_allreduce(c, x, y, 8, (gw_dtype_t)99, GW_SUM) == GW_ERR_INVALID_ARGUMENT);
  CHECK(me, HAS("dtype 99"));
  CHECK(me, gw_allreduce(c, x, y, 8, GW_FLOAT32, (gw_op_t)42) == GW_ERR_INVALID_ARGUMENT);
  CHECK(me, HAS("op 42"));
  CHECK(me, gw_allreduce(c, x, y, SIZE_MAX / 2, GW_FLOAT32, GW_SUM) == GW_ERR_INVALID_ARGUMENT);
  CHECK(me, HAS("overflows"));
  CHECK(me, gw_allgather(c, x, y, SIZE_MAX / 4, GW_INT64) == GW_ERR_INVALID_ARGUMENT);
  CHECK(me, gw_broadcast(c, x, 8, GW_FLOAT32, 5) == GW_ERR_INVALID_ARGUMENT && HAS("root 5"));
  CHECK(me, gw_gather(c, x, y, 8, GW_FLOAT32, 5) == GW_ERR_INVALID_ARGUMENT && HAS("root 5"));
  CHECK(me, gw_scatter(c, NULL, y, 8, GW_FLOAT32, 0) == GW_ERR_INVALID_ARGUMENT);
  CHECK(me, HAS("send buffer is NULL"));
  CHECK(me, gw_alltoallv(c, x, NULL, NULL, y, NULL, NULL, GW_FLOAT32) == GW_ERR_INVALID_ARGUMENT);
  CHECK(me, HAS("send_counts is NULL"));
  CHECK(me, gw_alltoall(c, x, x, 8, GW_FLOAT32) == GW_ERR_INVALID_ARGUMENT && HAS("overlap"));
  CHECK(me, gw_allreduce_start(c, x, y, 8, GW_FLOAT32, GW_SUM, NULL) == GW_ERR_INVALID_ARGUMENT);
  CHECK(me, HAS("req is NULL"));
  CHECK(me, gw_allreduce_bucket(c, NULL, 0, GW_FLOAT32, GW_SUM) == GW_ERR_INVALID_ARGUMENT);
  gw_tensor_t bad = {x, NULL, 8};
  CHECK(me, gw_allreduce_bucket(c, &bad, 1, GW_FLOAT32, GW_SUM) == GW_ERR_INVALID_ARGUMENT);
  CHECK(me, HAS("tensor 0"));
  CHECK(me, gw_wait(NULL, 0) == GW_ERR_INVALID_ARGUMENT && gw_wait(&req, 0) != GW_OK);
  CHECK(me, gw_send(c, x, 4, 0, 1) == GW_ERR_INVALID_ARGUMENT && HAS("not another rank"));
  CHECK(me, gw_recv(c, NULL, 4, GW_ANY_SOURCE, 1, NULL, NULL) == GW_ERR_INVALID_ARGUMENT);
  CHECK(me, gw_mem_register(c, x, 0, NULL) == GW_ERR_INVALID_ARGUMENT);
  /* Zero elements is a valid (empty) collective; one rank copies. */
  CHECK_OK(me, gw_allreduce(c, NULL, NULL, 0, GW_FLOAT32, GW_SUM));
  CHECK_OK(me, gw_allreduce_start(c, x, y, 8, GW_FLOAT32, GW_MAX, &req));
  CHECK_OK(me, gw_wait(&req, 1000));
  for (int i = 0; i < 8; ++i) CHECK(me, y[i] == x[i]);
  CHECK(me, gw_last_error()[0] == '\0');
  CHECK_OK(me, gw_comm_destroy(c));
  return 0;
}

int a2a_case(int rank, int n, void* arg);    /* test_capi_a2a.c */
int shrink_case(int rank, int n, void* arg); /* test_capi_shrink.c */

int main(int argc, char** argv) {
  char dir[256];
  int rc = 2;
  if (argc != 2 || make_temp_dir(dir, sizeof dir) != 0) {
    fprintf(stderr, "usage: test_capi colls|a2a|p2p|rdzv|faults|abort|errors|gap|shrink\n");
    return 2;
  }
  const char* k = argv[1];
  if (strcmp(k, "colls") == 0) rc = run_ranks(3, colls, NULL, 40);
  if (strcmp(k, "a2a") == 0) rc = run_ranks(3, a2a_case, NULL, 40);
  if (strcmp(k, "p2p") == 0) rc = run_ranks(3, p2p, NULL, 40);
  if (strcmp(k, "rdzv") == 0) rc = run_ranks(2, rdzv, dir, 40);
  if (strcmp(k, "faults") == 0) rc = run_ranks(2, faults, dir, 40);
  if (strcmp(k, "abort") == 0) rc = run_ranks(3, abort_case, NULL, 40);
  if (strcmp(k, "shrink") == 0) rc = run_ranks(5, shrink_case, NULL, 60);
  if (strcmp(k, "errors") == 0) rc = errors(dir);
  if (strcmp(k, "gap") == 0) {
    const char* s = getenv("GW_TEST_CAPI_TRANSPORT");
    const char* at = s ? strstr(s, "{dir}") : NULL;
    if (s && at)
      snprintf(g_spec, sizeof g_spec, "%.*s%s%s", (int)(at - s), s, dir, at + 5);
    else if (s)
      snprintf(g_spec, sizeof g_spec, "%s", s);
    rc = run_ranks(2, gap, NULL, 60);
  }
  rm_tree(dir);
  printf("capi %s: %s\n", k, rc == 0 ? "ok" : rc == 2 ? "unknown case" : "FAILED");
  return rc;
}
