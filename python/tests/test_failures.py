"""A killed rank: every survivor's next collective raises within the timeout, naming the dead
rank (in the text and as gradwire.failed_rank()); gradwire.abort() from another thread; the
tensors of a failed call are kept until the process group is destroyed."""
import datetime
import gc
import os
import tempfile
import threading
import time
import weakref

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

TIMEOUT_S = 10


def rank_main(rank, n, tmpdir, q):
    import gradwire
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
        q.put((rank, "no error", 0.0, -1))
    except RuntimeError as e:
        q.put((rank, str(e), time.monotonic() - start, gradwire.failed_rank()))


def spawn_ranks(target, n, reports):
    """Runs target(rank, n, tmpdir, queue) in n spawned processes; returns `reports` reports."""
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    with tempfile.TemporaryDirectory() as d:
        ps = [ctx.Process(target=target, args=(r, n, d, q)) for r in range(n)]
        for p in ps:
            p.start()
        got = [q.get(timeout=120) for _ in range(reports)]
        for p in ps:
            p.join(30)
    return got


def test_killed_rank_fails_survivors_within_timeout():
    n = 3
    for rank, msg, took, culprit in spawn_ranks(rank_main, n, n - 1):
        assert "gradwire allreduce" in msg and "rank " in msg, f"rank {rank}: {msg}"
        assert took < TIMEOUT_S + 5, f"rank {rank} took {took:.1f} s: {msg}"
        # Every survivor names the dead rank: its neighbours saw it go, the others were told.
        assert culprit == n - 1 and f"[failed rank {n - 1}]" in msg, f"rank {rank}: {msg}"


def abort_main(rank, n, tmpdir, q):
    import gradwire
    dist.init_process_group("gradwire", init_method="file://" + os.path.join(tmpdir, "s"),
                            rank=rank, world_size=n,
                            timeout=datetime.timedelta(seconds=TIMEOUT_S))
    dist.barrier()
    if rank == 0:  # never joins the allreduce; another thread aborts the group instead
        threading.Timer(0.5, gradwire.abort, kwargs={"reason": "test abort"}).start()
        t = torch.zeros(4)
        work = dist.irecv(t, src=1, tag=5)
        start = time.monotonic()
        try:
            work.wait()
            q.put((rank, "no error", 0.0, -1))
        except RuntimeError as e:
            took, culprit = time.monotonic() - start, gradwire.failed_rank()
            # The receive stays posted in the transport: dropping every Python reference
            # must not free its tensor before the group is gone.
            ref = weakref.ref(t)
            del t, work
            gc.collect()
            kept = ref() is not None
            dist.destroy_process_group()
            gc.collect()
            if not kept or ref() is not None:
                e = RuntimeError(f"{e} [tensor kept after the error: {kept}, "
                                 f"released with the group: {ref() is None}]")
            q.put((rank, str(e), took, culprit))
        return
    start = time.monotonic()
    try:
        dist.all_reduce(torch.ones(16))
        q.put((rank, "no error", 0.0, -1))
    except RuntimeError as e:
        q.put((rank, str(e), time.monotonic() - start, gradwire.failed_rank()))


def test_abort_from_another_thread_ends_every_rank():
    n = 3
    for rank, msg, took, culprit in spawn_ranks(abort_main, n, n):
        assert "Aborted" in msg and "test abort" in msg, f"rank {rank}: {msg}"
        assert "tensor kept" not in msg, f"rank {rank}: {msg}"
        assert culprit == 0, f"rank {rank}: {msg}"
        assert took < 3, f"rank {rank} took {took:.1f} s: {msg}"
