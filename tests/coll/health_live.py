#!/usr/bin/env python3
"""gw-doctor --live against running ranks (issue 42 item 3; meson test coll-health).

Four gw-fail-probe ranks over tcp on loopback run allreduces with compute gaps. Checked:
  1. healthy: every rank answers its health socket, nothing is reported (exit 0), and the
     Prometheus text has each rank's transport counters;
  2. rank 1 computes 4 s before one allreduce: the others wait in it, and the live query names
     rank 1 BEHIND and the others WAITING for it (exit 1) -- before any timeout (60 s);
  3. rank 2 is SIGSTOPped: the live query names it NOT ANSWERING, its process stopped, within
     2 s of the stop;
  4. coll.metrics_file: each rank writes its counters as Prometheus text to its own file every
     200 ms (checked: the rank's labels, gradwire_up 1, bytes_sent growing).
Usage: health_live.py BUILD_DIR
"""
import json
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

N = 4


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


METRICS = tempfile.mkdtemp(prefix="gw-metrics-")


def start(build, extra):
    port = free_port()
    procs = []
    for r in range(N):
        env = dict(os.environ, GW_RANK=str(r), GW_WORLD_SIZE=str(N), GW_MASTER_ADDR="127.0.0.1",
                   GW_MASTER_PORT=str(port), GW_LOG_LEVEL="error",
                   GW_COLL_METRICS_FILE=os.path.join(METRICS, "gw-{job}-{rank}.prom"),
                   GW_COLL_METRICS_INTERVAL_MS="200")
        procs.append(subprocess.Popen(
            [f"{build}/tests/coll/gw-fail-probe", "--bytes", "65536", "--timeout-ms", "60000",
             "--linger-s", "60", "--transport", "tcp:iface=lo", "--gap-ms", "20"] + extra,
            env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1))
    sel = selectors.DefaultSelector()
    for p in procs:
        sel.register(p.stdout, selectors.EVENT_READ)
    jobs, end = set(), time.monotonic() + 60
    while len(jobs) < N and time.monotonic() < end:  # "ready <rank> job=<id>" from each
        for key, _ in sel.select(timeout=0.1):
            line = key.fileobj.readline()
            if line.startswith("ready"):
                jobs.add(line.split("job=")[1].strip() + f"/{line.split()[1]}")
    ids = {j.split("/")[0] for j in jobs}
    if len(jobs) < N or len(ids) != 1:
        stop(procs)
        sys.exit(f"FAIL setup: ready ranks {sorted(jobs)}")
    return procs, ids.pop()


def stop(procs):
    for p in procs:
        try:
            p.send_signal(signal.SIGCONT)
            p.kill()
        except ProcessLookupError:
            pass
    for p in procs:
        p.wait()


def doctor(build, job, *args):
    r = subprocess.run([f"{build}/apps/gw-doctor/gw-doctor", "--live", "--job", job, *args],
                       capture_output=True, text=True, timeout=30)
    return r.returncode, r.stdout, r.stderr


def check(cond, what, out=""):
    if not cond:
        sys.exit(f"FAIL: {what}\n{out}")
    print(f"ok: {what}")


def main():
    build = sys.argv[1]
    procs, job = start(build, ["--pause-rank", "1", "--pause-at", "60", "--pause-s", "4"])
    try:
        rc, out, err = doctor(build, job, "--json")
        rep = json.loads(out)[0]
        check(rc == 0 and rep["ok"], "healthy job: exit 0", out + err)
        check([r["rank"] for r in rep["ranks"]] == list(range(N)), "every rank answers", out)
        check(all(r["last_finished"] > 0 and r["broken"] is None for r in rep["ranks"]),
              "every rank has finished allreduces and is not broken", out)
        rc, prom, err = doctor(build, job, "--prometheus")
        for r in range(N):
            check(f'gradwire_bytes_sent{{job="{job}",rank="{r}"}}' in prom,
                  f"Prometheus text has rank {r}'s bytes_sent", prom + err)
        # Exposition format: one TYPE line per metric, its samples right after it.
        lines = prom.splitlines()
        types = [ln.split()[2] for ln in lines if ln.startswith("# TYPE ")]
        check(len(types) == len(set(types)) and "gradwire_up" in types,
              "each metric has one TYPE line", prom)
        at = lines.index("# TYPE gradwire_bytes_sent gauge")
        check(all(ln.startswith("gradwire_bytes_sent{") for ln in lines[at + 1:at + 1 + N]),
              "bytes_sent's samples of all ranks follow its TYPE line", prom)
        # The metrics files: one per rank, rewritten every 200 ms.
        def sent(r):  # a rank in a call at a tick writes no counters yet: up to 2 s
            key, text = f'gradwire_bytes_sent{{job="{job}",rank="{r}"}} ', ""
            for _ in range(20):
                with open(os.path.join(METRICS, f"gw-{job}-{r}.prom")) as f:
                    text = f.read()
                if key in text:
                    break
                time.sleep(0.1)
            check(f'gradwire_up{{job="{job}",rank="{r}"}} 1' in text and key in text,
                  f"rank {r}'s metrics file", text)
            return int(text.split(key)[1].split()[0])
        before = [sent(r) for r in range(N)]
        time.sleep(0.5)
        check(all(sent(r) > before[r] for r in range(N)), "metrics files rewritten, bytes growing")
        # Rank 1 computes 4 s before allreduce #60 (~20 ms a call: about 1.2 s in).
        seen, end = None, time.monotonic() + 15
        while time.monotonic() < end:
            rc, out, _ = doctor(build, job, "--json", "--stuck-ms", "1000")
            rep = json.loads(out)[0]
            if rc == 1 and rep["behind"] == [1] and len(rep["waiting"]) == N - 1:
                seen = rep
                break
            time.sleep(0.2)
        check(seen is not None, "rank 1 computing: named BEHIND, the others WAITING", out)
        # Recursive doubling: rank 2 waits for rank 0, which waits for rank 1.
        check(all(w["blocked_by"] == [1] and w["state"] == "running" for w in seen["waiting"]),
              "each waiting rank is blocked by rank 1", json.dumps(seen["waiting"]))
        rc, text, _ = doctor(build, job, "--stuck-ms", "1000")
        print(text, end="")
        # Stop rank 2; the next query must name it.
        os.kill(procs[2].pid, signal.SIGSTOP)
        t0, named = time.monotonic(), None
        while time.monotonic() - t0 < 5:
            rc, out, _ = doctor(build, job, "--json", "--timeout-ms", "500")
            silent = json.loads(out)[0]["not_answering"]
            if rc == 1 and [s["rank"] for s in silent] == [2]:
                named = time.monotonic() - t0
                break
        check(named is not None and named <= 2.0,
              f"stopped rank 2 named within 2 s ({named if named is None else round(named, 2)} s)",
              out)
        check("stopped" in silent[0]["why"] and silent[0]["pid"] == procs[2].pid,
              "its process is named stopped, with its pid", silent[0]["why"])
        rc, text, _ = doctor(build, job)
        print(text, end="")
    finally:
        stop(procs)
        shutil.rmtree(METRICS, ignore_errors=True)
    print("1 passed, 0 failed")


if __name__ == "__main__":
    main()
