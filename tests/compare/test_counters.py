"""The counters are right on a workload whose cost is known: two ranks of count_helper, each
making N getppid() calls and N sleeps and burning CPU, measured between rank 0's lines."""
import sys

import compare_test_util  # noqa: F401 (module path)
import gwc_proc

N = 2000


def main(helper):
    # rank 0 opens the window at ~100 ms and closes it after a 2.5 s gap + its work; rank 1
    # starts its own work at 800 ms, inside the window, and burns three times as much CPU.
    # The margins are wide: on a loaded machine gw-compare may read "begin" late.
    ranks = [([helper, str(N), "100", "100", "2500"], {}, None),
             ([helper, str(N), "300", "800", "0"], {}, None)]
    procs, marks, ok = gwc_proc.run_ranks(ranks, 60, watch=0, stagger_s=0)
    rank1 = procs[1].stdout()
    for p in procs:
        p.close()
    assert ok, "helpers failed"
    assert [m[0].split()[0] for m in marks] == ["begin", "end"], marks
    # the CPU-clock reads of both burns are system calls too
    clock_reads = int(marks[1][0].split()[1]) + int(rank1.split()[-1])
    want = 4 * N + clock_reads  # 2N per rank, the burns' clock reads
    c = gwc_proc.delta(marks[0][1], marks[1][1])
    print("window cost:", c)
    fails = []
    if c["syscalls"] is None:
        print("SKIP syscalls: perf_event_open of the tracepoint is not allowed here")
    elif not want <= c["syscalls"] <= want + 40:  # + the sleep, writes, exit
        fails.append("syscalls %s not in [%d, %d]" % (c["syscalls"], want, want + 40))
    # one voluntary switch per sleep, bar a few whose timer fired before the task slept
    lo = int(2 * N * 0.98)
    if not lo <= c["vcsw"] <= 2 * N + 60:
        fails.append("voluntary switches %s not in [%d, %d]" % (c["vcsw"], lo, 2 * N + 60))
    # perf's counter and getrusage are read at slightly different instants (the
    # switch into the exit path falls on either side): a few of slack, not more.
    if c["ctxsw"] + 4 < c["vcsw"]:
        fails.append("context switches %s < voluntary %s - 4" % (c["ctxsw"], c["vcsw"]))
    # 100 + 300 ms burnt by the two ranks: only both together reach 0.4 s.
    if not 0.38e9 <= c["task_clock_ns"] <= 1.2e9:
        fails.append("task clock %.3f s not in [0.38, 1.2] (both ranks' CPU)" %
                     (c["task_clock_ns"] * 1e-9))
    if c["user_s"] < 0.3:
        fails.append("user time %.2f s < 0.3" % c["user_s"])
    for f in fails:
        print("FAIL:", f)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
