"""Worker for tests/test_distributed.py (importable by spawned processes)."""
import copy

import torch
import torch.distributed as dist
import torch.nn as nn

STEPS = 4


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 16)
        self.b = nn.Linear(16, 4)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)) * 2)


def _wrap(kind, m, mesh):
    import tracer
    from torch.nn.parallel import DistributedDataParallel as DDP
    if kind == "ddp_eager":
        return DDP(m)
    if kind == "compile_of_ddp":
        return tracer.compile(DDP(m))
    if kind == "ddp_of_compiled":
        return DDP(tracer.compile(m))
    from torch.distributed.fsdp import fully_shard
    fully_shard(m.a, mesh=mesh)
    fully_shard(m, mesh=mesh)
    return m if kind == "fsdp_eager" else tracer.compile(m)


def _params(m):
    """Plain lists: tensors sent through a queue would be shared by file descriptor, which
    breaks when the worker exits first."""
    return [(p.full_tensor() if hasattr(p, "full_tensor") else p).detach().tolist() for p in m.parameters()]


def worker(rank, world, init, queue):
    import tracer
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    try:
        from torch.distributed.device_mesh import init_device_mesh
        mesh = init_device_mesh("cpu", (world,))
        torch.manual_seed(0)
        base = Net()
        out = {}
        for kind in ("ddp_eager", "compile_of_ddp", "ddp_of_compiled", "fsdp_eager", "fsdp_compiled"):
            # each kind on fresh caches: instances of one module structure share entries
            # (modules are graph inputs), so a later kind would otherwise run an earlier
            # kind's entry and trace nothing of its own
            tracer.reset()
            m = copy.deepcopy(base)
            model = _wrap(kind, m, mesh)
            opt = torch.optim.SGD(m.parameters(), lr=0.1)
            gen = torch.Generator().manual_seed(rank)  # each rank its own data, as in training
            s0 = tracer.stats()
            snaps, warm = [], None
            for step in range(STEPS):
                x, y = torch.randn(5, 8, generator=gen), torch.randn(5, 4, generator=gen)
                loss = ((model(x) - y) ** 2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
                snaps.append(_params(m))
                if step == 0:
                    warm = tracer.stats().frames_traced
            s1 = tracer.stats()
            out[kind] = {"params": snaps, "graphs": s1.graphs - s0.graphs, "ops": s1.ops - s0.ops,
                         "warm_frames": s1.frames_traced - warm, "internal_errors": s1.internal_errors}
        queue.put((rank, out))
    except BaseException as e:  # noqa: BLE001 - report to the parent, whatever it is
        import traceback
        queue.put((rank, traceback.format_exc()))
        raise
    finally:
        dist.destroy_process_group()
