"""Generators made by calling a generator function inside the traced frame.

A `GeneratorVariable` owns the inlined frame of the generator body, suspended at its last
`yield`. `next()`/`send()` run that frame to its next `yield` (handlers/misc.py YIELD_VALUE
suspends it), so the body advances exactly as far as the consumer pulls, interleaved with
the consumer's own work, as in Python: `y.extend(y[-1] + z for z in ...)` sees `y` grow.

What CPython does around a generator frame is done here, symbolically:
  * a StopIteration escaping the body becomes RuntimeError (PEP 479);
  * `throw(exc)` raises `exc` at the suspended `yield` (the frame's own try/finally/with
    handlers run), or into the generator it delegates to with `yield from`;
  * `close()` throws GeneratorExit; a generator that yields again raises RuntimeError;
  * a suspended generator that would run code when closed (its `yield` is inside a
    try/finally or with block) is finalized when the traced program drops its last
    reference, as CPython's reference counting does: after every instruction while such a
    generator exists, `collect_generators` finds which ones are no longer reachable from
    the running frames, the side-effect log or objects from outside the frame, and closes
    them (their `finally` runs there, in program order).
"""
import types

from bytecode_utils.instructions import closing_runs_code
from bytecode_utils.versions import SEND_KEEPS_RECEIVER, ITER_SLOTS

from ..exc import Unsupported, UserException
from .base import ConstantVariable, Variable
from .containers import IteratorVariable
from bytecode_utils import decode, live_locals
from bytecode_utils.resume import (STACK_ARG, STACK_EXC_INFO, STACK_NULL, make_generator_resume_code)

CREATED, SUSPENDED, RUNNING, FINISHED = "created", "suspended", "running", "finished"
_epoch = [0]  # changes of any generator's state (`pending`'s memo)


class GeneratorVariable(IteratorVariable):
    """A generator object whose body is an inlined, suspendable translator frame."""

    def __init__(self, tx):
        super().__init__([], py_type=types.GeneratorType)
        self.frame = tx
        self._state = CREATED
        self.exc_state = None  # the exception handled inside the body while suspended
        tx.generator = self

    def lazy(self):
        return True

    # ---- the protocol -------------------------------------------------------------------------
    def next(self, tx):
        """The next yielded Variable, or None when the generator is finished (StopIteration)."""
        kind, value = self.send(tx, None)
        return value if kind == "yield" else None

    def iterate(self, tx):
        rest = []
        while (item := self.next(tx)) is not None:
            rest.append(item)
        return rest

    def send(self, tx, value):
        """('yield', v) when the body yields v, ('return', v) when it returns v."""
        if self.state == FINISHED:
            return "return", ConstantVariable(None)
        if self.state == CREATED and value is not None and not _is_none(value):
            raise exceptions.user_error(TypeError, "can't send non-None value to a just-started generator")
        if self.state == SUSPENDED and value is not None:
            self.frame.stack[-1] = value  # what the suspended `yield` expression evaluates to
        return self._run(tx)

    def throw(self, tx, exc):
        """Raise the ExceptionVariable `exc` where the generator is suspended."""
        if self.state == RUNNING:
            raise exceptions.user_error(ValueError, "generator already executing")
        error = UserException(exc.cls, f"{exc.cls.__name__} thrown into a generator", exc)
        if self.state != SUSPENDED:
            self.state = FINISHED
            raise error
        inner = self.delegate()
        if inner is not None:  # `yield from`: the delegate gets it first
            if exc.cls is GeneratorExit:
                if isinstance(inner, GeneratorVariable):
                    inner.close(tx)
            elif isinstance(inner, GeneratorVariable):
                try:
                    kind, value = inner.throw(tx, exc)
                except UserException as e:
                    return self._run(tx, raise_here=e)
                if kind == "yield":
                    return kind, value
                if not SEND_KEEPS_RECEIVER:
                    self.frame.stack.pop()  # the sent-value slot; the iterator's is replaced
                self.frame.stack[-1] = value  # the `yield from` expression's value
                self.frame.ip = self._send_instruction().target
                return self._run(tx)
        # (the sent-value slot stays: the handler's depth trims the stack, and 3.12+'s
        # CLEANUP_THROW handler of a `yield from` reads it)
        assert isinstance(exc, exceptions.ExceptionVariable)
        return self._run(tx, raise_here=error)

    def close(self, tx):
        if self.state in (CREATED, FINISHED):
            self.state = FINISHED
            return
        try:
            kind, _ = self.throw(tx, exceptions.ExceptionVariable(GeneratorExit, []))
        except UserException as e:
            if issubclass(e.exc_type, (GeneratorExit, StopIteration)):
                return
            raise
        if kind == "yield":
            raise exceptions.user_error(RuntimeError, "generator ignored GeneratorExit")

    def _run(self, tx, raise_here=None):
        frame = self.frame
        self.state = RUNNING
        frame.suspended_value = None
        exc_stack = frame.ctx.exc_stack
        exc_stack.append(self.exc_state)  # the generator's own handled exception, as CPython
        try:
            if raise_here is not None:
                frame.raise_at_current(raise_here)
            result = frame.run()
        except UserException as e:
            self.state = FINISHED
            if issubclass(e.exc_type, StopIteration):  # PEP 479
                raise _runtime_error_from(e) from None
            raise
        except BaseException:
            self.state = FINISHED
            raise
        finally:
            self.exc_state = exc_stack.pop()
        if frame.suspended_value is not None:
            self.state = SUSPENDED
            value, frame.suspended_value = frame.suspended_value, None
            return "yield", value
        self.state = FINISHED
        return "return", result

    # ---- state queries ------------------------------------------------------------------------
    @property
    def state(self):
        return self._state

    @state.setter
    def state(self, value):
        self._state = value
        _epoch[0] += 1

    def delegate(self):
        """The iterator this generator is suspended in a `yield from` over, or None (below the
        sent value: [iterator, value], 3.15: [iterator, NULL, value])."""
        if self.state != SUSPENDED or self._send_instruction() is None:
            return None
        return self.frame.stack[-1 - ITER_SLOTS]

    def _send_instruction(self):
        instrs, i = self.frame.instrs, self.frame.current.index
        return instrs[i - 1] if i > 0 and instrs[i - 1].opname == "SEND" else None

    def needs_finalizer(self):
        """Suspended where closing it runs code (a try/finally or with around the yield)."""
        if self.state != SUSPENDED:
            return False
        if closing_runs_code(self.frame.instrs, self.frame.current):
            return True
        inner = self.delegate()
        return isinstance(inner, GeneratorVariable) and inner.needs_finalizer()

    # ---- the Variable protocol ----------------------------------------------------------------
    def call_method(self, tx, name, args, kwargs):
        if kwargs:
            raise Unsupported(f"generator.{name} with keyword arguments")
        if name == "__next__" and not args:
            kind, value = self.send(tx, None)
        elif name == "send" and len(args) == 1:
            kind, value = self.send(tx, args[0])
        elif name == "throw" and 1 <= len(args) <= 3:
            kind, value = self.throw(tx, _exception_of(tx, args))
        elif name == "close" and not args:
            self.close(tx)
            return ConstantVariable(None)
        elif name == "__iter__" and not args:
            return self
        else:
            raise Unsupported(f"generator.{name}")
        if kind == "yield":
            return value
        raise UserException(StopIteration, "the generator is exhausted (the user code raises StopIteration)",
                            _stop_iteration(value))

    def getattr(self, tx, name):
        if name in ("send", "throw", "close", "__next__", "__iter__"):
            return functions.BuiltinMethodVariable(self, name)
        raise Unsupported(f"generator attribute {name!r}")

    def reconstruct(self, cg):
        """A real generator in the state the traced one reached (made once per codegen:
        CodeGen memoises mutable values). Suspended or not started: a generator made from
        resume code for the body (bytecode_utils.resume.make_generator_resume_code), with the
        frame's stack, live locals and cells; finished: an exhausted generator."""
        if self.state == FINISHED:
            return cg.call_with(finished_generator, [])
        if self.state != SUSPENDED and self.state != CREATED:
            raise Unsupported("a running generator escapes the frame")
        frame = self.frame
        code = frame.code
        suspended = self.state == SUSPENDED
        target = frame.ip if suspended else _body_start(frame)
        stack = frame.stack[:-1] if suspended else []
        handled = self.exc_state
        live = set()
        for v in reversed(stack):  # the except bodies still running in the generator
            if isinstance(v, exceptions.ExcInfoSlot) and v.exc is handled:
                live.add(id(v))
                handled = v.prev
        kinds = [STACK_NULL if isinstance(v, stack_values.NullVariable) else STACK_EXC_INFO if id(v) in live else STACK_ARG
                 for v in stack]
        names = sorted(n for n in live_locals(code)[target] if n in frame.locals)
        try:
            rcode = make_generator_resume_code(code, target, kinds, names, suspended=suspended)
        except (RuntimeError, ValueError) as e:
            # (a stream the `bytecode` package cannot assemble: the frame runs as Python)
            raise Unsupported(f"a generator made in the traced frame escapes it and cannot be "
                              f"rebuilt here ({e})") from None
        values = [v for v in stack if not isinstance(v, stack_values.NullVariable)] + [frame.locals[n] for n in names]
        for box_name in rcode.co_freevars:
            cg.load_cell(frame.cells[box_name])
        cg.build(tuple, len(rcode.co_freevars))
        closure = base.TempVariable(cg.store_tmp())
        cg.call_with(rebuild_generator, [ConstantVariable(rcode), functions._GlobalsVariable(frame.f_globals), closure,
                                         containers.TupleVariable(values), ConstantVariable(suspended)])

    def __repr__(self):
        return f"Generator({self.frame.code.co_name}, {self.state})"


def rebuild_generator(code, f_globals, closure, args, suspended):
    """The real generator for a GeneratorVariable (no user code runs: a suspended one is
    primed to the yield of its resume code's prefix)."""
    fn = types.FunctionType(code, f_globals, code.co_name, None, closure or None)
    gen = fn(*args)
    if suspended:
        next(gen)
    return gen


def finished_generator():
    def done():
        return
        yield  # noqa: unreachable - makes this a generator function
    gen = done()
    for _ in gen:
        pass
    return gen


def _body_start(tx):
    """Index of the first instruction after a generator's prologue (its first RESUME)."""
    return next(i for i, inst in enumerate(tx.instrs) if inst.opname == "RESUME") + 1


def _is_none(var):
    return var.is_constant() and var.as_constant() is None


def _stop_iteration(value):
    return exceptions.ExceptionVariable(StopIteration, [] if _is_none(value) else [value])


def runtime_error_for(stop):
    """The RuntimeError (an ExceptionVariable) that replaces the StopIteration `stop`
    escaping a generator body (PEP 479): 3.11 converts it in the caller (`_run`), 3.12+ in
    the body (CALL_INTRINSIC_1 INTRINSIC_STOPITERATION_ERROR)."""
    exc = exceptions.ExceptionVariable(RuntimeError, [ConstantVariable("generator raised StopIteration")])
    exc.cause = exc.context = stop
    exc.suppress_context = True
    return exc


def _runtime_error_from(stop):
    return UserException(RuntimeError, "generator raised StopIteration (PEP 479; the user code raises it)",
                         runtime_error_for(stop.value))


def _exception_of(tx, args):
    """gen.throw(typ[, val[, tb]]) arguments as one ExceptionVariable."""
    first = args[0]
    if isinstance(first, exceptions.ExceptionVariable):
        return first
    if isinstance(first, objects.ClassVariable) and exceptions.is_modelled_exception(first.cls):
        rest = [args[1]] if len(args) > 1 and not _is_none(args[1]) else []
        if rest and isinstance(rest[0], exceptions.ExceptionVariable):
            return rest[0]
        return exceptions.ExceptionVariable(first.cls, rest)
    raise Unsupported(f"generator.throw({first})")


# ---- finalization on collection ---------------------------------------------------------------
def real_generator_needs_finalizer(gen):
    """A real generator suspended where closing it runs code (its yield is inside try/with)."""
    frame = getattr(gen, "gi_frame", None)
    if frame is None or gen.gi_running or frame.f_lasti < 0:
        return False
    instrs = decode(gen.gi_code)
    for inst in instrs:
        if inst.offset == frame.f_lasti:
            return closing_runs_code(instrs, inst)
    return False


def pending(ctx):
    """The generators that would run code on close. This runs before every instruction while a
    generator exists, and most generators stay suspended where closing runs nothing (an `any()`
    over a generator expression that stopped early; every layer of an encoder leaves some): the
    answer changes only when a generator's state does (its position moves only while it runs)
    or the list does (a trial's rollback cuts it back), so it is kept until then. Computed anew
    it cost a 12-layer encoder's trace a fifth of its time, growing with depth."""
    memo = ctx.generator_memo
    if not memo or memo[0] != (_epoch[0], len(ctx.generators), id(ctx.generators)):
        ctx.generators = [g for g in ctx.generators if g.state != FINISHED]
        found = [g for g in ctx.generators if g.needs_finalizer()]
        memo[:] = [(_epoch[0], len(ctx.generators), id(ctx.generators)), found]
    return memo[1]


def collect_generators(ctx, extra_roots=()):
    """Close the suspended generators (that would run code on close) which nothing reachable
    refers to any more. Returns the ones that are still reachable.

    A real generator from outside the frame (an input, or one rebuilt at an earlier break)
    that the trace stops referring to would be finalized natively only when the rewritten
    frame ends, not where the program dropped it: that is Unsupported (the frame runs as
    Python there)."""
    waiting = pending(ctx)
    foreign = ctx.foreign_generators
    if not waiting and not foreign:
        return []
    live = _reachable(ctx, extra_roots)
    for var in foreign:
        if id(var) not in live:
            raise Unsupported("a generator made outside the frame, suspended inside try/with, is dropped "
                              "here: its finally would run at another time")
    if not waiting:
        return []
    alive = []
    for g in waiting:
        if id(g) in live:
            alive.append(g)
            continue
        ctx.finalizing = True
        try:
            g.close(ctx.root_frame)
        except UserException as e:
            raise Unsupported(f"a generator's finalizer raises {e.exc_type.__name__} (CPython only "
                              f"reports it as unraisable)") from e
        finally:
            ctx.finalizing = False
    return alive


def holders_of_pending_generators(ctx, local_vars, already):
    """Names (not in `already`) of locals through which a generator that would run code on
    close is reachable."""
    if not pending(ctx) and not ctx.foreign_generators:
        return set()
    out = set()
    for name, var in local_vars.items():
        if name not in already and _reaches_pending(ctx, var):
            out.add(name)
    return out


def _reaches_pending(ctx, var):
    foreign = {id(v) for v in ctx.foreign_generators}
    waiting = {id(g) for g in pending(ctx)} | foreign
    return bool(_walk([var], foreign, ctx.frames) & waiting)


def _reachable(ctx, extra_roots):
    """ids of every GeneratorVariable reachable from the running frames, the side-effect
    log, values from outside the frame, and `extra_roots`. It follows the tracer's own
    structures only (Variables, their lists/dicts, frames, cells, closures): a reference it
    cannot see is one the traced program cannot have made."""
    se = ctx.side_effects
    foreign = {id(v) for v in ctx.foreign_generators}
    todo = [*ctx.frame_stack, *extra_roots, se.mutated_containers,
            [v for _var, attrs in se.attr_stores.values() for v in (_var, *attrs.values())],
            [v for _g, names in se.global_stores.values() for v in names.values()],
            [var for _value, var in ctx.wrap_memo.values() if id(var) not in foreign]]
    return _walk(todo, foreign, ctx.frames)


def _walk(todo, foreign, frames):
    """ids of the GeneratorVariables (and foreign generator Variables) reachable from todo;
    `frames` are the trace's interpreter frames (a generator's body is one), whose stack,
    locals and cells are followed."""
    frame_ids = {id(fr) for fr in frames}
    seen, found = set(), set()
    while todo:
        o = todo.pop()
        if id(o) in seen:
            continue
        seen.add(id(o))
        if isinstance(o, GeneratorVariable) or id(o) in foreign:
            found.add(id(o))
        if isinstance(o, Variable):
            todo.extend(vars(o).values())
        elif isinstance(o, (list, tuple, set, frozenset)):
            todo.extend(o)
        elif isinstance(o, dict):
            todo.extend(o.keys())
            todo.extend(o.values())
        elif id(o) in frame_ids:
            todo.extend(o.stack)
            todo.extend(o.locals.values())
            todo.extend(o.cells.values())
        elif isinstance(o, functions.CellBox):
            todo.append(o._value)
        elif isinstance(o, containers._IdKey):
            todo.append(o.var)
        elif isinstance(o, types.MethodType):
            todo.append(o.__self__)
        elif isinstance(o, types.FunctionType):
            for cell in o.__closure__ or ():
                try:
                    todo.append(cell.cell_contents)
                except ValueError:
                    pass
    return found


# Modules of the value model that also import this one (the one import cycle, see
# docs/design.md): imported as modules, after this module's own definitions, so that
# either may be imported first; their names are read when a function runs.
from . import objects, containers, functions, stack_values, base, exceptions  # noqa: E402
