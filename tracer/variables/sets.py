"""Sets made in the frame or passed in: a real set of the constants they hold, changed by
the same operations in the same order as the program's, so that the order the trace iterates
in (and what pop() would take) is CPython's; a set made in the frame is rebuilt by replaying
that history (`replay_set`), not from its members, whose insertion order alone can give
another table.

Objects compared by identity (tensors, modules, plain instances: containers._IdKey) may be
members too, as a parameter deduplication `seen = set(); if p not in seen: seen.add(p)` makes
them: adding, removing, `in`, `len` and truth are traced. Their order is by address, which the
trace does not know: iterating such a set, `pop()` and the set algebra on it are graph breaks.
The rebuilt set replays the same additions and removals of the same objects, so its table is
the program's."""
from ..exc import Unsupported
from .base import ConstantVariable, Variable
from .containers import (DictVariable, IteratorVariable, TupleVariable, _IdKey, _const_key, method_of, pulled,
                         tx_mutated)


class SetVariable(Variable):
    mutable = True

    def __init__(self, items, source=None, tx=None):
        super().__init__(source)
        self.objects = False  # holds a member compared by identity (an _IdKey)
        self.items = {}  # const -> Variable, insertion-ordered
        self.table = set()  # the same constants in a real set, changed in the same order:
        self.history = []   # its iteration order is CPython's for this history, which the
        for it in items:    # rebuilt set replays (`replay_set`) to get the same order
            self.add_item(it, tx)

    def add_item(self, var, tx=None):
        k = var.as_constant() if tx is None or var.is_constant() else _const_key(tx, var)
        if isinstance(k, _IdKey) and (self.source is not None or
                                      any(step[0] == "unknown" for step in _steps(self.history))):
            # written back (an input) or rebuilt from its members (an unknown history): neither
            # can hold an object compared by identity
            raise Unsupported("an object added to a set passed in, or made from one")
        self.objects = self.objects or isinstance(k, _IdKey)
        self.history.append(("add", k))
        if k not in self.table:  # (an equal member stays: {1}.add(True) keeps 1)
            self.table.add(k)
            self.items[k] = var

    def discard_item(self, k):
        self.history.append(("discard", k))
        self.table.discard(k)
        self.items.pop(k, None)

    def update_from(self, tx, var):
        """`set.update(var)` as CPython runs it, so that the real table's layout (its order)
        is CPython's: a set or frozenset (SET_UPDATE of a constant literal) and a dict are
        merged whole (presized), anything else is added item by item as it is pulled."""
        if var.is_constant() and isinstance(var.as_constant(), (set, frozenset)):
            self._merge(var.as_constant(), frozenset(var.as_constant()))
        elif isinstance(var, SetVariable) and var.objects:
            if var.source is not None:
                raise Unsupported("set.update from a set input holding objects compared by identity")
            # merged whole, in the other set's table order: replayed from its own steps
            self.table.update(var.table)
            self._resync(var)
            self.objects = True
            self.history.append(("update_set", tuple(var.history)))
        elif isinstance(var, SetVariable):
            self._merge(var.table, ("set", tuple(var.history)) if var.source is None else None)
        elif type(var) is DictVariable and var.user_cls is dict and all(not isinstance(k, _IdKey) for k in var.keys):
            self._merge(dict.fromkeys(var.keys), ("dict", tuple(var.keys)))
        else:
            for item in pulled(tx, var):
                self.add_item(item, tx)

    def _merge(self, members, recorded):
        """`table.update(members)`; `recorded` is how replay_set makes `members` again (None:
        it cannot, the set is rebuilt from its members)."""
        self.table.update(members)
        self._resync()
        self.history.append(("update", recorded) if recorded is not None else ("unknown",))

    def _resync(self, other=None):
        """`items` after the real table changed whole: its members, in its order (the
        Variables of members merged from `other` taken from it)."""
        known = other.items if other is not None else {}
        self.items = {k: self.items.get(k) or known.get(k) or ConstantVariable(k) for k in self.table}

    def python_type(self):
        return set

    def getattr(self, tx, name):
        return method_of(self, name)

    def truthy(self, tx):
        return bool(self.items)

    def length(self, tx):
        return len(self.items)

    def iterate(self, tx):
        self.refuse_objects("iterating it")
        return [ConstantVariable(v) for v in self.table]

    def refuse_objects(self, what):
        if self.objects:
            raise Unsupported(f"{what}: a set holding objects compared by identity is in the order of "
                              f"their addresses, which the trace does not know")

    def call_method(self, tx, name, args, kwargs):
        if name == "add" and len(args) == 1:
            tx.side_effects.mutated(self)
            self.add_item(args[0], tx)
            return ConstantVariable(None)
        if name == "__contains__" and len(args) == 1:
            return ConstantVariable(_member(tx, args[0]) in self.items)
        if name == "discard" and len(args) == 1:
            tx.side_effects.mutated(self)
            self.discard_item(_member(tx, args[0]))
            return ConstantVariable(None)
        if name == "remove" and len(args) == 1 and not args[0].is_constant():
            k = _member(tx, args[0])
            if k not in self.items:
                raise Unsupported(f"KeyError for the object {args[0]} (the user code raises KeyError)")
            tx.side_effects.mutated(self)
            self.discard_item(k)
            return ConstantVariable(None)
        if name != "clear":
            self.refuse_objects(f"set.{name}")
        if kwargs:
            raise Unsupported(f"set.{name} with keyword arguments")
        if name in ("update", "union") and any(_lazy(a) for a in args):
            # an iterator is pulled item by item, each added at once (a generator reading the
            # set sees it grow); union copies the set first, as CPython does
            target = self if name == "update" else SetVariable.of_table(set(self.table), self, "copy")
            if name == "update":
                tx.side_effects.mutated(self)
            for a in args:
                target.update_from(tx, a)
            return ConstantVariable(None) if name == "update" else target
        if name in _SET_QUERIES or name in _SET_MAKERS or name in _SET_UPDATES:
            # on the real set of constants, so that the result (and its iteration order) is
            # CPython's for the same history
            if any(_lazy(a) for a in args):
                raise Unsupported(f"set.{name} of an iterator")
            if name in _SET_UPDATES:
                tx.side_effects.mutated(self)
            consts = [_constants(tx, a) for a in args]
            try:
                answer = getattr(self.table, name)(*consts)
            except TypeError as e:  # an unhashable member: the user code raises it
                raise exceptions.folding_error(e, f"set.{name}")
            if name in _SET_UPDATES:
                self._resync()
                self.history.append(("call", name, _frozen(consts)))
                return ConstantVariable(None)
            if name in _SET_QUERIES:
                return ConstantVariable(answer)
            return SetVariable.of_table(answer, self, name, consts)
        if name == "remove":
            k = args[0].as_constant()
            k = frozenset(k) if isinstance(k, set) else k  # (a set is looked up as a frozenset)
            if k not in self.table:
                raise exceptions.user_error(KeyError, args[0].as_constant())
            tx.side_effects.mutated(self)
            self.discard_item(k)
            return ConstantVariable(None)
        if name == "clear":
            tx.side_effects.mutated(self)
            self.table.clear()
            self.items.clear()
            self.history.append(("call", "clear", _frozen([])))
            return ConstantVariable(None)
        raise Unsupported(f"set.{name}")

    @classmethod
    def of_table(cls, table, base, name, consts=()):
        """A set made in the frame, `table` (real, constants), which is `base.<name>(*consts)`."""
        out = cls([])
        out.table = table
        out._resync()
        out.history = [("derive", tuple(base.history) if base.source is None else (("unknown",),), name,
                        _frozen(consts))]
        return out

    def as_constant(self):
        return set(self.table)

    def reconstruct(self, cg):
        if self.source is not None and (self.mutable or not tx_mutated(self)):
            # a mutated input list/dict/set keeps its identity: the replay writes its contents
            return cg.load_source(self.source)
        if self.objects:  # the same steps, on the same objects, passed in at run time
            members = {}
            steps = _object_steps(self.history, members)
            return cg.call_with(replay_set, [ConstantVariable(steps), TupleVariable([k.var for k in members])])
        if all(step[0] != "unknown" for step in _steps(self.history)):
            return cg.call_with(replay_set, [ConstantVariable(tuple(self.history))])
        for k in self.items:
            cg.load_const(k)
        cg.build(set, len(self.items))


def replay_set(history, objects=()):
    """The set a SetVariable's history makes, rebuilt by the same operations so that its table,
    hence its iteration order and what pop() takes, is the one the program's set has. An
    object member is added or discarded as `objects[i]` ("add_object", i)."""
    s = set()
    for step in history:
        kind = step[0]
        if kind == "add_object":
            s.add(objects[step[1]])
        elif kind == "discard_object":
            s.discard(objects[step[1]])
        elif kind == "update_set":
            s.update(replay_set(step[1], objects))
        elif kind == "add":
            s.add(step[1])
        elif kind == "discard":
            s.discard(step[1])
        elif kind == "update":
            what = step[1]
            if isinstance(what, frozenset):
                s.update(what)
            elif what[0] == "set":
                s.update(replay_set(what[1]))
            else:
                s.update(dict.fromkeys(what[1]))
        elif kind == "call":
            getattr(s, step[1])(*_thawed(step[2]))
        elif kind == "derive":
            s = getattr(replay_set(step[1]), step[2])(*_thawed(step[3]))
    return s


def _object_steps(history, members):
    """`history` as code constants: each object member replaced by its index in `members`
    (filled here, in order of first use), nested set updates included."""
    out = []
    for step in history:
        if step[0] in ("add", "discard") and isinstance(step[1], _IdKey):
            out.append((step[0] + "_object", members.setdefault(step[1], len(members))))
        elif step[0] == "update_set":
            out.append(("update_set", _object_steps(step[1], members)))
        else:
            out.append(step)
    return tuple(out)


def _steps(history):
    for step in history:
        yield step
        if step[0] == "derive":
            yield from _steps(step[1])
        elif step[0] == "update" and isinstance(step[1], tuple) and step[1][0] == "set":
            yield from _steps(step[1][1])


def _frozen(consts):
    """The arguments of a recorded call as code constants, and which were sets (replayed as
    sets: a set argument is read in its table's order)."""
    return (tuple(frozenset(c) if type(c) is set else tuple(c) if type(c) is list else c for c in consts),
            tuple(i for i, c in enumerate(consts) if type(c) is set))


def _thawed(frozen):
    consts, sets = frozen
    return [set(c) if i in sets else c for i, c in enumerate(consts)]


_SET_QUERIES = frozenset({"isdisjoint", "issubset", "issuperset"})
_SET_MAKERS = frozenset({"union", "intersection", "difference", "symmetric_difference", "copy"})
_SET_UPDATES = frozenset({"update", "intersection_update", "difference_update", "symmetric_difference_update"})


def _lazy(var):
    return isinstance(var, IteratorVariable) and var.lazy()


def _member(tx, var):
    """A member looked up, added or removed: a constant, or an object compared by identity."""
    return var.as_constant() if var.is_constant() else _const_key(tx, var)


def _constants(tx, var):
    """The members of an iterable of constants, as a real set (or frozenset) when it is one."""
    if isinstance(var, SetVariable):
        var.refuse_objects("set algebra with it")
        return var.table
    value = var.as_constant() if var.is_constant() else [v.as_constant() for v in var.iterate(tx)]
    return value


# Modules of the value model that also import this one, read when a function runs.
from . import exceptions  # noqa: E402
