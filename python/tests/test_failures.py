"""A killed rank: every survivor's next collective raises within the timeout, naming a peer."""
import datetime
import os
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

TIMEOUT_S = 10


def rank_main(rank, n, tmpdir, q):
    import gradwire  # noqa: F401
    dist.init_process_group("gradwire", init_method="file://" + os.path.join(tmpdir, "s"),
                            rank=rank, world_size=n,
                            timeout=datetime.timedelta(seconds=TIMEOUT_S))
    t = torch.ones(1000)
    dist.all_reduce(t)
    assert t[0].item() == n
    dist.barrier()
    if rank == n - 1:
        os._exit(9)  # dies without a word
    time.sleep(0.5)
    start = time.monotonic()
    try:
        for _ in range(3):
            dist.all_reduce(torch.ones(1 << 16))
        q.put((rank, "no error", 0.0))
    except RuntimeError as e:
        q.put((rank, str(e), time.monotonic() - start))


def test_killed_rank_fails_survivors_within_timeout():
    n = 3
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    with tempfile.TemporaryDirectory() as d:
        ps = [ctx.Process(target=rank_main, args=(r, n, d, q)) for r in range(n)]
        for p in ps:
            p.start()
        got = [q.get(timeout=120) for _ in range(n - 1)]
        for p in ps:
            p.join(30)
    for rank, msg, took in got:
        assert "gradwire allreduce" in msg and "rank " in msg, f"rank {rank}: {msg}"
        assert took < TIMEOUT_S + 5, f"rank {rank} took {took:.1f} s: {msg}"
    # At least the dead rank's neighbours name it.
    assert any(f"rank {n - 1}" in msg for _, msg, _ in got), got
