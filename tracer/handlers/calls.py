"""Calls (3.11 convention: PUSH_NULL/LOAD_METHOD, PRECALL, KW_NAMES, CALL) and MAKE_FUNCTION."""
from ..exc import Unsupported
from ..variables.containers import DictVariable, TupleVariable
from ..variables.functions import NestedFunctionVariable
from . import handler
from .load_store import NULL, NullVariable


@handler("PUSH_NULL")
def PUSH_NULL(f, inst):
    f.push(NULL)


@handler("PRECALL")
def PRECALL(f, inst):
    pass  # 3.11 specialisation hook; CALL does the work


@handler("KW_NAMES")
def KW_NAMES(f, inst):
    f.kw_names = inst.argval


@handler("CALL")
def CALL(f, inst):
    argc = inst.arg
    kw_names = f.kw_names or ()
    f.kw_names = None
    args = f.popn(argc)
    first, second = f.pop(), f.pop()
    if isinstance(second, NullVariable):
        fn = first
    else:  # (method, self) pair
        fn, args = second, [first, *args]
    if kw_names:
        kwargs = dict(zip(kw_names, args[len(args) - len(kw_names):]))
        args = args[:len(args) - len(kw_names)]
    else:
        kwargs = {}
    f.push(fn.call(f, args, kwargs))


@handler("CALL_FUNCTION_EX")
def CALL_FUNCTION_EX(f, inst):
    kwargs = f.pop() if inst.arg & 1 else DictVariable({})
    args = f.pop()
    fn = f.pop()
    if f.stack and isinstance(f.stack[-1], NullVariable):
        f.pop()
    if not isinstance(kwargs, DictVariable):
        raise Unsupported(f"** unpacking of {kwargs}")
    if not all(isinstance(k, str) for k in kwargs.items):
        raise Unsupported("keywords must be strings (the user code raises TypeError)")
    f.push(fn.call(f, args.iterate(f), dict(kwargs.items)))


@handler("MAKE_FUNCTION")
def MAKE_FUNCTION(f, inst):
    code = f.pop().as_constant()
    flags = inst.arg
    closure = [ref.box for ref in f.pop().items] if flags & 0x08 else []
    annotations = f.pop().iterate(f) if flags & 0x04 else []  # 3.11: (name, value, name, value...)
    kwdefaults = dict(f.pop().items) if flags & 0x02 else {}
    defaults = f.pop().iterate(f) if flags & 0x01 else []  # a tuple constant when all are constants
    fn = NestedFunctionVariable(code, f.f_globals, defaults, kwdefaults, closure, code.co_qualname)
    fn.annotations.items.update({k.as_constant(): v for k, v in zip(annotations[::2], annotations[1::2])})
    f.push(fn)
