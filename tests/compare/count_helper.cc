// A workload whose cost is known, for gw-compare's counter tests. Prints "begin", then makes
// N getppid() calls, N short sleeps (one voluntary context switch each) and burns burn_ms of
// CPU, then prints "end K": K is the number of CPU-clock reads the burn made (each one a
// system call). usage: count_helper N burn_ms pre_ms gap_ms
#include <stdio.h>  // C in a .cc file: the project builds C++ only
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double cpu_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);  // a system call (no vDSO for CPU clocks)
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void sleep_ms(long ms) {
  struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

int main(int argc, char** argv) {
  if (argc != 5) return 2;
  long n = atol(argv[1]), burn_ms = atol(argv[2]), pre_ms = atol(argv[3]), gap_ms = atol(argv[4]);
  sleep_ms(pre_ms);
  printf("begin\n");
  fflush(stdout);
  if (gap_ms > 0) sleep_ms(gap_ms);  // one nanosleep: lets the other rank run inside the window
  volatile long sink = 0;
  for (long i = 0; i < n; ++i) sink = sink + getppid();
  struct timespec us10 = {0, 10000};
  for (long i = 0; i < n; ++i) nanosleep(&us10, NULL);
  // CPU time, not wall time: on a loaded machine wall time passes off the CPU.
  long reads = 1;
  double end = cpu_s() + (double)burn_ms * 1e-3;
  for (;;) {
    for (long i = 0; i < (1L << 20); ++i) sink = sink + 1;
    ++reads;
    if (cpu_s() >= end) break;
  }
  printf("end %ld\n", reads);
  fflush(stdout);
  return 0;
}
