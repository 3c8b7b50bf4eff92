#!/usr/bin/env python3
"""What a failure costs: shrink against a full teardown and re-rendezvous (issue 42 item 5).

N gw-shrink-probe ranks (processes, tcp on loopback, one file store) run allreduces of 64 KiB;
the last rank is SIGKILLed; the survivors either shrink (Communicator::shrink) or tear down
and rendezvous again (--reinit: new transport, Group::create under a new prefix). Each
survivor measures from the failed call's return to its first correct collective after it;
a trial gives the slowest survivor's figure and the median survivor's. Modes run
interleaved, trial by trial.
Usage: gw-shrink-bench.py [--build DIR] [--ranks 4,8] [--trials 5] [--transport SPEC]
"""
import argparse
import os
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time


def trial(build, n, mode, spec, tmp):
    store = tempfile.mkdtemp(dir=tmp)
    lines = queue.Queue()
    procs = []
    for r in range(n):
        env = dict(os.environ, GW_RANK=str(r), GW_WORLD_SIZE=str(n), GW_LOG_LEVEL="error",
                   GW_MASTER_ADDR="127.0.0.1", GW_MASTER_PORT="1")
        p = subprocess.Popen([f"{build}/tests/coll/gw-shrink-probe", "--count", "16384",
                              "--iters", "100000", "--gap-ms", "2", "--transport", spec,
                              "--store-dir", store, "--reinit", "1" if mode == "reinit" else "0"],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                             bufsize=1)
        procs.append(p)
        threading.Thread(target=lambda r=r, p=p: [lines.put((r, l)) for l in p.stdout],
                         daemon=True).start()
    want = "reinit size=" if mode == "reinit" else "shrunk size="
    got, started, end = {}, False, time.monotonic() + 120
    try:
        while len(got) < n - 1 and time.monotonic() < end:
            try:
                r, l = lines.get(timeout=0.2)
            except queue.Empty:
                continue
            if not started and l.startswith("step 20"):
                started = True
                procs[n - 1].kill()
            elif l.startswith(want):
                got[r] = float(l.split("ms=")[1].split()[0])
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()
    if len(got) < n - 1:
        sys.exit(f"{mode} at {n} ranks: only {len(got)} survivors reported")
    return max(got.values()), statistics.median(got.values())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--ranks", default="4,8")
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--transport", default="tcp:iface=lo")
    a = ap.parse_args()
    print(f"# {time.strftime('%Y-%m-%d %H:%M')} {os.uname().nodename}, {os.cpu_count()} CPUs, "
          f"{a.transport}, {a.trials} trials: median (min-max) of the slowest survivor; "
          f"[median of the median survivor]")
    print("| ranks | shrink (ms) | teardown + re-rendezvous (ms) | re-init / shrink |")
    print("|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="gw-shrink-bench-") as tmp:
        for n in [int(x) for x in a.ranks.split(",")]:
            res = {"shrink": [], "reinit": []}
            for _ in range(a.trials):
                for mode in res:
                    res[mode].append(trial(a.build, n, mode, a.transport, tmp))
            s, r = [x[0] for x in res["shrink"]], [x[0] for x in res["reinit"]]
            sm = statistics.median(x[1] for x in res["shrink"])
            rm = statistics.median(x[1] for x in res["reinit"])
            print(f"| {n} | {statistics.median(s):.1f} ({min(s):.1f}-{max(s):.1f}) [{sm:.1f}] | "
                  f"{statistics.median(r):.1f} ({min(r):.1f}-{max(r):.1f}) [{rm:.1f}] | "
                  f"{statistics.median(r) / statistics.median(s):.1f}x [{rm / sm:.1f}x] |",
                  flush=True)


if __name__ == "__main__":
    main()
