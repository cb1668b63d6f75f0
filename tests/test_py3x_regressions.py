"""Bugs found while porting the tracer to CPython 3.12 to 3.15, each kept as a test that runs
on every version (compiled == eager, and the capture asserted)."""
import functools
import inspect
import sys

import pytest
import torch

import tracer
from semantics_helpers import check, run as run_both
from test_graph_breaks import Recorder, run, t


@pytest.fixture(autouse=True)
def _fresh():
    tracer.reset()
    yield
    tracer.reset()


def test_resume_function_with_many_locals_and_fused_stores(capsys):
    """3.13 fuses `a, b = ...` into STORE_FAST_STORE_FAST, packing both local indices into
    4 bits each. A resume function renumbers locals (its arguments come first): indices
    past 15 do not fit, and `bytecode` 0.19.1 emitted a wrong EXTENDED_ARG (a crash in T5).
    versions.relocatable splits them into plain stores."""
    def f(x, pairs):
        l0 = l1 = l2 = l3 = l4 = l5 = l6 = l7 = l8 = l9 = l10 = l11 = l12 = l13 = x
        h = x.sin()
        print("break")  # the rest is a resume function, with locals renumbered
        for a, b in pairs:  # STORE_FAST_STORE_FAST (a, b) on 3.13
            h, last = h * a, h + b
        return h + last + l0 + l1 + l2 + l3 + l4 + l5 + l6 + l7 + l8 + l9 + l10 + l11 + l12 + l13

    c, rec = run(f, (t(3), [(1.0, 2.0), (3.0, 4.0)]), (t(3, seed=1), [(1.0, 2.0), (3.0, 4.0)]))
    assert c.entries[0].code is not None and c.entries[0].breaks
    assert rec.graphs[0] == ["sin"] and any(g.count("mul") == 2 for g in rec.graphs[1:])


def test_closure_tuple_of_a_free_variable_after_a_break(capsys):
    """The resume call rebuilds the frame's closure: on 3.13 a cell is loaded with LOAD_FAST
    of its slot, which `bytecode` only finds given a FreeVar (a plain name made a new local:
    a NULL in the closure tuple, a crash)."""
    scale = 3.0

    def helper(y):
        print("helper")
        return y * scale

    def f(x):
        return helper(x.cos()).exp()

    c, rec = run(f, (t(2),), (t(2, seed=3),))
    assert c.entries[0].code is not None and rec.graphs[0] == ["cos"]
    assert ["exp"] in rec.graphs


def test_data_dependent_branch_keeps_the_comparison_in_the_graph(capsys):
    """3.13 fuses the bool conversion into COMPARE_OP (`bool(>)`): a tensor result stays in
    the graph and the jump breaks, whose native form converts it (TO_BOOL) before jumping
    (3.13's POP_JUMP_IF_* read an exact bool)."""
    def f(x):
        y = x.sum()
        if y > 0:
            return x + 1
        return x - 1

    c, rec = run(f, (t(3),), (-t(3),), (t(3, seed=2),))
    brk = c.entries[0].breaks[0]
    assert "data-dependent" in brk.reason
    assert rec.graphs[0] == ["sum", "gt"]


def test_not_of_a_tensor_value_breaks_and_converts(capsys):
    """`not t` is UNARY_NOT after TO_BOOL (3.13); either way the value is needed: a break, and
    the native instruction converts whatever object it gets."""
    def f(x):
        y = (x > 0).all()
        z = not y
        return x * 2 if z else x * 3

    c, rec = run(f, (t(3),), (t(3).abs() + 1,))
    assert c.entries[0].breaks and rec.graphs[0][:2] == ["gt", "all"]


def test_super_method_call_and_attribute(capsys):
    """3.12 compiles `super().m(...)` and `super().attr` to LOAD_SUPER_ATTR."""
    class Base(torch.nn.Module):
        scale = 2.0

        def forward(self, x):
            return x.relu()

    class Child(Base):
        def forward(self, x):
            return super().forward(x) * super().scale

    m = Child()
    c = tracer.compile(m, backend=Recorder())
    x = t(4)
    assert torch.equal(c(x), m(x))
    entry = c.entries[0] if hasattr(c, "entries") else None
    assert entry is None or entry.code is not None


def test_slices_and_fstrings(capsys):
    """BINARY_SLICE / STORE_SLICE (3.12+) and 3.13's split f-string instructions."""
    def f(x, xs):
        xs[1:3] = [x.sin(), x.cos()]
        tag = f"{len(xs)!r:>4}|{'a'}"
        return torch.stack(xs[0:3]).sum(0) * len(tag)

    c, rec = run(f, (t(3), [t(3), t(3), t(3), t(3)]))
    assert c.entries[0].code is not None and not c.entries[0].breaks
    assert rec.graphs == [["sin", "cos", "stack", "sum", "mul"]]


def test_resume_code_maps_its_instructions_past_a_split_superinstruction():
    """3.13: a resume code has its superinstructions split (versions.relocatable); the map
    from its instruction indices to the original code's was built before the split, so
    every index after it was off by one. A break in a resume function that resumes at an
    exception handler then entered it one instruction past PUSH_EXC_INFO (POP_EXCEPT read
    below the stack: a segfault). Every mapped instruction has the original's opname."""
    from bytecode_utils import decode
    from bytecode_utils.resume import make_resume_code, resume_origin

    def f(x, lst):
        y, v = x, 1          # 3.13: STORE_FAST_STORE_FAST
        lst.append(y + v)    # 3.13: LOAD_FAST_LOAD_FAST
        try:
            lst.append(x)
        except IndexError:
            lst.append(-1)
        return y + v

    original = decode(f.__code__)
    target = next(i.index for i in original if i.opname == "LOAD_FAST" and i.argval == "lst")
    rcode = make_resume_code(f.__code__, target, [], ["x", "lst"])
    root, index_map = resume_origin(rcode)
    assert root is f.__code__
    here = decode(rcode)
    assert len(index_map) > 10
    for j, k in index_map.items():
        assert here[j].opname == original[k].opname, (j, k, here[j].opname, original[k].opname)


def test_closure_over_an_argument_cell_made_after_two_breaks():
    """Fuzz seed 400008 on 3.13 (a segfault): after a break, the resume function's body makes
    a closure over `n`, an argument that is a cell. 3.13 loads the cell with LOAD_FAST of its
    slot; copied by name into the resume code it became a second, local slot named `n` beside
    the free variable, and the next break's resume code crashed the interpreter."""
    import numpy as np

    def f(x, n):
        t2 = x + 1
        n = int(np.int64(n) + 1)  # two breaks: the numpy call, then + on its result
        def inner3(a):
            return a * n + t2
        t2 = inner3(x)
        return t2

    c = tracer.compile(f)
    for n in (2, 3):
        x = torch.randn(3)
        assert torch.allclose(c(x, n), f(x, n))
    assert tracer.stats().internal_errors == 0 and tracer.stats().fallbacks == 0


def test_generated_code_never_gives_a_name_two_slots():
    """The check that turns such code into an internal error (the frame then runs as
    Python) instead of a crash."""
    from bytecode_utils.codegen import check_slots

    def g(a):
        return lambda: a

    def comp(xs):
        return [lambda: k for k in xs]  # 3.12+: k is a local and a cell of comp (PEP 709)
    check_slots(g.__code__)  # an argument that is a cell: one slot, allowed
    check_slots(comp.__code__)
    inner = g(1).__code__  # a free variable `a`
    with pytest.raises(ValueError, match="two frame slots"):
        check_slots(inner.replace(co_varnames=("a",), co_nlocals=1))


def test_closure_read_after_a_break_on_3_14(capsys):
    """3.14 moved LOAD_DEREF from `hasfree` to `haslocal`, and `bytecode` 0.19.1 decodes its
    argument as a plain name: a resume function, where the frame's cells are free variables,
    got a second, local slot for each (fuzz seed 5; versions.fix_decoded). And the closure
    tuple is loaded with LOAD_FAST_BORROW, which must become a free-variable load too."""
    def f(x, y, n):
        def inner2(a):
            return a * n + y
        y = inner2(y)
        print("break")
        return x + y + n

    c, rec = run(f, (t(2), t(2, seed=1), 2), (t(2, seed=2), t(2, seed=3), 3))
    assert c.entries[0].code is not None and c.entries[0].breaks
    assert tracer.stats().internal_errors == 0 and tracer.stats().fallbacks == 0


def test_replacement_of_a_function_with_a_docstring(capsys):
    """3.14 reads co_consts[0] as the docstring when CO_HAS_DOCSTRING is set: a replacement code
    made with the original's flags but other constants crashed PyFunction_New (GaussianNLLLoss
    .forward; versions.finish_code)."""
    def f(x):
        """A docstring the rewritten code does not keep as its first constant."""
        return x.relu()

    def g(x):
        """Another."""
        y = x * 2
        print("break")
        return y + 1

    c, rec = run(f, (t(3),), (t(3, seed=1),))
    assert rec.graphs == [["relu"]]
    c2, rec2 = run(g, (t(3),), (t(3, seed=1),))
    assert rec2.graphs[:2] == [["mul"], ["add"]]
    for entry in c.entries + c2.entries:
        consts = entry.code.co_consts
        if entry.code.co_flags & 0x4000000:  # CO_HAS_DOCSTRING (3.14+)
            assert consts and isinstance(consts[0], str)


def test_inlined_any_and_all_over_a_generator(capsys):
    """3.14 compiles `any(... for ...)` as a loop behind `any is <the builtin any>`, loading the
    builtin with LOAD_COMMON_CONSTANT: it must be the builtin, not a constant that `is` cannot
    compare (a graph break in nn.Transformer.forward)."""
    def f(x, ys):
        if any(y is None for y in ys) or not all(isinstance(y, int) for y in ys if y is not None):
            return x - 1
        return x + sum(ys)

    c, rec = run(f, (t(3), [1, 2]), (t(3), [1, None]), (t(3), [1, 2.0]))
    assert all(entry.code is not None for entry in c.entries)
    assert tracer.stats().graph_breaks == 0 and tracer.stats().fallbacks == 0


@pytest.mark.loop_resumes
def test_with_blocks_and_a_break_inside_one(capsys):
    """3.14 enters a `with` by LOAD_SPECIAL __exit__ / __enter__ and keeps [exit, self | NULL] on
    the stack; a break inside the block rebuilds both, and an exception in the block reaches
    __exit__ through WITH_EXCEPT_START's two exit entries."""
    log = []

    class Track:
        def __enter__(self):
            log.append("in")
            return self

        def __exit__(self, et, ev, tb):
            log.append("out" if et is None else et.__name__)
            return et is KeyError

    def f(x, d):
        with torch.no_grad():
            y = x * 2
        with Track():
            y = y + 1
            print("break")
            y = y.relu()
        with Track():
            y = y - d["missing"]  # KeyError, suppressed by Track.__exit__
        return y

    c, rec = run(f, (t(3), {}), (t(3, seed=1), {}))
    assert log == ["in", "out", "in", "KeyError"] * 4
    assert rec.graphs[0][:1] == ["_set_grad_enabled"] or "mul" in rec.graphs[0]


_TSTRINGS = """
from string.templatelib import Interpolation, Template


def render(tmpl):
    out = []
    for item in tmpl:
        match item:
            case str() as s:
                out.append(s)
            case Interpolation(value, expression, conversion, spec):
                out.append(f"<{expression}:{conversion}:{format(value if conversion is None else repr(value), spec)}>")
    return "".join(out)


def f(x, n):
    y = x.sin()
    tmpl = t'{y.shape[0]:>3} items, {n!r}{n!a:{n}}' t'' t'{y}'
    parts = [(i.value, i.expression, i.conversion, i.format_spec) for i in tmpl.interpolations]
    return y + len(tmpl.strings), tmpl.values, render(t'a{n}b'), parts, tmpl, isinstance(tmpl, Template)


def g(x, n):
    tmpl = t'{x}' + t'{n}'  # (Template.__add__ is not modelled: a break)
    return x + 1, tmpl.strings
"""


def _same_template(a, b):
    return a.strings == b.strings and len(a.interpolations) == len(b.interpolations) and all(
        i.expression == j.expression and i.conversion == j.conversion and i.format_spec == j.format_spec and
        (torch.equal(i.value, j.value) if isinstance(i.value, torch.Tensor) else i.value == j.value)
        for i, j in zip(a.interpolations, b.interpolations))


@pytest.mark.skipif(sys.version_info < (3, 14), reason="template strings are new in 3.14")
def test_template_strings_are_traced(capsys):
    """t-strings (PEP 750) were a graph break at each BUILD_INTERPOLATION and at BUILD_TEMPLATE
    (two or more per t-string). They are modelled: the Template and its Interpolations are
    read, iterated and matched in the trace, and rebuilt after the graph; what the model does
    not do (`+`) is a break."""
    ns = {"torch": torch}
    exec(_TSTRINGS, ns)
    f, g = ns["f"], ns["g"]
    c = tracer.compile(f)
    for n in (3, 3):
        out, values, text, parts, tmpl, is_template = c(t(3), n)
        ref, ref_values, ref_text, ref_parts, ref_tmpl, ref_is = f(t(3), n)
        assert torch.equal(out, ref) and values[:3] == ref_values[:3] and torch.equal(values[3], ref_values[3])
        assert text == ref_text == "a<n:None:3>b" and parts[:3] == ref_parts[:3] and is_template and ref_is
        assert _same_template(tmpl, ref_tmpl) and tmpl.values[3] is values[3]
    s = tracer.stats()
    assert s.graphs == 1 and s.graph_breaks == 0 and s.fallbacks == 0
    cg = tracer.compile(g)
    out, strings = cg(t(3), 2)
    ref, ref_strings = g(t(3), 2)
    assert torch.equal(out, ref) and strings == ref_strings
    assert any("operator add" in r for r in tracer.stats().break_reasons)


_TSTRING_CONVERSIONS = """
def f(x, n):
    y = x.sin()
    t = t"{n!r}|{n!a:>6}|{n!s}|{y.shape[0]:{n}}|{n}"
    print("break")  # the template and its interpolations cross into the resume function
    parts = [(i.value, i.conversion, i.format_spec, i.expression) for i in t.interpolations]
    return y + len(t.strings), parts, t.strings
"""


@pytest.mark.skipif(sys.version_info < (3, 14), reason="template strings are new in 3.14")
def test_template_string_conversions_decode(capsys):
    """CPython packs an interpolation's conversion in BUILD_INTERPOLATION's oparg bits 2 and
    up (`!r` is 10, `!a` 14); `bytecode` 0.19.1 decoded it as FormatValue(oparg >> 1), and
    a graph break in a frame holding a t-string with `!r` or `!a` (its code decoded by the
    package to build the resume function; before t-strings were traced, at the t-string
    itself) raised ValueError ("5 is not a valid FormatValue"): an internal error, the frame
    run as Python. versions.decodable gives the package an oparg it decodes; fix_decoded puts
    the real one back."""
    ns = {"torch": torch}
    exec(_TSTRING_CONVERSIONS, ns)
    f = ns["f"]
    c = tracer.compile(f)
    for n in (3, 3, 4):
        out, parts, strings = c(t(3), n)
        ref, ref_parts, ref_strings = f(t(3), n)
        assert torch.equal(out, ref) and parts == ref_parts and strings == ref_strings
    assert [p[1] for p in parts] == ["r", "a", "s", None, None]
    s = tracer.stats()
    assert s.internal_errors == 0 and s.fallbacks == 0 and s.graph_breaks >= 1


def test_nested_function_with_annotations(capsys):
    """3.14 makes a function's annotations lazily (PEP 649: SET_FUNCTION_ATTRIBUTE 0x10 sets
    `__annotate__`); the function made in the traced frame and returned keeps them."""
    def f(x):
        def inner(a: torch.Tensor, k: int = 2) -> torch.Tensor:
            return a * k
        return inner(x) + 1, inner

    c = tracer.compile(f)
    x = t(3)
    out, inner = c(x)
    ref, ref_inner = f(x)
    assert torch.equal(out, ref)
    assert inner.__annotations__ == ref_inner.__annotations__
    assert c.entries[0].code is not None and tracer.stats().fallbacks == 0


needs_lazy_annotations = pytest.mark.skipif(sys.version_info < (3, 14),
                                           reason="annotations are evaluated lazily from 3.14 (PEP 649)")
_ANN_T = 0
_ANN_LOG = []


def _ann_note(v):
    _ANN_LOG.append(v)
    return v


def _fresh_annotated():
    """A function and a class whose annotations (PEP 649) read _ANN_T and log when evaluated."""
    def g(a: _ann_note(_ANN_T)):
        return a

    class C:
        a: _ann_note(_ANN_T)
    return g, C


def _reads_annotations(x, n, g, C):
    global _ANN_T
    _ANN_LOG.append("before")
    _ANN_T = n
    return x + g.__annotations__["a"] + C.__annotations__["a"]


def _run_with_fresh_annotations(fn, n):
    global _ANN_T
    _ANN_T = 0
    _ANN_LOG.clear()
    g, C = _fresh_annotated()
    return fn(torch.ones(2), n, g, C), list(_ANN_LOG)


@needs_lazy_annotations
def test_lazy_annotations_are_read_in_order(capsys):
    """3.14 evaluates a function's or class's annotations at their first read (PEP 649). The
    trace read `g.__annotations__` on the real object, which ran them at trace time, before
    the frame's own `global T; T = n` (eager [6, 6] + ..., compiled [1, 1]) and before its
    side effects. A read of annotations not evaluated yet is a graph break there."""
    c = tracer.compile(_reads_annotations)
    for n in (5, 6):
        out, log = _run_with_fresh_annotations(c, n)
        ref, ref_log = _run_with_fresh_annotations(_reads_annotations, n)
        assert torch.equal(out, ref) and log == ref_log == ["before", n, n]
    s = tracer.stats()
    assert s.graph_breaks >= 2 and s.internal_errors == 0
    assert any("PEP 649" in r for r in s.break_reasons)
    # (the class's __annotate__, run by the break, is a frame of its own, run as Python)
    assert all("module or class body" in r for r in s.fallback_reasons)


def _signature_of_annotated(x, n, g, C):
    global _ANN_T
    _ANN_LOG.append("before")
    _ANN_T = n
    return x + len(inspect.signature(g).parameters) + len(inspect.signature(C).parameters), \
        inspect.signature(g).parameters["a"].annotation


@needs_lazy_annotations
def test_inspect_signature_runs_lazy_annotations_in_order(capsys):
    """inspect.signature is folded at trace time on the real function; on 3.14 it reads the
    function's annotations, which ran them then (before the frame's `T = n`: the parameter's
    annotation was 0, and logged before "before"). A function whose annotations are not
    evaluated yet makes it a graph break."""
    c = tracer.compile(_signature_of_annotated)
    for n in (5, 6):
        out, log = _run_with_fresh_annotations(c, n)
        ref, ref_log = _run_with_fresh_annotations(_signature_of_annotated, n)
        assert torch.equal(out[0], ref[0]) and out[1] == ref[1] == n and log == ref_log
    assert any("PEP 649" in r for r in tracer.stats().break_reasons)


@needs_lazy_annotations
def test_evaluated_annotations_are_read_in_the_graph_and_guarded():
    """Annotations evaluated already (cached by CPython) are read as before, no break, through
    a source that never evaluates them: a later call with a fresh function of the same code,
    whose annotations are pending, fails the guard instead of evaluating them."""
    global _ANN_T
    _ANN_T = 0
    g, C = _fresh_annotated()
    g.__annotations__, C.__annotations__  # evaluated now: 0 and 0
    c = tracer.compile(_reads_annotations)
    assert torch.equal(c(torch.ones(2), 5, g, C), _reads_annotations(torch.ones(2), 5, g, C))
    s = tracer.stats()
    assert s.graphs == 1 and s.graph_breaks == 0
    out, log = _run_with_fresh_annotations(c, 7)
    assert torch.equal(out, torch.full((2,), 15.0)) and log == ["before", 7, 7]
    assert tracer.stats().recompiles == 1 and tracer.stats().graph_breaks >= 1


@needs_lazy_annotations
def test_lazy_annotations_of_a_closure_across_a_break_and_of_a_module(capsys):
    """A nested function made before a break is a real function in the resume function: its
    annotations read a cell the frame writes after the break. A module's annotations are
    evaluated at their first read too."""
    import types

    def fresh_module():
        mod = types.ModuleType("lazy_annotated")
        mod.note = _ann_note
        exec("x: note(T)\nT = 0", mod.__dict__)
        return mod

    def f(x, n, mod):
        T = n
        def g(a: T):
            return a
        print("break")
        T = n * 3
        mod.T = n
        return x + g.__annotations__["a"] + mod.__annotations__["x"]

    c = tracer.compile(f)
    for n in (1, 2):
        assert torch.equal(c(torch.ones(2), n, fresh_module()), f(torch.ones(2), n, fresh_module()))
    s = tracer.stats()
    assert s.fallbacks == 0 and s.internal_errors == 0
    assert sum(k for r, k in s.break_reasons.items() if "PEP 649" in r) >= 2


@pytest.mark.loop_resumes
def test_loops_yield_from_and_star_calls_keep_their_stack_layout(capsys):
    """3.15 keeps an iterator as two stack entries (GET_ITER pushes [iterator, index | NULL],
    POP_ITER drops both, SEND sees the pair below the value); 3.14 always has CALL_FUNCTION_EX's
    kwargs slot. A break inside a loop rebuilds the pair."""
    def gen(xs):
        yield from xs
        yield from (x * 2 for x in xs)

    def star(*args, **kwargs):
        return sum(args) + len(kwargs)

    def f(x, xs):
        total = x
        for v in gen(xs):
            total = total + v
        for v in xs:
            total = total * v
            if v == 2.0:
                print("break in the loop")
        return total + star(*xs) + star(*xs, k=1)

    c, rec = run(f, (t(3), [1.0, 2.0, 3.0]), (t(3, seed=1), [1.0, 2.0, 3.0]))
    assert c.entries[0].code is not None and c.entries[0].breaks
    assert tracer.stats().internal_errors == 0 and tracer.stats().fallbacks == 0


_PLACEHOLDER = getattr(functools, "Placeholder", None)
needs_placeholder = pytest.mark.skipif(_PLACEHOLDER is None, reason="functools.Placeholder is new in 3.14")


def _tensors_of(*args, **kwargs):
    return torch.cat([a for a in args if isinstance(a, torch.Tensor)]), len(args), sorted(kwargs)


@needs_placeholder
def test_partial_placeholders_are_filled_by_the_call():
    """3.14's functools.Placeholder: a call fills a partial's placeholders with its first
    positional arguments, left to right. The trace passed the Placeholder object itself and
    appended the call's arguments (`partial(cat, Placeholder, y)(x)` was cat(y, x))."""
    P = _PLACEHOLDER
    two_holes = functools.partial(_tensors_of, P, P, 3)

    def f(x, y):
        p = functools.partial(_tensors_of, P, y)
        merged = functools.partial(functools.partial(_tensors_of, P, 2, P, 4), P, y)
        return p(x), two_holes(y, x), two_holes(x, y, x, k=1), merged(x), merged.args[0] is P, \
            len(merged.args), p(P)[1]

    c, d = check(f, torch.zeros(2), torch.ones(2))
    assert d.graphs == 1 and d.breaks == 0

    def g(x, p):
        q = functools.partial(p, x)  # a partial passed in, merged: one placeholder left
        return q(x + 1), q.args[1] is P, p(x, x)

    check(g, torch.zeros(2), functools.partial(_tensors_of, P, P, 5), graphs=1)


@needs_placeholder
def test_partial_placeholder_errors_are_eagers():
    """A call with fewer positional arguments than placeholders, a trailing Placeholder and a
    keyword Placeholder raise eager's TypeError, which traced code can catch."""
    P = _PLACEHOLDER

    def caught(make):
        try:
            return make()
        except TypeError as e:
            return str(e)

    def f(x, y):
        return x + 1, caught(lambda: functools.partial(_tensors_of, P, P, y)(x)), \
            caught(lambda: functools.partial(_tensors_of, x, P)), \
            caught(lambda: functools.partial(_tensors_of, x, k=P)), \
            caught(lambda: functools.partial(functools.partial(_tensors_of, P, 1, P, 2), y)())

    c, d = check(f, torch.zeros(2), torch.ones(2))
    out, _ = run_both(c, f, torch.zeros(2), torch.ones(2))
    assert out[1] == "missing positional arguments in 'partial' call; expected at least 2, got 1"
    assert out[2:4] == ("trailing Placeholders are not allowed",
                        "Placeholder cannot be passed as a keyword argument")
    assert d.graphs == 1 and d.breaks == 0


@needs_placeholder
def test_partial_with_a_placeholder_across_a_break(capsys):
    """A partial with a placeholder made before a break is rebuilt for the resume function
    and still fills its placeholder there."""
    P = _PLACEHOLDER

    def f(x, y):
        p = functools.partial(_tensors_of, P, y * 2)
        print("break")
        return p(x), p.args[0] is P

    c, d = check(f, torch.zeros(2), torch.ones(2), graphs=2, breaks=1)
