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


def free_port_below_ephemeral():
    """A free port below the kernel's ephemeral range: with --standalone, torchrun's bind(0)-and-
    close port for the job's store was taken by another socket before rank 0 bound it (seen once
    in a suite run)."""
    import random
    import socket
    try:
        low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    low = low if low > 11024 else 32768
    for _ in range(200):
        port = random.randrange(10000, low)
        with socket.socket() as s:
            try:
                s.bind(("", port))
                return port
            except OSError:
                continue
    raise RuntimeError("no free port below %d" % low)


def test_torchrun_two_ranks(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    port = free_port_below_ephemeral()
    # Static rendezvous: the agent's store on `port` is the job's (MASTER_PORT), no port of
    # torchrun's own choosing.
    cmd = ["/usr/bin/python3", "-m", "torch.distributed.run", "--nnodes", "1", "--node_rank", "0",
           "--rdzv_backend", "static", "--master_addr", "127.0.0.1", "--master_port", str(port),
           "--nproc_per_node", "2", "--redirects", "1", "--tee", "1", str(script)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=dict(os.environ))
    out = res.stdout + res.stderr
    assert res.returncode == 0, out
    assert out.count("torchrun-ok") >= 2, out
