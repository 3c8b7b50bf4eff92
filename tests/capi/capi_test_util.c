/* Helpers of the capi suite: see capi_test_util.h. */
#define _POSIX_C_SOURCE 200809L
#include "capi_test_util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* A free port below the kernel's ephemeral range (closed again; rank 0 binds it). A port the
 * kernel hands out on bind(0) can be handed to another process's socket before rank 0 binds it
 * (seen beside a fuzzer opening thousands of listeners a second); below the range only an
 * explicit bind takes it. */
static int free_port(void) {
  int low = 32768, high = 60999;
  FILE* f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
  if (f) {
    if (fscanf(f, "%d %d", &low, &high) != 2) low = 32768;
    fclose(f);
  }
  if (low <= 11024) low = 32768; /* no room below it: fall back to the usual range's start */
  srand((unsigned)getpid() ^ (unsigned)now_ms());
  for (int tries = 0; tries < 200; ++tries) {
    const int port = 10000 + rand() % (low - 10000);
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = htons((uint16_t)port);
    const int ok = s >= 0 && bind(s, (struct sockaddr*)&a, sizeof a) == 0;
    if (s >= 0) close(s);
    if (ok) return port;
  }
  fprintf(stderr, "free_port: no free port in 10000-%d\n", low - 1);
  exit(2);
}

int run_ranks(int size, rank_fn fn, void* arg, int timeout_s) {
  char port[16], rank[16], world[16];
  pid_t pids[64];
  int failed = 0;
  if (size < 1 || size > 64) return 1;
  snprintf(port, sizeof port, "%d", free_port());
  snprintf(world, sizeof world, "%d", size);
  fflush(NULL);
  for (int r = 0; r < size; ++r) {
    pids[r] = fork();
    if (pids[r] < 0) {
      perror("fork");
      return 1;
    }
    if (pids[r] == 0) {
      snprintf(rank, sizeof rank, "%d", r);
      setenv("GW_RANK", rank, 1);
      setenv("GW_WORLD_SIZE", world, 1);
      setenv("GW_MASTER_ADDR", "127.0.0.1", 1);
      setenv("GW_MASTER_PORT", port, 1);
      int rc = fn(r, size, arg);
      fflush(NULL);
      _exit(rc);
    }
  }
  double deadline = now_ms() + timeout_s * 1000.0;
  for (int left = size; left > 0;) {
    int st = 0;
    pid_t p = waitpid(-1, &st, WNOHANG);
    if (p > 0) {
      for (int r = 0; r < size; ++r) {
        if (pids[r] != p) continue;
        pids[r] = 0;
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
          fprintf(stderr, "rank %d failed (status 0x%x)\n", r, st);
          failed = 1;
        }
      }
      --left;
    } else if (now_ms() > deadline) {
      for (int r = 0; r < size; ++r) {
        if (!pids[r]) continue;
        fprintf(stderr, "rank %d did not finish in %d s; killed\n", r, timeout_s);
        kill(pids[r], SIGKILL);
        waitpid(pids[r], &st, 0);
      }
      return 1;
    } else {
      sleep_ms(2);
    }
  }
  return failed;
}

int make_temp_dir(char* out, size_t cap) {
  const char* base = getenv("TMPDIR");
  snprintf(out, cap, "%s/gw-capi-XXXXXX", base && *base ? base : "/tmp");
  return mkdtemp(out) ? 0 : -1;
}

void rm_tree(const char* dir) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

/* ---- file rendezvous: one file per key ('/' in keys becomes '_') ---- */

static void key_path(const file_rdzv* f, const char* key, char* out, size_t cap) {
  size_t n = (size_t)snprintf(out, cap, "%s/k_", f->dir);
  for (; *key && n + 1 < cap; ++key) out[n++] = *key == '/' ? '_' : *key;
  out[n] = '\0';
}

static int fr_set(void* user, const char* key, const void* value, size_t len) {
  char path[400], tmp[420];
  key_path(user, key, path, sizeof path);
  snprintf(tmp, sizeof tmp, "%s.%d", path, (int)getpid());
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) return -errno;
  int ok = write(fd, value, len) == (ssize_t)len;
  close(fd);
  return ok && rename(tmp, path) == 0 ? 0 : -EIO;
}

static int fr_get(void* user, const char* key, void* buf, size_t cap, size_t* len) {
  char path[400];
  struct stat sb;
  key_path(user, key, path, sizeof path);
  int fd = open(path, O_RDONLY);
  if (fd < 0) return -errno;
  if (fstat(fd, &sb) != 0) {
    close(fd);
    return -EIO;
  }
  *len = (size_t)sb.st_size;
  int rc = *len > cap ? GW_RDZV_TOO_SMALL : (read(fd, buf, *len) == (ssize_t)*len ? 0 : -EIO);
  close(fd);
  return rc;
}

static int fr_wait(void* user, const char* const* keys, size_t n, int64_t timeout_ms) {
  double end = now_ms() + (double)timeout_ms;
  for (;;) {
    size_t have = 0;
    char path[400];
    for (; have < n; ++have) {
      key_path(user, keys[have], path, sizeof path);
      if (access(path, F_OK) != 0) break;
    }
    if (have == n) return 0;
    if (now_ms() >= end) return GW_RDZV_TIMEOUT;
    sleep_ms(1);
  }
}

gw_rendezvous_t file_rendezvous(file_rdzv* f) {
  if (mkdir(f->dir, 0700) != 0 && errno != EEXIST) perror(f->dir);
  gw_rendezvous_t r = {f, fr_set, fr_get, fr_wait};
  return r;
}
