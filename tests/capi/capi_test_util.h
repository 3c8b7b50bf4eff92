/* Helpers of the capi suite (C11 + POSIX): ranks as forked processes, a file-backed
 * rendezvous for gw_comm_init_rendezvous, and a CHECK that reports rank and gradwire's error. */
#ifndef CAPI_TEST_UTIL_H
#define CAPI_TEST_UTIL_H

#include <gradwire.h>
#include <stdio.h>

/* Fail the rank (return 1 from the enclosing function) with a message naming the rank. */
#define CHECK(rank, cond)                                                                        \
  do {                                                                                           \
    if (!(cond)) {                                                                               \
      fprintf(stderr, "rank %d: %s:%d: CHECK(%s) failed; gw_last_error: %s\n", (rank), __FILE__, \
              __LINE__, #cond, gw_last_error());                                                 \
      return 1;                                                                                  \
    }                                                                                            \
  } while (0)

/* CHECK that a gradwire call returns GW_OK. */
#define CHECK_OK(rank, call) CHECK(rank, (call) == GW_OK)

typedef int (*rank_fn)(int rank, int size, void* arg);

/* Run fn in `size` forked processes, each with GW_RANK, GW_WORLD_SIZE, GW_MASTER_ADDR
 * (127.0.0.1) and GW_MASTER_PORT (a free port) set. Kills them all after timeout_s.
 * Returns 0 when every rank returned 0. */
int run_ranks(int size, rank_fn fn, void* arg, int timeout_s);

/* A fresh directory under $TMPDIR (or /tmp), removed by run_ranks' caller with rm_tree. */
int make_temp_dir(char* out, size_t cap);
void rm_tree(const char* dir);

/* A rendezvous whose keys are files in f->dir (made if missing; values written by rename, so
 * readers see whole values). */
typedef struct file_rdzv {
  char dir[320];
} file_rdzv;
gw_rendezvous_t file_rendezvous(file_rdzv* f);

/* Monotonic milliseconds. */
double now_ms(void);
void sleep_ms(int ms);

#endif
