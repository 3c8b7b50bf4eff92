"""Per-process counters read while the process runs, so that one process can measure several
workloads (its setup is left out by reading the counters between phases).

perf_event_open(2), the interface `perf stat` uses, opened by gw-compare itself on the rank's
pid with inherit=1 (its threads and children count too) before the rank starts running:
  raw_syscalls:sys_enter   tracepoint: every system call entry
  context-switches         software event: voluntary and involuntary
  task-clock               software event: ns on a CPU
User/system split and voluntary/involuntary split from /proc (ticks of 10 ms; summed over
the process's threads). Needs root or kernel.perf_event_paranoid <= 1 for the tracepoint,
and tracefs mounted (ensure_tracefs mounts it when root); without them syscalls are None and
the reason is kept in `why`.
"""
import ctypes
import os
import struct

_NR_PERF_EVENT_OPEN = {"x86_64": 298, "aarch64": 241}.get(os.uname().machine)
_TYPE_SOFTWARE, _TYPE_TRACEPOINT = 1, 2
_SW_TASK_CLOCK, _SW_CONTEXT_SWITCHES = 1, 3
_FLAG_INHERIT = 1 << 1
_ATTR_SIZE = 112  # PERF_ATTR_SIZE_VER5, the rest zero
_libc = ctypes.CDLL(None, use_errno=True)
_TICK = 1.0 / os.sysconf("SC_CLK_TCK")
_TRACEFS = ("/sys/kernel/tracing", "/sys/kernel/debug/tracing")
_MOUNT_HINT = "as root: mount -t tracefs nodev /sys/kernel/tracing"
_mount_failed = None  # why ensure_tracefs could not mount it, once it tried


def _tracepoint_id(name):
    for root in _TRACEFS:
        try:
            with open("%s/events/%s/id" % (root, name)) as f:
                return int(f.read())
        except OSError:
            continue
    return None


def _open(pid, type_, config):
    """A counting perf event on `pid` (all CPUs). @return fd, or -errno."""
    if _NR_PERF_EVENT_OPEN is None:
        return -38  # ENOSYS: unknown architecture
    attr = struct.pack("IIQQQQQ", type_, _ATTR_SIZE, config, 0, 0, 0, _FLAG_INHERIT)
    attr += b"\0" * (_ATTR_SIZE - len(attr))
    buf = ctypes.create_string_buffer(attr, _ATTR_SIZE)
    fd = _libc.syscall(_NR_PERF_EVENT_OPEN, buf, pid, -1, -1, 0)
    return fd if fd >= 0 else -ctypes.get_errno()


class Counters:
    """The counters of one process tree; `read()` gives a snapshot dict."""

    def __init__(self, pid):
        self.pid = pid
        self.fds = {}
        self.why = None
        tp = _tracepoint_id("raw_syscalls/sys_enter")
        wanted = [("task_clock_ns", _TYPE_SOFTWARE, _SW_TASK_CLOCK),
                  ("ctxsw", _TYPE_SOFTWARE, _SW_CONTEXT_SWITCHES)]
        if tp is None:
            self.why = "no tracefs at %s (%s)" % (" or ".join(_TRACEFS),
                                                  _mount_failed or _MOUNT_HINT)
        else:
            wanted.append(("syscalls", _TYPE_TRACEPOINT, tp))
        for name, t, c in wanted:
            fd = _open(pid, t, c)
            if fd >= 0:
                self.fds[name] = fd
            elif name == "syscalls":
                self.why = "perf_event_open(raw_syscalls:sys_enter) failed: %s (root, or " \
                    "kernel.perf_event_paranoid <= 1)" % os.strerror(-fd)

    def read(self):
        snap = {}
        for name, fd in self.fds.items():
            try:
                snap[name] = struct.unpack("Q", os.read(fd, 8))[0]
            except OSError:
                snap[name] = None
        snap.update(proc_times(self.pid))
        return snap

    def close(self):
        for fd in self.fds.values():
            os.close(fd)
        self.fds = {}


def _mount(argv):
    """Runs mount(8); @return None, or its complaint."""
    import subprocess
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as e:
        return str(e)
    return None if r.returncode == 0 else (r.stderr.strip() or "exit %d" % r.returncode)


def ensure_tracefs():
    """Mounts tracefs when the syscall tracepoint cannot be found and we are root: on
    /sys/kernel/tracing, else debugfs on /sys/kernel/debug (which brings tracing/ with it).
    @return what was mounted (a line for the log), or None when nothing was done; a failure is
    kept for Counters.why, so the report says what was tried and what to run."""
    global _mount_failed
    if _tracepoint_id("raw_syscalls/sys_enter") is not None:
        return None
    if os.geteuid() != 0:
        _mount_failed = "not root, so gw-compare did not mount it; " + _MOUNT_HINT
        return None
    tried = []
    for argv, where in ((["mount", "-t", "tracefs", "nodev", _TRACEFS[0]], _TRACEFS[0]),
                        (["mount", "-t", "debugfs", "nodev", "/sys/kernel/debug"],
                         _TRACEFS[1])):
        err = _mount(argv)
        if err is None and _tracepoint_id("raw_syscalls/sys_enter") is not None:
            return "mounted %s on %s for the system-call counts (%s)" % (
                argv[2], argv[4], " ".join(argv))
        tried.append("`%s`: %s" % (" ".join(argv), err or "mounted, but %s has no "
                                   "events/raw_syscalls (kernel without "
                                   "CONFIG_FTRACE_SYSCALLS?)" % where))
    _mount_failed = "gw-compare tried %s; mount it where that is allowed (%s; in a container: " \
        "on the host, or give it CAP_SYS_ADMIN)" % ("; ".join(tried), _MOUNT_HINT)
    return None


def proc_times(pid):
    """utime/stime (s, whole process) and switch counts (summed over live threads)."""
    out = {}
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        out["user_s"] = int(fields[11]) * _TICK
        out["sys_s"] = int(fields[12]) * _TICK
    except (OSError, IndexError, ValueError):
        return out
    v = iv = 0
    try:
        for tid in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/status" % (pid, tid)) as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches"):
                        v += int(line.split()[1])
                    elif line.startswith("nonvoluntary_ctxt_switches"):
                        iv += int(line.split()[1])
    except OSError:
        pass
    out["vcsw"], out["ivcsw"] = v, iv
    return out
