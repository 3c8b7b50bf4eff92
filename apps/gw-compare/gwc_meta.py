"""What a report needs to be traced back: when, on what, with which versions, by which command."""
import os
import platform
import shlex
import subprocess
import time


def _first_line(argv):
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=10)
        text = (r.stdout or r.stderr).strip()
        return text.splitlines()[0] if text else None
    except (OSError, subprocess.TimeoutExpired):
        return None


def _cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def syscall_counting():
    """None when system calls can be counted here, else why not (probed on ourselves)."""
    from gwc_counters import Counters
    c = Counters(os.getpid())
    why = c.why
    c.close()
    return why


def collect(a, ctx, argv):
    return {
        "syscalls_not_counted": syscall_counting(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "host": platform.node(),
        "kernel": platform.release(),
        "os": _first_line(["sh", "-c", ". /etc/os-release && echo $PRETTY_NAME"]),
        "cpus": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "load_before": load(),
        "command": "gw-compare " + " ".join(shlex.quote(x) for x in argv),
        "commit": _first_line(["git", "-C", ctx.source, "describe", "--always", "--dirty"]),
        "rounds": a.rounds,
        "duration_s": a.duration,
        "versions": {
            "gw-perf": ctx.gw_perf,
            "dpdk": _first_line(["pkg-config", "--modversion", "libdpdk"]),
            "iperf3": _first_line(["iperf3", "--version"]),
            "sockperf": _first_line(["sockperf", "--version"]),
            "ucx": _first_line(["ucx_info", "-v"]),
            "libfabric": _first_line(["fi_info", "--version"]),
            "perf": _first_line(["perf", "--version"]),
            "python": platform.python_version(),
        },
        "method": (
            "Each transport runs gw-perf / gw-coll-perf as two processes (server first). "
            "Rounds are interleaved (every transport once per round, starting point rotated). "
            "Speed is the tool's own figure: ping-pong = half round trip (median over "
            "iterations, t_typical), bandwidth = average over the timed phase, allreduce = "
            "time per operation. Cost is read with perf_event_open on both ranks (task-clock, "
            "context-switches, raw_syscalls:sys_enter; inherited by threads) between the rows "
            "the tool prints, so process setup is excluded and the warm-up of each workload is "
            "counted with its messages. 'msg' = one message delivered (a ping-pong iteration is "
            "two), one allreduce for allreduce rows. Medians over rounds; spread = min..max."),
    }
