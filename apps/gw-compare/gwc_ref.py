"""Reference tools in the same run, measured the same way (both processes' counters), placed
the same way (not pinned, like the gradwire ranks): iperf3 for bandwidth (and 64 B writes
per second), sockperf ping-pong for latency, sleeping and busy, dpdk-testpmd for the memif
packet rate, and the peers of gwc_peers (UCX, libfabric). And the soft-RoCE VM.
"""
import os
import re
import shutil
import subprocess
import json

import gwc_baselines
import gwc_peers
import gwc_proc
import gwc_workloads as W

JSON_MARK = "@@gw-compare-json@@"  # --in-vm: the document's line in the VM's output
SOCKPERF_MAX = 65507  # sockperf's largest message: its 64 KiB point uses this


def _col(name, label, why=None):
    return {"name": name, "label": label, "kind": "reference", "status": "not run",
            "why": why, "commands": [], "errors": [], "driver_counters": {}, "results": {}}


def _iperf3(ctx, w, secs, timeout):
    port = str(ctx.port())
    ln = min(w.size, W.MIB)  # iperf3 writes at most 1 MiB per call
    ranks = [(["iperf3", "-s", "-1", "-p", port], {}, None),
             (["iperf3", "-c", "127.0.0.1", "-p", port, "-l", str(ln), "-t",
               str(max(1, round(secs))), "-J"], {}, None)]
    procs, marks, ok = gwc_proc.run_ranks(ranks, timeout, stagger_s=0.3)
    cmds = [" ".join(p.command) for p in procs]
    out = procs[1].stdout()
    for p in procs:
        p.close()
    if not ok or not marks:
        return None, cmds, "iperf3 failed"
    end = json.loads(out)["end"]["sum_received"]
    nbytes, bps = end["bytes"], end["bits_per_second"]
    msgs = nbytes / ln
    value = bps / ln / 8 / 1e6 if w.kind == "rate" else bps * 1e-9
    return {"workload": w.id, "value": value, "msgs": msgs, "bytes": nbytes,
            "cost": marks[-1][1], "write_len": ln}, cmds, None


def _sockperf(ctx, w, secs, busy, timeout):
    port = str(ctx.port())
    size = min(w.size, SOCKPERF_MAX)
    flag = ["--nonblocked"] if busy else []
    ranks = [(["sockperf", "sr", "--tcp", "-i", "127.0.0.1", "-p", port] + flag, {}, None),
             (["sockperf", "pp", "--tcp", "-i", "127.0.0.1", "-p", port, "-m", str(size),
               "-t", str(max(1, round(secs)))] + flag, {}, None)]
    procs, marks, ok = gwc_proc.run_ranks(ranks, timeout, stagger_s=0.5, daemons=(0,))
    cmds = [" ".join(p.command) for p in procs]
    for p in procs:
        p.close()
    text = [(re.sub(r"\x1b\[[0-9;]*m", "", ln), snap) for ln, snap in marks]
    start = next((s for ln, s in text if "Starting test" in ln), None)
    stop = next((s for ln, s in text if "Test end" in ln), None)
    sent = next((int(m.group(1)) for ln, _ in text
                 for m in [re.search(r"Total Run.*SentMessages=(\d+)", ln)] if m), None)
    med = next((float(ln.split("=")[-1]) for ln, _ in text if "percentile 50.000" in ln), None)
    if not ok or None in (start, stop, sent, med):
        return None, cmds, "sockperf failed"
    cost = gwc_proc.delta(start, stop)
    return {"workload": w.id, "value": med, "msgs": 2 * sent, "bytes": 2 * sent * size,
            "cost": cost, "msg_size": size}, cmds, None


def _testpmd(ctx, w, secs, timeout):
    """dpdk-testpmd txonly -> rxonly on a memif pair (64 B packets): the receiver's Rx-pps,
    both processes' cost between its first and last busy stats lines (1 s apart)."""
    n = ctx.port()
    sock = "/tmp/gwc-testpmd-%d-%d.sock" % (os.getpid(), n)
    eal = ["--lcores", "0@(0-1),1@(0-1)", "--no-huge", "-m", "512", "--no-pci"]
    app = ["--nb-cores=1", "--total-num-mbufs=16384", "--stats-period", "1", "-a"]
    ranks = [(["dpdk-testpmd"] + eal + ["--file-prefix", "gwctp%da" % n, "--vdev",
              "net_memif0,role=%s,socket=%s,socket-abstract=no" % (role, sock), "--",
              "--forward-mode=" + mode] + app, {}, None)
             for role, mode in (("server", "rxonly"), ("client", "txonly"))]
    for r in ranks[1:]:
        r[0][r[0].index("--file-prefix") + 1] = "gwctp%db" % n
    busy = lambda marks: [m for m in marks if "Rx-pps:" in m[0] and int(m[0].split()[1]) > 0]
    want = max(3, round(secs) + 2)
    procs, marks, ok = gwc_proc.run_ranks(ranks, timeout, watch=0, stagger_s=1.0,
                                          until=lambda m: len(busy(m)) >= want)
    cmds = [" ".join(p.command) for p in procs]
    for p in procs:
        p.close()
    if os.path.exists(sock):
        os.unlink(sock)
    b = busy(marks)
    if len(b) < want:
        return None, cmds, "dpdk-testpmd: no traffic seen (%d busy stats lines)" % len(b)
    pkts, seen = {}, 0  # Rx-pps mark -> RX-packets of the same stats block (a few lines up)
    for i, (line, _) in enumerate(marks):
        if "RX-packets:" in line:
            seen = int(line.split()[1])
        elif "Rx-pps:" in line:
            pkts[i] = seen
    index = {id(m): i for i, m in enumerate(marks)}
    first, last = b[1], b[-1]  # b[0]: the second that traffic started in
    msgs = pkts.get(index[id(last)], 0) - pkts.get(index[id(first)], 0)
    pps = sorted(int(m[0].split()[1]) for m in b[1:])
    return {"workload": w.id, "value": pps[len(pps) // 2] * 1e-6, "msgs": max(msgs, 1),
            "bytes": max(msgs, 1) * 64, "cost": gwc_proc.delta(first[1], last[1])}, cmds, None


class Refs:
    """Reference columns; `round()` runs one round of them, so the caller interleaves them
    with the transports' rounds. Tools that are missing are listed with the reason."""

    KNOWN = ("iperf3", "sockperf", "dpdk-testpmd", "ucx_perftest", "fi_pingpong",
             "fi_rdm_tagged_bw", "openmpi", "gloo")
    BASELINES = {"openmpi": "mpi", "gloo": "gloo"}  # column -> gwc_baselines' driver
    PACKAGES = dict(gwc_peers.PACKAGES, **{"dpdk-testpmd": "dpdk"})

    def __init__(self, a, selected, ctx=None):
        self.a, self.selected = a, selected
        wanted = [x for x in a.refs.split(",") if x]
        cols = {}
        if "iperf3" in wanted:
            cols["iperf3"] = _col("iperf3", "iperf3 (tcp)")
        if "sockperf" in wanted:
            cols["sockperf"] = _col("sockperf", "sockperf (sleep)")
            cols["sockperf-busy"] = _col("sockperf-busy", "sockperf (busy)")
        if "dpdk-testpmd" in wanted:
            cols["dpdk-testpmd"] = _col("dpdk-testpmd", "dpdk-testpmd (memif)")
        if "ucx_perftest" in wanted:
            cols["ucx_perftest"] = _col("ucx_perftest", "ucx tag (tcp, busy)")
            cols["ucx_perftest-shm"] = _col("ucx_perftest-shm", "ucx tag (shm, busy)")
        if "fi_pingpong" in wanted:
            cols["fi_pingpong"] = _col("fi_pingpong", "libfabric (tcp, busy)")
        if "fi_rdm_tagged_bw" in wanted:  # named so the table says why libfabric has no bw row
            cols["fi_rdm_tagged_bw"] = _col(
                "fi_rdm_tagged_bw", "libfabric bw",
                "not run by gw-compare: fabtests' fi_rdm_tagged_bw is not packaged in Debian 12 "
                "(libfabric-bin ships fi_pingpong only)")
        if "openmpi" in wanted:  # allreduce rows only, through apps/gw-baseline
            cols["openmpi"] = _col("openmpi", "Open MPI (tcp)")
        if "gloo" in wanted:
            cols["gloo"] = _col("gloo", "Gloo (tcp)")
        for name in wanted:
            if name not in self.KNOWN:
                cols[name] = _col(name, name, "unknown reference tool (known: %s)"
                                  % ", ".join(self.KNOWN))
        for name, col in cols.items():
            tool = name.split("-")[0] if name != "dpdk-testpmd" else name
            if col["why"] is None and name in self.BASELINES:
                col["why"] = (gwc_baselines.why_not(ctx, self.BASELINES[name]) if ctx
                             else "not checked: no build directory given")
            elif col["why"] is None and not shutil.which(tool):
                col["why"] = "%s is not installed (apt-get install %s, or usertools/" \
                    "gw-deps.sh)" % (tool, self.PACKAGES.get(tool, tool))
        self.cols = cols
        self.raw = {n: {} for n in cols}
        self.pace = {}  # (column, workload) -> us per iteration seen: sizes fi_pingpong's next run

    def _ok(self, name):
        return name in self.cols and self.cols[name]["why"] is None

    def round(self, ctx, rnd, log):
        a, secs = self.a, max(self.a.duration, 0.2)
        peer_s = min(a.timeout, max(30, 20 * secs))  # a busy-polling peer starved: bounded
        for w in W.WORKLOADS:
            if w.id not in self.selected:
                continue
            jobs = []
            if w.kind in ("bw", "rate") and self._ok("iperf3"):
                jobs.append(("iperf3", lambda: _iperf3(ctx, w, secs, a.timeout)))
            if w.kind == "rate" and self._ok("dpdk-testpmd"):  # packets, 64 B: the rate row
                jobs.append(("dpdk-testpmd", lambda: _testpmd(ctx, w, secs, 60)))
            if w.kind == "lat":
                for n, busy in (("sockperf", False), ("sockperf-busy", True)):
                    if self._ok(n):
                        jobs.append((n, lambda busy=busy: _sockperf(ctx, w, secs, busy,
                                                                    a.timeout)))
            if w.kind in ("lat", "bw", "rate"):
                for n in ("ucx_perftest", "ucx_perftest-shm"):
                    if self._ok(n):
                        jobs.append((n, lambda n=n: gwc_peers.run_ucx(ctx, n, w, secs,
                                                                      peer_s)))
            if w.kind == "lat" and self._ok("fi_pingpong"):
                jobs.append(("fi_pingpong", lambda: gwc_peers.run_fi_pingpong(
                    ctx, w, secs, peer_s, self.pace.get(("fi_pingpong", w.id)))))
            if w.kind == "coll":
                for n, drv in self.BASELINES.items():
                    if self._ok(n):
                        jobs.append((n, lambda n=n, drv=drv: gwc_baselines.run(
                            ctx, drv, w, a.duration, peer_s, self.pace.get((n, w.id)))))
            for name, job in jobs:
                s, cmds, err = job()
                if err:  # a server that was not listening yet on a loaded machine: once more
                    s, cmds, err = job()
                col = self.cols[name]
                log("round %d  %-10s %-28s%s" % (rnd + 1, name, w.id, "  FAILED" if err else ""))
                col["commands"].extend(c for c in cmds if c not in col["commands"])
                if err:
                    col["errors"].append(err)
                else:
                    s["round"] = rnd + 1
                    if s.get("pace_us"):
                        self.pace[(name, w.id)] = s["pace_us"]
                    self.raw[name].setdefault(w.id, []).append(s)

    def finish(self, summarize):
        for name, col in self.cols.items():
            col["results"] = {w: summarize(s) for w, s in self.raw[name].items()}
            if col["results"]:
                col["status"] = "ran"
            elif col["why"] is None and not col["errors"]:
                col["why"] = "measures none of the selected workloads"
            elif col["why"] is None:
                col["why"] = "every run failed: " + "; ".join(col["errors"][:1])
        return list(self.cols.values())


def run_rdma_vm(a, ctx, t, log):
    """rdma on soft-RoCE: gw-compare itself runs inside the VM (--in-vm, rdma only) and prints
    its document as one marked JSON line, which gw-rxe-vm.sh passes back on stdout.
    Returns {"rdma": {workload: samples}}; on failure sets t.why."""
    script = os.path.join(ctx.source, "usertools/gw-rxe-vm.sh")
    here = os.path.dirname(os.path.abspath(__file__))
    cmd = ["bash", script, "--timeout", "1200", "--", "python3",
           os.path.join(here, "gw_compare.py"), "--in-vm", "-t", "rdma", "--refs", "",
           "--build-dir", os.path.abspath(ctx.build), "--source-dir", ctx.source,
           "-r", str(a.rounds), "-D", str(a.duration), "-w", a.workloads]
    if a.quick:
        cmd.append("--quick")
    t.commands.append(" ".join(cmd))
    log("gw-compare: rdma: booting the soft-RoCE VM (minutes)")
    r = subprocess.run(cmd, capture_output=True, text=True)
    for line in r.stdout.splitlines():
        if line.startswith(JSON_MARK):
            doc = json.loads(line[len(JSON_MARK):])
            col = next((c for c in doc["columns"] if c["name"] == "rdma"), None)
            if col and col["results"]:
                t.why = None
                t.commands.extend(col["commands"])
                if doc["meta"].get("syscalls_not_counted"):
                    t.errors.append("in the VM, syscalls not counted: "
                                    + doc["meta"]["syscalls_not_counted"])
                return {"rdma": {w: r["samples"] for w, r in col["results"].items()}}
            t.why = "in the VM: " + ((col or {}).get("why") or "no result")
            return {}
    t.why = "the VM run failed (exit %d): %s" % (r.returncode,
                                                 (r.stdout + r.stderr).strip()[-300:])
    return {}
