"""gradwire as a torch.distributed backend.

    import gradwire                     # registers the backend "gradwire"
    torch.distributed.init_process_group("gradwire", rank=r, world_size=n, init_method=...)

The transport comes from GW_TRANSPORT ("tcp" by default; "dpdk:vdev=net_memif0,role=auto,
socket=/tmp/gw.sock" for memif between two processes; "rdma"). CPU tensors only.
"""
import torch.distributed as dist

from ._C import create_process_group

__all__ = ["create_process_group"]


def _create(store, rank, size, timeout):
    return create_process_group(store, rank, size, timeout)


if "GRADWIRE" not in dist.Backend._plugins:
    dist.Backend.register_backend("gradwire", _create)
