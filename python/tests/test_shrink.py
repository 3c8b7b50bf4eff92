"""gradwire.shrink under DistributedDataParallel (issue 42): four ranks train an MLP; rank 2
is SIGKILLed at the start of step 5; the three others see the step fail (naming rank 2),
shrink the group and train on with a new DDP over it, redoing step 5. Their losses from step
5 on equal, bit for bit, those of a fresh 3-rank gradwire job started from the same
parameters with the same data (the batches of original ranks 0, 1 and 3)."""
import gc
import json
import os
import signal

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

from gw_testutil import init

STEPS, KILL_AT, VICTIM = 12, 5, 2


def model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(),
                         nn.Linear(32, 4))


def batch(orig_rank, step):
    g = torch.Generator().manual_seed(1000 * orig_rank + step)
    return torch.randn(8, 16, generator=g), torch.randn(8, 4, generator=g)


def step_loss(ddp, opt, orig_rank, step):
    x, y = batch(orig_rank, step)
    loss = nn.functional.mse_loss(ddp(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.item()


def job(rank, n, tmpdir):
    import gradwire
    init("gradwire", rank, n, tmpdir, "job", timeout_s=30)
    m = model()
    ddp = DDP(m, bucket_cap_mb=0.002)
    opt = torch.optim.SGD(m.parameters(), lr=0.05)
    group, members, losses, step = None, list(range(n)), {}, 0
    while step < STEPS:
        if rank == VICTIM and step == KILL_AT:
            os.kill(os.getpid(), signal.SIGKILL)
        try:
            losses[step] = step_loss(ddp, opt, rank, step)
            step += 1
        except RuntimeError as e:
            assert step == KILL_AT and group is None, f"rank {rank} step {step}: {e}"
            assert gradwire.failed_rank(group) == VICTIM, str(e)
            del ddp  # its reducer's hooks leave the parameters with it
            gc.collect()
            opt.zero_grad(set_to_none=True)
            group = gradwire.shrink(group)
            members = [members[p] for p in gradwire._C.parent_ranks(group)]
            assert members == [0, 1, 3] and dist.get_world_size(group) == 3
            assert dist.get_rank(group) == members.index(rank)
            if dist.get_rank(group) == 0:
                torch.save(m.state_dict(), os.path.join(tmpdir, "state.pt"))
            ddp = DDP(m, process_group=group, bucket_cap_mb=0.002)
    with open(os.path.join(tmpdir, f"shrunk-{rank}.json"), "w") as f:
        json.dump({s: losses[s] for s in range(KILL_AT, STEPS)}, f)


def reference(rank, n, tmpdir):
    init("gradwire", rank, n, tmpdir, "ref", timeout_s=30)
    m = model()
    m.load_state_dict(torch.load(os.path.join(tmpdir, "state.pt")))
    ddp = DDP(m, bucket_cap_mb=0.002)
    opt = torch.optim.SGD(m.parameters(), lr=0.05)
    orig = [0, 1, 3][rank]
    losses = {s: step_loss(ddp, opt, orig, s) for s in range(KILL_AT, STEPS)}
    with open(os.path.join(tmpdir, f"ref-{orig}.json"), "w") as f:
        json.dump(losses, f)
    dist.destroy_process_group()


def run(fn, n, tmpdir):
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=fn, args=(r, n, tmpdir)) for r in range(n)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    codes = [p.exitcode for p in procs]
    for p in procs:
        if p.is_alive():
            p.kill()
    return codes


def test_ddp_trains_on_after_a_rank_is_killed(tmp_path):
    codes = run(job, 4, str(tmp_path))
    assert codes == [0, 0, -signal.SIGKILL, 0], f"exit codes {codes}"
    assert run(reference, 3, str(tmp_path)) == [0, 0, 0]
    for r in (0, 1, 3):
        got = json.loads((tmp_path / f"shrunk-{r}.json").read_text())
        ref = json.loads((tmp_path / f"ref-{r}.json").read_text())
        assert got == ref, f"rank {r}: losses after the shrink {got} != 3-rank run {ref}"
