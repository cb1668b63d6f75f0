"""TorchDynamo's frame hook kept out of the frames a tracer-compiled call runs.

torch.compile (TorchDynamo) traces a tracer-compiled function as the function it compiled
(compile_annotations.WRAPPER_MARK). Where it cannot inline it (a graph break inside), it breaks
its own graph at the call and runs the call natively with its frame hook still set, and would
compile every frame the call starts: the tracer's own machinery (`_slow`, convert_frame...) and
the rewritten code of the tracer's cache entries (whose constants are the tracer's objects),
which it fails on. A nested torch.compile'd function turns the outer hook off for its call; so
does a tracer-compiled one: the code objects its call starts in (`dynamo_skip_call`) are marked
for TorchDynamo as a recursive `torch.compiler.disable` marks code, skipped with everything they
call. Their frames are then the tracer's alone (its own hook traces the resume functions).

The other way round, a torch.compile'd function called (natively) in a frame the tracer hooks
sets TorchDynamo's hook for its call: the frames it starts are TorchDynamo's, and the tracer's
callback leaves them (`dynamo_hooked`).

Reads torch._C._dynamo.eval_frame (part of torch's C extension, loaded with torch: marking costs
no import of the torch._dynamo package): set_code_exec_strategy, _FrameExecStrategy,
_FrameAction and get_eval_frame_callback (docs/torch.md). A torch without them: nothing is
marked, and TorchDynamo's hook reads as unset.
"""
import types

import torch


def _recursive_skip():
    """(set_code_exec_strategy, the strategy "skip this frame and everything it calls"), or None."""
    try:
        ef = torch._C._dynamo.eval_frame
        skip = ef._FrameAction.SKIP
        return ef.set_code_exec_strategy, ef._FrameExecStrategy(skip, skip)
    except (AttributeError, TypeError):  # (a torch without them: TorchDynamo is not kept out)
        return None


_SKIP = _recursive_skip()


def dynamo_skip_call(fn):
    """Mark the code of `fn` (a function, or a code object) so that TorchDynamo's frame hook
    leaves its frames, and every frame they start, to the tracer. Cheap (a flag on the code)
    and idempotent; returns `fn`."""
    code = fn if isinstance(fn, types.CodeType) else getattr(fn, "__code__", None)
    if _SKIP is not None and code is not None:
        _SKIP[0](code, _SKIP[1])
    return fn


def _callback_getter():
    try:
        return torch._C._dynamo.eval_frame.get_eval_frame_callback
    except AttributeError:  # (a torch without it: never hooked, as far as the tracer knows)
        return lambda: None


_GET_CALLBACK = _callback_getter()


def dynamo_hooked():
    """Whether TorchDynamo's frame hook is set on this thread (a torch.compile'd call is
    running): the frames it starts are TorchDynamo's to compile, and the tracer leaves them
    alone. Tracing one, the tracer's own Python ran under that hook, which traced it and failed
    (an internal error on every call)."""
    cb = _GET_CALLBACK()
    return cb is not None and cb is not False
