"""Switches read by the tracer at run time (plain module attributes; set them in code).

inline_stock_modules: trace into the forward of torch.nn's own modules (Conv2d, BatchNorm,
    Linear, LayerNorm, MultiheadAttention, ...) as TorchDynamo does, so the graph holds their
    ops (F.conv2d, batch_norm, ...) and a warm call runs no module Python. A stock module
    whose forward cannot be traced whole is kept as one call_module node (a leaf) instead of
    breaking the graph. False: every stock module is a leaf (smaller graphs that name the
    modules, more Python per call).

dynamic_floats: a float argument whose value changed between traces (or any float argument
    under dynamic=True) becomes a SymFloat graph input, as an int becomes a SymInt (automatic
    dynamic, as torch.compile's `specialize_float=False`): a learning rate or a temperature
    that changes every call compiles twice, not once per value until the recompile limit.

suppress_errors: a backend that raises, or returns something that is not callable, makes the
    compiled call raise tracer.BackendError (naming the backend and the frame, the backend's
    exception chained as __cause__), under tracer.compile and tracer.capture alike, as
    torch.compile raises BackendCompilerFailed. True: the frame runs as Python instead
    (falls back), with the reason logged ("tracer" logger, INFO) and counted in
    tracer.stats() as a fallback; under fullgraph=True that is a FullGraphError. (Internal
    errors of the tracer always fall back, and the user's own exceptions always surface
    unchanged: this switch is about backends only.) Env: TRACER_SUPPRESS_ERRORS=1.
recompile_limit: how many times one code object is traced for one module structure (the
    classes of the nn.Modules among its arguments: runtime/cache.structure_key) before it runs
    as plain Python for that structure, with a RecompileLimitWarning (torch.compile's
    `recompile_limit`). Instances of one module class share an entry (modules are graph
    inputs, guarded by structure), so this counts real changes: shapes, dtypes, flags.

reuse_blocks: a module call that repeats an earlier sibling's (the same class, forward and
    kinds of arguments: the layers of a stack) is not traced again when the guards the first one
    recorded hold on it, re-targeted: its nodes are copied with its own parameters
    (tracer/variables/blocks.py). The graph is the one an unrolled trace makes; compile time no
    longer grows with depth the way it did. False: every call is traced. Env: TRACER_NO_BLOCK_REUSE=1.

inductor_subgraphs: the replayed calls of a block reach inductor as one subgraph called once
    per block (torch.ops.higher_order.invoke_subgraph; tracer/graph/subgraphs.py): AOTAutograd
    traces it and inductor lowers it once. Off by default: measured (benchmarks/gpu.md) it cut
    a 16-layer ViT's inductor compile by 14% on the CPU and a 6-layer ViT's first call by 17%
    on an H200, but made a ResNet-50's slower and T5's warm calls 7% slower (kernels do not fuse
    across a block's boundary). Env: TRACER_INDUCTOR_SUBGRAPHS=1.

capture_scalar_outputs: `t.item()` (and `int(t)`, `float(t)`, `bool(t)` of a one-element
    tensor) is a graph op whose value is a symbol known only when the graph runs (an unbacked
    SymInt/SymFloat/SymBool), as torch.compile's `capture_scalar_outputs`; the graph goes on
    with it (`torch.arange(n)`, `x * v`), and only what needs its value at trace time (an `if`
    on it, a list index) is a break. Always on under `fullgraph=True`, as torch.compile turns it
    on there; off otherwise, where `.item()` is a graph break, as torch.compile's default.
    Env: TRACER_CAPTURE_SCALAR_OUTPUTS=1.

verify_guards: check what can be checked cheaply only at compile time anyway, but also the
    costly invariants: a new entry's `failures()` is empty on its own inputs, and an entry
    whose `check()` rejects a call names a failing guard. Off by default (it compiles each
    entry's slow path); the test suite turns it on (tests/conftest.py).
"""
import os
import warnings


def _env_int(name, default):
    """A whole number from the environment variable `name`; one that is not (a user's
    mistake) is said in one line and the default taken: `import tracer` must not fail on it."""
    text = os.environ.get(name, "")
    if not text:
        return default
    try:
        value = int(text)
        if value < 0:
            raise ValueError
        return value
    except ValueError:
        warnings.warn(f"tracer: {name}={text!r} is not a whole number >= 0; using {default}", stacklevel=3)
        return default


verify_guards = os.environ.get("TRACER_VERIFY_GUARDS", "") not in ("", "0")
reuse_blocks = os.environ.get("TRACER_NO_BLOCK_REUSE", "") in ("", "0")
inductor_subgraphs = os.environ.get("TRACER_INDUCTOR_SUBGRAPHS", "") not in ("", "0")
inline_stock_modules = os.environ.get("TRACER_STOCK_LEAVES", "") in ("", "0")
suppress_errors = os.environ.get("TRACER_SUPPRESS_ERRORS", "") not in ("", "0")
recompile_limit = _env_int("TRACER_RECOMPILE_LIMIT", 8)
capture_scalar_outputs = os.environ.get("TRACER_CAPTURE_SCALAR_OUTPUTS", "") not in ("", "0")
dynamic_floats = os.environ.get("TRACER_STATIC_FLOATS", "") in ("", "0")
# A graph break inside a loop body: 0 (the default, as TorchDynamo) runs the frame as Python
# and traces its calls as frames of their own, so a model called in the loop is one cache
# entry reused by every iteration; N > 0 traces the first N iterations in resume functions
# (more of the loop's own ops captured, one copy of the body's graph per iteration).
# The disk cache (tracer/persist/): every entry traced is written under this directory, and a
# later process with the same directory reads a code object's entries at its first call
# instead of tracing (TORCHINDUCTOR_CACHE_DIR's counterpart). None: off.
cache_dir = os.environ.get("TRACER_CACHE_DIR") or None
loop_resume_limit = _env_int("TRACER_LOOP_RESUMES", 0)

# Limits of one trace (constants, not switches).
MAX_INLINE_DEPTH = 32  # nested inlined calls (recursion is a graph break past this)
MAX_STEPS = 500_000
# Unrolling a long loop of plain Python into an empty graph only costs time (seconds for a
# loop eager runs in milliseconds); past this many instructions with no op, the frame runs as
# Python (not a graph break: its resume function would trace the rest of the loop again).
MAX_STEPS_WITHOUT_OPS = 40_000
