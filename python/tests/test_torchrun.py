"""torchrun launches a gradwire job (env:// rendezvous). Debian's torchrun on Python 3.11
fails parsing its default --redirects/--tee; passing them explicitly works around it."""
import os
import subprocess
import sys

SCRIPT = r'''
import torch, torch.distributed as dist
import gradwire
dist.init_process_group("gradwire")
r, n = dist.get_rank(), dist.get_world_size()
t = torch.full((100,), float(r + 1))
dist.all_reduce(t)
assert t[0].item() == n * (n + 1) / 2, t[0]
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 2))
model(torch.randn(3, 4)).sum().backward()
dist.barrier()
print("torchrun-ok", r, n, flush=True)
'''


def test_torchrun_two_ranks(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    cmd = ["/usr/bin/python3", "-m", "torch.distributed.run", "--standalone",
           "--nproc_per_node", "2", "--redirects", "1", "--tee", "1", str(script)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=dict(os.environ))
    out = res.stdout + res.stderr
    assert res.returncode == 0, out
    assert out.count("torchrun-ok") >= 2, out
