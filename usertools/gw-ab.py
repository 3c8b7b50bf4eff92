#!/usr/bin/python3
"""A/B of two gradwire builds on the same workloads, interleaved round by round.

  usertools/gw-ab.py OLD_BUILD NEW_BUILD [--rounds N] [--only NAME,...]
                     [--old-env K=V ...] [--new-env K=V ...]

--old-env/--new-env: settings of one side only (e.g. the same build twice, the flight recorder
off on the old side: --old-env GW_COLL_FLIGHT_RECORDS=0).

Each round runs every workload once per build, the order of the builds alternating between
rounds (this machine is shared and noisy: only paired ratios mean something). Prints, per
workload, each build's median and the median [min, max] of the per-round new/old ratios,
oriented so that > 1 means the new build is faster. Builds need apps/gw-perf,
apps/gw-coll-perf and apps/gw-ps-perf (configure with -Dtests=false for a quick old build).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

LO = "tcp:iface=lo"


def memif(sock):
    return "dpdk:vdev=net_memif0,role=auto,socket=%s" % sock


# name, tool, args, json key, higher-is-better
WORKLOADS = [
    ("tcp 64 B busy ping-pong, us", "perf",
     ["-t", LO, "--test", "lat", "-s", "64", "-n", "20000", "--busy"], "t_typical_us", False),
    ("tcp 16 KiB busy ping-pong, us", "perf",
     ["-t", LO, "--test", "lat", "-s", "16K", "-n", "10000", "--busy"], "t_typical_us", False),
    ("tcp 64 KiB busy ping-pong, us", "perf",
     ["-t", LO, "--test", "lat", "-s", "64K", "-n", "5000", "--busy"], "t_typical_us", False),
    ("tcp 1 MiB bandwidth, MB/s", "perf",
     ["-t", LO, "--test", "bw", "-s", "1M", "-n", "3000"], "bw_avg_MBps", True),
    ("dpdk memif 64 B ping-pong, us", "perf",
     ["-t", "MEMIF", "--test", "lat", "-s", "64", "-n", "20000", "--busy"], "t_typical_us",
     False),
    ("dpdk memif 64 B rate, Mpps", "perf",
     ["-t", "MEMIF", "--test", "bw", "-s", "64", "-n", "1000000"], "msg_rate_Mpps", True),
    ("allreduce 4 KiB, 2 ranks tcp, us", "coll",
     ["-t", LO, "-b", "4K", "-e", "4K", "-n", "20000", "-w", "500", "-c", "0"], "time_us",
     False),
    ("allreduce 64 MiB, 2 ranks tcp, us", "coll",
     ["-t", LO, "-b", "64M", "-e", "64M", "-n", "8", "-w", "2", "-c", "0"], "time_us", False),
    ("allreduce 4 KiB, 2 ranks memif, us", "coll",
     ["-t", "MEMIF", "-b", "4K", "-e", "4K", "-n", "20000", "-w", "500", "-c", "0"], "time_us",
     False),
    ("allreduce 64 MiB, 2 ranks memif, us", "coll",
     ["-t", "MEMIF", "-b", "64M", "-e", "64M", "-n", "8", "-w", "2", "-c", "0"], "time_us",
     False),
    # Small collectives whose calls exchange descriptor headers (coll.check_args, the default).
    ("allgather 2 KiB, 2 ranks tcp, us", "coll",
     ["-t", LO, "--coll", "allgather", "-b", "2K", "-e", "2K", "-n", "10000", "-w", "500", "-c",
      "0"], "time_us", False),
    ("alltoall 2 KiB, 2 ranks tcp, us", "coll",
     ["-t", LO, "--coll", "alltoall", "-b", "2K", "-e", "2K", "-n", "10000", "-w", "500", "-c",
      "0"], "time_us", False),
    ("alltoall 64 KiB, 4 ranks tcp, us", "coll",
     ["--ranks", "4", "-t", LO, "--coll", "alltoall", "-b", "64K", "-e", "64K", "-n", "1000",
      "-w", "50", "-c", "0"], "time_us", False),
    # One PS iteration (push + pull of 4 KiB, BSP) of 2 workers on 1 server: gw-ps-perf's CSV.
    ("PS 4 KiB push+pull, 1 server 2 workers tcp, us", "ps",
     ["-t", LO, "-s", "4K", "-n", "2000", "--warmup", "100", "--no-ring"], "ps_us", False),
    # Soft-RoCE exists only in the VM: run there, e.g.
    # usertools/gw-rxe-vm.sh -- /usr/bin/python3 usertools/gw-ab.py OLD NEW --only rdma
    ("rdma 2 B ping-pong, us", "perf",
     ["-t", "rdma:dev=rxe0", "--test", "lat", "-s", "2", "-n", "1000", "--busy"], "t_typical_us",
     False),
    ("rdma 64 KiB bandwidth, MB/s", "perf",
     ["-t", "rdma:dev=rxe0", "--test", "bw", "-s", "64K", "-n", "500", "--busy"], "bw_avg_MBps",
     True),
    # One receive posted at a time: the sender runs ahead, so most messages arrive before their
    # receive and are pulled into bounce buffers (the unexpected path).
    ("rdma 1 MiB bandwidth, 1 receive posted, MB/s", "perf",
     ["-t", "rdma:dev=rxe0", "--test", "bw", "-s", "1M", "-n", "100", "-r", "1"], "bw_avg_MBps",
     True),
]


SIDE_ENV = {"old": {}, "new": {}}


def side_env(tag):
    return dict(os.environ, GW_LOG_LEVEL="error", **SIDE_ENV[tag[:3]])


def run_ps(build, args, key, tag):
    exe = os.path.join(build, "apps", "gw-ps-perf", "gw-ps-perf")
    csv = "/tmp/gw-ab-%d-%s.csv" % (os.getpid(), tag)
    env = side_env(tag)
    try:
        subprocess.run([exe, "--ranks", "3", "--servers", "1", "--csv", csv] + args, env=env,
                       timeout=300, capture_output=True, text=True)
        rows = open(csv).read().splitlines()
    except (subprocess.TimeoutExpired, OSError):
        return None
    finally:
        if os.path.exists(csv):
            os.unlink(csv)
    head = rows[0].split(",")
    return float(rows[1].split(",")[head.index(key)]) if len(rows) > 1 else None


def run_one(build, tool, args, key, tag):
    if tool == "ps":
        return run_ps(build, args, key, tag)
    exe = os.path.join(build, "apps", "gw-perf" if tool == "perf" else "gw-coll-perf",
                       "gw-perf" if tool == "perf" else "gw-coll-perf")
    sock = "/tmp/gw-ab-%d-%s.sock" % (os.getpid(), tag)
    args = [memif(sock) if a == "MEMIF" else a for a in args]
    env = side_env(tag)
    try:
        ranks = [] if "--ranks" in args else ["--ranks", "2"]
        out = subprocess.run([exe, "--json"] + ranks + args, env=env, timeout=300,
                             capture_output=True, text=True)
    except subprocess.TimeoutExpired:
        return None
    finally:
        if os.path.exists(sock):
            os.unlink(sock)
    for line in out.stdout.splitlines():
        if line.startswith("{"):
            return float(json.loads(line)[key])
    sys.stderr.write("%s failed (rc %d): %s\n" % (exe, out.returncode, out.stderr[-300:]))
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--only", default="", help="comma-separated substrings of workload names")
    ap.add_argument("--old-env", action="append", default=[], help="K=V for the old side only")
    ap.add_argument("--new-env", action="append", default=[], help="K=V for the new side only")
    o = ap.parse_args()
    for side in ("old", "new"):
        SIDE_ENV[side] = dict(kv.split("=", 1) for kv in getattr(o, side + "_env"))
    wl = [w for w in WORKLOADS if any(s in w[0] for s in o.only.split(","))] if o.only else \
        [w for w in WORKLOADS if not w[0].startswith("rdma")]
    res = {w[0]: {"old": [], "new": [], "ratio": []} for w in wl}
    load = open("/proc/loadavg").read().split()[:3]
    print("# %s, load %s, %d rounds, old=%s %s new=%s %s" %
          (time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), " ".join(load), o.rounds,
           o.old, " ".join(o.old_env), o.new, " ".join(o.new_env)))
    for r in range(o.rounds):
        order = ["old", "new"] if r % 2 == 0 else ["new", "old"]
        for name, tool, args, key, higher in wl:
            got = {}
            for b in order:
                got[b] = run_one(getattr(o, b), tool, args, key, "%s%d" % (b, r))
            if got["old"] is None or got["new"] is None:
                continue
            res[name]["old"].append(got["old"])
            res[name]["new"].append(got["new"])
            ratio = got["new"] / got["old"] if higher else got["old"] / got["new"]
            res[name]["ratio"].append(ratio)
        sys.stderr.write("round %d/%d done\n" % (r + 1, o.rounds))
    print("| workload | old median | new median | new vs old (>1: new faster), median "
          "[min, max] | rounds |")
    print("|---|---:|---:|---|---:|")
    for name, *_ in wl:
        x = res[name]
        if not x["ratio"]:
            print("| %s | - | - | (failed) | 0 |" % name)
            continue
        print("| %s | %.3f | %.3f | %.3f [%.3f, %.3f] | %d |" %
              (name, statistics.median(x["old"]), statistics.median(x["new"]),
               statistics.median(x["ratio"]), min(x["ratio"]), max(x["ratio"]),
               len(x["ratio"])))


if __name__ == "__main__":
    main()
