#!/usr/bin/env python3
"""Small allreduces at 2-8 ranks: gradwire (gw-coll-perf, tcp loopback) against Open MPI
(gw-baseline-mpi, btl tcp) in one run, rounds interleaved (issue 41 item 1).

Per rank count and size: the median time of each tool's rounds and their ratio, and, from a
`perf stat -a` of a long and a short run (their difference: no start-up), the system calls
and context switches per allreduce per rank and the CPU per allreduce (all processes, mpirun
included). Every element is checked by both tools (a wrong one fails the run).
Usage: gw-vs-mpi.py [--build DIR] [--baselines DIR] [--ranks 2,4,8] [--sizes 4K,64K]
                    [--rounds 3] [--iters 2000]
Markdown on stdout. Needs mpirun (openmpi-bin) and a build with apps/gw-baseline/gw-baseline-mpi.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "--mca",
          "btl", "tcp,self", "--mca", "btl_tcp_if_include", "lo", "--mca", "pml", "ob1"]


def cmd(tool, a, n, size, iters):
    common = ["-b", str(size), "-e", str(size), "-n", str(iters), "-w", str(max(iters // 10, 5))]
    if tool == "gradwire":
        return [f"{a.build}/apps/gw-coll-perf/gw-coll-perf", "--ranks", str(n), "-t",
                "tcp:iface=lo"] + common
    return MPIRUN + ["-np", str(n), f"{a.baselines}/apps/gw-baseline/gw-baseline-mpi"] + common


def run_us(c):
    """The time column (us) of the one row the tool prints."""
    r = subprocess.run(c, capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, GW_LOG_LEVEL="error"))
    rows = [ln.split() for ln in r.stdout.splitlines() if ln.strip()[:1].isdigit()]
    if r.returncode != 0 or not rows or rows[-1][7] != "0":
        sys.exit(f"FAIL: {' '.join(c)} (exit {r.returncode}, wrong elements or no row)\n"
                 f"{r.stdout}{r.stderr}")
    return float(rows[-1][4])


def counts(c):
    """(system calls, context switches, task-clock ms) of the whole machine while c runs."""
    r = subprocess.run(["perf", "stat", "-a", "-x,", "-e",
                        "raw_syscalls:sys_enter,context-switches,task-clock", "--"] + c,
                       capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, GW_LOG_LEVEL="error"))
    v = {}
    for ln in r.stderr.splitlines():
        f = ln.split(",")
        if len(f) > 3 and f[0].replace(".", "").isdigit():
            v[f[2]] = float(f[0])
    return (v.get("raw_syscalls:sys_enter", 0), v.get("context-switches", 0),
            v.get("task-clock", 0))


def per_op(tool, a, n, size):
    long_, short = a.iters, max(a.iters // 10, 10)
    x, y = counts(cmd(tool, a, n, size, long_)), counts(cmd(tool, a, n, size, short))
    d = (long_ + long_ // 10) - (short + max(short // 10, 5))  # timed + warm-up iterations
    return ((x[0] - y[0]) / d / n, (x[1] - y[1]) / d, (x[2] - y[2]) / d * 1000)


def parse_size(s):
    m = {"K": 1 << 10, "M": 1 << 20}
    return int(s[:-1]) * m[s[-1].upper()] if s[-1].upper() in m else int(s)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--baselines", default=None, help="build dir with gw-baseline-mpi")
    ap.add_argument("--ranks", default="2,4,8")
    ap.add_argument("--sizes", default="4K,64K")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=2000)
    a = ap.parse_args()
    a.baselines = a.baselines or a.build
    print(f"gw-vs-mpi: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} "
          f"CPUs, load {open('/proc/loadavg').read().split()[0]}; median of {a.rounds} "
          "interleaved rounds; per allreduce: system calls and context switches per rank, "
          "CPU of all processes\n")
    print("| ranks | size | gradwire us | Open MPI us | gw / MPI | syscalls gw / MPI | "
          "ctx switches gw / MPI | CPU us gw / MPI |")
    print("|---:|---:|---:|---:|---:|---|---|---|")
    for n in [int(x) for x in a.ranks.split(",")]:
        for s in a.sizes.split(","):
            size = parse_size(s)
            iters = max(a.iters // n, 100)
            t = {"gradwire": [], "mpi": []}
            for _ in range(a.rounds):
                for tool in t:
                    t[tool].append(run_us(cmd(tool, a, n, size, iters)))
            g, m = statistics.median(t["gradwire"]), statistics.median(t["mpi"])
            cg, cm = per_op("gradwire", a, n, size), per_op("mpi", a, n, size)
            print(f"| {n} | {s} | {g:.1f} | {m:.1f} | {g / m:.2f} | {cg[0]:.1f} / {cm[0]:.1f} "
                  f"| {cg[1]:.1f} / {cm[1]:.1f} | {cg[2]:.0f} / {cm[2]:.0f} |", flush=True)


if __name__ == "__main__":
    main()
