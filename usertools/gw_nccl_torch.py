#!/usr/bin/env python3
"""Two ranks on one GPU through NCCL's network path (issue 45 item 2; run by gw-device-check.sh).

Each rank gets its own NCCL_HOSTID (NCCL then sees two hosts and neither refuses the shared GPU
nor uses P2P/SHM between them), so every byte goes through the net plugin: gradwire's
(NCCL_NET_PLUGIN=<path of libnccl-net-gradwire.so>) or NCCL's own Socket (--net Socket).
all_reduce, all_gather, reduce_scatter, broadcast and all_to_all over 8 B..256 MiB (float32),
every element checked against a reference computed from the ranks' known inputs; prints one
JSON line per (op, size) with the median time and busbw (nccl-tests' factors).

    python3 usertools/gw_nccl_torch.py --net gradwire|Socket [--max-mib 256] [--iters 10]
Exit status 1 on any wrong element or error.
"""
import argparse
import json
import os
import socket
import sys
import time


def busbw_factor(op, n):
    return {"all_reduce": 2 * (n - 1) / n, "broadcast": 1.0}.get(op, (n - 1) / n)


def expected(torch, op, rank, n, count):
    # rank r's input: r * 1000 + i (small integers: float32 sums stay exact).
    i = torch.arange(count, dtype=torch.float32)
    if op == "all_reduce":
        return sum(r * 1000 + i for r in range(n))
    if op == "broadcast":
        return 0 * 1000 + i
    if op == "all_gather":
        return torch.cat([r * 1000 + i for r in range(n)])
    if op == "reduce_scatter":  # input of n*count: block `rank` reduced
        j = torch.arange(rank * count, (rank + 1) * count, dtype=torch.float32)
        return sum(r * 1000 + j for r in range(n))
    if op == "all_to_all":  # input of n*count: block p goes to rank p
        return torch.cat([r * 1000 + torch.arange(rank * count, (rank + 1) * count,
                                                  dtype=torch.float32) for r in range(n)])
    raise ValueError(op)


def run_op(torch, dist, op, rank, n, count, dev):
    if op in ("reduce_scatter", "all_to_all"):
        x = rank * 1000 + torch.arange(n * count, dtype=torch.float32, device=dev)
    else:
        x = rank * 1000 + torch.arange(count, dtype=torch.float32, device=dev)
    if op == "all_reduce":
        dist.all_reduce(x)
        return x
    if op == "broadcast":
        if rank != 0:
            x.zero_()
        dist.broadcast(x, 0)
        return x
    if op == "all_gather":
        out = torch.empty(n * count, dtype=torch.float32, device=dev)
        dist.all_gather_into_tensor(out, x)
        return out
    if op == "reduce_scatter":
        out = torch.empty(count, dtype=torch.float32, device=dev)
        dist.reduce_scatter_tensor(out, x)
        return out
    out = torch.empty(n * count, dtype=torch.float32, device=dev)
    dist.all_to_all_single(out, x)
    return out


def rank_main(rank, n, port, args):
    os.environ["NCCL_HOSTID"] = "gw-host-%d" % rank
    import torch
    import torch.distributed as dist
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", init_method="tcp://127.0.0.1:%d" % port, rank=rank,
                            world_size=n, device_id=dev)
    bad = 0
    ops = ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all"]
    size = 8
    while size <= args.max_mib << 20:
        count = max(1, size // 4)
        for op in ops:
            got = run_op(torch, dist, op, rank, n, count, dev).cpu()
            wrong = int((got != expected(torch, op, rank, n, count)).sum())
            bad += wrong
            times = []
            for _ in range(args.iters):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                run_op(torch, dist, op, rank, n, count, dev)
                torch.cuda.synchronize()
                times.append(time.perf_counter() - t0)
            t = sorted(times)[len(times) // 2]
            if rank == 0:
                print(json.dumps({"net": args.net, "op": op, "bytes": count * 4,
                                  "time_us": round(t * 1e6, 2),
                                  "busbw_gbps": round(count * 4 / t / 1e9 *
                                                      busbw_factor(op, n), 3),
                                  "wrong": wrong}), flush=True)
        size *= 8
    dist.destroy_process_group()
    sys.exit(1 if bad else 0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--net", required=True, help="gradwire (the plugin) or Socket")
    ap.add_argument("--max-mib", type=int, default=256)
    ap.add_argument("--iters", type=int, default=10)
    args = ap.parse_args()
    if args.net == "Socket":
        os.environ.pop("NCCL_NET_PLUGIN", None)
        os.environ["NCCL_NET"] = "Socket"
        os.environ.setdefault("NCCL_SOCKET_IFNAME", "lo")
    elif "NCCL_NET_PLUGIN" not in os.environ:
        sys.exit("gw_nccl_torch: set NCCL_NET_PLUGIN to libnccl-net-gradwire.so's path")
    os.environ.setdefault("NCCL_P2P_DISABLE", "1")
    os.environ.setdefault("NCCL_SHM_DISABLE", "1")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    import torch.multiprocessing as mp
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=rank_main, args=(r, 2, port, args)) for r in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=420)
    codes = [p.exitcode for p in procs]
    print(json.dumps({"net": args.net, "exit_codes": codes}))
    sys.exit(0 if codes == [0, 0] else 1)


if __name__ == "__main__":
    main()
