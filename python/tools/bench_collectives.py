#!/usr/bin/python3
"""torch reduce_scatter and all_to_all_single through gradwire vs gloo in one run (same
processes, two groups, sizes interleaved), in nccl-tests' terms: size is the bytes each rank
sends in total, algbw = size / time, busbw = algbw * (n - 1) / n. Gloo in torch 1.13 has no
reduce_scatter: its row is what a gloo user does instead (all_reduce of the whole input, then
the rank's own block), as later torch versions do inside gloo. Prints markdown tables.

    PYTHONPATH=build/python /usr/bin/python3 python/tools/bench_collectives.py [--ranks 2 4]
"""
import argparse
import datetime
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_allreduce import init_groups, run, timed  # noqa: E402

RS_SIZES = [1 << 20, 16 << 20, 64 << 20]
A2A_SIZES = [1 << 10, 16 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20]  # per pair


def reduce_scatter(backend, n):
    if backend == "gloo":
        def fn(t, group):
            dist.all_reduce(t[0], group=group)
            t[1].copy_(t[0].view(n, -1)[dist.get_rank(group)])
        return fn
    return lambda t, group: dist.reduce_scatter_tensor(t[1], t[0], group=group)


def all_to_all(t, group):
    dist.all_to_all_single(t[1], t[0], group=group)


def sweep(rank, n, tmpdir, op, sizes, q):
    groups = init_groups(rank, n, tmpdir, "s", 300)
    rows = []
    for size in sizes:
        total = size if op == "reduce_scatter" else size * n  # bytes each rank sends
        t = (torch.ones(total // 4), torch.empty(total // 4 // n if op == "reduce_scatter"
                                                 else total // 4))
        fns = {b: reduce_scatter(b, n) if op == "reduce_scatter" else all_to_all for b in groups}
        iters = max(2, min(100, (64 << 20) // total))
        res = {}
        for name, g in groups.items():
            timed(fns[name], g, t, 2, 1)  # warm-up
        for name, g in groups.items():
            res[name] = timed(fns[name], g, t, iters, 5)
        rows.append((size, total, res))
    if rank == 0:
        q.put((op, n, rows))
    dist.destroy_process_group()


def human(b):
    return f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--ops", nargs="+", default=["reduce_scatter", "all_to_all_single"])
    a = ap.parse_args()
    print(f"# {datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC, torch {torch.__version__}, "
          f"transport {os.environ.get('GW_TRANSPORT', 'tcp')}")
    for op in a.ops:
        sizes = RS_SIZES if op == "reduce_scatter" else A2A_SIZES
        what = "input per rank" if op == "reduce_scatter" else "per pair"
        print(f"\n## {op}\n\n| ranks | size ({what}) | gloo busbw GB/s | gradwire busbw GB/s | "
              "gradwire / gloo |\n|---|---|---|---|---|")
        for n in a.ranks:
            _, _, rows = run(sweep, n, op, sizes)
            for size, total, res in rows:
                bw = {b: total / t * (n - 1) / n / 1e9 for b, t in res.items()}
                print(f"| {n} | {human(size)} | {bw['gloo']:.2f} | {bw['gradwire']:.2f} | "
                      f"{bw['gradwire'] / bw['gloo']:.2f} |", flush=True)


if __name__ == "__main__":
    main()
