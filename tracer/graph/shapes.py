"""Symbolic sizes (dynamic shapes), from torch's own machinery.

Each trace has one `Shapes`: a `ShapeEnv` and the `FakeTensorMode` built on it. An input
tensor dimension that is dynamic is fakified as a `SymInt` (a symbol `s0` with the real size
as its hint); an int argument that is dynamic becomes a `SymInt` placeholder. Arithmetic,
comparisons and torch ops on them run on the fake values, so the ShapeEnv records every
relation the trace relied on, simplifies them, specialises 0/1, and keeps value ranges. No
solver of our own: at the end the ShapeEnv prints its guards (`produce_guards_verbose`) as
Python over tokens `_z0 ...` that we map back to our Sources (guards/shape.py: ShapeMatch).

A float computed by Python arithmetic from a symbolic float (`n / (h * w / 2 / 2)`) is a
symbol of its own (`computed_float`), never an expression sympy may simplify (float
arithmetic is not algebra); its hint is the value the program computes, and a guard that
reads it computes it again the same way (guards/shape.py: ComputedNumberSource).

Which dimensions are dynamic (`SizePolicy`): `dynamic=False` none (except the user's
`mark_dynamic`), `dynamic=True` every dimension of every input tensor and every int argument,
`dynamic=None` (the default) "automatic dynamic" as torch.compile does: the first trace is
static; `FrameSizes` remembers, per code object and source, what the traces saw, and a
dimension (or int) whose value differs from an earlier trace's is dynamic from then on.
Parameters and tensors read through modules stay static.

Torch internals read here: FakeTensorMode, ShapeEnv, torch._guards.TracingContext and
torch._dynamo.source.LocalSource; checked on torch 2.13.0, 2.14.1 and 2.15.0 (docs/torch.md
lists them all; tests/test_torch_internals.py resolves each).
"""
from __future__ import annotations

import contextlib
import math
import re

import sympy
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import (DimDynamic, ShapeEnv, ShapeGuardPythonPrinter,
                                                   StatefulSymbolicContext)
from torch.utils._sympy.numbers import IntInfinity, NegativeIntInfinity

from guards import ComputedNumberSource, ShapeMatch, TensorMatch, TensorPropSource
from guards.tensor import UNKNOWN_STORAGE, storage_id

from ..runtime import config
from ..runtime.cache import FrameSizes
from ..exc import Unsupported
from .static_fakes import forget_real_tensors

SYM_TYPES = (torch.SymInt, torch.SymFloat, torch.SymBool)


def is_symbolic(value):
    """True for a SymInt/SymFloat/SymBool whose value is not a known constant."""
    if not isinstance(value, SYM_TYPES):
        return False
    node = value.node
    return not node.expr.is_number


_INT_INFINITIES = (IntInfinity, NegativeIntInfinity)


def constant_of(value):
    """The Python value of a SymInt/SymFloat/SymBool that simplified to a constant, else None."""
    expr = value.node.expr
    if not expr.is_number:
        return None
    if isinstance(value, torch.SymBool):
        return bool(expr)
    if isinstance(value, torch.SymInt):
        if expr.is_finite is not True or isinstance(expr, _INT_INFINITIES):
            # (torch's int_oo: what its sympy functions answer past their range, `n << 70`)
            raise ValueError(f"the int {value} is not a finite number")
        return int(expr)
    return float(expr)




class SizePolicy:
    """Which input dimensions and ints of one trace are dynamic: `mode` is compile()'s
    `dynamic` (None, True or False); `frame` the code object's FrameSizes."""

    def __init__(self, mode=None, frame=None):
        self.mode = mode
        self.frame = frame if frame is not None else FrameSizes()
        self.made_float_symbols = False
        self.made_scalar_index = False  # `x[t]` by a 0-d int tensor is in the graph (torch_calls)
        self.scalar_outputs = False  # `t.item()` may be an unbacked symbol (config.capture_scalar_outputs)
        # a view of an earlier input's storage keeps static sizes (Shapes.fake_input): for a
        # backend that runs AOTAutograd (convert_frame sets it)
        self.static_views = True

    @property
    def scalar_index(self):
        """Whether `x[t]`, t a 0-d int tensor, may be a graph op. Only eager-running backends
        run it as is: one that retraces the graph with its own fake tensors (AOTAutograd)
        meets `t.item()` with no value and refuses, and then (convert_frame) it is a break."""
        return not self.frame.no_scalar_index

    @property
    def computed_floats(self):
        """Whether a float computed from sizes may be a backed symbol (Shapes.computed_float):
        until half the recompile limit of this code's traces specialised one. Such a float
        that takes a new value with each size (`F.interpolate(scale_factor=(w + 0.1) / 4)`)
        is a trace per size, as under torch.compile; past that an opaque symbol, a graph break
        where its value is needed, and one trace serves every further size instead of the
        code running as Python at the recompile limit."""
        return self.frame.float_pins < max(1, config.recompile_limit // 2)

    @property
    def floats(self):
        """Whether a float argument may become a SymFloat (config.dynamic_floats)."""
        return config.dynamic_floats and self.mode is not False and not self.frame.static_floats

    def tensor_dims(self, tensor, source):
        """{dim: DimDynamic} for the dynamic dimensions of an input tensor."""
        sizes = tuple(tensor.shape)
        seen = self.frame.tensor_dims(source, sizes) if self.mode is None else set()
        if isinstance(tensor, torch.nn.Parameter) or tensor.is_sparse or tensor.layout != torch.strided:
            return {}
        marked = _indices(tensor, "_dynamo_dynamic_indices") | _indices(tensor, "_dynamo_weak_dynamic_indices")
        static = _indices(tensor, "_dynamo_static_indices")
        out = {}
        for i in range(len(sizes)):
            if i in marked:
                out[i] = DimDynamic.DYNAMIC
            elif i in static:
                continue
            elif self.mode is True:
                out[i] = DimDynamic.DUCK
            elif i in seen:
                out[i] = DimDynamic.DYNAMIC
        return out

    def int_dynamic(self, value, source):
        """An int argument (read from the frame's locals, possibly through items) that is
        dynamic: dynamic=True, or its value changed between traces (dynamic=None)."""
        if self.mode is False:
            return False
        changed = self.frame.int_dynamic(source, value)
        return self.mode is True or changed

    def int_would_be_dynamic(self, value, source):
        """`int_dynamic`'s answer, asked without recording the value (FrameSizes.int_changed)."""
        if self.mode is False:
            return False
        return self.mode is True or self.frame.int_changed(source, value)


def mark_dynamic(tensor, dims):
    """Make dimension(s) `dims` of `tensor` symbolic from the first trace that sees it (also
    under dynamic=False). The same mark as torch._dynamo.mark_dynamic, which is honoured too."""
    _mark(tensor, dims, "_dynamo_dynamic_indices")


def mark_static(tensor, dims=None):
    """Keep dimension(s) `dims` (default: all) of `tensor` static even when they change (each
    size is then its own compile). As torch._dynamo.mark_static; mark_dynamic wins."""
    _mark(tensor, range(tensor.dim()) if dims is None else dims, "_dynamo_static_indices")


def _mark(tensor, dims, attr):
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"expected a tensor, got {type(tensor).__name__}")
    dims = [dims] if isinstance(dims, int) else list(dims)
    n = tensor.dim()
    for d in dims:
        if not isinstance(d, int) or not -n <= d < n:
            raise IndexError(f"dimension {d!r} out of range for a {n}-d tensor")
    marks = getattr(tensor, attr, None)
    if marks is None:
        marks = set()
        setattr(tensor, attr, marks)
    marks.update(d % n for d in dims)


def _indices(tensor, attr):
    got = getattr(tensor, attr, None)
    if not got:
        return set()
    n = tensor.dim()
    return {i % n if n else i for i in got if isinstance(i, int)}


class Shapes:
    """The ShapeEnv and fake mode of one trace, and the symbolic inputs it made."""

    def __init__(self, policy=None):
        self.policy = policy if policy is not None else SizePolicy(False)
        scalars = self.policy.scalar_outputs
        self.env = ShapeEnv(allow_scalar_outputs=scalars, allow_dynamic_output_shape_ops=scalars)
        self.fake_mode = FakeTensorMode(shape_env=self.env)
        # per graph input, in placeholder order: (our source, torch source, fake or SymInt, context)
        self.inputs = []
        self.symbolic = False  # any input made a symbol
        self._storages = set()  # of the tensor inputs with sizes of their own (fake_input)
        # per float computed from symbols (computed_float), by its torch source's name:
        # (torch source, SymFloat, function, operands, its symbol)
        self.computed = {}

    # ---- making inputs ------------------------------------------------------------------------
    def _torch_source(self, name=None):
        """A torch source for a new symbol (inputs `a<i>`, computed floats `c<i>`)."""
        from torch._dynamo.source import LocalSource as TorchLocal
        return TorchLocal(name or f"a{len(self.inputs)}")

    def fake_input(self, tensor, source):
        """The fake tensor of a graph input, with symbolic sizes where the policy says so."""
        try:
            tensor.is_leaf  # noqa: B018 - raises for a no_grad view whose base changed in place
        except RuntimeError as e:  # (any autograd use of it raises in eager too)
            raise Unsupported(f"a tensor whose autograd state cannot be read: {str(e).split('.')[0]}")
        dims = self.policy.tensor_dims(tensor, source)
        storage = storage_id(tensor)
        if storage != UNKNOWN_STORAGE and storage in self._storages and self.policy.static_views:
            # a view of an earlier input's storage keeps static sizes: AOTAutograd merges the
            # two into one base and cannot find its own symbols again (an internal error). The
            # eager backend runs the graph as it is: its views' sizes may be symbolic (HF's
            # `labels=batch[:, 1:]` beside `input_ids=batch[:, :-1]`: a trace per length)
            dims = {}
        self._storages.add(storage)
        tsrc = self._torch_source()
        ctx = None
        if dims:
            n = tensor.dim()
            ctx = StatefulSymbolicContext(
                dynamic_sizes=[dims.get(i, DimDynamic.STATIC) for i in range(n)],
                dynamic_strides=[DimDynamic.INFER_STRIDE] * n,
                constraint_sizes=[None] * n, constraint_strides=[None] * n,
                tensor_source=tsrc)
            fake = self.fake_mode.from_tensor(tensor, source=tsrc, symbolic_context=ctx)
            if any(is_symbolic(s) for s in fake.shape):
                self._now_symbolic()
        else:
            fake = self.fake_mode.from_tensor(tensor, static_shapes=True)
        self.inputs.append((source, tsrc, fake, ctx))
        return fake

    def static_input(self, fake, source):
        """A graph input with static sizes made elsewhere (a module's parameter or buffer:
        OutputGraph.fake), kept in placeholder order with the others."""
        self.inputs.append((source, self._torch_source(), fake, None))
        return fake

    def sym_input(self, value, source):
        """A SymInt for a dynamic int argument (a plain int when 0/1 specialises it), a
        SymFloat for a dynamic float argument."""
        tsrc = self._torch_source()
        if isinstance(value, float):
            expr = self.env.create_unspecified_symbol(value, source=tsrc, dynamic_dim=DimDynamic.DYNAMIC)
            sym = self.env.create_symfloatnode(expr, hint=value, source=tsrc)
            self.policy.made_float_symbols = True  # (convert_frame: a backend may refuse them)
        else:
            sym = self.env.create_unspecified_symint_and_symbol(value, tsrc, DimDynamic.DYNAMIC)
        if isinstance(sym, (torch.SymInt, torch.SymFloat)):
            self.inputs.append((source, tsrc, sym, None))
            self._now_symbolic()
        return sym

    def computed_float(self, fn, values):
        """The SymFloat standing for `fn(*values)`, a float the program computes from a
        symbolic float (sym.sym_apply): a symbol of its own, which sympy cannot simplify, with
        the value the program computes from this trace's inputs as its hint. A guard on it (an
        op that needs a Python float specialises it, `int()` of it sizes a view) reads it
        again through a ComputedNumberSource.

        An unbacked symbol instead (the graph computes it, what needs its value breaks) where
        no such value is known (an operand from tensor data), where sympy would not keep it
        apart from another (a zero's sign, an infinity, a NaN), and where it is computed from
        a float argument: that argument is symbolic because it changed between calls, and
        an op that needs the result as a Python float would trace once per value
        (BatchNorm(momentum=None)'s `1.0 / float(num_batches_tracked)`, new on every step);
        sizes and ints take few values, and a trace per value is torch.compile's answer (up
        to SizePolicy.computed_floats)."""
        backed = self.policy.computed_floats and not self._from_float_argument(values)
        hint = _computed_hint(fn, values) if backed else None
        if hint is None:
            with self.env.ignore_fresh_unbacked_symbols():
                return self.env.create_unbacked_symfloat()
        tsrc = self._torch_source(f"c{len(self.computed)}")
        expr = self.env.create_unspecified_symbol(hint, source=tsrc, dynamic_dim=DimDynamic.DYNAMIC)
        sym = self.env.create_symfloatnode(expr, hint=hint, source=tsrc)
        self.computed[tsrc.name] = (tsrc, sym, fn, tuple(values), expr)
        return sym

    def _from_float_argument(self, values):
        """Whether an operand is computed from a float argument's symbol (not only from sizes,
        ints and floats computed from them)."""
        computed = {c[4] for c in self.computed.values()}
        return any(not s.is_integer and s not in computed
                   for v in values if isinstance(v, SYM_TYPES) for s in v.node.expr.free_symbols)

    def made_unbacked(self):
        """A symbol the graph computes (`t.item()`, the size of `nonzero`'s result, under
        config.capture_scalar_outputs): the backend then needs this ShapeEnv
        (backend_context) to retrace the graph."""
        self._now_symbolic()

    def _now_symbolic(self):
        # FakeTensorMode's dispatch cache keys symbolic entries per ShapeEnv (one per trace):
        # they never hit in a later trace, and making and checking them costs more than the
        # ops (attention over sequence lengths: 2x the trace time). Static traces keep it.
        self.symbolic = True
        self.fake_mode.cache_enabled = False

    # ---- compiling ----------------------------------------------------------------------------
    @contextlib.contextmanager
    def backend_context(self, real_inputs):
        """Around the backend call: backends that fakify the inputs (aot_autograd, inductor)
        find this trace's symbols, as under torch.compile (a fresh fake mode on the same
        ShapeEnv, each real input tensor mapped to the context it was fakified with)."""
        if not self.symbolic:
            yield
            return
        from torch._guards import TracingContext, tracing
        tc = TracingContext(FakeTensorMode(shape_env=self.env))
        for (_src, tsrc, fake, ctx), real in zip(self.inputs, real_inputs):
            if isinstance(real, torch.Tensor):
                n = real.dim()
                tc.tensor_to_context[real] = ctx if ctx is not None else StatefulSymbolicContext(
                    dynamic_sizes=[DimDynamic.STATIC] * n, dynamic_strides=[DimDynamic.INFER_STRIDE] * n,
                    constraint_sizes=[None] * n, constraint_strides=[None] * n, tensor_source=tsrc)
        try:
            with tracing(tc):
                yield
        finally:
            forget_inputs(tc)

    def example_inputs(self, real_inputs):
        """What the backend gets, as torch.compile gives it: real tensors, SymInts for ints
        (SymFloats for floats)."""
        if not self.symbolic:
            return list(real_inputs)
        out = []
        for (_src, _tsrc, fake, _ctx), real in zip(self.inputs, real_inputs):
            out.append(fake if isinstance(fake, (torch.SymInt, torch.SymFloat)) else real)
        return out

    # ---- guards -------------------------------------------------------------------------------
    def guards(self):
        """The ShapeEnv's guards over the inputs, as ShapeMatch guards (call after the backend
        compiled: it may add guards of its own)."""
        if not self.symbolic:
            return []
        by_name = {tsrc.name: src for src, tsrc, _f, _c in self.inputs}
        tokens, sources = {}, []

        def ref(tsrc):
            key = tsrc.name
            if key not in tokens:
                tokens[key] = len(sources)
                sources.append(self._our_source(tsrc, by_name))
            return f"_z{tokens[key]}"
        # computed floats the trace relied on are passed as inputs too: their value ranges,
        # the NaN check and a value they were specialised to are guarded as an input float's
        relied = self._relied_on()
        placeholders = [f for _s, _t, f, _c in self.inputs] + [c[1] for c in relied]
        tsources = [t for _s, t, _f, _c in self.inputs] + [c[0] for c in relied]
        try:
            out = self.env.produce_guards_verbose(placeholders, tsources, source_ref=ref,
                                                  ignore_static=True, langs=("python",))
        except Unsupported:
            raise
        except Exception as e:
            raise Unsupported(f"size guards could not be produced ({type(e).__name__}: {e})") from e
        return [_shape_match(expr, sources) for expr in out[0].exprs]

    def note_specialised_floats(self):
        """Count this trace in the code's FrameSizes if it specialised a computed float (the
        ShapeEnv replaced its symbol by a value): SizePolicy.computed_floats."""
        if any(c[1].node.expr.is_number for c in self.computed.values()):
            self.policy.frame.float_pins += 1

    def _relied_on(self):
        """The computed floats some fact of the ShapeEnv is about: a guard or a replacement
        names the symbol, or its value range was narrowed. (One no fact is about is only
        computed by the graph: guarding it would cost every call and check nothing.)"""
        if not self.computed:
            return []
        env = self.env
        named = set()
        for g in env.guards:
            named |= g.expr.free_symbols
        for k, v in env.replacements.items():
            named.add(k)
            named |= v.free_symbols
        out = []
        for c in self.computed.values():
            sym = c[4]  # (the SymFloat's own expr is what the ShapeEnv replaced it by)
            r = env.var_to_range.get(sym)
            if sym in named or (r is not None and not (r.lower == -sympy.oo and r.upper == sympy.oo)):
                out.append(c)
        return out

    def _our_source(self, tsrc, by_name):
        """Our Source for a torch source the ShapeEnv printed: an input, a size of one, or a
        computed float (made once, then kept in `by_name`)."""
        if tsrc.name not in by_name and tsrc.name in self.computed:
            by_name[tsrc.name] = self._computed_source(tsrc.name, by_name)
        return _our_source(tsrc, by_name)

    def _computed_source(self, name, by_name):
        """How a guard computes the float `name` again: its function, applied to each operand
        printed as the ShapeEnv prints a guard (a literal; an expression over sizes, ints and
        other computed floats, each a token)."""
        fn, values = self.computed[name][2:4]
        tokens = []

        def ref(tsrc):
            src = self._our_source(tsrc, by_name)
            if src not in tokens:
                tokens.append(src)
            return f"_z{tokens.index(src)}"
        printer = ShapeGuardPythonPrinter({}, ref, self.env.var_to_sources)
        args = [printer.doprint(v.node.expr) if isinstance(v, SYM_TYPES) else repr(v) for v in values]
        try:
            return ComputedNumberSource(fn, args, tokens)
        except ValueError as e:
            raise Unsupported(f"a guard cannot compute {getattr(fn, '__name__', fn)}{tuple(args)}: {e}") from e

    @staticmethod
    def dynamic_sizes(fake):
        """(sizes, strides, names) of a fake input with None where symbolic, now that the trace
        is done (a symbol later specialised to a constant counts as static)."""
        sizes, strides, names = [], [], []
        for values, out in ((fake.shape, sizes), (fake.stride(), strides)):
            for v in values:
                if isinstance(v, torch.SymInt):
                    c = constant_of(v)
                    out.append(c)
                    names.append(str(v.node.expr) if c is None else str(c))
                else:
                    out.append(int(v))
                    names.append(str(v))
        return sizes, strides, names


def _computed_hint(fn, values):
    """`fn` applied to the operands' values on this trace's inputs (their hints): the float
    the program computes. None where an operand has no such value (computed from tensor
    data), or the result is a zero (sympy has no -0.0), an infinity or a NaN, or an operand
    is a literal a guard cannot spell (an infinity, a NaN)."""
    hints = []
    for v in values:
        if isinstance(v, SYM_TYPES):
            v = v.node.hint
            if v is None:
                return None
        if type(v) is float and not math.isfinite(v):
            return None
        hints.append(v)
    try:
        out = fn(*hints)
    except Exception:  # noqa: BLE001 - (the symbolic op succeeded; no value: unbacked)
        return None
    if type(out) is not float or out == 0.0 or not math.isfinite(out):
        return None
    return out


def tensor_guards_with_dynamic_dims(guards, shapes):
    """The trace's guards, each TensorMatch of an input with symbolic sizes checking only
    its static dims and strides (the ShapeMatch guards check the rest)."""
    fakes = {src: fake for src, _t, fake, _c in shapes.inputs if isinstance(fake, torch.Tensor)}
    if not fakes or not shapes.symbolic:
        return list(guards)
    out = []
    for g in guards:
        fake = fakes.get(getattr(g, "source", None)) if isinstance(g, TensorMatch) else None
        if fake is not None:
            sizes, strides, names = shapes.dynamic_sizes(fake)
            if None in sizes or None in strides:
                g = g.with_dynamic(sizes, strides, names)
        out.append(g)
    return out


_PROPS = {"SIZE": "size", "STRIDE": "stride", "STORAGE_OFFSET": "storage_offset"}


def _our_source(tsrc, by_name):
    """Our Source for a torch source the ShapeEnv printed (an input, or a size of one)."""
    src = by_name.get(tsrc.name)
    if src is not None:
        return src
    base = getattr(tsrc, "base", None)
    prop = getattr(getattr(tsrc, "prop", None), "name", None)
    if base is not None and prop in _PROPS and base.name in by_name:
        return TensorPropSource(by_name[base.name], _PROPS[prop], getattr(tsrc, "idx", None))
    raise Unsupported(f"a size guard reads {tsrc.name}, which the rewritten frame cannot load")


def _shape_match(expr, sources):
    """One guard, its tokens renumbered to the sources it reads."""
    used = []

    def renumber(m):
        i = int(m.group(1))
        if i not in used:
            used.append(i)
        return f"_z{used.index(i)}"
    text = re.sub(r"\b_z(\d+)\b", renumber, expr)
    try:
        return ShapeMatch(text, [sources[i] for i in used])
    except ValueError as e:
        raise Unsupported(f"size guard {expr!r} cannot be checked: {e}") from e


__all__ = ["Shapes", "SizePolicy", "is_symbolic", "constant_of", "SYM_TYPES"]


def forget_inputs(tc):
    """After the backend's compile: let go of the weakrefs a tracing context holds on the real
    input tensors (its map of each input's symbolic context, its fake mode's describer). The
    compiled graph may keep the context (AOTAutograd's lazy backward does), and
    `torch.utils.swap_tensors` refuses a tensor with any weakref. As TorchDynamo does after a
    compile (convert_frame.clear_compile_context_weakrefs)."""
    tc.tensor_to_context.clear()
    forget_real_tensors(tc.fake_mode)


def static_tracing_context(example_inputs):
    """A tracing context for a backend compiling a graph of static sizes outside a trace (a
    graph read from the disk cache, or a trace that made no symbol): a ShapeEnv of its own, as
    torch.compile gives every graph (inductor's FX graph cache and AOTAutograd's cache bypass a
    graph without one), and every input tensor fakified with static sizes (a fake mode with a
    ShapeEnv would otherwise give it symbolic ones)."""
    from torch._dynamo.source import LocalSource as TorchLocal
    from torch._guards import TracingContext
    # (scalar outputs and data-dependent sizes allowed: a graph read from disk may hold
    # `t.item()` or `nonzero`, traced under config.capture_scalar_outputs; a graph without
    # them is not changed by it)
    tc = TracingContext(FakeTensorMode(shape_env=ShapeEnv(allow_scalar_outputs=True,
                                                          allow_dynamic_output_shape_ops=True)))
    for i, t in enumerate(example_inputs):
        if isinstance(t, torch.Tensor):
            n = t.dim()
            tc.tensor_to_context[t] = StatefulSymbolicContext(
                dynamic_sizes=[DimDynamic.STATIC] * n, dynamic_strides=[DimDynamic.INFER_STRIDE] * n,
                constraint_sizes=[None] * n, constraint_strides=[None] * n, tensor_source=TorchLocal(f"a{i}"))
    return tc
