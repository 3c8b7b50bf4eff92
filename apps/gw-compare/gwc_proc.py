"""Spawning the ranks of one measurement, and what each workload they ran cost.

Each rank is its own process, started stopped (a shell trampoline stops itself before it
execs the rank) so that the counters of gwc_counters are attached before the first
instruction; `ip netns exec` execs in place, so the pid stays the rank's. One rank (the one
that prints results: gw-perf's client, gw-coll-perf's rank 0) writes into a pipe; every line
it prints ends a workload, and all ranks' counters are read right then. The first line of a
run ends the throw-away first workload, so process setup (EAL start, connection) is never
charged to a measured one. gw-compare sleeps in read()/wait4() meanwhile: a parent waking
every few ms would preempt a busy-polling rank on a 2-CPU machine.
"""
import os
import shutil
import signal
import subprocess
import tempfile
import time

from gwc_counters import Counters

TRAMPOLINE = ["/bin/sh", "-c", 'kill -STOP $$ && exec "$@"', "gw-compare-rank"]
COST_KEYS = ("task_clock_ns", "user_s", "sys_s", "ctxsw", "vcsw", "ivcsw", "syscalls")


class Proc:
    """One rank: command, output (a pipe when `watch`, else a file), counters."""

    def __init__(self, argv, env=None, netns=None, watch=False, profile=None):
        self.argv = list(argv)
        full = list(argv)
        if profile:  # CPU samples, kernel symbols included (gwc_profile reads them)
            full = ["perf", "record", "-q", "-e", "cpu-clock", "-F", "1999", "-g", "-k",
                    "CLOCK_MONOTONIC", "-o", profile, "--"] + full
        if netns:
            full = ["ip", "netns", "exec", netns] + full
        self.command = full
        self.tmp = tempfile.mkdtemp(prefix="gwc-")
        self.err = open(os.path.join(self.tmp, "stderr"), "w+")
        self.out = None if watch else open(os.path.join(self.tmp, "stdout"), "w+")
        e = dict(os.environ)
        e.update(env or {})
        self.env = env or {}
        self.p = subprocess.Popen(TRAMPOLINE + full, env=e, start_new_session=True,
                                  stdout=subprocess.PIPE if watch else self.out,
                                  stderr=self.err, text=True)
        _, st = os.waitpid(self.p.pid, os.WUNTRACED)
        # GW_COMPARE_COUNTERS=0 (--no-counters): speed only, to see what counting costs
        on = os.environ.get("GW_COMPARE_COUNTERS", "1") != "0"
        self.counters = Counters(self.p.pid) if on and os.WIFSTOPPED(st) else None
        os.kill(self.p.pid, signal.SIGCONT)
        self.rc = None
        self.lines = []

    def snapshot(self):
        return self.counters.read() if self.counters else {}

    def kill(self):
        try:
            os.killpg(self.p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def stdout(self):
        if self.out is None:
            return "".join(self.lines)
        self.out.seek(0)
        return self.out.read()

    def stderr(self):
        self.err.seek(0)
        return self.err.read()

    def close(self):
        if self.counters:
            self.counters.close()
        for f in (self.out, self.err, self.p.stdout):
            if f:
                f.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


class _Alarm(Exception):
    pass


def _on_alarm(signum, frame):
    raise _Alarm()


def run_ranks(specs, timeout_s, watch=1, stagger_s=0.05, profile=None, daemons=(),
              mark_time=False, until=None):
    """Start each (argv, env, netns) in order, servers first, and follow rank `watch`.

    Returns (procs, marks, ok): marks = [(line, {counter: sum over ranks})] for each line
    rank `watch` printed. A rank that fails gets its peers killed. Ranks in `daemons`
    (servers that never exit) are killed when the watched rank ends; their status is ignored.
    `mark_time`: each mark also holds "t", time.monotonic() when the line arrived.
    `until(marks)`: true once enough was seen; every rank is then stopped (tools that run
    until killed, as dpdk-testpmd) and counts as having succeeded.
    """
    procs, marks = [], []
    old = signal.signal(signal.SIGALRM, _on_alarm)
    deadline = time.monotonic() + timeout_s
    try:
        for i, (argv, env, netns) in enumerate(specs):
            if i:
                time.sleep(stagger_s)
            procs.append(Proc(argv, env, netns, watch=(i == watch),
                              profile=profile[i] if profile else None))
        w = procs[watch]
        signal.setitimer(signal.ITIMER_REAL, timeout_s)
        try:
            for line in w.p.stdout:  # sleeps in read() until the rank prints
                snap = _sum([p.snapshot() for p in procs])
                if mark_time:
                    snap["t"] = time.monotonic()
                marks.append((line, snap))
                w.lines.append(line)
                if until and until(marks):
                    daemons = range(len(procs))
                    break
        except _Alarm:
            pass
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        _reap(procs, deadline, daemons)
    except BaseException:
        for p in procs:
            p.kill()
        raise
    finally:
        signal.signal(signal.SIGALRM, old)
    return procs, marks, all(p.rc == 0 for p in procs)


def _reap(procs, deadline, daemons):
    pending = {p.p.pid: p for p in procs}
    timed_out = False
    while pending:
        if all(procs.index(p) in daemons for p in pending.values()):
            for p in pending.values():
                p.kill()
        left = deadline - time.monotonic()
        if left <= 0 and not timed_out:
            timed_out = True
            for p in pending.values():
                p.kill()
        try:
            signal.setitimer(signal.ITIMER_REAL, 5 if timed_out else max(left, 0.001))
            pid, status = os.waitpid(-1, 0)
        except _Alarm:
            continue
        except ChildProcessError:
            break
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        p = pending.pop(pid, None)
        if p is None:
            continue
        p.p.returncode = p.rc = os.waitstatus_to_exitcode(status)
        if procs.index(p) in daemons:
            p.rc = 0
        elif timed_out:
            p.rc = 124
        elif p.rc != 0:
            for q in pending.values():  # its peers will not finish
                q.kill()


def _sum(snaps):
    out = {}
    for k in COST_KEYS:
        vals = [s.get(k) for s in snaps]
        out[k] = None if any(v is None for v in vals) else sum(vals)
    return out


def delta(a, b):
    """Cost between two snapshots (b after a)."""
    return {k: (None if a.get(k) is None or b.get(k) is None else b[k] - a[k])
            for k in COST_KEYS}


def parse_stats(stderr_text):
    """gw-perf --stats lines ("client: name value") -> {name: value}, summed over roles."""
    out = {}
    for line in stderr_text.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0].endswith(":") and parts[2].isdigit():
            out[parts[1]] = out.get(parts[1], 0) + int(parts[2])
    return out
