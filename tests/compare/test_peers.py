"""gw-compare's peer rows (UCX ucx_perftest, libfabric fi_pingpong) and its tracefs set-up:
the tools' output as they print it (captured from ucx_perftest 1.13.1 and fi_pingpong 1.17.0,
Debian 12) parsed into the table's columns; a missing tool named with its package; when
installed, one short live pair of each on 127.0.0.1 through the same code (~5 s). No timing is
asserted: only that each figure is parsed and lands where the table reads it."""
import os
import sys
import tempfile
import types

from compare_test_util import SOURCE  # noqa: F401 (puts apps/gw-compare on sys.path)
import gw_compare
import gwc_counters
import gwc_peers
import gwc_ref
import gwc_workloads as W

UCX_HEADER = """\
+--------------+--------------+------------------------------+---------------------+-----------------------+
|              |              |        latency (usec)        |   bandwidth (MB/s)  |  message rate (msg/s) |
+--------------+--------------+----------+---------+---------+----------+----------+-----------+-----------+
|    Stage     | # iterations | 50.0%ile | average | overall |  average |  overall |  average  |  overall  |
+--------------+--------------+----------+---------+---------+----------+----------+-----------+-----------+
""".splitlines(keepends=True)
UCX_PROGRESS = ["[thread 0]              1121      4.187   913.325   913.325       68.43      68.43"
                "        1095        1095\n",
                "[thread 0]              2965      4.618   544.335   683.841      114.82      91.40"
                "        1837        1462\n"]
UCX_FINAL = "Final:                 20000      4.708   510.320   369.617      122.47     169.09" \
    "        1960        2706\n"
FI_OUT = """\
bytes   #sent   #ack     total       time     MB/sec    usec/xfer   Mxfers/sec
64      1k      =1k      125k        3.28s      0.04    1639.48       0.00
"""


def snap(i):
    """A counters snapshot that grows with i (as the real ones do between lines)."""
    return {"task_clock_ns": 1000 * i, "user_s": 0.01 * i, "sys_s": 0.02 * i, "ctxsw": i,
            "vcsw": i, "ivcsw": 0, "syscalls": 10 * i}


def check_parsers(fails):
    lines = UCX_HEADER + UCX_PROGRESS  # gw-compare stops it after its progress lines
    marks = [(ln, snap(i)) for i, ln in enumerate(lines)]
    r = gwc_peers.parse_ucx_line(UCX_FINAL)
    if not r or (r["final"], r["iters"], r["p50_us"], r["MiBps"], r["msg_per_s"]) != (
            True, 20000, 4.708, 122.47, 1960):
        fails.append("ucx Final line parsed as %s" % r)
    p = gwc_peers.parse_ucx_line(UCX_PROGRESS[0])
    if not p or p["final"] or p["iters"] != 1121:
        fails.append("ucx progress line parsed as %s" % p)
    if any(gwc_peers.parse_ucx_line(ln) for ln in UCX_HEADER):
        fails.append("ucx: a header line parsed as a result")
    for wid, want in (("lat_64", 4.618), ("bw_64k", 114.82 * W.MIB * 8e-9),
                      ("rate_64", 1837e-6)):
        w = W.BY_ID[wid]
        s, why = gwc_peers.ucx_sample(w, marks)
        if s is None:
            fails.append("ucx %s: no sample (%s)" % (wid, why))
            continue
        msgs = (2 if w.kind == "lat" else 1) * (2965 - 1121)  # first .. last progress line
        if abs(s["value"] - want) > 1e-9 * want or s["msgs"] != msgs:
            fails.append("ucx %s: value %s msgs %s, want %s, %s" % (wid, s["value"], s["msgs"],
                                                                   want, msgs))
        # window: from the first progress line (index 5) to the last (index 6)
        if s["cost"]["syscalls"] != 10 or s["cost"]["task_clock_ns"] != 1000:
            fails.append("ucx %s: cost window %s" % (wid, s["cost"]))
    s, _ = gwc_peers.ucx_sample(W.BY_ID["lat_64"], [(ln, snap(1)) for ln in lines])
    if s is None or s["value"] != 4.618 or s["cost"]["syscalls"] is not None:
        fails.append("ucx, lines read in one wake-up: want the speed and unknown costs, got %s"
                     % s)
    if gwc_peers.ucx_sample(W.BY_ID["lat_64"], marks[:6])[0] is not None:
        fails.append("ucx: a run with one progress line gave a sample")
    fi_marks = [(ln, snap(5)) for ln in FI_OUT.splitlines(keepends=True)]
    s, why = gwc_peers.fi_sample(W.BY_ID["lat_64"], fi_marks, iters=1000)
    if s is None or (s["value"], s["msgs"], s["cost"]["syscalls"]) != (1639.48, 2000, 50):
        fails.append("fi_pingpong parsed as %s (%s)" % (s, why))
    if gwc_peers.parse_fi_pingpong(FI_OUT.splitlines()[0]) is not None:
        fails.append("fi_pingpong: the header parsed as a row")
    # Each sample must summarize into the table's columns.
    res = gw_compare.summarize([dict(s, round=1)])
    if res["median"] != 1639.48 or res["cost"].get("syscalls_per_msg") != 50 / 2000:
        fails.append("fi_pingpong summary %s" % res)


def check_missing(fails):
    a = types.SimpleNamespace(refs="ucx_perftest,fi_pingpong,fi_rdm_tagged_bw,openmpi,gloo",
                              duration=0.1, timeout=30)
    # The allreduce peers: mpirun not on PATH, gw-baseline-gloo not in this (empty) build.
    ctx = types.SimpleNamespace(bindir=None, build=tempfile.mkdtemp())
    path = os.environ.get("PATH", "")
    os.environ["PATH"] = tempfile.mkdtemp()
    try:
        cols = gwc_ref.Refs(a, {"lat_64"}, ctx).cols
    finally:
        os.environ["PATH"] = path
    for name, pkg in (("ucx_perftest", "ucx-utils"), ("ucx_perftest-shm", "ucx-utils"),
                      ("fi_pingpong", "libfabric-bin"), ("fi_rdm_tagged_bw", "not packaged"),
                      ("openmpi", "openmpi-bin"), ("gloo", "libgloo-dev")):
        why = (cols.get(name) or {}).get("why") or ""
        if pkg not in why:
            fails.append("%s missing: why %r does not name %r" % (name, why, pkg))


def check_tracefs(fails):
    """No tracefs, not root or mount(8) refused: nothing mounted, and the reason says what was
    tried and what to run (mount(8) itself is never run here)."""
    saved = gwc_counters._tracepoint_id, os.geteuid, gwc_counters._mount
    for case, euid, want in (("non-root", 1000, "not root"),
                             ("root, mount refused", 0, "tried `mount -t tracefs")):
        gwc_counters._tracepoint_id, os.geteuid = (lambda name: None), (lambda: euid)
        gwc_counters._mount = lambda argv: "permission denied"
        try:
            did = gwc_counters.ensure_tracefs()
            c = gwc_counters.Counters(os.getpid())
            why = c.why or ""
            c.close()
        finally:
            gwc_counters._tracepoint_id, os.geteuid, gwc_counters._mount = saved
            gwc_counters._mount_failed = None
        if did is not None or "mount -t tracefs nodev /sys/kernel/tracing" not in why \
                or want not in why:
            fails.append("tracefs, %s: mounted %r, why %r" % (case, did, why))


class _Ctx:
    def __init__(self):
        self._ctx = gw_compare.Ctx(types.SimpleNamespace(
            build_dir="build", in_vm=False, source_dir=SOURCE))

    def port(self):
        return self._ctx.port()


def check_live(fails):
    """One short pair of each installed tool (ucx_perftest: until its second progress line;
    fi_pingpong: 20 iterations): its output must still parse."""
    w = W.BY_ID["lat_64"]
    pace = 1e6  # us per iteration: iterations() gives its minimum
    # ucx over tcp only: shm prints the same lines, and each ucx run takes ~2.5 s
    runs = [("ucx_perftest", lambda: gwc_peers.run_ucx(_Ctx(), "ucx_perftest", w, 0.1, 30)),
            ("fi_pingpong", lambda: gwc_peers.run_fi_pingpong(_Ctx(), w, 0.1, 30, pace))]
    for name, run in runs:
        if not gwc_ref.shutil.which(name.split("-")[0]):
            print("SKIP live %s: not installed (usertools/gw-deps.sh installs it)" % name)
            continue
        s, cmds, err = run()
        if err:  # a server not listening yet on a loaded machine: once more, as gw-compare
            s, cmds, err = run()
        print("%s: %s -> %s" % (name, " | ".join(cmds), s and s["value"]))
        if err or not s or not s["value"] > 0 or s["msgs"] <= 0 or "cost" not in s:
            fails.append("live %s: %s %s" % (name, err, s))


def main():
    fails = []
    check_parsers(fails)
    check_missing(fails)
    check_tracefs(fails)
    check_live(fails)
    for f in fails:
        print("FAIL:", f)
    print("peers: %d failure(s)" % len(fails))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
