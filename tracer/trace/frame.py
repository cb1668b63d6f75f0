"""The symbolic interpreter: one `Frame` per code object being interpreted.

A Frame holds a symbolic stack, locals and closure cells of Variables, and steps through
the decoded instructions, dispatching each to the handler registered for its opname (see
handlers/). The root frame is the user's frame; calls to user functions create child
frames that share one `TraceContext` (graph, guards, side effects), which is inlining.

What a value does (operators, truthiness, torch calls, nn.Module calls, wrapping real
values) is the value model's (tracer/variables/: operators.py, torch_calls.py, nn_module.py,
builder.py), which handlers and Variables call with the interpreter as `tx`.
"""
import dis

from bytecode_utils import decode, versions
from guards import BuiltinSource, ConstSource, GlobalSource, ItemSource, Predicate
from guards.sources import GlobalsDictSource

from ..exc import Unsupported, UserException
from ..runtime import config, policy
from ..rewrite.handoff import note_root_call
from ..runtime.frame_hook import is_skipped
from .handlers import HANDLERS
from ..variables import library_reads
from ..variables.base import ConstantVariable, Variable
from ..variables.builder import wrap, wrap_unguarded
from ..variables.functions import CellBox
from ..variables.exceptions import ExceptionVariable, set_context
from ..variables.generators import GeneratorVariable, collect_generators
from .context import TraceContext  # noqa: F401  (re-exported: Frame's callers build one)
from .handlers.exceptions import exception_value



BREAK = object()  # returned by Frame.run when it stopped at ctx.break_at


class Frame:
    def __init__(self, ctx, code, f_globals, locals_, cells, parent=None, func=None):
        self.ctx = ctx
        self.code = code
        self.instrs = decode(code)
        self.f_globals = f_globals
        self.locals = locals_
        self.cells = cells
        self.stack = []
        self.ip = 0
        self.kw_names = None
        self.parent = parent
        self.depth = 0 if parent is None else parent.depth + 1
        self.func = func
        self.current = None
        self.return_value = None
        self.seen = set()            # indices of the instructions run to their end (trace/coverage.py)
        ctx.frames.append(self)      # (released when the trace is done: TraceContext.release)
        self.generator = None        # the GeneratorVariable whose body this frame is
        self.suspended_value = None  # what the last YIELD_VALUE yielded (handlers/misc.py)
        self.namespace = None        # a class body's namespace (a DictVariable): the NAME ops' locals

    # ---- shared state shortcuts ---------------------------------------------------------
    output = property(lambda self: self.ctx.output)
    side_effects = property(lambda self: self.ctx.side_effects)
    wrap_memo = property(lambda self: self.ctx.wrap_memo)

    def guard(self, g):
        self.ctx.guards.append(g)

    # ---- the interpreter loop -----------------------------------------------------------
    def run(self):
        ctx = self.ctx
        ctx.frame_stack.append(self)
        try:
            return self._run()
        finally:
            ctx.frame_stack.pop()

    def _run(self):
        instrs = self.instrs
        ctx = self.ctx
        while True:
            if self.ip >= len(instrs):
                raise Unsupported("fell off the end of the code")
            if (ctx.generators or ctx.foreign_generators) and not ctx.finalizing:
                collect_generators(ctx)  # a generator nothing refers to any more runs its finally
            inst = instrs[self.ip]
            self.current = inst
            if self.parent is None:
                if self.ctx.root_steps == self.ctx.break_at:
                    return BREAK
                self.ctx.root_steps += 1
            self.ip += 1
            self.ctx.steps += 1
            if self.ctx.steps > config.MAX_STEPS:
                raise Unsupported(f"trace longer than {config.MAX_STEPS} instructions (unbounded loop?)", breakable=False)
            if ctx.steps % 4096 == 0 and ctx.steps >= config.MAX_STEPS_WITHOUT_OPS and not ctx.output.has_ops():
                raise Unsupported(f"{ctx.steps} instructions traced and not one tensor operation: "
                                  f"a loop of plain Python runs as Python", breakable=False)
            handler = HANDLERS.get(inst.opname)
            if handler is None:
                raise Unsupported(f"opcode {inst.opname} is not supported")
            try:
                done = handler(self, inst)
                self.seen.add(inst.index)
            except Unsupported as e:
                if isinstance(e, UserException) and e.fresh:
                    e.fresh = False  # raised here, while the handled exception is current
                    if e.value is not None:
                        set_context(self, e.value)
                if isinstance(e, UserException) and inst.exn is not None:
                    self._to_handler(inst.exn, e)  # caught by a try block of this frame
                    continue
                if isinstance(e, UserException):
                    self.seen.add(inst.index)  # (it ran, and raised; a graph break did not run)
                if e.location is None:
                    e.location = self.location()
                if self.parent is None and e.root_step is None:
                    e.root_step, e.root_inst = self.ctx.root_steps - 1, inst
                e.user_stack.insert(0, (self.code.co_filename, inst.lineno, self.code.co_name))
                raise
            if done:
                return self.return_value

    def _to_handler(self, entry, exc):
        """Unwind to an exception-table handler the way CPython does: stack cut to the entry's
        depth, [lasti], then the exception."""
        del self.stack[entry.depth:]
        if entry.lasti:
            self.push(ConstantVariable(self.current.offset))
        value = exception_value(exc)
        if self.parent is None and isinstance(value, ExceptionVariable) and self.current is not None and \
                value.tb_line is None:  # (a cleanup handler's re-raise keeps the line it was raised at)
            value.tb_line = self.current.lineno  # (exceptions.make_exception)
        self.push(value)
        self.ip = entry.target

    def raise_at_current(self, exc):
        """Raise the UserException `exc` where the frame stopped (a generator suspended at a
        yield, by throw()/close()): to its handler in this frame, else out of the frame."""
        entry = self.current.exn if self.current is not None else None
        if entry is None:
            raise exc
        self._to_handler(entry, exc)

    def location(self):
        inst = self.current
        return f"{self.code.co_filename}:{inst.lineno if inst else self.code.co_firstlineno}"

    def jump(self, inst):
        self.ip = inst.target

    # ---- stack helpers --------------------------------------------------------------------
    def push(self, v):
        assert isinstance(v, Variable), v
        self.stack.append(v)

    def pop(self):
        return self.stack.pop()

    def popn(self, n):
        if n == 0:
            return []
        items = self.stack[-n:]
        del self.stack[-n:]
        return items

    # ---- globals and builtins -------------------------------------------------------------
    def load_global(self, name):
        pending = self.side_effects.pending_global(self.f_globals, name)
        if pending is not None:
            return pending
        root = self.f_globals is self.ctx.f_globals
        library = policy.is_library_globals(self.f_globals)
        if name in self.f_globals:
            src = GlobalSource(name) if root else ItemSource(ConstSource(self.f_globals), name)
            if library:  # library module globals are code, treated as immutable: not guarded
                library_reads.note_global(self, self.f_globals, name, self.f_globals[name])
                return wrap_unguarded(self, self.f_globals[name], src)
            return wrap(self, self.f_globals[name], src)
        builtins_dict = self.f_globals.get("__builtins__", self.ctx.f_builtins)
        if not isinstance(builtins_dict, dict):
            builtins_dict = builtins_dict.__dict__
        if name not in builtins_dict:
            raise Unsupported(f"name {name!r} is not defined (the user code raises NameError)")
        bsrc = BuiltinSource(name) if builtins_dict is self.ctx.f_builtins else \
            ItemSource(ConstSource(builtins_dict), name)
        if library:  # (library modules such as torch.* are treated as immutable)
            library_reads.note_global(self, self.f_globals, name, builtins_dict[name])
            return wrap_unguarded(self, builtins_dict[name], bsrc)
        gsrc = GlobalsDictSource() if root else ConstSource(self.f_globals)
        self.guard(Predicate.key_absent(gsrc, name, f"{name!r} not shadowed by a global"))
        return wrap(self, builtins_dict[name], bsrc)

    # ---- exception handlers ----------------------------------------------------------------
    def under_handler(self):
        """Whether an exception raised here would be caught by an exception-table handler of
        this frame or of a frame it was inlined into (a try, a with)."""
        f = self
        while f is not None:
            if f.current is not None and f.current.exn is not None:
                return True
            f = f.parent
        return False

    # ---- calls ------------------------------------------------------------------------------
    def inline_call(self, fn_var, args, kwargs, namespace=None):
        """Run a call of `fn_var` as a child frame; `namespace`: the DictVariable a class
        body's NAME instructions read and write (variables/frame_classes.py)."""
        code = fn_var.get_code()
        if self.depth + 1 > config.MAX_INLINE_DEPTH:
            raise Unsupported(f"inlining deeper than {config.MAX_INLINE_DEPTH} calls (recursion?)")
        if code.co_flags & (0x80 | 0x100 | 0x200):
            raise Unsupported(f"call to coroutine/async generator function {code.co_name}")
        if is_skipped(code):
            raise Unsupported(f"{code.co_name} is marked tracer.disable")
        bound = fn_var.bind_args(self, args, kwargs)
        if self.parent is None:
            note_root_call(self.ctx, code, bound)
        cells = {}
        for name in code.co_cellvars:
            cells[name] = CellBox(bound.pop(name)) if name in bound else CellBox()
        for name, box in zip(code.co_freevars, fn_var.closure_cells(self)):
            cells[name] = box
        child = Frame(self.ctx, code, fn_var.get_globals(), bound, cells, parent=self, func=fn_var)
        child.namespace = namespace
        if code.co_flags & 0x20:  # generator: resumed lazily, one yield per next()
            gen = GeneratorVariable(child)
            self.ctx.generators.append(gen)
            return gen
        return child.run()


def opnames_without_handler():
    """Opnames of this version's dis.opmap that decode (versions.ALIASES) to a name without
    a handler."""
    return sorted(name for name in dis.opmap
                  if any(n not in HANDLERS for n in versions.ALIASES.get(name, (name,))))
