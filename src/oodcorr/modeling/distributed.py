"""Multi-process helpers for `accelerate launch` / torchrun: train (data parallel) and evaluate (sharded)
read rank and world size from the environment; gloo on CPU, nccl on CUDA."""

from __future__ import annotations

from oodcorr.settings import environment


def init() -> tuple[int, int]:
    """(rank, world size); joins the process group that the launcher described in the environment."""
    world = environment.read("WORLD_SIZE", 1)
    if world <= 1:
        return 0, 1
    import torch
    import torch.distributed as dist

    if not dist.is_initialized():
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    return dist.get_rank(), dist.get_world_size()


def device_for_rank() -> str | None:
    """cuda:<local rank> when several processes share a machine's GPUs; None = the default device."""
    import torch

    if torch.cuda.is_available() and environment.read("WORLD_SIZE", 1) > 1:
        return f"cuda:{environment.read('LOCAL_RANK', 0)}"
    return None


def barrier() -> None:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()


def all_reduce_sum(tensors) -> None:
    """Sum tensors (e.g. gradients) over all processes, in place."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        for t in tensors:
            dist.all_reduce(t, op=dist.ReduceOp.SUM)
