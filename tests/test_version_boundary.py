"""One version boundary: only bytecode_utils/versions/ spells a version's instruction sequences.

Why a test: the 3.11 call sequence used to be written by hand in ~15 places; each was a place
to forget when 3.12 and 3.13 changed it. The package sources are scanned for

* emitted instructions whose spelling differs between versions (a call, a NULL, a method or
  attribute load, a closure, a function, a conditional jump, a return), written as
  ``Instr("NAME"`` or ``emit("NAME"``: these must come from the version helpers;
* names that exist only in some versions' call/closure/jump sequences, anywhere outside the
  version modules and the opname table (tracer/handlers/, which registers handlers by name).
"""
import pathlib
import re

import pytest

from bytecode_utils import versions

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ("tracer", "bytecode_utils", "guards")
VERSION_DIR = ROOT / "bytecode_utils" / "versions"
HANDLERS_DIR = ROOT / "tracer" / "trace" / "handlers"

EMITTED = re.compile(
    r"""(?:Instr|emit)\(\s*["'](CALL|CALL_KW|PRECALL|KW_NAMES|PUSH_NULL|LOAD_METHOD|LOAD_ATTR|"""
    r"""LOAD_GLOBAL|LOAD_CLOSURE|MAKE_FUNCTION|SET_FUNCTION_ATTRIBUTE|RETURN_VALUE|RETURN_CONST|"""
    r"""TO_BOOL|POP_JUMP_\w+|JUMP_IF_\w+)["']""")
VERSION_ONLY = re.compile(
    r"""["'](PRECALL|KW_NAMES|CALL_KW|SET_FUNCTION_ATTRIBUTE|TO_BOOL|POP_JUMP_(?:FORWARD|BACKWARD)_\w*)["']""")


def _sources():
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            if VERSION_DIR in path.parents:
                continue
            yield path


def _violations(path, pattern):
    out = []
    for lineno, line in enumerate(path.read_text().splitlines(), 1):
        for m in pattern.finditer(line):
            where = path.relative_to(ROOT) if ROOT in path.parents else path.name
            out.append(f"{where}:{lineno}: {m.group(0)}")
    return out


def test_no_hand_written_version_specific_instructions():
    bad = [v for path in _sources() for v in _violations(path, EMITTED)]
    assert bad == [], "use bytecode_utils.versions helpers instead:\n" + "\n".join(bad)


def test_version_only_opnames_stay_in_version_modules_and_the_opname_table():
    bad = [v for path in _sources() if HANDLERS_DIR not in path.parents
           for v in _violations(path, VERSION_ONLY)]
    assert bad == [], "\n".join(bad)


def test_the_scan_finds_what_it_looks_for(tmp_path):
    """The patterns are not vacuous: they catch the spellings they forbid."""
    sample = tmp_path / "sample.py"
    sample.write_text('cg.emit("PRECALL", 1)\nbc.Instr("PUSH_NULL")\nx = "POP_JUMP_FORWARD_IF_TRUE"\n'
                      'cg.emit("LOAD_FAST", t)\n')
    assert len(_violations(sample, EMITTED)) == 2
    assert len(_violations(sample, VERSION_ONLY)) == 2


def test_load_closure_passes_this_frames_cells_on():
    """A closure built from a free variable (load_closure(free=True)) and from a cell
    variable of the frame (free=False) reads the same cells (3.13: LOAD_FAST of the slot)."""
    import types

    import bytecode as bc

    def outer():
        v = 41

        def middle():
            w = 1

            def inner():
                return v + w
            return inner
        return middle

    middle = outer()
    inner_code = middle().__code__  # free vars ('v', 'w') in some order
    body = [bc.Instr("MAKE_CELL", bc.CellVar("w")), bc.Instr("COPY_FREE_VARS", 1), bc.Instr("RESUME", 0),
            bc.Instr("LOAD_CONST", 1), bc.Instr("STORE_DEREF", bc.CellVar("w"))]
    make = []
    for name in inner_code.co_freevars:
        make += versions.load_closure(name, free=(name == "v"))
    make += [bc.Instr("BUILD_TUPLE", 2)] + versions.make_function(inner_code, closure=True)
    body += versions.load_callable(make) + versions.call(0) + versions.return_value()
    code = bc.Bytecode(body)
    code.freevars, code.cellvars = ["v"], ["w"]
    fn = types.FunctionType(code.to_code(), {}, "m", None, middle.__closure__)
    assert fn() == 42


@pytest.mark.parametrize("helper", ["load_const_callable", "load_method", "make_function"])
def test_helpers_build_valid_code(helper):
    """The helpers' output assembles and runs on this version (a call with keywords, a method
    call, a closure function, a conditional jump, both returns)."""
    import types

    import bytecode as bc

    def closure_owner():
        v = 41

        def inner():
            return v + 1
        return inner

    body = [bc.Instr("RESUME", 0)]
    if helper == "load_const_callable":
        body += versions.load_const_callable(dict) + [bc.Instr("LOAD_CONST", 1)] + versions.call(1, ("a",))
    elif helper == "load_method":
        body += [bc.Instr("LOAD_CONST", (1, 2, 2))] + versions.load_method("count") \
            + [bc.Instr("LOAD_CONST", 2)] + versions.call(1)
    else:
        inner = closure_owner().__code__
        body += [bc.Instr("LOAD_CONST", types.CellType(41)), bc.Instr("BUILD_TUPLE", 1)] \
            + versions.make_function(inner, closure=True) + versions.call_const_on_tos(lambda fn: fn())
    label = bc.Label()
    body += [bc.Instr("COPY", 1)] + versions.cond_jump("POP_JUMP_IF_TRUE", label) + versions.return_const(None)
    body += [label] + versions.return_value()
    code = bc.Bytecode(body).to_code()
    result = types.FunctionType(code, {})()
    assert result == {"load_const_callable": {"a": 1}, "load_method": 2, "make_function": 42}[helper]
