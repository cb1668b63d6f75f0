"""The public entry points: `compile` (functions and modules) and `reset`.

`CompiledFunction.__call__` is the per-call hot path: bind the call to the N argument
slots (a no-op for plain positional calls), run each cache entry's guard check, and call the
entry's rewritten code with the same slots. A miss traces the frame (convert_frame).
"""
import contextlib
import copy
import functools
import inspect
import pickle
import types

import torch
from bytecode_utils import arg_count, make_binder, make_function

from .runtime import cache
from .runtime import records
from .runtime.compile_annotations import MODULE_WRAPPER_MARK, ORIGINAL, WRAPPER_MARK
from .runtime.dynamo_interop import dynamo_skip_call
from .runtime.records import HITS
from .graph.backends import backend_name, inductor_with, new_step, resolve
from .check import checked
from .options import check_callable, check_options
from .trace.convert_frame import convert_frame
from .variables import block_holes
from .runtime.frame_hook import clear_thread_caches, hook, set_error_handler, skip_code
from .capture import FrameCallback, _report_callback_error

# The frames a compiled function's graph breaks leave to the frame hook (resume functions, the
# calls run natively) report a failed callback as capture() does: a backend's failure
# (BackendError) and FullGraphError reach the caller, an internal error is logged and counted.
set_error_handler(_report_callback_error)

_FLAG_SIMPLE_MASK = 0x04 | 0x08  # CO_VARARGS | CO_VARKEYWORDS
_NO_NAMING = contextlib.nullcontext()


try:  # the cache-hit path in C (optional: without the extension, __call__ is _slow)
    from .runtime._dispatch import Dispatch as _DispatchBase, enable_vectorcall as _enable_vectorcall
except ImportError:
    _DispatchBase = None


class CompiledFunction(_DispatchBase or object):
    """A Python function whose frames are traced, guarded and cached. A call with the
    function's positional parameters that an entry's guards accept runs in C
    (tracer/runtime/_dispatch.c); every other call is `_slow`."""

    def __new__(cls, fn, backend="eager", *args, mode=None, options=None, **kwargs):
        if cls is CompiledFunction and (mode is not None or options) and \
                getattr(inductor_with(mode, options, kwargs.get("dynamic")), "cudagraphs", False):
            cls = _CudagraphFunction
        return super().__new__(cls)

    def __init__(self, fn, backend="eager", fullgraph=False, check=False, check_rtol=1e-4, check_atol=1e-5,
                 dynamic=None, mode=None, options=None):
        if not isinstance(fn, types.FunctionType):
            raise TypeError(f"CompiledFunction expects a Python function, got {type(fn).__name__} "
                            f"(tracer.compile takes any callable)")
        self._fn = fn
        # (mode/options: inductor's, checked by compile(); one backend object per configuration)
        self._backend = resolve(backend) if mode is None and not options else inductor_with(mode, options, dynamic)
        self._fullgraph = fullgraph
        self._dynamic = dynamic
        self._G = fn.__globals__
        self._C = fn.__closure__
        self._builtins = _builtins_of(fn.__globals__)
        self._hits = []  # [(check, runner)]: this function's view of its code's cache
        self._check = (int(check), check_rtol, check_atol)  # calls checked per new entry (check.py)
        self._use_code(fn.__code__)
        cache.register_view(self)
        functools.update_wrapper(self, fn)
        setattr(self, ORIGINAL, fn)  # (calls under torch.compile, or a trace, inline it: see below)

    def _use_code(self, code):
        """Serve the function's code `code`: at creation, and when `fn.__code__` was assigned
        since (a hot reload: IPython's autoreload assigns `__code__`), which sends every call
        to _slow. The entries of the other code are dropped from this view."""
        self._code = code
        self._n = arg_count(code)
        self._simple = not (code.co_flags & _FLAG_SIMPLE_MASK) and not code.co_kwonlyargcount
        self._defaults = self._kwdefaults = None
        self._binder = None
        self._hits.clear()
        if _DispatchBase is not None:  # (_hits is only ever changed in place: C reads it)
            self._dispatch_setup(self._hits, self._G, self._C, self._n if self._simple else -1, self._fn, code)

    def _slow(self, /, *args, **kwargs):  # (positional-only: a keyword named `self` is the user's)
        """The whole call in Python: binding, the entries' checks, a miss (C runs the hit
        path of a plain positional call and comes here for anything else)."""
        if self._fn.__code__ is not self._code:
            self._use_code(self._fn.__code__)
        if kwargs or len(args) != self._n or not self._simple:
            L = self._bind(args, kwargs)
        else:
            L = args
        G, C = self._G, self._C
        for check, run in self._hits:
            if check(L, G, C):
                HITS[0] += 1
                return run(*L)
        return self._miss(L)

    if _DispatchBase is None:
        __call__ = _slow

    def __get__(self, obj, objtype=None):
        return self if obj is None else types.MethodType(self, obj)

    def __reduce__(self):
        """pickle and copy treat a compiled function as a function: by reference, its module
        and qualified name (which must name this very object: a module-level `@compile`d
        function; pickle's own error for a lambda or a closure), and copy/deepcopy give the
        function itself. A copy of an object holding one shares it, and its entries: they
        guard what they read of the globals and closure the function keeps."""
        return self.__qualname__

    def __repr__(self):  # (3.14's pickle names a local object by its repr)
        return f"<compiled function {self.__qualname__} at {id(self):#x}>"

    def _bind(self, args, kwargs):
        fn = self._fn
        kw = fn.__kwdefaults__
        if self._binder is None or fn.__defaults__ is not self._defaults or not _same_items(kw, self._kwdefaults):
            # (the keyword-only defaults are a dict the user may assign or change in place:
            # compared item by item, by identity; the binder holds the values, so no id is reused)
            self._defaults = fn.__defaults__
            self._kwdefaults = None if kw is None else tuple(kw.items())
            self._binder = make_binder(self._code, fn.__defaults__, kw)
            # the binder carries the function's name and file: inside capture() the hook
            # would take it for a user frame and trace it
            skip_code(self._binder.__code__)
        return self._binder(*args, **kwargs)

    def _miss(self, L):
        name = self._fn.__qualname__
        with records.naming(self._code, name) if name != self._code.co_qualname else _NO_NAMING:
            entry = cache.lookup_or_compile(self._code, L, self._G, self._C, self._backend, self._fullgraph,
                                            lambda: self._trace(L))
        if entry is None:  # the recompile limit is reached, or set_stance says run eagerly
            return self._run_eager(*L)
        for check, run in self._hits:
            if getattr(run, "_entry", None) is entry:
                break  # (another function with this code made it, or another thread)
        else:
            self._add(entry)
            run = self._hits[-1][1]
        return run(*L)

    def _trace(self, L):
        with hook(None):  # the tracer's own reads of user objects must not be traced as frames
            return convert_frame(self._code, L, self._G, self._C, self._builtins, self._backend,
                                 self._fullgraph, self._dynamic)

    def _run_eager(self, *L):
        args, kwargs = self._unflatten(L)
        return self._fn(*args, **kwargs)

    def _clear_cache(self):
        self._hits.clear()

    def _entries(self):
        return [getattr(run, "_entry", None) for _c, run in self._hits]

    def _add(self, entry):
        if entry.code is None:
            # The frame runs as Python, but the frames it calls are still traced, through
            # the frame hook, each as its own frame (as TorchDynamo does).
            orig = self._fn
            flat = self._unflatten
            callback = self._fallback_callback()

            def run(*L):
                args, kwargs = flat(L)
                with hook(callback):
                    return orig(*args, **kwargs)
        elif entry.breaks:
            # After a graph break the rest of the frame runs in resume functions, and the
            # call at the break runs natively: both are traced through the frame hook.
            rewritten = make_function(entry.code, self._G, closure=self._C)
            callback = self._fallback_callback()

            def run(*L):
                with hook(callback):
                    return rewritten(*L)
        else:
            run = make_function(entry.code, self._G, closure=self._C)
        try:
            run._entry = entry
        except AttributeError:
            pass
        dynamo_skip_call(run)  # (C runs it directly: TorchDynamo's hook stays out of it, see below)
        calls, rtol, atol = self._check
        if calls and entry.code is not None:
            run = checked(run, entry, self._run_eager, calls, rtol, atol, self._drop_checker,
                          self._code.co_qualname, own_slots=_star_slots(self._code))
            dynamo_skip_call(run)
        self._hits.append((entry.guards.check, run))

    def _drop_checker(self, plain_run):
        """The last checked call of an entry: its plain runner takes the checker's place."""
        self._hits[:] = [(c, plain_run if getattr(r, "_entry", None) is plain_run._entry else r)
                         for c, r in self._hits]

    def _fallback_callback(self):
        return FrameCallback(self._backend, self._fullgraph, dynamic=self._dynamic)

    def _unflatten(self, L):
        """Slots back to a call: only needed to run the original function on fallback."""
        code = self._code
        npos = code.co_argcount
        nkw = code.co_kwonlyargcount
        args = list(L[:npos])
        kwargs = dict(zip(code.co_varnames[npos:npos + nkw], L[npos:npos + nkw]))
        i = npos + nkw
        if code.co_flags & 0x04:
            args.extend(L[i])
            i += 1
        if code.co_flags & 0x08:
            kwargs.update(L[i])
        return args, kwargs

    @property
    def entries(self):
        return [e for e in self._entries() if e is not None]


class _CudagraphFunction(CompiledFunction):
    """A compiled function whose graphs inductor runs as CUDA graphs: each call starts a new
    step of the cudagraph trees first (backends.new_step), as a call of a torch.compile'd
    function does."""

    def __call__(self, /, *args, **kwargs):
        new_step()
        return CompiledFunction.__call__(self, *args, **kwargs)


if _DispatchBase is not None:
    _enable_vectorcall(CompiledFunction)
# A call of a compiled function that torch.compile (TorchDynamo) traces, or that the tracer meets
# inside another trace, is inlined as the original function: the attribute protocol TorchDynamo
# reads (runtime/compile_annotations.py). Set here: in the class body the name would be mangled.
setattr(CompiledFunction, WRAPPER_MARK, True)
# A call TorchDynamo runs natively instead (it could not inline it: a break inside) is the
# tracer's alone: the frames such a call starts in are kept from TorchDynamo's frame hook
# (runtime/dynamo_interop.py): `_slow` and each entry's runner (`_add`).
for _start in (CompiledFunction._slow, _CudagraphFunction.__call__):
    dynamo_skip_call(_start)
del _start


def _same_items(d, items):
    """Whether dict `d` (or None) holds exactly `items` (or None), each value the same object."""
    if d is None or items is None:
        return d is None and items is None
    return len(d) == len(items) and all(k in d and d[k] is v for k, v in items)


def _builtins_of(g):
    b = g.get("__builtins__", __builtins__)
    return b if isinstance(b, dict) else b.__dict__


def _global_module_hooks():
    from torch.nn.modules import module as impl
    return any(getattr(impl, n, None) for n in ("_global_forward_hooks", "_global_forward_pre_hooks",
                                                 "_global_backward_hooks", "_global_backward_pre_hooks"))


# The wrapper's own attributes; every other attribute is read and written on the model.
# (prefixed: a model's own `_options` or `_forward` stays the model's)
_WRAPPER_ATTRS = frozenset({"_orig_mod", "_compiled_forward", "_tracer_forward", "_tracer_options",
                            "_tracer_other_forwards"})
# The wrapper's own Module state: the call hooks registered on the wrapper itself, which run
# around the compiled call (nn.Module.__init__ makes them; everything else it makes is the model's)
_CALL_STATE = frozenset({"_backward_pre_hooks", "_backward_hooks", "_is_full_backward_hook", "_forward_hooks",
                         "_forward_hooks_with_kwargs", "_forward_hooks_always_called", "_forward_pre_hooks",
                         "_forward_pre_hooks_with_kwargs", "_compiled_call_impl"})


class CompiledModule(torch.nn.Module):
    """`tracer.compile(module)`: the module, to the user, with its forward traced.

    Attribute reads, writes and deletes, `repr`, `dir`, `state_dict`/`load_state_dict`,
    `parameters()` and the other tree walks are the model's (no `_orig_mod.` prefix in the
    names); `.to()`, `.cuda()`, `.float()`..., `.train()`, `.eval()`, `.apply()` and
    `.requires_grad_()` act on the model and return this wrapper; `len`, `bool`, iteration,
    `in`, indexing and `+`/`*` are the model's, for the model classes that define them (a
    compiled empty ModuleList is falsy; a compiled Linear has no len). `copy.deepcopy`,
    `pickle` and `torch.save` give a compiled copy of the model with the same options (the
    copy traces its own frames): a backend given as a callable must be picklable for
    pickle/torch.save (a name always is). `torch.load` of a whole compiled module needs
    `weights_only=False` (torch >= 2.6 defaults to True, which refuses any class that is not
    a tensor's: save `compiled.state_dict()` to load with weights_only=True). Hooks
    registered on the wrapper itself run around the compiled call, as for any module.
    `isinstance(compiled, torch.nn.Module)` holds; `compiled._orig_mod` is the model."""

    def __new__(cls, module=None, *args, **kwargs):
        if cls is CompiledModule and module is not None:
            cls = _class_for(type(module))  # with the model class's container protocol, if any
        return super().__new__(cls)

    def __init__(self, module, backend="eager", fullgraph=False, **options):
        d = self.__dict__
        d["_orig_mod"] = module  # first: reads of other names go to it from here on
        super().__init__()
        for name in [k for k in d if k not in _CALL_STATE and k != "_orig_mod"]:
            # the model's state, read and written through __getattr__/__setattr__: training,
            # parameters, buffers, children, state_dict hooks; so torch's own walks of a
            # parent that holds the wrapper (load_state_dict, _apply, DataParallel) find them
            del d[name]
        d["_tracer_forward"] = type(module).forward
        d["_tracer_options"] = dict(backend=backend, fullgraph=fullgraph, **options)  # (as compile() takes them)
        d["_compiled_forward"] = CompiledFunction(self._tracer_forward, **self._tracer_options)
        d["_tracer_other_forwards"] = {}  # a forward the class got later (patched): its own compiled function

    def __call__(self, *args, **kwargs):
        """The wrapper is no module of the user's: global module hooks
        (`register_module_forward_hook`) fire for the original module, in forward through its
        own __call__, as in eager, and not for the wrapper. Hooks registered on the wrapper
        itself run as for any module."""
        if self._forward_hooks or self._forward_pre_hooks or self._backward_hooks or self._backward_pre_hooks:
            return super().__call__(*args, **kwargs)
        return self.forward(*args, **kwargs)

    def forward(self, *args, **kwargs):
        m = self._orig_mod
        current = type(m).forward is self._tracer_forward and "forward" not in m.__dict__
        if (m._forward_hooks or m._forward_pre_hooks or m._backward_hooks or m._backward_pre_hooks
                or _global_module_hooks()):
            body = functools.partial(self._compiled_forward, m) if current else self._current_forward(m)
            return self._call_with_hooks(m, body, args, kwargs)
        if not current:
            return self._current_forward(m)(*args, **kwargs)
        return self._compiled_forward(m, *args, **kwargs)

    def _current_forward(self, m):
        """The forward eager's __call__ would run now, bound, when it is no longer the one
        this wrapper compiled, compiled in its turn: one set on the instance (accelerate's
        hooks wrap forward this way; any callable), or one the class got since
        (`mock.patch.object(M, "forward", ...)`)."""
        fn = m.__dict__.get("forward")
        bound = fn is not None
        if not bound:
            fn = type(m).forward
        compiled = self._tracer_other_forwards.get(fn)
        if compiled is None:
            compiled = self._tracer_other_forwards[fn] = compile(fn, **self._tracer_options)
        return compiled if bound else functools.partial(compiled, m)

    def _call_with_hooks(self, m, body, args, kwargs):
        """The module's own __call__ runs its hooks exactly as in eager (FSDP's unshard and
        reshard, DDP's, user hooks), with the compiled `body` as the forward: `forward` is an
        instance attribute of the module for the moment __call__ looks it up. (Another
        thread calling the same module meanwhile may find the plain forward: it then runs
        eagerly, which is slower, never wrong.)"""
        d = m.__dict__
        had, prev = "forward" in d, d.get("forward")
        d["forward"] = body
        try:
            return m(*args, **kwargs)
        finally:
            if had:
                d["forward"] = prev
            else:
                d.pop("forward", None)

    # ---- the model's attributes ------------------------------------------------------------
    def __getattr__(self, name):  # (only for names the wrapper does not hold)
        d = self.__dict__
        if "_orig_mod" not in d:  # (half made: copy and pickle machinery probing)
            raise AttributeError(name)
        return getattr(d["_orig_mod"], name)

    def _own(self, name):
        """Whether `name` is the wrapper's: its own state (the hooks on it), or a name its class
        defines (a method the user patches over, as on OptimizedModule)."""
        d = self.__dict__
        return name in d or name in _WRAPPER_ATTRS or "_orig_mod" not in d or hasattr(type(self), name)

    def __setattr__(self, name, value):
        if self._own(name):
            object.__setattr__(self, name, value)
        else:
            setattr(self.__dict__["_orig_mod"], name, value)

    def __delattr__(self, name):
        if self._own(name) and name in self.__dict__:
            object.__delattr__(self, name)
        else:
            delattr(self.__dict__["_orig_mod"], name)

    def __repr__(self):
        return repr(self._orig_mod)

    def __dir__(self):
        mine = object.__dir__(self)
        theirs = dir(self._orig_mod)
        return theirs + [n for n in mine if n not in set(theirs)]

    # ---- copies: a compiled copy of the model, with the same options -----------------------
    def _wrapper_state(self):
        """The wrapper's own Module state (the hooks registered on it, attributes set over its
        methods): what a copy keeps besides the model and the options."""
        return {k: v for k, v in self.__dict__.items() if k not in _WRAPPER_ATTRS}

    def __deepcopy__(self, memo):
        model = copy.deepcopy(self._orig_mod, memo)
        new = _rebuild_compiled_module(model, dict(self._tracer_options), {})
        memo[id(self)] = new
        new.__dict__.update(copy.deepcopy(self._wrapper_state(), memo))
        return new

    def __copy__(self):
        return _rebuild_compiled_module(self._orig_mod, dict(self._tracer_options), dict(self._wrapper_state()))

    def __reduce__(self):  # pickle, torch.save (deepcopy and copy have their own)
        backend = self._tracer_options["backend"]
        if not isinstance(backend, str):
            try:
                pickle.dumps(backend)
            except Exception as e:  # noqa: BLE001 - any pickling failure says the same
                raise TypeError(
                    f"cannot pickle a compiled {type(self._orig_mod).__name__}: its backend "
                    f"{backend_name(backend)} is not picklable ({type(e).__name__}: {e}); pass a "
                    f"backend by name or a module-level function, or pickle compiled._orig_mod"
                ) from None
        return _rebuild_compiled_module, (self._orig_mod, dict(self._tracer_options), self._wrapper_state())


# A trace that meets a compiled module (a submodule of a model compiled in its turn) calls the
# model itself while the wrapper has no hooks of its own (runtime/compile_annotations.py).
# (TorchDynamo traces the wrapper's Python: its _compiled_forward is a compiled function.)
setattr(CompiledModule, MODULE_WRAPPER_MARK, True)


def _rebuild_compiled_module(module, options, state):
    """A CompiledModule of `module` (unpickling, copies): a fresh wrapper, with no cache entries
    of its own yet: its first call traces (the guards of the original's entries name the
    original model)."""
    new = CompiledModule(module, **options)
    new.__dict__.update(state)
    return new


def _to_model(name, returns_self):
    """A CompiledModule method that is the model's: `name` called on the model; a method that
    returns the model (`to`, `train`...) returns the wrapper, as the model's returns itself."""
    impl = getattr(torch.nn.Module, name)

    if returns_self:
        def method(self, *args, **kwargs):
            m = self.__dict__["_orig_mod"]
            out = getattr(m, name)(*args, **kwargs)
            return self if out is m else out
    else:
        def method(self, *args, **kwargs):
            return getattr(self.__dict__["_orig_mod"], name)(*args, **kwargs)
    method.__name__ = name
    method.__qualname__ = f"CompiledModule.{name}"
    method.__doc__ = impl.__doc__
    return method


_MODEL_METHODS = (
    "parameters", "named_parameters", "buffers", "named_buffers", "children", "named_children",
    "modules", "named_modules", "state_dict", "load_state_dict", "get_submodule", "set_submodule",
    "get_parameter", "get_buffer", "register_buffer", "_load_from_state_dict",
    "register_parameter", "add_module", "register_module", "zero_grad", "extra_repr",
    "register_state_dict_pre_hook", "register_state_dict_post_hook", "_register_state_dict_hook",
    "register_load_state_dict_pre_hook", "register_load_state_dict_post_hook",
    "_register_load_state_dict_pre_hook")
_MODEL_METHODS_RETURNING_SELF = (
    "to", "cuda", "cpu", "xpu", "mtia", "ipu", "float", "double", "half", "bfloat16", "type",
    "to_empty", "train", "eval", "requires_grad_", "apply", "share_memory", "_apply")
for _name in _MODEL_METHODS + _MODEL_METHODS_RETURNING_SELF:
    if hasattr(torch.nn.Module, _name):  # (across torch versions)
        setattr(CompiledModule, _name, _to_model(_name, _name in _MODEL_METHODS_RETURNING_SELF))
del _name

# Python looks special methods up on the type: a compiled module has the model class's own,
# so that a compiled ModuleList, Sequential or ModuleDict has its length, truthiness,
# iteration and indexing, and a compiled Linear has none of them (no len, always true).
_PROTOCOL = ("__len__", "__bool__", "__iter__", "__reversed__", "__contains__", "__getitem__",
             "__setitem__", "__delitem__", "__add__", "__radd__", "__iadd__", "__mul__", "__rmul__",
             "__imul__")
_CLASSES = {(): CompiledModule}


def _class_for(model_type):
    names = tuple(n for n in _PROTOCOL if getattr(model_type, n, None) is not None)
    cls = _CLASSES.get(names)
    if cls is None:
        cls = _CLASSES[names] = type("CompiledModule", (CompiledModule,),
                                     {n: _protocol_method(n) for n in names} | {"__module__": __name__})
    return cls


def _protocol_method(name):
    def method(self, *args):
        m = self.__dict__["_orig_mod"]
        out = getattr(type(m), name)(m, *args)
        return self if out is m else out  # (`compiled += [layer]` keeps the wrapper)
    method.__name__ = name
    method.__qualname__ = f"CompiledModule.{name}"
    return method


def compile(fn=None, *, backend="eager", fullgraph=False, dynamic=None, mode=None, options=None, check=False,
            check_rtol=1e-4, check_atol=1e-5):
    """Trace `fn` (a function or nn.Module) into FX graphs run by `backend`.

    Usable as `@compile`, `@compile(backend=...)` or `compile(fn, ...)`. `check=True` (or a
    number of calls) also runs the first call(s) of each new cache entry eagerly on copies of
    the inputs and raises `tracer.CheckError` on any difference (see check.py).

    `dynamic`: None (default) compiles static shapes first and makes a size symbolic once it
    changes between calls (automatic dynamic, as torch.compile); True makes every input size
    (and int argument) symbolic from the first call; False never does (only `mark_dynamic`).

    `mode` and `options` are torch.compile's, for backend "inductor": "reduce-overhead" runs
    the graphs as CUDA graphs, "max-autotune" also tunes the kernels; `options` is a dict of
    inductor config names to values (backends.Inductor).
    """
    check_options("tracer.compile", backend=backend, fullgraph=fullgraph, dynamic=dynamic, check=check,
                  check_rtol=check_rtol, check_atol=check_atol, mode=mode, options=options)
    given = dict(backend=backend, fullgraph=fullgraph, check=check, check_rtol=check_rtol, check_atol=check_atol,
                 dynamic=dynamic)
    if mode is not None or options:
        given.update(mode=mode, options=options)
    if fn is None:
        return lambda f: compile(f, **given)
    if isinstance(fn, torch.nn.Module):
        return CompiledModule(fn, **given)
    if isinstance(fn, types.MethodType) and isinstance(fn.__func__, types.FunctionType):
        return types.MethodType(CompiledFunction(fn.__func__, **given), fn.__self__)
    if not isinstance(fn, types.FunctionType):
        check_callable("tracer.compile", fn)
        # a builtin, an OpOverload, a callable object: traced through a Python function that
        # calls it (as torch.compile does), with its own code object, hence its own cache
        return CompiledFunction(_trampoline(fn), **given)
    return CompiledFunction(fn, **given)


def uncompiled(fn):
    """What a tracer.compile'd function or module (or a method bound from one) stands for:
    tracer.explain and tracer-dump trace that. Traced as it was, its own wrapper was the frame
    (at api.py), and the entries of earlier calls were cache hits nobody reported: the counts
    and places they printed were wrong."""
    if isinstance(fn, CompiledModule):
        return fn._orig_mod
    if isinstance(fn, types.MethodType) and isinstance(fn.__func__, CompiledFunction):
        return types.MethodType(fn.__func__._fn, fn.__self__)
    if isinstance(fn, CompiledFunction):
        return fn._fn
    return fn


def _trampoline(target):
    def call(*args, **kwargs):
        return target(*args, **kwargs)
    name = getattr(target, "__name__", None) or type(target).__name__
    call.__code__ = call.__code__.replace(co_name=name, co_qualname=f"compile({name})")
    for attr in ("__name__", "__qualname__", "__doc__", "__module__"):
        try:
            setattr(call, attr, getattr(target, attr))
        except (AttributeError, TypeError):
            pass
    call.__wrapped__ = target
    return call


def reset():
    """Drop every cache entry (and the frame hook's per-thread recycled objects), and what
    the process learned about replaying repeated blocks."""
    cache.reset()
    clear_thread_caches()
    block_holes.forget()


def _star_slots(code):
    """The argument slots of `code` the call makes for the frame alone: its `*args` tuple and
    `**kwargs` dict (after the positional and keyword-only ones)."""
    i = code.co_argcount + code.co_kwonlyargcount
    out = []
    for flag in (inspect.CO_VARARGS, inspect.CO_VARKEYWORDS):
        if code.co_flags & flag:
            out.append(i)
            i += 1
    return tuple(out)
