"""A replayed block's graph inputs read by one call per sibling in the rewritten code.

Why: a model's parameters are graph inputs, each loaded by the rewritten code through its
chain of module dicts (`layers._modules['7']._modules['linear1']._parameters['weight']`).
A 48-layer encoder has 577 of them: their loads were most of the rewritten code's
instructions, and generating and assembling that code grew with the depth. A replayed block
(variables/blocks.py) makes its sibling's inputs in one run, in its first block's order, read
through the sibling module by the same paths: the rewritten code loads the sibling module
and calls the block's getter on it, whose tuple lands on the stack as those inputs
(rewrite/codegen.py). The getter is compiled once per block from the paths read from the
stand-in root, and reads exactly what the instructions read (attributes and subscripts).
The disk cache writes it as those paths (persist/entry_io.py).
"""
from guards.codegen import ExprContext


class InputGetter:
    """`getter(module)`: the values of `sources` (read from the stand-in root, `V`) on
    `module`, last first: UNPACK_SEQUENCE leaves the first on top of the stack, so the
    reversed tuple leaves them in call order."""

    __slots__ = ("sources", "fn")

    def __init__(self, sources):
        self.sources = tuple(sources)
        ctx = ExprContext({})
        exprs = "".join(s.guard_expr(ctx) + ", " for s in reversed(self.sources))
        self.fn, _ = ctx.compile("check_block_inputs", [f"return ({exprs})"], args="V")

    def __call__(self, module):
        return self.fn(module)

    def __repr__(self):
        return f"<inputs of a replayed block: {len(self.sources)}>"


class InputGroups:
    """The runs of an OutputGraph's inputs read by a getter: {first input's index: (their
    sources, the sibling module's source, the getter)}. A run is used only if the inputs
    there are still those sources (`run_at`)."""

    def __init__(self):
        self.runs = {}

    def add(self, start, sources, root, getter):
        self.runs[start] = (tuple(sources), root, getter)

    def run_at(self, i, sources):
        """(root, getter, n) of the run starting at input i, or None."""
        run = self.runs.get(i)
        if run is None:
            return None
        srcs, root, getter = run
        if len(sources) < i + len(srcs) or any(sources[i + j] is not s for j, s in enumerate(srcs)):
            return None
        return root, getter, len(srcs)
