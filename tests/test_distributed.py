"""torch.distributed (issue 14): tracer.compile(DDP(model)), DDP(tracer.compile(model)) and a
compiled FSDP2 (fully_shard) model train exactly like eager DDP / FSDP: 2 processes, gloo,
SGD steps, parameters equal after every step, graphs captured, nothing traced when warm."""
import tempfile

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from tests import distributed_helpers as helpers

pytestmark = pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(),
                                reason="torch.distributed with gloo is not available")


@pytest.fixture(scope="module")
def runs():
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    init = "file://" + tempfile.mktemp(prefix="tracer_dist_")
    procs = [ctx.Process(target=helpers.worker, args=(r, 2, init, queue)) for r in range(2)]
    for p in procs:
        p.start()
    results = dict(queue.get(timeout=600) for _ in procs)
    for p in procs:
        p.join(timeout=60)
    for rank, res in results.items():
        assert isinstance(res, dict), f"rank {rank} failed:\n{res}"
    return results


def _same(a, b):
    return all(torch.allclose(torch.tensor(x), torch.tensor(y), rtol=1e-5, atol=1e-6)
               for sa, sb in zip(a, b) for x, y in zip(sa, sb))


@pytest.mark.parametrize("kind, eager", [("compile_of_ddp", "ddp_eager"), ("ddp_of_compiled", "ddp_eager"),
                                         ("fsdp_compiled", "fsdp_eager")])
def test_trains_like_eager(runs, kind, eager):
    for rank, res in runs.items():
        assert len(res[kind]["params"]) == helpers.STEPS
        assert _same(res[kind]["params"], res[eager]["params"]), f"rank {rank}: parameters differ from {eager}"
        assert res[kind]["graphs"] >= 1 and res[kind]["ops"] >= 3, f"rank {rank}: not captured: {res[kind]}"
        assert res[kind]["warm_frames"] == 0, f"rank {rank}: warm steps traced frames: {res[kind]}"
        assert res[kind]["internal_errors"] == 0
    assert _same(runs[0]["ddp_eager"]["params"], runs[1]["ddp_eager"]["params"]), "DDP keeps ranks in sync"
