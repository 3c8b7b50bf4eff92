#!/usr/bin/python3
"""torch.distributed.all_reduce through gradwire vs gloo in one run (same processes, two
groups, sizes interleaved), DDP step time of a communication-bound model, and the binding's
overhead against gw-coll-perf at 4 KiB. Prints markdown tables for BENCHMARKS.md.

    PYTHONPATH=build/python /usr/bin/python3 python/tools/bench_allreduce.py [--ranks 2 4] [--quick]
"""
import argparse
import datetime
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

SIZES = [4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20]


def timed(fn, group, t, iters, reps):
    """Median over `reps` of the mean time of `iters` back-to-back calls (barrier first)."""
    out = []
    for _ in range(reps):
        dist.barrier(group=group)
        t0 = time.perf_counter()
        for _ in range(iters):
            fn(t, group=group)
        out.append((time.perf_counter() - t0) / iters)
    return statistics.median(out)


def init_groups(rank, n, tmpdir, name, timeout_s):
    """The default group (gloo) and one gloo and one gradwire group over the same ranks."""
    import gradwire  # noqa: F401
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + os.path.join(tmpdir, name), rank=rank,
                            world_size=n, timeout=datetime.timedelta(seconds=timeout_s))
    return {"gloo": dist.new_group(backend="gloo"), "gradwire": dist.new_group(backend="gradwire")}


def sweep(rank, n, tmpdir, sizes, q):
    groups = init_groups(rank, n, tmpdir, "s", 120)
    rows = []
    for size in sizes:
        t = torch.ones(size // 4)
        iters = max(2, min(200, (32 << 20) // size))
        res = {}
        for name, g in groups.items():
            timed(dist.all_reduce, g, t, 2, 1)  # warm-up
        for name, g in groups.items():
            res[name] = timed(dist.all_reduce, g, t, iters, 5)
        rows.append((size, res))
    if rank == 0:
        q.put(("sweep", n, rows))
    dist.destroy_process_group()


def ddp_step(rank, n, tmpdir, steps, q):
    from torch.nn.parallel import DistributedDataParallel as DDP
    groups = init_groups(rank, n, tmpdir, "d", 300)
    torch.manual_seed(0)
    # ~25.2 M float32 parameters, batch of 1: the step is the gradient allreduce.
    model = torch.nn.Sequential(*[torch.nn.Linear(2048, 2048) for _ in range(6)])
    params = sum(p.numel() for p in model.parameters())
    res = {}
    for name, g in groups.items():
        ddp = DDP(model, process_group=g)
        x = torch.randn(1, 2048)
        times = []
        for i in range(steps + 2):
            dist.barrier(group=g)
            t0 = time.perf_counter()
            ddp(x).sum().backward()
            times.append(time.perf_counter() - t0)
        res[name] = statistics.median(times[2:])
    if rank == 0:
        q.put(("ddp", n, (params, res)))
    dist.destroy_process_group()


def run(fn, n, *args):
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    with tempfile.TemporaryDirectory() as d:
        mp.spawn(fn, args=(n, d) + args + (q,), nprocs=n, join=True)
    return q.get()


def coll_perf_4k(n, build):
    """gw-coll-perf's own allreduce of 4 KiB float32 (us), same ranks and transport."""
    exe = os.path.join(build, "apps", "gw-coll-perf", "gw-coll-perf")
    if not os.path.exists(exe):
        return None
    out = subprocess.run([exe, "--ranks", str(n), "-b", "4K", "-e", "4K", "-n", "2000", "-w", "200",
                          "-t", os.environ.get("GW_TRANSPORT", "tcp")], capture_output=True,
                         text=True, timeout=300).stdout
    for line in out.splitlines():
        f = line.split()
        if f and f[0] == "4096":
            return float(f[4])  # time column (us), nccl-tests layout
    sys.stderr.write(out)
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--quick", action="store_true", help="sizes up to 1 MiB, 3 DDP steps")
    ap.add_argument("--sizes", type=int, nargs="+", help="bytes (default 4 KiB..64 MiB)")
    ap.add_argument("--no-ddp", action="store_true")
    ap.add_argument("--build", default=os.environ.get("GW_BUILD_DIR", "build"))
    a = ap.parse_args()
    sizes = a.sizes or ([s for s in SIZES if s <= (1 << 20)] if a.quick else SIZES)
    print(f"# {datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC, torch {torch.__version__}, "
          f"transport {os.environ.get('GW_TRANSPORT', 'tcp')}")
    for n in a.ranks:
        _, _, rows = run(sweep, n, sizes)
        print(f"\nall_reduce float32, {n} ranks (time us, busbw GB/s = 2(n-1)/n x bytes / time)\n")
        print("| size | gloo us | gradwire us | time gw/gloo | gloo busbw | gradwire busbw |")
        print("|---:|---:|---:|---:|---:|---:|")
        for size, r in rows:
            bw = {k: 2 * (n - 1) / n * size / v / 1e9 for k, v in r.items()}
            print(f"| {size >> 10} KiB | {r['gloo'] * 1e6:.0f} | {r['gradwire'] * 1e6:.0f} | "
                  f"{r['gradwire'] / r['gloo']:.2f} | {bw['gloo']:.2f} | {bw['gradwire']:.2f} |")
        if rows[0][0] == 4096:
            cp = coll_perf_4k(n, a.build)
            if cp:
                gw = rows[0][1]["gradwire"] * 1e6
                print(f"\n4 KiB binding overhead, {n} ranks: backend {gw:.0f} us vs "
                      f"gw-coll-perf {cp:.0f} us = {gw / cp:.2f}x")
    if a.no_ddp:
        return
    _, n, (params, res) = run(ddp_step, 2, 3 if a.quick else 10)
    print(f"\nDDP step (forward+backward+allreduce), {params / 1e6:.1f} M params, batch 1, "
          f"2 ranks: gloo {res['gloo'] * 1e3:.1f} ms, gradwire {res['gradwire'] * 1e3:.1f} ms, "
          f"ratio {res['gradwire'] / res['gloo']:.2f}")


if __name__ == "__main__":
    main()
