"""Calls and function creation.

The stack layout of a call differs by version and is read through
`bytecode_utils.versions.split_call`: 3.11/3.12 `[NULL | method, callable | self, args...]`,
3.13 `[callable, self | NULL, args...]`. Keyword names come from KW_NAMES (3.11, 3.12) or
are CALL_KW's top operand (3.13). MAKE_FUNCTION takes its flags from the oparg up to 3.12;
3.13 makes a bare function and sets each attribute with SET_FUNCTION_ATTRIBUTE.
"""
from bytecode_utils import versions

from ...exc import Unsupported
from ...variables.collections_vars import mapping_as_dict
from ...variables.containers import DictVariable
from ...variables.functions import NestedFunctionVariable
from ...variables.stack_values import NULL, NullVariable
from .registry import PY311, SINCE_313, UNTIL_312, handler


def _is_null(v):
    return isinstance(v, NullVariable)


@handler("PUSH_NULL")
def PUSH_NULL(tx, inst):
    tx.push(NULL)


@handler("PRECALL", versions=PY311)
def PRECALL(tx, inst):
    """3.11's specialisation hook before CALL; CALL does the work."""


@handler("KW_NAMES", versions=UNTIL_312)
def KW_NAMES(tx, inst):
    tx.kw_names = inst.argval  # read by the CALL that follows


def _call(tx, argc, kw_names):
    items = tx.popn(argc + 2)
    fn, args = versions.split_call(items, _is_null)
    kwargs = {}
    if kw_names:
        n = len(kw_names)
        kwargs = dict(zip(kw_names, args[len(args) - n:]))
        args = args[:len(args) - n]
    tx.push(fn.call(tx, args, kwargs))


@handler("CALL")
def CALL(tx, inst):
    kw_names = tx.kw_names or ()
    tx.kw_names = None
    _call(tx, inst.arg, kw_names)


@handler("CALL_KW", versions=SINCE_313)
def CALL_KW(tx, inst):
    names = tx.pop()
    if not names.is_constant():
        raise Unsupported("CALL_KW with keyword names that are not a constant")
    _call(tx, inst.arg, names.as_constant())


@handler("CALL_FUNCTION_EX")
def CALL_FUNCTION_EX(tx, inst):
    kwargs = tx.pop() if versions.call_ex_has_kwargs(inst) else DictVariable({})
    if _is_null(kwargs):  # 3.14: the kwargs slot is always there, NULL when there are none
        kwargs = DictVariable({})
    args = tx.pop()
    top = tx.pop()
    if _is_null(top):  # 3.13: [callable, NULL, args, kwargs?]
        fn = tx.pop()
    else:  # 3.11/3.12: [NULL, callable, args, kwargs?]
        fn = top
        if tx.stack and _is_null(tx.stack[-1]):
            tx.pop()
    if not isinstance(kwargs, DictVariable):
        as_dict = mapping_as_dict(tx, kwargs)  # (3.13+ pass a lone `**m` as it is)
        if as_dict is None:
            raise Unsupported(f"** unpacking of {kwargs}")
        kwargs = as_dict
    if not all(isinstance(k, str) for k in kwargs.items):
        raise Unsupported("keywords must be strings (the user code raises TypeError)")
    tx.push(fn.call(tx, args.iterate(tx), dict(kwargs.items)))


# ---- making functions ------------------------------------------------------------------------
_ANNOTATE, _CLOSURE, _ANNOTATIONS, _KWDEFAULTS, _DEFAULTS = 0x10, 0x08, 0x04, 0x02, 0x01


def _set_attribute(fn, flag, value, f):
    """One function attribute from its stack value (MAKE_FUNCTION flags / SET_FUNCTION_ATTRIBUTE)."""
    if flag == _CLOSURE:
        fn.closure = [ref.box for ref in value.items]
    elif flag == _KWDEFAULTS:
        fn.kwdefaults = dict(value.items)
    elif flag == _DEFAULTS:
        fn.defaults = value.iterate(f)  # a tuple constant when all are constants
    elif flag == _ANNOTATIONS:  # 3.11-3.13: a tuple (name, value, name, value, ...)
        items = value.iterate(f)
        fn.annotations.items.update({k.as_constant(): v for k, v in zip(items[::2], items[1::2])})
    elif flag == _ANNOTATE:  # 3.14 (PEP 649): the function that computes them when asked
        fn.slots["__annotate__"] = value
    else:
        raise Unsupported(f"function attribute flag {flag:#x}")


@handler("MAKE_FUNCTION")
def MAKE_FUNCTION(tx, inst):
    code = tx.pop().as_constant()
    fn = NestedFunctionVariable(code, tx.f_globals, [], {}, [], code.co_qualname)
    flags = inst.arg or 0  # (3.13: no flags, SET_FUNCTION_ATTRIBUTE follows)
    for flag in (_CLOSURE, _ANNOTATIONS, _KWDEFAULTS, _DEFAULTS):  # stack order, top first
        if flags & flag:
            _set_attribute(fn, flag, tx.pop(), tx)
    tx.push(fn)


@handler("SET_FUNCTION_ATTRIBUTE", versions=SINCE_313)
def SET_FUNCTION_ATTRIBUTE(tx, inst):
    fn = tx.pop()
    if not isinstance(fn, NestedFunctionVariable):
        raise Unsupported(f"SET_FUNCTION_ATTRIBUTE on {fn}")
    _set_attribute(fn, inst.arg, tx.pop(), tx)
    tx.push(fn)
