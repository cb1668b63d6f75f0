"""What `tracer-dump` is asked to trace: the target, its inputs, and the user's mistakes with them.

Every mistake a user can make on the command line (a module that does not exist, a directory
as the target, a syntax error in it, a target that is not callable, inputs that do not fit its
signature, an output file in a missing directory) ends in `UsageError`: one line that names
the problem and the fix, printed by `tracer-dump` with exit code 2, never a traceback of ours.
An exception raised by the user's own code while it is imported or called is reported the same
way, with the innermost line of *their* code that raised it.
"""
import ast
import importlib
import importlib.util
import inspect
import os
import sys
import traceback

import torch

_TENSOR_FNS = ("randn", "rand", "zeros", "ones", "arange", "randint")


class UsageError(Exception):
    """A mistake in what the user asked for: its message is the whole report."""


def user_frame(exc):
    """`file:line` of the innermost frame of `exc`'s traceback outside the tracer, importlib and
    this tool (where the user's code raised), or ""."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    where = ""
    for fs in traceback.extract_tb(exc.__traceback__):
        if fs.filename.startswith(here) or fs.filename.startswith("<frozen"):
            continue
        where = f"{fs.filename}:{fs.lineno}"
    return where


def _raised(what, exc):
    where = user_frame(exc)
    return UsageError(f"{what} raised {type(exc).__name__}: {exc}" + (f" (at {where})" if where else ""))


# ---- the target -------------------------------------------------------------------------------
def load_target(spec):
    """`path/to/file.py:attr` or `pkg.module:attr` -> (module, object)."""
    where, sep, attr = spec.rpartition(":")
    if not sep or not where or not attr:
        raise UsageError(f"TARGET must be file.py:function or package.module:function, got {spec!r}")
    if where.endswith(".py") or os.sep in where:
        module = _load_file(where)
    else:
        sys.path.insert(0, os.getcwd())
        try:
            module = importlib.import_module(where)
        except ModuleNotFoundError as e:
            if e.name and where.startswith(e.name):  # the target's own module, not one it imports
                raise UsageError(f"no module named {where!r} (TARGET is package.module:function, importable "
                                 f"from {os.getcwd()}, or path/to/file.py:function)") from None
            raise _raised(f"importing {where}", e) from None
        except SyntaxError as e:
            raise UsageError(f"{e.filename}:{e.lineno}: syntax error: {e.msg}") from None
        except Exception as e:  # the module's own code failed
            raise _raised(f"importing {where}", e) from None
        if getattr(module, "__file__", None) is None and hasattr(module, "__path__"):
            raise UsageError(f"{where} is a directory (a namespace package), not a module; "
                             "TARGET is path/to/file.py:function or package.module:function")
    obj = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise UsageError(f"{where} has no attribute {attr!r}") from None
    if not callable(obj):
        raise UsageError(f"{spec} is a {type(obj).__name__}, not a function or an nn.Module")
    return module, obj


def _load_file(where):
    path = os.path.abspath(where)
    if not os.path.exists(path):
        raise UsageError(f"no such file: {where}")
    if os.path.isdir(path):
        raise UsageError(f"{where} is a directory; TARGET is path/to/file.py:function")
    name = "__tracer_dump_" + os.path.splitext(os.path.basename(path))[0]
    sys.path.insert(0, os.path.dirname(path))
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None:
        raise UsageError(f"{where} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as e:
        raise UsageError(f"{e.filename}:{e.lineno}: syntax error: {e.msg}") from None
    except Exception as e:  # the script's own code failed at import
        raise _raised(f"running {where}", e) from None
    return module


def check_arity(name, obj, args, kwargs):
    """The inputs must fit the target's signature: said before anything is traced."""
    try:
        sig = inspect.signature(obj.forward if isinstance(obj, torch.nn.Module) else obj)
    except (TypeError, ValueError):  # a builtin without a signature: the call will say
        return
    try:
        sig.bind(*args, **kwargs)
    except TypeError as e:
        raise UsageError(f"the inputs do not fit {name}{sig}: {e} "
                         f"(got {len(args)} positional, {len(kwargs)} keyword)") from None


# ---- the inputs -------------------------------------------------------------------------------
def parse_inputs(text):
    """Parse `--inputs` safely (ast only): returns (args tuple, kwargs dict)."""
    try:
        call = ast.parse(f"_({text})", mode="eval").body
    except SyntaxError as e:
        raise ValueError(f"--inputs is not a valid argument list: {e.msg}") from None
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        raise ValueError("--inputs: * and ** are not accepted")
    return tuple(_value(a) for a in call.args), {k.arg: _value(k.value) for k in call.keywords}


def _value(node):
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str, bool, type(None))):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        v = _value(node.operand)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return -v
    if isinstance(node, (ast.Tuple, ast.List)):
        items = [_value(e) for e in node.elts]
        return tuple(items) if isinstance(node, ast.Tuple) else items
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _TENSOR_FNS:
        return _tensor(node)
    raise ValueError(f"--inputs: unsupported expression {ast.unparse(node)!r} "
                     f"(allowed: {', '.join(_TENSOR_FNS)}, numbers, strings, tuples, lists)")


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _tensor(node):
    """A tensor constructor with torch's own signatures: `randn(2, 8)` or `randn((2, 8))`;
    `randint(high, size)`, `randint(low, high, size)` (size a tuple) or `randint(high, 2, 8)`;
    `arange(end)`, `arange(start, end[, step])`; an optional `dtype=<torch dtype name>`."""
    fn = node.func.id
    args = [_value(a) for a in node.args]
    kw = {}
    for k in node.keywords:
        if k.arg != "dtype" or not isinstance(k.value, ast.Name) \
                or not isinstance(getattr(torch, k.value.id, None), torch.dtype):
            raise ValueError(f"{fn}(): only dtype=<torch dtype name> is accepted")
        kw["dtype"] = getattr(torch, k.value.id)
    if fn == "randint":
        if len(args) >= 2 and isinstance(args[-1], (tuple, list)) and all(_is_int(a) for a in args[:-1]) \
                and len(args) <= 3 and all(_is_int(s) for s in args[-1]):
            return _make(fn, torch.randint, *args[:-1], tuple(args[-1]), **kw)
        if len(args) >= 2 and all(_is_int(a) for a in args):
            return _make(fn, torch.randint, args[0], tuple(args[1:]), **kw)
        raise ValueError("randint takes (high, size), (low, high, size) with size a tuple, or (high, d0, d1, ...)")
    if len(args) == 1 and isinstance(args[0], (tuple, list)) and fn != "arange":
        args = list(args[0])
    if not all(_is_int(s) for s in args):
        raise ValueError(f"{fn}() takes integer sizes")
    if fn != "arange" and any(s < 0 for s in args):
        raise ValueError(f"{fn}(): negative size {min(args)}")
    return _make(fn, getattr(torch, fn), *args, **kw)


def _make(name, maker, *args, **kw):
    """`maker(*args, **kw)`, torch's refusal (a size it cannot allocate, an empty randint
    range) as one line."""
    try:
        return maker(*args, **kw)
    except (RuntimeError, ValueError, MemoryError) as e:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ValueError(f"{name}(): {first}") from None


def example_inputs(module, fn_name):
    maker = getattr(module, f"example_inputs_{fn_name}", None) or getattr(module, "example_inputs", None)
    if maker is None:
        raise UsageError(f"give --inputs, or define example_inputs() in {module.__name__}")
    try:
        got = maker()
    except Exception as e:
        raise _raised(f"{module.__name__}.{maker.__name__}()", e) from None
    if isinstance(got, tuple) and len(got) == 2 and isinstance(got[0], (tuple, list)) and isinstance(got[1], dict):
        return tuple(got[0]), dict(got[1])
    return (tuple(got) if isinstance(got, (tuple, list)) else (got,)), {}


# ---- the outputs ------------------------------------------------------------------------------
def check_output_path(option, path):
    """`--html`/`--export` into a directory that does not exist (or cannot be written) is said
    before the trace, not after the whole text report."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise UsageError(f"{option} {path}: is a directory; give a file name")
    if not os.path.isdir(folder):
        raise UsageError(f"{option} {path}: no directory {folder}")
    if not os.access(folder, os.W_OK):
        raise UsageError(f"{option} {path}: cannot write in {folder}")
