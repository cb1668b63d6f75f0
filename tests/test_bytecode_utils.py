"""Tests for bytecode_utils.instructions and bytecode_utils.analysis on real bytecode of the
running CPython (3.11, 3.12 or 3.13); version-specific expectations say which version."""

from __future__ import annotations

import dis
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bytecode_utils as bu
from bytecode_utils import versions
from test_bytecode_utils_support import STDLIB_MODULES, stdlib_codes

PY = sys.version_info[:2]


def test_no_torch_or_tracer_import():
    import subprocess

    probe = "import sys, bytecode_utils; print(sorted({'torch', 'tracer', 'guards'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --- decode ---------------------------------------------------------------------------------


def _dis_exn_for_offset(code):
    """offset -> (start, end, target, depth, lasti) of the first dis entry covering it."""
    entries = dis._parse_exception_table(code)
    out = {}
    for d in dis.get_instructions(code):
        for e in entries:
            if e.start <= d.offset < e.end:
                out[d.offset] = (e.start, e.end, e.target, e.depth, e.lasti)
                break
    return out


@pytest.mark.parametrize("modname", STDLIB_MODULES)
def test_decode_consistent_with_dis(modname):
    for code in stdlib_codes(modname):
        instrs = bu.decode(code)
        real = [d for d in dis.get_instructions(code) if d.opname != "EXTENDED_ARG"]
        assert [i.offset for i in instrs] == [d.offset for d in real]
        # names are normalised (versions.normalize): the raw name or one of its aliases
        for i, d in zip(instrs, real):
            assert i.opname in (d.opname, *versions.ALIASES.get(d.opname, ()))
            assert i.opcode == d.opcode and i.arg == d.arg
        # (3.14's LOAD_COMMON_CONSTANT is a LOAD_CONST of the constant, where dis shows its index)
        assert [(i.argval, i.argrepr) for i in instrs if i.opname != "KW_NAMES"] == [
            (dis._common_constants[d.arg] if d.opname == "LOAD_COMMON_CONSTANT" else d.argval, d.argrepr)
            for d in real if d.opname != "KW_NAMES"
        ]
        for i in instrs:
            if i.opname == "KW_NAMES":
                assert i.argval == code.co_consts[i.arg] and type(i.argval) is tuple
        by_offset = {i.offset: i for i in instrs}
        dis_exn = _dis_exn_for_offset(code)
        for idx, inst in enumerate(instrs):
            assert inst.index == idx
            assert inst.opname not in ("CACHE", "EXTENDED_ARG")
            if bu.is_jump(inst):
                assert inst.target is not None
                assert instrs[inst.target].start_offset == inst.argval
                assert instrs[inst.target].is_jump_target
            else:
                assert inst.target is None
            e = dis_exn.get(inst.offset)
            if e is None:
                assert inst.exn is None, (code, inst)
            else:
                start, end, target, depth, lasti = e
                assert inst.exn is not None, (code, inst)
                assert instrs[inst.exn.start].start_offset <= start <= instrs[inst.exn.start].offset
                assert instrs[inst.exn.end].offset < end
                assert inst.exn.end + 1 == len(instrs) or instrs[inst.exn.end + 1].start_offset >= end
                assert by_offset[target].index == inst.exn.target or instrs[inst.exn.target].start_offset == target
                assert (inst.exn.depth, inst.exn.lasti) == (depth, lasti)
        table = bu.exception_table(code)
        assert len(table) == len(dis._parse_exception_table(code))
        assert {i.exn for i in instrs if i.exn is not None} <= set(table)


def test_decode_folds_extended_arg_and_long_jumps():
    # > 256 constants and names, and a branch over a long body, force EXTENDED_ARG.
    body = "\n".join(f"        x{i} = {i}.5 + y" for i in range(300))
    src = f"def f(y, flag):\n    if flag:\n{body}\n    return y\n"
    ns = {}
    exec(src, ns)
    code = ns["f"].__code__
    raw = list(dis.get_instructions(code))
    assert any(d.opname == "EXTENDED_ARG" for d in raw)
    instrs = bu.decode(code)
    assert all(i.opname != "EXTENDED_ARG" for i in instrs)
    big = [i for i in instrs if i.arg is not None and i.arg > 255]
    assert big and all(i.start_offset < i.offset for i in big)
    jump = next(i for i in instrs if i.opname == "POP_JUMP_IF_FALSE")  # (normalised name)
    assert instrs[jump.target].opname == "LOAD_FAST" and instrs[jump.target].argval == "y"
    assert instrs[jump.target + 1].opname == "RETURN_VALUE"
    assert ns["f"](1, True) == 1


@pytest.mark.skipif(PY != (3, 11), reason="3.11 call sequence (PRECALL)")
def test_decode_argvals_and_3_11_opcodes():
    def f(a, b, xs):
        out = len(xs)
        out += a.real + b
        if a < b:
            out = g(a, key=b)
        return out

    instrs = bu.decode(f.__code__)
    by_name = {}
    for i in instrs:
        by_name.setdefault(i.opname, []).append(i)
    assert instrs[0].opname == "RESUME"
    assert by_name["LOAD_GLOBAL"][0].argval == "len"
    assert by_name["LOAD_GLOBAL"][0].arg & 1  # NULL pushed before the callable
    assert by_name["LOAD_ATTR"][0].argval == "real"
    assert {i.argval for i in by_name["BINARY_OP"]} == {13, 0}
    assert {bu.BINARY_OP_NAMES[i.argval] for i in by_name["BINARY_OP"]} == {"+=", "+"}
    assert by_name["COMPARE_OP"][0].argval == "<"
    assert by_name["KW_NAMES"][0].argval == ("key",)
    assert [i.arg for i in by_name["PRECALL"]] == [1, 2] == [i.arg for i in by_name["CALL"]]
    assert all(i.lineno is not None for i in instrs)
    assert bu.BINARY_OP_NAMES[0] == "+" and bu.BINARY_OP_NAMES[5] == "*"


@pytest.mark.skipif(PY < (3, 12), reason="3.12+ instructions")
def test_decode_argvals_and_3_12_plus_opcodes():
    def f(a, b, xs):
        out = len(xs)
        out += a.real + b
        if a < b:
            out = g(a, key=b)  # noqa: F821
        ys = [x for x in xs]
        return out, xs[a:b], ys, a.m(b)  # (3.14 folds a constant slice: xs[1:2] is a subscript)

    instrs = bu.decode(f.__code__)
    names = [i.opname for i in instrs]
    assert "PRECALL" not in names and "BINARY_SLICE" in names and "LOAD_FAST_AND_CLEAR" in names
    assert "LOAD_METHOD" in names  # LOAD_ATTR with the method bit, normalised
    method = next(i for i in instrs if i.opname == "LOAD_METHOD")
    assert method.argval == "m" and dis.opname[method.opcode] == "LOAD_ATTR" and method.arg & 1
    assert next(i for i in instrs if i.opname == "COMPARE_OP").argval == "<"
    if PY == (3, 12):
        assert next(i for i in instrs if i.opname == "KW_NAMES").argval == ("key",)
        assert "END_FOR" in names and "CALL_KW" not in names
    else:
        assert "CALL_KW" in names and "KW_NAMES" not in names
        assert "LOAD_FAST_LOAD_FAST" in names
        kw = next(i for i in instrs if i.opname == "CALL_KW")
        assert instrs[kw.index - 1].argval == ("key",)
    assert all(i.opname not in versions.ALIASES or versions.ALIASES[i.opname][0] == i.opname
               for i in instrs)


def test_jump_and_terminator_sets():
    assert {"JUMP_FORWARD", "JUMP_BACKWARD", "POP_JUMP_IF_TRUE", "FOR_ITER", "SEND"} <= bu.JUMP_OPNAMES
    if PY == (3, 11):
        assert "POP_JUMP_FORWARD_IF_TRUE" in bu.JUMP_OPNAMES
    assert {"RETURN_VALUE", "RAISE_VARARGS", "RERAISE", "JUMP_FORWARD", "JUMP_BACKWARD"} <= bu.TERMINATOR_OPNAMES
    assert "POP_JUMP_FORWARD_IF_TRUE" not in bu.TERMINATOR_OPNAMES
    assert "YIELD_VALUE" not in bu.TERMINATOR_OPNAMES


def test_exception_table_entries():
    def f(x):
        try:
            x = x + 1
        except ValueError:
            x = 0
        return x

    instrs = bu.decode(f.__code__)
    table = bu.exception_table(f.__code__)
    body = next(e for e in table if e.depth == 0 and not e.lasti)
    covered = [instrs[i].opname for i in range(body.start, body.end + 1)]
    assert "BINARY_OP" in covered and "STORE_FAST" in covered
    assert instrs[body.target].opname == "PUSH_EXC_INFO"
    add = next(i for i in instrs if i.opname == "BINARY_OP")
    assert add.exn == body
    assert instrs[0].exn is None  # RESUME is outside the try


# --- analysis: blocks -------------------------------------------------------------------------


@pytest.mark.parametrize("modname", STDLIB_MODULES[:5])
def test_basic_blocks_partition(modname):
    for code in stdlib_codes(modname):
        instrs = bu.decode(code)
        blocks = bu.basic_blocks(instrs)
        assert [i for b in blocks for i in b] == list(range(len(instrs)))
        starts = {b.start for b in blocks}
        assert bu.jump_targets(instrs) <= starts
        for b in blocks:
            for i in b[:-1]:
                assert not bu.is_jump(instrs[i]) and not bu.is_terminator(instrs[i])
            assert len({instrs[i].exn for i in b}) == 1


# --- analysis: stack depths -------------------------------------------------------------------


@pytest.mark.parametrize("modname", STDLIB_MODULES)
def test_stack_depths_match_compiler(modname):
    for code in stdlib_codes(modname):
        instrs = bu.decode(code)
        depths = bu.stack_depths(instrs)
        reachable = [d for d in depths if d is not None]
        # (3.13's compiler gives `RESUME; RETURN_CONST None` bodies a stack size of 1)
        assert max(reachable) == code.co_stacksize or (PY >= (3, 13) and max(reachable) == 0), code
        assert depths[0] == 0
        # unreachable code exists (dead except-cleanup blocks) but is rare
        assert len(reachable) >= len(depths) - 8
        for inst, d in zip(instrs, depths):
            if d is None:
                continue
            assert d >= 0
            if inst.opname == "RETURN_VALUE":
                assert d == 1
            if inst.opname == "PUSH_EXC_INFO":
                assert d >= 1  # the exception is on the stack


def test_stack_depths_generator_and_handlers():
    def gen(xs):
        for x in xs:
            try:
                yield x + 1
            except KeyError as e:
                yield e

    instrs = bu.decode(gen.__code__)
    depths = bu.stack_depths(instrs)
    assert [i.opname for i in instrs[:3]] == ["RETURN_GENERATOR", "POP_TOP", "RESUME"]
    assert depths[:3] == [0, 1, 0]
    for entry in bu.exception_table(gen.__code__):
        if depths[entry.start] is not None:
            assert depths[entry.target] == entry.depth + entry.lasti + 1
    fi = next(i for i in instrs if i.opname == "FOR_ITER")
    assert depths[fi.index + 1] == depths[fi.index] + 1  # next item pushed
    if PY == (3, 11):
        assert depths[fi.target] == depths[fi.index] - 1  # iterator popped at exhaustion
    else:  # the jump lands on END_FOR, which drops the iterator (and a pushed value)
        assert instrs[fi.target].opname == "END_FOR"
        assert depths[fi.target] == depths[fi.index] + 1


@settings(max_examples=60, deadline=None)
@given(st.recursive(st.sampled_from(["a", "b", "1"]), lambda e: st.tuples(e, st.sampled_from("+-*"), e).map(
    lambda t: f"({t[0]} {t[1]} {t[2]})") | st.lists(e, max_size=4).map(lambda xs: f"f({', '.join(xs)})"),
    max_leaves=20))
def test_stack_depths_random_expressions(expr):
    src = f"def g(a, b, f):\n    if a:\n        return {expr}\n    return [{expr}, {expr}]\n"
    ns = {}
    exec(src, ns)
    code = ns["g"].__code__
    depths = bu.stack_depths(code)
    assert max(d for d in depths if d is not None) == code.co_stacksize


# --- analysis: liveness -----------------------------------------------------------------------


def _live_at(code, opname, argval=None, nth=0):
    instrs = bu.decode(code)
    live = bu.live_locals(code)
    hits = [i for i in instrs if i.opname == opname and (argval is None or i.argval == argval)]
    return live[hits[nth].index]


def test_live_locals_straight_line_and_branch():
    def f(a, b, c):
        x = a + 1
        if b:
            y = x
        else:
            y = c
        return y

    live = bu.live_locals(f.__code__)
    assert live[0] == {"a", "b", "c"}
    assert _live_at(f.__code__, "STORE_FAST", "x") == {"b", "c"}  # a is dead after a + 1
    # before the branch both x and c are needed; in the 'then' arm c is dead
    assert _live_at(f.__code__, "LOAD_FAST", "b") == {"b", "x", "c"}
    assert _live_at(f.__code__, "STORE_FAST", "y", 0) == set()
    assert _live_at(f.__code__, "RETURN_VALUE") == set()


def test_live_locals_loop_keeps_loop_carried_values():
    def f(n):
        total = 0
        unused = 5
        for i in range(n):
            total = total + i
        return total

    assert _live_at(f.__code__, "FOR_ITER") == {"total"}
    assert _live_at(f.__code__, "STORE_FAST", "i") == {"total"}
    assert "unused" not in _live_at(f.__code__, "STORE_FAST", "unused")
    assert _live_at(f.__code__, "LOAD_GLOBAL", "range") == {"n", "total"}


def test_live_locals_try_except_sees_handler_uses():
    def f(x, fallback):
        y = 1
        try:
            y = x.compute()
        except Exception as e:
            return fallback + y
        return y

    # inside the try, fallback and the *old* y are live because the handler reads them
    at_call = _live_at(f.__code__, "LOAD_METHOD", "compute")
    assert at_call == {"fallback", "y"}  # x is already on the stack
    # after the try body the handler is gone; only y matters (the `return y` line; the
    # handler's code comes after it on 3.12+)
    return_y = max(i.lineno for i in bu.decode(f.__code__) if i.lineno)
    load_y = next(i for i in bu.decode(f.__code__) if i.lineno == return_y and i.opname == "LOAD_FAST")
    assert bu.live_locals(f.__code__)[load_y.index] == {"y"}
    assert "e" in _live_at(f.__code__, "DELETE_FAST", "e")


def test_live_locals_cells_and_freevars():
    def outer(a, unused):
        b = 2

        def inner():
            return a + b

        return inner

    live = bu.live_locals(outer.__code__)
    instrs = bu.decode(outer.__code__)
    assert [i.opname for i in instrs[:2]] == ["MAKE_CELL", "MAKE_CELL"]
    assert live[0] == {"a"}  # MAKE_CELL a wraps the argument; 'unused' is dead
    store_b = next(i for i in instrs if i.opname == "STORE_DEREF")
    assert "a" in live[store_b.index]  # closure built later reads cell a
    inner = next(c for c in outer.__code__.co_consts if hasattr(c, "co_code"))
    # free variables are not frame locals of the inner function
    assert all(not s for s in bu.live_locals(inner))


def test_loop_components_are_the_cycles_of_the_control_flow_graph():
    """An instruction is in a loop when it reaches itself; two are in one loop when each
    reaches the other. The handler of a try after the loop is in none, whatever its place."""
    from bytecode_utils.analysis import loop_components

    def f(xs, d):
        try:
            n = d["k"]
        except KeyError:
            n = len("handler")
        total = 0
        for x in xs:
            total += x
            if total > 10:
                return "early"
        return total + n

    instrs = bu.decode(f.__code__)
    loops = loop_components(f.__code__)
    const = {i.argval: i.index for i in instrs if i.opname in ("LOAD_CONST", "RETURN_CONST")}
    handler, early = const["handler"], const["early"]
    body = next(i.index for i in instrs if i.opname == "BINARY_OP" and "+=" in i.argrepr)
    assert loops[handler] is None and loops[early] is None
    assert loops[body] is not None
    head = next(i.target for i in instrs if i.target is not None and i.target < body and i.index > body)
    assert loops[head] == loops[body]
    assert [k for k, c in enumerate(loops) if c is not None] == sorted(
        k for k, c in enumerate(loops) if c == loops[body])  # one loop in f
