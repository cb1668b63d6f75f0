"""itertools (and sys.exc_info) applied to Variables.

Each itertools callable is written as a Python generator over Variables, run lazily behind an
IteratorVariable: the consumer's next() pulls exactly one item, so the iterables it reads
(inlined generators with side effects, lists that change) are advanced exactly as far and in
the same order as CPython's C implementation advances them. What CPython does when the
object is made (iter() of the arguments, product's and combinations' tuple() of theirs) is
done when the Variable is made. The pure-Python equivalents in the itertools documentation
are the specification followed here.
"""
import itertools
import sys

from ..exc import Unsupported
from .base import ConstantVariable
from .containers import IteratorVariable, TupleVariable

IMPLS = {}


def impl(fn):
    def register(f):
        IMPLS[fn] = f
        return f
    return register


def _iter(tx, v):
    return builtins_impl.call_builtin(tx, iter, [v], {})


def _lazy(tx, gen, py_type):
    return IteratorVariable([], more=lambda _tx: next(gen, None), py_type=py_type)


def _items(it, tx):
    while (item := it.next(tx)) is not None:
        yield item


def _const(v, what):
    if v is None:
        return None
    if not v.is_constant():
        raise Unsupported(f"{what} that is not a constant")
    return v.as_constant()


@impl(itertools.chain)
def _chain(tx, *iterables):
    def gen():
        for src in iterables:  # iter() of each, only when the one before is exhausted
            yield from _items(_iter(tx, src), tx)
    return _lazy(tx, gen(), itertools.chain)


def chain_from_iterable(tx, iterables):
    """itertools.chain.from_iterable (registered under this function: the bound classmethod is
    a new object at each attribute read)."""
    outer = _iter(tx, iterables)

    def gen():
        for src in _items(outer, tx):
            yield from _items(_iter(tx, src), tx)
    return _lazy(tx, gen(), itertools.chain)


IMPLS[chain_from_iterable] = chain_from_iterable


@impl(itertools.islice)
def _islice(tx, iterable, *args):
    bounds = [_const(a, "islice() bound") for a in args]
    s = slice(*bounds)
    start, stop, step = s.start or 0, s.stop if s.stop is not None else sys.maxsize, s.step or 1
    if start < 0 or stop < 0 or step <= 0:
        raise exceptions.user_error(ValueError, "Indices for islice() must be None or an integer: 0 <= x <= sys.maxsize.")
    it = _iter(tx, iterable)

    def gen():
        indices = iter(range(start, stop, step))
        nexti = next(indices, None)
        if nexti is None:  # consume up to start
            for _i, _el in zip(range(start), _items(it, tx)):
                pass
            return
        i = -1
        for i, element in enumerate(_items(it, tx)):
            if i == nexti:
                yield element
                nexti = next(indices, None)
                if nexti is None:
                    break
        else:
            return
        for _i, _el in zip(range(i + 1, stop), _items(it, tx)):  # consume to stop
            pass
    return _lazy(tx, gen(), itertools.islice)


@impl(itertools.accumulate)
def _accumulate(tx, iterable, func=None, *, initial=None):
    it = _iter(tx, iterable)
    if func is not None and func.is_constant() and func.as_constant() is None:
        func = None

    def step(total, element):
        return operators.binary_op(tx, "add", total, element) if func is None else func.call(tx, [total, element], {})

    def gen():
        total = initial if initial is not None and not (initial.is_constant() and initial.as_constant() is None) \
            else None
        if total is None:
            total = it.next(tx)
            if total is None:
                return
        yield total
        for element in _items(it, tx):
            total = step(total, element)
            yield total
    return _lazy(tx, gen(), itertools.accumulate)


@impl(itertools.count)
def _count(tx, start=None, step=None):
    start = start or ConstantVariable(0)
    step = step or ConstantVariable(1)

    def gen():
        n = start
        while True:
            yield n
            n = operators.binary_op(tx, "add", n, step)
    return _lazy(tx, gen(), itertools.count)


@impl(itertools.repeat)
def _repeat(tx, obj, times=None):
    n = _const(times, "repeat() count")

    def gen():
        i = 0
        while n is None or i < n:
            yield obj
            i += 1
    return _lazy(tx, gen(), itertools.repeat)


@impl(itertools.cycle)
def _cycle(tx, iterable):
    it = _iter(tx, iterable)

    def gen():
        saved = []
        for element in _items(it, tx):
            yield element
            saved.append(element)
        while saved:
            yield from saved
    return _lazy(tx, gen(), itertools.cycle)


@impl(itertools.product)
def _product(tx, *iterables, repeat=None):
    n = _const(repeat, "product() repeat") if repeat is not None else 1
    pools = [_iter(tx, p).iterate(tx) for p in iterables] * n  # tuple() of each, now

    def gen():
        for idx in itertools.product(*(range(len(p)) for p in pools)):
            yield TupleVariable([pool[i] for pool, i in zip(pools, idx)])
    return _lazy(tx, gen(), itertools.product)


def _index_combinatoric(fn):
    def make(tx, iterable, r=None):
        pool = _iter(tx, iterable).iterate(tx)
        r_ = _const(r, f"{fn.__name__}() length")
        args = (range(len(pool)),) if r_ is None and fn is itertools.permutations else (range(len(pool)), r_)

        def gen():
            for idx in fn(*args):
                yield TupleVariable([pool[i] for i in idx])
        return _lazy(tx, gen(), fn)
    return make


for _fn in (itertools.combinations, itertools.permutations, itertools.combinations_with_replacement):
    IMPLS[_fn] = _index_combinatoric(_fn)


@impl(itertools.zip_longest)
def _zip_longest(tx, *iterables, fillvalue=None):
    its = [_iter(tx, i) for i in iterables]
    fill = fillvalue if fillvalue is not None else ConstantVariable(None)

    def gen():
        active = len(its)
        done = [False] * len(its)
        while its:
            row = []
            for k, it in enumerate(its):
                item = None if done[k] else it.next(tx)
                if item is None:
                    if not done[k]:
                        done[k] = True
                        active -= 1
                        if not active:
                            return
                    item = fill
                row.append(item)
            yield TupleVariable(row)
    return _lazy(tx, gen(), itertools.zip_longest)


@impl(itertools.starmap)
def _starmap(tx, fn, iterable):
    it = _iter(tx, iterable)

    def gen():
        for args in _items(it, tx):
            yield fn.call(tx, args.iterate(tx), {})
    return _lazy(tx, gen(), itertools.starmap)


def _truth(tx, pred, item):
    if pred is None or (pred.is_constant() and pred.as_constant() is None):
        return item.truthy(tx)
    return pred.call(tx, [item], {}).truthy(tx)


@impl(itertools.takewhile)
def _takewhile(tx, pred, iterable):
    it = _iter(tx, iterable)

    def gen():
        for item in _items(it, tx):
            if not _truth(tx, pred, item):
                return
            yield item
    return _lazy(tx, gen(), itertools.takewhile)


@impl(itertools.dropwhile)
def _dropwhile(tx, pred, iterable):
    it = _iter(tx, iterable)

    def gen():
        dropping = True
        for item in _items(it, tx):
            if dropping and _truth(tx, pred, item):
                continue
            dropping = False
            yield item
    return _lazy(tx, gen(), itertools.dropwhile)


@impl(itertools.filterfalse)
def _filterfalse(tx, pred, iterable):
    it = _iter(tx, iterable)

    def gen():
        for item in _items(it, tx):
            if not _truth(tx, pred, item):
                yield item
    return _lazy(tx, gen(), itertools.filterfalse)


@impl(itertools.compress)
def _compress(tx, data, selectors):
    d, s = _iter(tx, data), _iter(tx, selectors)

    def gen():
        while True:
            item = d.next(tx)
            if item is None:
                return
            sel = s.next(tx)
            if sel is None:
                return
            if sel.truthy(tx):
                yield item
    return _lazy(tx, gen(), itertools.compress)


@impl(itertools.pairwise)
def _pairwise(tx, iterable):
    it = _iter(tx, iterable)

    def gen():
        a = it.next(tx)
        if a is None:
            return
        for b in _items(it, tx):
            yield TupleVariable([a, b])
            a = b
    return _lazy(tx, gen(), itertools.pairwise)


_TEE = type(itertools.tee(())[0]) if hasattr(itertools, "tee") else None


@impl(itertools.tee)
def _tee(tx, iterable, n=None):
    """n iterators over one: the items pulled from the source by the one ahead are kept for
    the others (CPython's shared buffer), and the source advances only as far as the one
    furthest ahead. tee() of a tee iterator copies it in CPython (the original is not
    advanced by its copies): not modelled."""
    count = 2 if n is None else _const(n, "tee() count")
    if type(count) is not int:
        raise exceptions.user_error(TypeError, f"'{type(count).__name__}' object cannot be interpreted as an integer")
    if count < 0:
        raise exceptions.user_error(ValueError, "n must be >= 0")
    if iterable.python_type() is _TEE:
        raise Unsupported("itertools.tee() of a tee iterator (CPython copies it)")
    it = _iter(tx, iterable)
    pulled = []

    def gen():
        i = 0
        while True:
            if i == len(pulled):
                item = it.next(tx)
                if item is None:
                    return
                pulled.append(item)
            yield pulled[i]
            i += 1
    return TupleVariable([_lazy(tx, gen(), _TEE) for _ in range(count)])


_GROUPER = type(next(itertools.groupby([0]))[1])


@impl(itertools.groupby)
def _groupby(tx, iterable, key=None):
    """(key, group) pairs over runs of equal keys, each group a lazy iterator over the run;
    iter() of the iterable now, the key function traced as any callable, when an item is
    pulled (_GroupBy)."""
    keyfunc = None if key is None or (key.is_constant() and key.as_constant() is None) else key
    state = _GroupBy(_iter(tx, iterable), keyfunc)
    return IteratorVariable([], more=state.next_group, py_type=itertools.groupby)


class _GroupBy:
    """CPython's groupby object (Modules/itertoolsmodule.c), field for field, over Variables:
    the key of the group last handed out (`tgtkey`), the item pulled last and its key
    (`currvalue`, `currkey`; None where C holds NULL: taken by a group, or not pulled yet),
    and which group may still advance (`current`). Advancing the groupby skips what is left
    of the current run and ends the group it had handed out, which yields nothing more, as
    CPython's does; keys compare as C's PyObject_RichCompareBool (identity, then ==)."""

    def __init__(self, it, keyfunc):
        self.it, self.keyfunc = it, keyfunc
        self.tgtkey = self.currkey = self.currvalue = None
        self.current = None

    def _step(self, tx):
        """groupby_step: pull one item and compute its key; False when the iterable is done."""
        value = self.it.next(tx)
        if value is None:
            return False
        key = value if self.keyfunc is None else self.keyfunc.call(tx, [value], {})
        self.currvalue, self.currkey = value, key
        return True

    def next_group(self, tx):
        """groupby_next: skip to the first item whose key differs from the last group's."""
        self.current = None
        while True:
            if self.currkey is None:
                pass
            elif self.tgtkey is None or not operators.values_equal(tx, self.tgtkey, self.currkey):
                break
            if not self._step(tx):
                return None
        self.tgtkey = self.currkey
        token = self.current = object()
        target = self.tgtkey
        group = IteratorVariable([], more=lambda tx_: self._group_next(tx_, token, target), py_type=_GROUPER)
        return TupleVariable([self.currkey, group])

    def _group_next(self, tx, token, target):
        """_grouper_next: the next item of the run keyed `target`, while this group is the
        groupby's current one."""
        if self.current is not token:
            return None
        if self.currvalue is None and not self._step(tx):
            return None
        if not operators.values_equal(tx, target, self.currkey):
            return None
        value, self.currvalue, self.currkey = self.currvalue, None, None
        return value


# ---- sys ------------------------------------------------------------------------------------
@impl(sys.exc_info)
def _exc_info(tx):
    exc = exceptions.handled_exception(tx)
    if exc is None:
        return TupleVariable([ConstantVariable(None)] * 3)
    return TupleVariable([objects.ClassVariable(exc.python_type()), exc, exceptions.TracebackVariable()])


if hasattr(sys, "exception"):
    @impl(sys.exception)
    def _exception(tx):
        exc = exceptions.handled_exception(tx)
        return exc if exc is not None else ConstantVariable(None)


# Modules of the value model that also import this one (the one import cycle, see
# docs/design.md): imported as modules, after this module's own definitions, so that
# either may be imported first; their names are read when a function runs.
from . import builtins_impl, exceptions, objects, operators  # noqa: E402
