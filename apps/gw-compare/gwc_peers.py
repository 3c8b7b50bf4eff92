"""The peers users compare transports with, run like the other reference tools (two processes
on 127.0.0.1, both processes' counters): UCX's ucx_perftest (UCP tag matching, over tcp on lo
and over shared memory) and libfabric's fi_pingpong (tcp provider, RDM endpoint, tagged).

Both tools busy-poll, and neither runs for a given time: each run is sized in iterations from
the pace that tool showed on that workload earlier in this gw-compare run (a slow guess in
round 1). Speed is the tool's own figure:
  ucx_perftest tag_lat  the "50.0%ile" column of its Final line (half round trip; UCX computes
                        it over its last timing window of iterations)
  ucx_perftest tag_bw   the "overall" bandwidth (MiB/s) and message rate of its Final line
  fi_pingpong           usec/xfer: the average half round trip (time / 2 x iterations)
Cost windows: ucx_perftest from the end of its table header to its Final line; fi_pingpong
prints only when done, so its window is the whole process (connection set-up included, as for
iperf3). Message counts include the warm-up iterations (ucx -w; fi_pingpong has none).
Debian 12's libfabric-bin ships fi_pingpong only: fabtests (fi_rdm_tagged_bw) is not packaged.
"""
import re

import gwc_proc
import gwc_workloads as W
from gwc_transports import LINEBUF

UCX_TLS = {"ucx_perftest": "tcp", "ucx_perftest-shm": "shm"}
FI_ARGS = ["-p", "tcp", "-e", "rdm", "-m", "tagged", "-d", "lo"]  # ofi_rxm over tcp on lo
# Round-1 guesses, microseconds per iteration: slow on purpose (a short first run, not a long
# one); later rounds use the pace measured here.
GUESS_US = {"lat": 200.0, "rate": 10.0}
GUESS_BPS = 200e6  # bandwidth rows: bytes per second
MIN_ITERS, MAX_ITERS = 20, 10_000_000
PACKAGES = {"ucx_perftest": "ucx-utils", "fi_pingpong": "libfabric-bin"}


def iterations(w, secs, pace_us=None):
    """Iterations that take about `secs` at `pace_us` (us per iteration; None: the guess)."""
    if pace_us is None:
        pace_us = GUESS_US.get(w.kind) or w.size / GUESS_BPS * 1e6
    return int(max(MIN_ITERS, min(MAX_ITERS, secs * 1e6 / max(pace_us, 1e-3))))


def ucx_args(w, n):
    """The client's test arguments for workload `w`: (argv tail, warm-up iterations)."""
    warm = max(10, min(1000, n // 10))
    test = "tag_lat" if w.kind == "lat" else "tag_bw"
    return ["-t", test, "-s", str(w.size), "-n", str(n), "-w", str(warm)], warm


def parse_ucx_final(text):
    """ucx_perftest's Final line -> {iters, p50_us, avg_us, overall_us, MiBps, msg_per_s}
    (overall = the whole timed phase), or None. Columns: iterations, latency 50.0%ile /
    average / overall (us), bandwidth average / overall (MiB/s), message rate average /
    overall (msg/s); "Final:" starts the line unless -f was given."""
    for line in text.splitlines():
        t = line.replace("Final:", "").split()
        if "Final:" in line and len(t) == 8:
            try:
                v = [float(x) for x in t]
            except ValueError:
                return None
            return {"iters": int(v[0]), "p50_us": v[1], "avg_us": v[2], "overall_us": v[3],
                    "MiBps": v[5], "msg_per_s": v[7]}
    return None


def ucx_sample(w, marks, warm):
    """A sample from the client's marks, or (None, why)."""
    final = next((i for i, (ln, _) in enumerate(marks) if "Final:" in ln), None)
    if final is None:
        return None, "ucx_perftest printed no Final line"
    r = parse_ucx_final(marks[final][0])
    if r is None:
        return None, "ucx_perftest: cannot parse %r" % marks[final][0].strip()
    # The window opens at the last table-header line ('+---' / '|') before the first result.
    first = next(i for i, (ln, _) in enumerate(marks) if not ln.lstrip().startswith(("+", "|"))
                 and ln.strip())
    start = marks[first - 1] if first > 0 else None
    iters = r["iters"] + warm
    if w.kind == "lat":  # an iteration is a round trip: two "overall" one-way latencies
        s = {"value": r["p50_us"], "t_avg": r["overall_us"], "msgs": 2 * iters,
             "pace_us": 2 * r["overall_us"]}
    else:
        s = {"value": r["msg_per_s"] * 1e-6 if w.kind == "rate" else r["MiBps"] * W.MIB * 8e-9,
             "msgs": iters, "pace_us": 1e6 / r["msg_per_s"] if r["msg_per_s"] else None}
    s.update(workload=w.id, bytes=s["msgs"] * w.size, iters=r["iters"])
    cost = gwc_proc.delta(start[1], marks[final][1]) if start else marks[final][1]
    if not cost.get("task_clock_ns"):  # header and result read in one wake-up: unknown
        cost = {k: None for k in cost}
    s["cost"] = cost
    return s, None


def run_ucx(ctx, name, w, secs, timeout, pace_us=None):
    """One ucx_perftest pair (server, then client) for workload `w`."""
    port = str(ctx.port())
    n = iterations(w, secs, pace_us)
    args, warm = ucx_args(w, n)
    env = {"UCX_TLS": UCX_TLS[name], "UCX_NET_DEVICES": "lo"}  # tcp: traffic on lo only
    # Line-buffered: its table header is printed without a flush, and it opens the window.
    ranks = [(["ucx_perftest", "-p", port], env, None),
             (LINEBUF + ["ucx_perftest", "127.0.0.1", "-p", port] + args, env, None)]
    marks, cmds, err = _run_pair("ucx_perftest", ranks, env, timeout)
    if err:
        return None, cmds, err
    s, why = ucx_sample(w, marks, warm)
    return s, cmds, why


def _run_pair(tool, ranks, env, timeout):
    """Server, then client (watched). @return (client's marks, commands, error or None)."""
    procs, marks, ok = gwc_proc.run_ranks(ranks, timeout, stagger_s=0.5)
    cmds = [" ".join(["%s=%s" % kv for kv in sorted(env.items())] + p.command) for p in procs]
    tail = (procs[1].stderr() + procs[1].stdout()).strip().splitlines()[-1:]
    for p in procs:
        p.close()
    if ok:
        return marks, cmds, None
    return marks, cmds, "%s failed (exit %s, server %s): %s" % (
        tool, procs[1].rc, procs[0].rc, tail or "no output")


def parse_fi_pingpong(text):
    """fi_pingpong's result row -> {size, usec_per_xfer, MBps, secs}, or None. Columns: bytes
    #sent #ack total time MB/sec usec/xfer Mxfers/sec (sizes and counts as "64k", "1k")."""
    for line in text.splitlines():
        t = line.split()
        if len(t) == 8 and re.match(r"^\d", t[0]) and t[4].endswith("s"):
            try:
                return {"size": t[0], "secs": float(t[4][:-1]), "MBps": float(t[5]),
                        "usec_per_xfer": float(t[6])}
            except ValueError:
                return None
    return None


def fi_sample(w, marks, iters):
    r = parse_fi_pingpong("".join(ln for ln, _ in marks))
    if r is None or not marks:
        return None, "fi_pingpong printed no result row"
    s = {"workload": w.id, "value": r["usec_per_xfer"], "t_avg": r["usec_per_xfer"],
         "msgs": 2 * iters, "bytes": 2 * iters * w.size, "iters": iters,
         "cost": marks[-1][1], "pace_us": 2 * r["usec_per_xfer"]}
    return s, None


def run_fi_pingpong(ctx, w, secs, timeout, pace_us=None):
    """One fi_pingpong pair for a ping-pong workload (both sides get -I and -S)."""
    port = str(ctx.port())
    n = iterations(w, secs, pace_us)
    common = FI_ARGS + ["-I", str(n), "-S", str(w.size)]
    ranks = [(["fi_pingpong"] + common + ["-B", port], {}, None),
             (["fi_pingpong"] + common + ["-P", port, "127.0.0.1"], {}, None)]
    marks, cmds, err = _run_pair("fi_pingpong", ranks, {}, timeout)
    if err:
        return None, cmds, err
    s, why = fi_sample(w, marks, n)
    return s, cmds, why
