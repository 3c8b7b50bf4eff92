"""Open MPI and Gloo allreduce as peers of gradwire's allreduce rows (ar_*), through the
project's own drivers apps/gw-baseline/ (gw-baseline-mpi, gw-baseline-gloo: built only when
libopenmpi-dev / libgloo-dev are installed). The same run as gradwire's: 2 ranks, float32 sum,
tcp on loopback, a smaller first size whose row is not kept, then the workload's size, -n as
fits the duration at the pace seen so far. Each driver checks every element of its result
(#wrong column); a row with wrong elements is an error, not a sample.
Cost: one watched process, counted with inherit (gwc_counters), so every rank it starts
counts: mpirun and its ranks (the launcher's own polling included), the Gloo driver and the
ranks it forks. Messages per window: the checked call, the warm-up and the timed ones.
"""
import os
import shutil

import gwc_proc
import gwc_workloads as W

RANKS = 2  # as gradwire's allreduce rows: two gw-coll-perf processes
MPIRUN = ["mpirun", "--oversubscribe", "--allow-run-as-root", "--bind-to", "none", "--mca",
          "btl", "tcp,self", "--mca", "btl_tcp_if_include", "lo", "--mca", "pml", "ob1"]
TOOLS = {"mpi": ("gw-baseline-mpi", "libopenmpi-dev openmpi-bin"),
         "gloo": ("gw-baseline-gloo", "libgloo-dev")}


def binary(ctx, name):
    if ctx.bindir:
        return os.path.join(ctx.bindir, TOOLS[name][0])
    return os.path.join(ctx.build, "apps/gw-baseline", TOOLS[name][0])


def why_not(ctx, name):
    """None when the baseline can run, else why not."""
    exe, pkg = TOOLS[name]
    if name == "mpi" and not shutil.which("mpirun"):
        return "mpirun is not installed (apt-get install openmpi-bin, or usertools/gw-deps.sh)"
    if not os.path.exists(binary(ctx, name)):
        return ("%s is not built (apt-get install %s, or usertools/gw-deps.sh, then set up the "
                "build again)" % (exe, pkg))
    return None


def run(ctx, name, w, secs, timeout, pace_us=None):
    """One allreduce run of workload `w`; @return (sample or None, commands, error or None)."""
    us = pace_us or W.COLL_GUESS_US[w.size]
    n = max(2, min(100000, int(secs * 1e6 / us)))
    first = W.KIB if w.size <= 4 * W.KIB else 4 * W.KIB
    args = ["-b", W.size_text(first), "-e", W.size_text(w.size), "-f", str(w.size // first),
            "-n", str(n), "-w", str(W.coll_warmup(w.size))]
    if name == "mpi":
        argv = MPIRUN + ["-np", str(RANKS), binary(ctx, name)] + args
    else:
        argv = [binary(ctx, name), "--ranks", str(RANKS), "--algo", "ring-chunked"] + args
    r = W.Run("coll", args, [None, w.id])
    procs, marks, ok = gwc_proc.run_ranks([(argv, {}, None)], timeout, watch=0)
    cmds = [" ".join(p.command) for p in procs]
    tail = (procs[0].stderr() + procs[0].stdout()).strip().splitlines()[-1:]
    for p in procs:
        p.close()
    if not ok:
        return None, cmds, "%s failed (exit %s): %s" % (TOOLS[name][0], procs[0].rc,
                                                       tail or "no output")
    rows = [ln for ln, _ in marks if W.is_row(ln)]
    wrong = [ln.split()[7] for ln in rows if len(ln.split()) > 7 and ln.split()[7] != "0"]
    if wrong:
        return None, cmds, "%s: %s wrong elements" % (TOOLS[name][0], ",".join(wrong))
    samples = [s for s in W.samples_from_marks(r, marks) if s["workload"] == w.id]
    if not samples:
        return None, cmds, "%s printed no %s row" % (TOOLS[name][0], w.size)
    s = samples[0]
    # Both drivers run each size once more before the warm-up, the call whose result they check.
    s["msgs"] += 1
    s["bytes"] = s["msgs"] * w.size
    s["pace_us"] = s["value"]
    return s, cmds, None
