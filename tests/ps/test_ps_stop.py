#!/usr/bin/env python3
"""The parameter server names a stopped worker (issue 39 item 3).

gw-ps-train runs 1 server and 3 workers (processes, BSP, tcp loopback, timeouts 60 s); once
they train, the last worker gets SIGSTOP. Heartbeats fail its connections after
tcp.peer_timeout_ms (1.5 s), and the first rank to see it tells the others before it leaves:
every survivor must report within 2 s of the stop, its error naming "worker rank 3" -- not a
worker that merely left first.

Usage: test_ps_stop.py BUILD_DIR
"""
import os
import queue
import signal
import subprocess
import sys
import threading
import time

LIMIT_S = 2.0


def rank_of(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            for kv in f.read().split(b"\0"):
                if kv.startswith(b"GW_RANK="):
                    return int(kv.split(b"=", 1)[1])
    except OSError:
        pass
    return None


def children(ppid):
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == ppid:
                        out.append(int(d))
            except (OSError, IndexError, ValueError):
                pass
    return out


SURVIVORS = ("server rank 0", "worker rank 1", "worker rank 2")


def reported(lines):
    """Survivor -> (seconds after the stop, its error line); the first line of each (the
    launcher repeats a rank's error)."""
    said = {}
    for t, l in lines:
        if l.startswith("gw-ps-train: "):
            # The rank reporting is named first ("ps worker rank 2: ps server rank 0: told by
            # worker rank 1: ..." is worker 2's line, relayed by the server).
            at = [(l.find(f"ps {w}:"), w) for w in SURVIVORS if f"ps {w}:" in l]
            who = min(at)[1] if at else None
            if who is not None and who not in said:
                said[who] = (t, l)
    return said


def main():
    build = sys.argv[1]
    exe = os.path.join(build, "apps", "gw-ps-train", "gw-ps-train")
    # Fail-fast: with ps.on_loss = continue the server would drop the worker instead.
    env = dict(os.environ, GW_LOG_LEVEL=os.environ.get("GW_LOG_LEVEL", "warn"),
               GW_PS_ON_LOSS="fail")
    p = subprocess.Popen([exe, "--ranks", "4", "--servers", "1", "--modes", "bsp", "--iters",
                          "1000000", "--timeout-ms", "60000", "--csv", "/dev/null", "--svg",
                          "/dev/null", "-t", "tcp:iface=lo"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    # A reader thread stamps each line as it comes (select() on a buffered pipe would miss
    # lines already read into the buffer).
    q = queue.Queue()
    threading.Thread(target=lambda: [q.put((time.monotonic(), l)) for l in p.stdout],
                     daemon=True).start()
    lines = []
    victim = None
    try:
        deadline = time.monotonic() + 60
        while victim is None and time.monotonic() < deadline:
            ranks = {rank_of(c): c for c in children(p.pid)}
            if 3 in ranks and len(ranks) == 4:
                victim = ranks[3]
            time.sleep(0.2)
        if victim is None:
            print("FAIL: the 4 ranks did not start")
            return 1
        time.sleep(3)  # training
        t_stop = time.monotonic()
        os.kill(victim, signal.SIGSTOP)
        while time.monotonic() < t_stop + 10 and len(reported(lines)) < 3:
            try:
                t, line = q.get(timeout=0.1)
            except queue.Empty:
                continue
            if t >= t_stop:
                lines.append((t - t_stop, line.strip()))
    finally:
        if victim:
            os.kill(victim, signal.SIGCONT)
        p.kill()
        for c in children(p.pid):
            try:
                os.kill(c, signal.SIGKILL)
            except OSError:
                pass
        p.wait()
    bad = []
    said = reported(lines)
    for who, (t, l) in sorted(said.items(), key=lambda kv: kv[1][0]):
        print(f"{t:.3f} s  {l[:240]}")
        if t > LIMIT_S:
            bad.append(f"{who} after {t:.2f} s")
        if "worker rank 3" not in l:
            bad.append(f"{who} did not name worker rank 3")
    for w in SURVIVORS:
        if w not in said:
            bad.append(f"{w} never reported an error")
    if bad:
        for t, l in lines:
            print(f"  {t:.3f} s  {l[:300]}")
    print("FAIL: " + "; ".join(bad) if bad else "ok: every survivor named worker rank 3")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
