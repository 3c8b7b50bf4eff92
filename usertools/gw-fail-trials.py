#!/usr/bin/env python3
"""Kill and stop trials (issue 24 item 5): does every survivor learn, fast, who failed?

Each trial starts N ranks of gw-fail-probe (tests/coll/fail_probe.cc) on loopback over tcp,
waits until all of them run allreduces, then SIGKILLs or SIGSTOPs one rank. The survivors keep
running until their allreduce fails, print the error and stay alive (as a trainer that catches
it does). A trial passes when every survivor errors within 2 s of a kill (within the timeout
+ 1 s of a stop) and its error names the victim (Status::rank(), printed as culprit=).

    usertools/gw-fail-trials.py --kills 20 --stops 20 --ranks 4-8 --bytes 16777216 \\
        --timeout-ms 5000 [--stop-limit-s 2] [--transport tcp:iface=lo] [--build build] [--seed 1]
        [--netns ID]

--netns ID: rank r runs in host r+1 of a bed made by `usertools/gw-cluster.sh --id ID --hosts N
up` (N >= the ranks), {iface} in the spec becoming its veth (dpdk af_packet over veth).

Prints one line per trial and a summary; exit status 1 when a trial failed.
"""
import argparse
import os
import random
import re
import selectors
import signal
import socket
import subprocess
import sys
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop_limit(args):
    # Heartbeats (transport.progress=thread) name a stopped rank within 2 s whatever the
    # collective's timeout; without them it is found at the timeout.
    return args.stop_limit_s if args.stop_limit_s > 0 else args.timeout_ms / 1000 + 1.0


def run_trial(probe, n, victim, mode, args):
    port = free_port()
    procs = []
    for r in range(n):
        env = dict(os.environ, GW_RANK=str(r), GW_WORLD_SIZE=str(n),
                   GW_MASTER_ADDR="10.77.0.1" if args.netns else "127.0.0.1",
                   GW_MASTER_PORT=str(port),
                   GW_LOG_LEVEL=os.environ.get("GW_LOG_LEVEL", "error"))
        spec = args.transport.replace("{port}", str(port))
        # `ip netns exec` execs the probe: the pid signalled is the rank's own.
        pre = ["ip", "netns", "exec", f"gwk{args.netns}-h{r + 1}"] if args.netns else []
        if args.netns:
            spec = spec.replace("{iface}", f"gwk{args.netns}h{r + 1}")
        procs.append(subprocess.Popen(
            pre + [probe, "--bytes", str(args.bytes), "--timeout-ms", str(args.timeout_ms),
                   "--linger-s", "60", "--transport", spec],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1))
    sel = selectors.DefaultSelector()
    for r, p in enumerate(procs):
        sel.register(p.stdout, selectors.EVENT_READ, r)
    ready, errors = set(), {}

    def pump(until, want):
        while time.monotonic() < until and not want():
            for key, _ in sel.select(timeout=0.05):
                line = key.fileobj.readline()
                if not line:
                    sel.unregister(key.fileobj)
                    continue
                r = key.data
                if line.startswith("ready"):
                    ready.add(r)
                elif line.startswith("error"):
                    f = dict(kv.split("=", 1) for kv in line.split(" msg=")[0].split()[1:])
                    errors[r] = (int(f["t_ns"]), f["code"], int(f["culprit"]),
                                 line.split(" msg=", 1)[1].strip())

    try:
        pump(time.monotonic() + 60, lambda: len(ready) == n)
        if len(ready) < n:
            return None, f"setup: only ranks {sorted(ready)} of {n} got ready"
        time.sleep(random.uniform(0.1, 0.4))  # somewhere inside an allreduce
        t_fail = time.time_ns()
        os.kill(procs[victim].pid, signal.SIGKILL if mode == "kill" else signal.SIGSTOP)
        survivors = [r for r in range(n) if r != victim]
        limit = 2.0 if mode == "kill" else stop_limit(args)
        pump(time.monotonic() + limit + 10, lambda: all(r in errors for r in survivors))
        worst, bad = 0.0, []
        for r in survivors:
            if r not in errors:
                bad.append(f"rank {r} never errored")
                continue
            t, code, culprit, msg = errors[r]
            took = (t - t_fail) / 1e9
            worst = max(worst, took)
            if took > limit:
                bad.append(f"rank {r} after {took:.2f} s")
            if culprit != victim:
                bad.append(f"rank {r} named {culprit} ({code}: {msg[:160]})")
        return worst, "; ".join(bad)
    finally:
        for p in procs:
            try:
                p.send_signal(signal.SIGCONT)
                p.kill()
            except ProcessLookupError:
                pass
        for p in procs:
            p.wait()
        for sock in re.findall(r"socket=([^,]+)", args.transport.replace("{port}", str(port))):
            if os.path.exists(sock):
                os.unlink(sock)  # a memif socket a killed rank left


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--stops", type=int, default=20)
    ap.add_argument("--ranks", default="4-8", help="lo-hi, each trial picks one")
    ap.add_argument("--bytes", type=int, default=16 << 20)
    ap.add_argument("--timeout-ms", type=int, default=5000)
    ap.add_argument("--stop-limit-s", type=float, default=0,
                    help="a stopped rank must be named this fast (default: timeout + 1 s)")
    ap.add_argument("--transport", default="tcp:iface=lo",
                    help="spec; {port} becomes the trial's store port (a fresh memif socket)")
    ap.add_argument("--build", default="build")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--netns", default="",
                    help="id of a gw-cluster.sh bed: rank r runs in its host r+1")
    args = ap.parse_args()
    random.seed(args.seed)
    probe = os.path.join(args.build, "tests", "coll", "gw-fail-probe")
    if not os.access(probe, os.X_OK):
        sys.exit(f"{probe} not found: build first (usertools/gw-build.sh)")
    lo, hi = (int(x) for x in args.ranks.split("-"))
    results = {"kill": [], "stop": []}
    for mode, count in (("kill", args.kills), ("stop", args.stops)):
        for i in range(count):
            n = random.randint(lo, hi)
            victim = random.randrange(n)
            worst, bad = run_trial(probe, n, victim, mode, args)
            ok = worst is not None and not bad
            results[mode].append((ok, worst))
            w = "-" if worst is None else f"{worst:.3f} s"
            print(f"{mode} {i + 1:2d}: {n} ranks, victim {victim}: slowest survivor {w}: "
                  f"{'ok' if ok else 'FAILED: ' + bad}", flush=True)
    failed = 0
    for mode, rs in results.items():
        if not rs:
            continue
        good = sum(ok for ok, _ in rs)
        failed += len(rs) - good
        worst = max((w for _, w in rs if w is not None), default=float("nan"))
        print(f"{mode}: {good}/{len(rs)} trials passed; slowest survivor {worst:.3f} s "
              f"(limit {'2 s' if mode == 'kill' else f'{stop_limit(args):.1f} s'})")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
