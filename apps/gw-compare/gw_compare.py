"""gw-compare: the protocol-stack overhead comparison. The same workloads over every transport
this machine can run (and the reference tools), rounds interleaved, speed and cost side by side.

  gw-compare                       # tcp (sleep, busy), dpdk memif, af_packet and af_xdp/veth, refs
                                   # (iperf3, sockperf, dpdk-testpmd, UCX, libfabric;
                                   # Open MPI and Gloo on the allreduce rows)
  gw-compare --quick --report DIR  # CI-sized run and an HTML report
  gw-compare --rdma-vm             # + rdma on soft-RoCE inside a VM (takes minutes)
"""
import argparse
import json
import os
import random
import signal
import socket
import statistics
import sys
import time

import gwc_counters
import gwc_output
import gwc_proc
import gwc_ref
import gwc_transports
import gwc_workloads as W
import gwc_meta

HERE = os.path.dirname(os.path.abspath(__file__))


def ephemeral_low():
    """The low end of the kernel's ephemeral port range (32768 if it cannot be read)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


class Ctx:
    def __init__(self, a):
        self.build = a.build_dir
        self.gw_perf = os.path.join(a.build_dir, "apps/gw-perf/gw-perf")
        self.gw_coll_perf = os.path.join(a.build_dir, "apps/gw-coll-perf/gw-coll-perf")
        self.bindir = os.environ.get("GW_COMPARE_BINDIR")
        if self.bindir:  # installed: the binaries are beside the launcher
            self.gw_perf = os.path.join(self.bindir, "gw-perf")
            self.gw_coll_perf = os.path.join(self.bindir, "gw-coll-perf")
        self.in_vm = a.in_vm
        # Store ports below the kernel's ephemeral range: a port inside it can be taken by any
        # outgoing connection between our pick and the store's bind (seen: "tcp store server:
        # cannot listen ... Address already in use" in one row of gw-demo).
        self._eph_low = ephemeral_low()
        self._port = random.randint(10000, max(10001, self._eph_low - 4000))
        self.source = a.source_dir

    def port(self):
        for _ in range(1000):  # the next one nobody holds now
            self._port = self._port + 1 if self._port + 1 < self._eph_low else 10000
            with socket.socket() as s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    s.bind(("0.0.0.0", self._port))
                    return self._port
                except OSError:
                    continue
        return self._port

    def netns_script(self):
        for d in (HERE, os.path.join(self.source, "usertools")):
            if os.path.exists(os.path.join(d, "gw-compare-netns.sh")):
                return os.path.join(d, "gw-compare-netns.sh")
        return "gw-compare-netns.sh"

    def driver_built(self, d):
        if self.bindir:  # an installed gradwire: try, and report the failure if it fails
            return True
        return os.path.exists(os.path.join(self.build, "drivers/libgw_drv_%s.a" % d))


def parse_args(argv):
    p = argparse.ArgumentParser(prog="gw-compare", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build-dir", default=os.environ.get("GW_COMPARE_BUILD", "build"))
    p.add_argument("--source-dir", default=os.environ.get("GW_COMPARE_SOURCE",
                                                          os.path.dirname(os.path.dirname(HERE))))
    p.add_argument("-t", "--transports", default="tcp,tcp-busy,memif,af_packet,af_xdp,rdma",
                   help="comma list of tcp, tcp-busy, memif, af_packet, af_xdp, rdma")
    p.add_argument("-w", "--workloads", default=",".join(w.id for w in W.WORKLOADS),
                   help="comma list of " + ", ".join(w.id for w in W.WORKLOADS))
    p.add_argument("--refs", default="iperf3,sockperf,dpdk-testpmd,ucx_perftest,fi_pingpong,"
                   "fi_rdm_tagged_bw,openmpi,gloo", help="reference tools to run when installed ('' for none)")
    p.add_argument("-r", "--rounds", type=int, default=3, help="interleaved rounds (3)")
    p.add_argument("-D", "--duration", type=float, default=0.3,
                   help="seconds per workload per round (0.3)")
    p.add_argument("--quick", action="store_true", help="1 round, short phases: for CI")
    p.add_argument("--json", metavar="FILE", help="results as JSON ('-' for stdout)")
    p.add_argument("--csv", metavar="FILE", help="one row per transport x workload")
    p.add_argument("--markdown", metavar="FILE", help="the table in Markdown")
    p.add_argument("--report", metavar="DIR", help="self-contained HTML report in DIR")
    p.add_argument("--profile", action="store_true",
                   help="one more pass under perf record: CPU time by category")
    p.add_argument("--rdma-vm", action="store_true",
                   help="also run rdma on soft-RoCE in a VM (usertools/gw-rxe-vm.sh)")
    p.add_argument("--no-counters", action="store_true",
                   help="speed only: no perf_event counters (to measure what they cost)")
    p.add_argument("--in-vm", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--timeout", type=float, default=120, help="seconds per process pair")
    a = p.parse_args(argv)
    if a.no_counters:
        os.environ["GW_COMPARE_COUNTERS"] = "0"
    if a.quick:
        a.rounds, a.duration = 1, min(a.duration, 0.1)
    return a


def run_pair(ctx, t, run, n, timeout, profile=None):
    """One process pair; returns (samples, commands, driver stats, error or None)."""
    ranks = (t.perf_ranks if run.tool == "perf" else t.coll_ranks)(ctx, n, run.args)
    watch = 1 if run.tool == "perf" else 0  # gw-perf's client, gw-coll-perf's rank 0
    procs, marks, ok = gwc_proc.run_ranks(ranks, timeout, watch=watch, profile=profile)
    cmds = [" ".join(["%s=%s" % kv for kv in sorted(p.env.items()) if kv[0] != "GW_LOG_LEVEL"]
                     + p.command) for p in procs]
    stats = {}
    for p in procs:
        for k, v in gwc_proc.parse_stats(p.stderr()).items():
            stats[k] = stats.get(k, 0) + v
    err = None
    if not ok:
        tails = ["rank %d exit %s: %s" % (i, p.rc, p.stderr().strip().splitlines()[-1:])
                 for i, p in enumerate(procs) if p.rc != 0]
        err = "; ".join(tails)
    samples = W.samples_from_marks(run, marks)
    for p in procs:
        p.close()
    if t.spec[0].find("{n}") >= 0:
        for s in t.fresh(n):
            path = s.split("socket=")[-1]
            if os.path.exists(path):
                os.unlink(path)
    return samples, cmds, stats, err


def measure(a, ctx, transports, selected, log, refs):
    """Interleaved rounds (the reference tools' too); returns {transport: {workload: [...]}}."""
    results = {t.name: {} for t in transports}
    est = {}
    n = 0
    for rnd in range(a.rounds):
        k = rnd % max(len(transports), 1)
        order = transports[k:] + transports[:k]
        for t in order:
            for run in W.plan(a.duration, selected, est.setdefault(t.name, {})):
                n += 1
                t0 = time.monotonic()
                samples, cmds, stats, err = run_pair(ctx, t, run, n, a.timeout)
                log("round %d  %-10s %-4s %-28s %5.1f s%s" % (
                    rnd + 1, t.name, run.tool, " ".join(run.args[:6]), time.monotonic() - t0,
                    "  FAILED: " + err if err else ""))
                t.commands.extend(c for c in cmds if c not in t.commands)
                for k, v in stats.items():
                    t.stats[k] = t.stats.get(k, 0) + v
                if err:
                    t.errors.append(err)
                for s in samples:
                    s["round"] = rnd + 1
                    results[t.name].setdefault(s["workload"], []).append(s)
                    if run.tool == "coll":  # the next round's iterations fit its pace
                        est[t.name][s["workload"]] = s["value"]
        refs.round(ctx, rnd, log)
    return results


def summarize(samples):
    """Median and spread of the speed, medians of the per-message costs."""
    vals = [s["value"] for s in samples]
    out = {"n": len(vals), "median": statistics.median(vals), "min": min(vals),
           "max": max(vals), "samples": samples}
    per = {}
    for s in samples:
        c, m, b = s["cost"], s["msgs"], s["bytes"]
        tc = c.get("task_clock_ns")
        u, k = c.get("user_s") or 0, c.get("sys_s") or 0
        ufrac = u / (u + k) if u + k > 0 else None
        row = {"cpu_us_per_msg": tc / m / 1e3 if tc is not None else None,
               "cpu_s_per_GiB": tc * 1e-9 / (b / 2**30) if tc is not None else None,
               "syscalls_per_msg": c["syscalls"] / m if c.get("syscalls") is not None else None,
               "ctxsw_per_msg": c["ctxsw"] / m if c.get("ctxsw") is not None else None,
               "vcsw_per_msg": c["vcsw"] / m if c.get("vcsw") is not None else None,
               "ivcsw_per_msg": c["ivcsw"] / m if c.get("ivcsw") is not None else None}
        if tc is not None and ufrac is not None:
            row["user_us_per_msg"] = tc * ufrac / m / 1e3
            row["sys_us_per_msg"] = tc * (1 - ufrac) / m / 1e3
        for key, v in row.items():
            if v is not None:
                per.setdefault(key, []).append(v)
    out["cost"] = {k: statistics.median(v) for k, v in per.items()}
    return out


def main(argv=None):
    a = parse_args(argv if argv is not None else sys.argv[1:])
    ctx = Ctx(a)
    log = lambda msg: print(msg, file=sys.stderr, flush=True)
    run_id = "%d" % (os.getpid() % 100000)
    wanted = [x for x in a.transports.split(",") if x]
    selected = set(x for x in a.workloads.split(",") if x)
    bad = [w for w in selected if w not in W.BY_ID]
    if bad:
        log("gw-compare: unknown workload(s) %s" % ", ".join(bad))
        return 2
    all_t = {t.name: t for t in gwc_transports.make_transports(run_id)}
    unknown = [x for x in wanted if x not in all_t]
    if unknown:
        log("gw-compare: unknown transport(s) %s (known: %s)" % (", ".join(unknown),
                                                                  ", ".join(all_t)))
        return 2
    transports = [all_t[x] for x in wanted]
    for t in transports:
        t.why, t.commands, t.stats, t.errors = gwc_transports.check_available(t, ctx), [], {}, []
    mounted = gwc_counters.ensure_tracefs()  # the system-call column needs it
    if mounted:
        log("gw-compare: " + mounted)
    meta = gwc_meta.collect(a, ctx, argv if argv is not None else sys.argv[1:])
    if mounted:
        meta["tracefs"] = mounted
    veth = None
    # A signal must still tear the namespaces down: turn it into an exception.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda s, f: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        on_veth = [all_t[k] for k in ("af_packet", "af_xdp")
                   if all_t.get(k) in transports and all_t[k].why is None]
        if on_veth:
            veth = gwc_transports.Veth(ctx.netns_script(), run_id).__enter__()
            for t in on_veth if veth.why else []:
                t.why = veth.why
        runnable = [t for t in transports if t.why is None and (t.name != "rdma" or a.in_vm)]
        for t in transports:
            if t.why and not (t.name == "rdma" and a.rdma_vm):
                log("gw-compare: %s cannot run: %s" % (t.name, t.why))
        refs = gwc_ref.Refs(a, selected, ctx)
        raw = measure(a, ctx, runnable, selected, log, refs)
        rdma = all_t["rdma"]
        if a.rdma_vm and rdma in transports:
            raw.update(gwc_ref.run_rdma_vm(a, ctx, rdma, log))
        refs = refs.finish(summarize)
        if a.profile:
            from gwc_profile import profile_all
            meta["profile"] = profile_all(a, ctx, runnable, run_pair, log)
    finally:
        if veth:
            veth.__exit__(None, None, None)
    results = {}
    for t in transports:
        res = {w: summarize(s) for w, s in raw.get(t.name, {}).items() if s}
        if t.why is None and not res:
            t.why = "every run failed: " + ("; ".join(t.errors[:2]) or "no output")
        results[t.name] = res
    doc = gwc_output.document(meta, transports, refs, results)
    print(gwc_output.table(doc))
    if a.in_vm:
        print(gwc_ref.JSON_MARK + json.dumps(doc, default=str))
    if a.json:
        text = json.dumps(doc, indent=1, default=str)
        if a.json == "-":
            print(text)
        else:
            with open(a.json, "w") as f:
                f.write(text)
    for path, render in ((a.csv, gwc_output.csv), (a.markdown, gwc_output.markdown)):
        if path:
            with open(path, "w") as f:
                f.write(render(doc))
    if a.report:
        import gwc_report
        path = gwc_report.write(doc, a.report)
        log("gw-compare: report %s" % path)
    return 0 if any(results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
