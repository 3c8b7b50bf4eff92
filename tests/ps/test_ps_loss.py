#!/usr/bin/env python3
"""The parameter server goes on after losing a rank (issue 42 item 1, ps.on_loss = continue).

Ranks are processes of ps_loss_probe over tcp loopback, one of them SIGKILLed:
 - worker-bsp: 1 server, 3 workers, 8 BSP rounds; worker rank 3 is killed after pushing round
   3. The server and workers 1 and 2 finish every round; each pulled round equals, element by
   element, the sum of the 3 workers' pushes for the rounds the victim's push reached the
   server (all before round 3; round 3 iff the server counted its 4th push) and the sum of
   the 2 others' for the rest.
 - worker-ssp: the same in SSP (staleness 1); the server's final parameters must be the sum of
   every counted push.
 - server: 2 servers, 2 workers, 6 BSP rounds, server rank 1 killed after 3: a pull in flight
   (worker rank 2), a new pull and a push of its key fail with RemoteError naming rank 1 and
   the key; the other key goes on.

Usage: test_ps_loss.py PROBE [CASE...]
"""
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROUNDS, K = 8, 3


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(probe, n, args):
    port = free_port()
    env = dict(os.environ, GW_LOG_LEVEL=os.environ.get("GW_LOG_LEVEL", "warn"),
               GW_PS_ON_LOSS="continue", GW_WORLD_SIZE=str(n), GW_MASTER_ADDR="127.0.0.1",
               GW_MASTER_PORT=str(port))
    procs, out = [], [[] for _ in range(n)]
    for r in range(n):
        p = subprocess.Popen([probe] + args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, env=dict(env, GW_RANK=str(r)))
        threading.Thread(target=lambda p=p, r=r: [out[r].append(l.rstrip()) for l in p.stdout],
                         daemon=True).start()
        procs.append(p)
    return procs, out


def run_case(probe, victim, n, args, ready_ranks, flag=None):
    procs, out = launch(probe, n, args)
    bad = []
    try:
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline and not all(
                "READY" in out[r] for r in ready_ranks):
            if any(p.poll() not in (None, 0) for p in procs):
                break
            time.sleep(0.02)
        if not all("READY" in out[r] for r in ready_ranks):
            bad.append("ranks %s never got READY" % ready_ranks)
        else:
            procs[victim].send_signal(signal.SIGKILL)
            procs[victim].wait()
            if flag:
                open(flag, "w").close()
        for r, p in enumerate(procs):
            if r == victim:
                continue
            try:
                rc = p.wait(timeout=max(1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                rc = "timeout"
            if rc != 0:
                bad.append(f"rank {r} exited {rc}")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
    time.sleep(0.1)  # the readers' last lines
    return out, bad


def worker_case(probe, mode):
    out, bad = run_case(probe, 3, 4, ["worker", mode, str(ROUNDS), str(K)], [3])
    pushes = next((int(l.split()[2]) for l in out[0] if l.startswith("server pushes")), None)
    if pushes is None:
        bad.append("the server did not report its pushes")
    else:
        counted = pushes - 2 * ROUNDS  # the victim's pushes the server applied
        if counted not in (K, K + 1):
            bad.append(f"server counted {counted} pushes of the victim, want {K} or {K + 1}")
        if not any(l.startswith("server pushes") and "live 2 lost 1" in l for l in out[0]):
            bad.append("server does not report 2 live workers, 1 lost")
        for r in (1, 2):
            if f"rank {r} done" not in out[r]:
                bad.append(f"worker rank {r} did not finish")
            if mode != "bsp":
                continue
            for t in range(ROUNDS):
                want = "with" if t < counted else "without"
                if f"rank {r} round {t} {want}" not in out[r]:
                    bad.append(f"worker rank {r} round {t}: want the sum {want} the victim")
        if mode == "ssp" and "server final ok" not in out[0]:
            bad.append("server's final parameters are not the sum of the counted pushes")
    return out, bad


def server_case(probe):
    with tempfile.TemporaryDirectory() as d:
        flag = os.path.join(d, "killed")
        out, bad = run_case(probe, 1, 4, ["server", "-", "6", str(K), flag], [2, 3], flag)
    for r in (2, 3):
        for what in ("pull", "push"):
            if not any(l.startswith(f"rank {r} {what} of lost key") and ": ok:" in l
                       for l in out[r]):
                bad.append(f"worker rank {r}: {what} of the lost key not refused naming rank 1")
        if f"rank {r} done" not in out[r]:
            bad.append(f"worker rank {r} did not finish")
    if not any(l.startswith("rank 2 in-flight pull of lost key") and ": ok:" in l for l in out[2]):
        bad.append("worker rank 2: its pull in flight did not fail naming rank 1 and the key")
    if not any(l.startswith("server 0 done, lost servers 1") for l in out[0]):
        bad.append("server 0 did not serve on to the end")
    return out, bad


def main():
    probe = sys.argv[1]
    cases = sys.argv[2:] or ["worker-bsp", "worker-ssp", "server"]
    failed = False
    for case in cases:
        t0 = time.monotonic()
        if case == "server":
            out, bad = server_case(probe)
        else:
            out, bad = worker_case(probe, case.split("-")[1])
        print(f"{case}: {'FAIL: ' + '; '.join(bad) if bad else 'ok'} "
              f"({time.monotonic() - t0:.1f} s)")
        if bad:
            failed = True
            for r, lines in enumerate(out):
                for l in lines:
                    print(f"  [{r}] {l[:300]}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
