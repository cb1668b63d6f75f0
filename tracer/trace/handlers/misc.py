"""Stack shuffling, no-ops, imports, and opcodes that are explicitly not traced."""
import builtins
import dis
import sys

from bytecode_utils.instructions import is_pep479_check
from bytecode_utils.versions import ITER_SLOTS, SEND_KEEPS_RECEIVER

from ...exc import Unsupported, UserException
from ...variables.base import ConstantVariable
from ...variables.builder import wrap
from .registry import SINCE_312, UNTIL_314, handler
from ...variables.generators import GeneratorVariable, runtime_error_for
from ...variables.containers import DictVariable, IteratorVariable
from ...variables.functions import BuiltinVariable
from ...variables.exceptions import ExceptionVariable
from ...variables.builtins_impl import call_builtin
from ...variables import module_getattr


@handler("NOP", "RESUME", "CACHE", "EXTENDED_ARG")
def NOP(tx, inst):
    pass  # RESUME only marks a frame start; CACHE/EXTENDED_ARG are folded away by decode()


@handler("POP_TOP")
def POP_TOP(tx, inst):
    tx.pop()


@handler("COPY")
def COPY(tx, inst):
    tx.push(tx.stack[-inst.arg])


@handler("SWAP")
def SWAP(tx, inst):
    s = tx.stack
    s[-1], s[-inst.arg] = s[-inst.arg], s[-1]


@handler("IMPORT_NAME")
def IMPORT_NAME(tx, inst):
    """`import a.b` / `from a import b` / `from .x import y` of a module already in sys.modules
    (an import that would run a module's code is a break). A relative one is resolved against
    the frame's package as importlib's __import__ does (`_package_of`); its fromlist names
    must be attributes of the module already (importing a submodule runs its code)."""
    fromlist, level = tx.pop(), tx.pop()
    name, level, fromlist = inst.argval, level.as_constant(), fromlist.as_constant()
    if level:
        name = _resolve_relative(tx, name, level)
    module = sys.modules.get(name)
    if module is None:
        raise Unsupported(f"import of a module not yet loaded: {name}")
    if not fromlist and "." in name:
        module = sys.modules[name.split(".")[0]]
    var = wrap(tx, module, None)
    if fromlist and _has(tx, var, "__path__"):
        for sub in fromlist:
            if sub != "*" and not _has(tx, var, sub):
                raise Unsupported(f"`from {name} import {sub}` would import a submodule")
    tx.push(var)


def _has(tx, var, attr):
    """hasattr(module, attr) as the import machinery asks it (`__path__`, then each name of a
    package's fromlist): a name the module's own `__getattr__` answers is that call, traced
    (eager makes it on every import); otherwise ordinary lookup, unguarded (IMPORT_FROM
    guards what it reads)."""
    if module_getattr.hook_for(var.module, attr) is not None:
        return var.hasattr(tx, attr)
    return module_getattr.found_by_lookup(var.module, attr)


def _resolve_relative(tx, name, level):
    """The absolute name of `from {'.' * level}{name} import ...` in this frame's module.
    (The module's `__package__` is read, not guarded: a module's package does not change.)"""
    package = _package_of(tx.f_globals)
    if not package:
        raise UserException(ImportError, "attempted relative import with no known parent package")
    bits = package.rsplit(".", level - 1)
    if len(bits) < level:
        raise UserException(ImportError, "attempted relative import beyond top-level package")
    return f"{bits[0]}.{name}" if name else bits[0]


def _package_of(g):
    """The package a module's relative imports start from, as importlib computes it from the
    module's globals: `__package__`, else `__spec__.parent`, else `__name__` (less its last
    part unless the module is a package)."""
    package = g.get("__package__")
    if package is not None:
        return package
    spec = g.get("__spec__")
    if spec is not None:
        return spec.parent
    package = g.get("__name__") or ""
    return package if "__path__" in g else package.rpartition(".")[0]


@handler("IMPORT_FROM")
def IMPORT_FROM(tx, inst):
    """`from m import name`: m.name; where m lacks it CPython looks for a submodule
    `m.name` and raises ImportError, not the AttributeError of the read (a break: it runs)."""
    try:
        tx.push(tx.stack[-1].getattr(tx, inst.argval))
    except UserException as e:
        if issubclass(e.exc_type, AttributeError):
            raise Unsupported(f"`from ... import {inst.argval}` of a name the module lacks") from None
        raise


@handler("GET_LEN")
def GET_LEN(tx, inst):
    tx.push(ConstantVariable(tx.stack[-1].length(tx)))


@handler("LOAD_BUILD_CLASS")
def LOAD_BUILD_CLASS(tx, inst):
    """A class statement: its call of __build_class__ is traced (variables/frame_classes.py)."""
    tx.push(BuiltinVariable(builtins.__build_class__))


@handler("SETUP_ANNOTATIONS")
def SETUP_ANNOTATIONS(tx, inst):
    """A class body with annotations: `__annotations__` made in its namespace if absent."""
    if tx.namespace is None:
        raise Unsupported("SETUP_ANNOTATIONS: annotations in module code")
    tx.namespace.items.setdefault("__annotations__", DictVariable({}))


def _unsupported(reason):
    def h(tx, inst):
        raise Unsupported(f"{inst.opname}: {reason}")
    return h


for _name, _why in {
    "IMPORT_STAR": "import * in a function",
    "PRINT_EXPR": "interactive printing",
    "GET_AWAITABLE": "coroutine frame",
    "GET_AITER": "async iteration",
    "GET_ANEXT": "async iteration",
    "END_ASYNC_FOR": "async iteration",
    "BEFORE_ASYNC_WITH": "async with",
    "ASYNC_GEN_WRAP": "async generator",
    "CALL_INTRINSIC_2": "exception groups or type parameters",
}.items():
    if _name in dis.opmap:  # (each version has its own subset)
        handler(_name)(_unsupported(_why))


@handler("CALL_INTRINSIC_1", versions=SINCE_312)
def CALL_INTRINSIC_1(tx, inst):
    """3.12+. LIST_TO_TUPLE and UNARY_POSITIVE arrive under those names (normalised); a
    generator body's StopIteration check turns StopIteration into RuntimeError (PEP 479)
    and passes other exceptions through; the rest
    (print of an interactive expression, import *, async generators, type parameters) are
    not traced."""
    if is_pep479_check(inst):
        exc = tx.stack[-1]
        if isinstance(exc, ExceptionVariable) and not issubclass(exc.cls, StopAsyncIteration):
            if issubclass(exc.cls, StopIteration) and tx.generator is not None:
                tx.stack[-1] = runtime_error_for(exc)  # PEP 479, as 3.11's caller-side check
            elif issubclass(exc.cls, StopIteration):
                raise Unsupported("StopIteration escaping a coroutine body")
            return  # the exception stays on the stack, unchanged: RERAISE follows
    raise Unsupported(f"CALL_INTRINSIC_1 {inst.argrepr} is not traced")


@handler("RETURN_GENERATOR")
def RETURN_GENERATOR(tx, inst):
    """Start of an inlined generator: the following POP_TOP drops what this pushes."""
    if tx.generator is None:
        raise Unsupported("generator frame entered without a consumer")
    tx.push(ConstantVariable(None))


@handler("YIELD_VALUE")
def YIELD_VALUE(tx, inst):
    """Suspend an inlined generator at a yield; the consumer's next() resumes it.

    The frame keeps its stack and ip, so GeneratorVariable.send just runs it again: the
    generator body advances exactly as far as the consumer pulls, as in Python. The None
    pushed here is the value of the `yield` expression, replaced by send(v).
    """
    if tx.generator is None:
        raise Unsupported("yield in a frame that is not an inlined generator")
    tx.suspended_value = tx.pop()
    tx.push(ConstantVariable(None))
    return True  # suspend: GeneratorVariable.send hands the value to the consumer


@handler("GET_YIELD_FROM_ITER", versions=UNTIL_314)
def GET_YIELD_FROM_ITER(tx, inst):
    from_iter(tx)


def from_iter(tx):
    """`yield from`'s iter(TOS): a generator is kept as it is (it is sent values)."""
    if not isinstance(tx.stack[-1], GeneratorVariable):
        tx.push(call_builtin(tx, iter, [tx.pop()], {}))


@handler("SEND")
def SEND(tx, inst):
    """`yield from`: send TOS into the iterator below it; its next value is pushed (and
    yielded by the YIELD_VALUE that follows); when it is finished, its return value replaces
    it (3.11) or goes above it (3.12+, for END_SEND) and the loop is left."""
    value = tx.pop()
    receiver = tx.stack[-ITER_SLOTS]  # (3.15: [iterator, NULL, value])
    if isinstance(receiver, GeneratorVariable):
        kind, out = receiver.send(tx, value)
    elif isinstance(receiver, IteratorVariable):
        if not (value.is_constant() and value.as_constant() is None):
            raise Unsupported(f"send() of a value into {receiver}, which has no send method")
        out = receiver.next(tx)
        kind = "yield" if out is not None else "return"
        out = out if out is not None else ConstantVariable(None)
    else:
        raise Unsupported(f"yield from {receiver}")
    if kind == "yield":
        tx.push(out)
    else:
        if SEND_KEEPS_RECEIVER:
            tx.push(out)  # [iterator, value]: END_SEND drops the iterator (3.12+)
        else:
            tx.stack[-1] = out
        tx.jump(inst)


@handler("END_SEND", versions=SINCE_312)
def END_SEND(tx, inst):
    """End of a `yield from` loop: [iterator, value] -> [value] (3.15: [iterator, NULL, value])."""
    del tx.stack[-1 - ITER_SLOTS:-1]


@handler("CLEANUP_THROW", versions=SINCE_312)
def CLEANUP_THROW(tx, inst):
    """An exception thrown (throw()/close()) at the `yield` of a `yield from` loop, stack
    [iterator, last sent value, exception] (3.15: [iterator, NULL, ...]): a StopIteration means the delegate finished,
    its value is the loop's result (the next instruction jumps to END_SEND); anything else
    is re-raised."""
    exc = tx.stack[-1]
    if not isinstance(exc, ExceptionVariable):
        raise Unsupported("CLEANUP_THROW of an exception that is not modelled")
    if not issubclass(exc.cls, StopIteration):
        tx.pop()
        raise UserException(exc.cls, f"{exc.cls.__name__} re-raised (the user code raises it)", exc)
    tx.popn(2 + ITER_SLOTS)
    for _ in range(ITER_SLOTS):  # what END_SEND drops
        tx.push(ConstantVariable(None))
    tx.push(exc.args[0] if exc.args else ConstantVariable(None))
