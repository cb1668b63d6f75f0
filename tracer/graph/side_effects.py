"""The log of mutations made by traced code to state that outlives the frame.

Tracing never touches real user state (rule 3). Instead, mutations of inputs are recorded
here: containers that came from the frame and were changed, attributes stored on
objects/modules, globals assigned. Reads during the rest of the trace see the pending
values; the rewritten code replays the final state after the graph has run (codegen.py).
"""
from ..exc import Unsupported


class SideEffects:
    # What a trial inline (TraceContext.checkpoint, variables/speculate.py) does with each log
    # when the trace refuses it: the pending stores are copied and put back; the other logs
    # record what cannot be taken back (a container changed in place, a real closure cell
    # written, a call to make after the graph), so a trial that added to them is not restorable.
    RESTORED = ("attr_stores", "raw_attr_stores", "global_stores")
    MARKED = ("mutated_containers", "cell_stores", "deferred_calls")
    # Counters that only grow, kept as they are by a refused trial: variables/blocks.py only
    # compares them, and a count too high refuses a replay, never allows one.
    COUNTED = ("events", "pending_reads", "escapes_due")

    def __init__(self):
        self.mutated_containers = []   # Variables with a source whose contents changed
        self.attr_stores = {}          # id(var) -> (var, {name: Variable})
        self.raw_attr_stores = set()   # (id(var), name) of stores replayed by object.__setattr__
        self.global_stores = {}        # id(globals) -> (globals dict, {name: Variable})
        self.cell_stores = {}          # id(CellBox) -> CellBox: real closure cells of called functions
        self.deferred_calls = []       # (fn, [Variable], {name: Variable}): made natively after the writes
        self.events = 0                # stores and changes logged so far (a store to a name already
                                       # pending, a second change of a container, count too)
        self.escapes_due = []          # containers changed since sizes() last walked them (escape)
        self.pending_reads = 0         # reads answered by the trace's own state, not the real one:
                                       # a pending store, a changed container, a written cell

    def mutated(self, var):
        if var.source is not None or getattr(var, "_escaped", False):
            self.events += 1
            self.escapes_due.append(var)  # (called before the change: walked by sizes())
        if not getattr(var, "_mutated", False):
            var._mutated = True
            if var.source is not None:
                self.mutated_containers.append(var)

    def store_attr(self, var, name, value, raw=False):
        """`raw`: replayed as object.__setattr__(obj, name, value), for a store the trace made
        from inside the class's own __setattr__ (which a plain store would run again)."""
        if var.source is None:
            raise Unsupported("attribute store on an object that cannot be reached after the graph")
        self.events += 1
        escape(value)
        self.attr_stores.setdefault(self.key(var), (var, {}))[1][name] = value
        if raw:
            self.raw_attr_stores.add((self.key(var), name))

    def pending_attr(self, var, name):
        entry = self.attr_stores.get(self.key(var))
        value = entry[1].get(name) if entry else None
        if value is not None:
            self.pending_reads += 1
        return value

    @staticmethod
    def key(var):
        """Attribute stores are kept per object, not per Variable: a module or object reached
        twice (`b.a.k = 3.0; x * b.a.k` wraps `b.a` anew for each read) is one object."""
        value = getattr(var, "value", None)
        return id(value) if var.source is not None and value is not None else id(var)

    def store_cell(self, box):
        self.cell_stores[id(box)] = box

    def cell_written(self, value):
        """A real closure cell (the root frame's or a called function's) was set to `value`."""
        self.events += 1
        escape(value)

    def changed(self, var, value=None):
        """An object made in the frame changed (a new object's attribute set to `value`, or
        deleted): an event when shared state can reach it (escape)."""
        if getattr(var, "_escaped", False):
            self.events += 1
            escape(value)

    def defer_call(self, fn, args, kwargs):
        """A call whose only effect is on objects outside the graph (torch._dynamo.mark_dynamic
        on a tensor): made by the rewritten code, after the graph, in program order."""
        self.events += 1
        self.deferred_calls.append((fn, list(args), dict(kwargs)))

    def store_global(self, f_globals, name, value):
        self.events += 1
        escape(value)
        self.global_stores.setdefault(id(f_globals), (f_globals, {}))[1][name] = value

    def writes_under(self, var):
        """The pending writes that touch `var`'s object or anything reached from it: (object
        Variable, attribute name, value Variable) for each attribute stored on it or on an
        object below its source, (container Variable, None, None) for each container below
        it that changed. Code that reads the live object (a leaf module's call_module, a
        module tree walk) would see it as it was before them."""
        src, obj = var.source, getattr(var, "value", None)

        def below(other):
            return other is not None and src is not None and (other == src or src in other.ancestors())
        out = []
        for v, names in self.attr_stores.values():
            if (obj is not None and getattr(v, "value", None) is obj) or below(v.source):
                out.extend((v, name, value) for name, value in names.items())
        out.extend((c, None, None) for c in self.mutated_containers if below(c.source))
        return out

    def pending_global(self, f_globals, name):
        entry = self.global_stores.get(id(f_globals))
        value = entry[1].get(name) if entry else None
        if value is not None:
            self.pending_reads += 1
        return value

    def mark(self):
        """The lengths of the logs a trial cannot take back: equal marks, nothing changed."""
        return tuple(len(getattr(self, name)) for name in self.MARKED)

    def sizes(self):
        """How many of each kind of pending effect there are, and how many were logged: equal
        sizes, no effect recorded in between (variables/blocks.py: a block's call made none;
        none was made since)."""
        while self.escapes_due:  # (what a shared container holds now is reachable from outside)
            escape(self.escapes_due.pop())
        return (len(self.mutated_containers), sum(len(d) for _v, d in self.attr_stores.values()),
                len(self.raw_attr_stores), sum(len(d) for _g, d in self.global_stores.values()),
                len(self.cell_stores), len(self.deferred_calls), self.events)

    def checkpoint(self):
        """The state a refused trial goes back to: restorable(), restore()."""
        return _Checkpoint(self)

    def is_empty(self):
        return not (self.mutated_containers or self.attr_stores or self.global_stores or self.cell_stores
                    or self.deferred_calls)


class _Checkpoint:
    """SideEffects.checkpoint(): the pending stores as they were (each object's or globals
    dict's {name: value} copied too), and the mark of the other logs."""

    def __init__(self, effects):
        self.effects = effects
        self.counts = effects.mark()
        self.attr_stores = {k: (v, dict(d)) for k, (v, d) in effects.attr_stores.items()}
        self.raw_attr_stores = set(effects.raw_attr_stores)
        self.global_stores = {k: (g, dict(d)) for k, (g, d) in effects.global_stores.items()}

    def restorable(self):
        return self.effects.mark() == self.counts

    def restore(self):
        for name in SideEffects.RESTORED:  # (in place)
            store = getattr(self.effects, name)
            store.clear()
            store.update(getattr(self, name))


def escape(value):
    """Mark the Variables made in the frame that `value` reaches (the items of a list stored
    into a global, a new object's attributes) as reachable from state that outlives the
    frame: a later change of one is then logged as an event (`changed`, `mutated`), which is
    what tells variables/blocks.py that a call reading shared state may now read something
    else. It follows the objects that say so (`ESCAPE_WALK`: Variables, cells, dict keys)
    through their attributes, and lists, tuples, sets and dicts; one marked already was
    walked when it was marked (its later additions are walked by their own change)."""
    todo, seen, first = [value], set(), True
    while todo:
        o = todo.pop()
        if id(o) in seen:
            continue
        seen.add(id(o))
        if isinstance(o, (list, tuple, set, frozenset)):
            todo.extend(o)
        elif isinstance(o, dict):
            todo.extend(o.keys())
            todo.extend(o.values())
        elif getattr(o, "ESCAPE_WALK", False):
            if getattr(o, "source", True) is None:  # (a Variable made in the frame)
                if getattr(o, "_escaped", False) and not first:
                    continue
                o._escaped = True
            todo.extend(vars(o).values())
        first = False
