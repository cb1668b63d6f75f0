"""Writes to a dict-subclass object passed into the frame (transformers' ModelOutput, a user's
dict or OrderedDict subclass): item assignment, `super().__setitem__`/`__setattr__` from the
class's own methods, deletion, and reads after them, traced and replayed after the graph at
the storage's own level (tracer/variables/dict_storage.py). Before, each was a graph break
("item assignment on UserObject(...)", "descriptor wrapper_descriptor on ..."): transformers'
`capture_outputs` sets `outputs[key] = ...` on the model's output after the forward.

Each test compares with eager, on the result and on the object's items, their order and its
attributes afterwards (semantics_helpers.run on deep copies), and counts graphs.
"""
import collections
import copy

import pytest
import torch

import tracer
from semantics_helpers import check, fresh, run


class Mirrored(collections.OrderedDict):
    """ModelOutput's shape: items mirrored as attributes, by the class's own methods."""

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        super().__setattr__(key, value)

    def __setattr__(self, name, value):
        if name in self.keys() and value is not None:
            super().__setitem__(name, value)
        super().__setattr__(name, value)


class Doubling(dict):
    def __setitem__(self, key, value):
        super().__setitem__(key, value * 2 if isinstance(value, int) else value)


class Counting:
    """A Python __setattr__ with an effect of its own: it must run once per store."""

    def __init__(self):
        object.__setattr__(self, "stores", 0)

    def __setattr__(self, name, value):
        object.__setattr__(self, "stores", self.stores + 1)
        object.__setattr__(self, name, value)


def _attrs_equal(a, b):
    assert vars(a).keys() == vars(b).keys()
    for k in vars(a):
        va, vb = vars(a)[k], vars(b)[k]
        assert type(va) is type(vb)
        if isinstance(va, torch.Tensor):
            assert torch.equal(va, vb)


def test_item_and_attribute_writes_on_a_mirrored_ordered_dict_are_captured():
    def f(out, x):
        out["hidden"] = (x * 2, x + 1)
        out.extra = x - 1           # Mirrored.__setattr__: an attribute only (not a key)
        out.logits = x * 5          # a key: item and attribute
        return out["logits"] + out.hidden[0] + out.extra + len(out)

    x = torch.randn(3)
    out = Mirrored(logits=x * 3, loss=None)
    _, d = check(f, out, x, graphs=1, dynamo=True)
    ea, ca = (copy.deepcopy(out), x), (copy.deepcopy(out), x)
    f(*ea)
    tracer.compile(f)(*ca)
    assert list(ca[0].keys()) == ["logits", "loss", "hidden"] == list(ea[0].keys())
    _attrs_equal(ca[0], ea[0])


def test_transformers_model_output_written_after_the_forward_is_captured():
    modeling_outputs = pytest.importorskip("transformers.modeling_outputs")

    def post(out, x):   # what transformers' capture_outputs does after a forward
        out["hidden_states"] = (x * 2, x + 1)
        out["attentions"] = (x - 1,)
        return out["last_hidden_state"] + out.hidden_states[0] + out[2][0] + len(out)

    x = torch.randn(3)
    out = modeling_outputs.BaseModelOutputWithPast(last_hidden_state=x * 3)
    c, d = check(post, out, x, graphs=1, dynamo=True)
    ea, ca = copy.deepcopy(out), copy.deepcopy(out)
    post(ea, x)
    c(ca, x)
    assert list(ca.keys()) == list(ea.keys()) == ["last_hidden_state", "hidden_states", "attentions"]
    _attrs_equal(ca, ea)


def test_a_dict_subclass_with_its_own_setitem_delete_and_reads_after_writes():
    def f(cfg, x):
        cfg["a"] = 3            # Doubling.__setitem__ -> 6
        cfg["t"] = x + 1
        del cfg["b"]
        cfg.setdefault("z", 9)
        return x * cfg["a"] + cfg.get("z", 0) + len(cfg) + sum(1 for _ in cfg)

    check(f, Doubling(b=1, z=5), torch.ones(2), graphs=1)
    check(fresh(f), Doubling(b=1), torch.ones(2), graphs=1)   # setdefault inserts


def test_other_keys_on_a_later_call_recompile_and_stay_equal():
    def f(cfg, x):
        cfg["n"] = len(cfg)
        return x + cfg["n"]

    c = tracer.compile(f)
    traced = []
    for keys in (("a",), ("a",), ("a", "b"), ("b", "a"), ("a", "b")):
        _, d = run(c, f, Doubling({k: 1 for k in keys}), torch.ones(2))
        assert d.fallbacks == 0 and d.breaks == 0
        traced.append(d.frames)
    assert traced == [1, 0, 1, 1, 0]   # the keys (and their order) are guarded


def test_ordered_dict_subclass_keeps_the_position_of_a_key_set_again():
    class OD(collections.OrderedDict):
        pass

    def f(d, x):
        d["a"] = x + 1      # already there: keeps its place
        d["c"] = x * 2      # new: at the end
        d.pop("b")
        return x + 1

    check(f, OD(a=torch.zeros(2), b=1), torch.ones(2), graphs=1)


def test_a_python_setattr_runs_once_per_store():
    def f(obj, x):
        obj.y = x + 1
        obj.z = 3
        return x * obj.stores

    _, d = check(f, Counting(), torch.ones(2), graphs=1)
    a, b = Counting(), Counting()
    f(a, torch.ones(2))
    tracer.compile(fresh(f))(b, torch.ones(2))
    assert a.stores == b.stores == 2


def test_a_write_then_a_graph_break_is_replayed_before_the_break():
    def f(out, x):
        out["k"] = x * 2
        print("break here")
        return out["k"] + 1

    check(f, Doubling(a=torch.ones(2)), torch.ones(2), graphs=2, breaks=1)


def test_refused_writes_are_breaks_with_reasons_and_stay_correct():
    class OD(collections.OrderedDict):
        pass

    def through_dict(d, x):
        dict.__setitem__(d, "k", 1)   # skips OrderedDict's order links: not modelled
        return x + 1

    class Missing(dict):
        def __missing__(self, key):
            return 7

    def missing(d, x):
        return x + d["nope"]

    _, d = run(tracer.compile(through_dict), through_dict, OD(), torch.ones(2))
    assert d.breaks == 1 and "OrderedDict" in d.break_reasons[0]
    # (a missing key given to the class's __missing__ was a break here too: it is inlined now)
    _, d = run(tracer.compile(missing), missing, Missing(), torch.ones(2))
    assert d.breaks == 0 and d.graphs == 1 and d.fallbacks == 0


def test_dicts_own_getitem_through_super_calls_missing():
    """dict.__getitem__ on a subclass calls its __missing__ for an absent key (it used to
    raise KeyError in the trace: a wrong result)."""
    class Missing(dict):
        def __missing__(self, key):
            return 7

        def __getitem__(self, key):
            return super().__getitem__(key)

    def f(d, x):
        try:
            v = d["nope"]
        except KeyError:
            v = -1
        return x + d["a"] + v

    _, d = run(tracer.compile(f), f, Missing(a=1), torch.ones(2))
    assert d.fallbacks == 0 and d.graphs >= 1


def test_ordered_dicts_update_setdefault_pop_run_the_subclass_setitem():
    """On an OrderedDict subclass, CPython's __init__/update/setdefault/pop go through the
    object's own item methods: Mirrored.__setitem__ runs for each stored item. They stored
    into the items directly, for objects made in the frame and passed in (no attribute:
    `getattr(r, "k", None)` gave None where eager gives 2; found by the fuzzer)."""
    def made_here(x):
        r = Mirrored(a=1)
        r.update(z=3)
        r.update([("w", 4)])
        r.setdefault("k", 2)
        r.setdefault("k", 5)
        return x + 1, r, getattr(r, "a", None), getattr(r, "k", None), getattr(r, "z", None), r.w

    def passed_in(r, x):
        r.setdefault("k", x * 2)
        v = r.pop("a")
        r.update(q=x + 1)
        return x + v, getattr(r, "k", None), r.q, r.pop("nope", 7)

    check(made_here, torch.ones(2), graphs=1)
    check(passed_in, Mirrored(a=1), torch.ones(2), graphs=1)


def test_update_from_pairs_and_from_another_mapping():
    """update()/__init__ take a dict's items or an iterable of pairs; another mapping is read
    through its own keys() and [] (a break). Its keys were unpacked as pairs before."""
    def f(r, other, x):
        r.update([("p", 1), "qz"])          # a 2-character string is a pair too
        s = Mirrored(other)
        return x + 1, r, s, dict(s)

    check(f, Mirrored(a=1), Doubling(ab=2, cd=3), torch.ones(2), breaks=1)
    check(fresh(f), Mirrored(a=1), Mirrored(ab=2), torch.ones(2), breaks=1)


def test_dict_and_ordered_dict_of_a_subclass_object_copy_its_items():
    """dict(...)/OrderedDict(...) of a dict-subclass object (passed in or made here) unpacked
    its keys as pairs: OrderedDict(D(ab=2)) gave {'a': 'b'} (a wrong result on 2931631)."""
    def f(d, x):
        return x + 1, collections.OrderedDict(d), dict(d), dict(Doubling(ab=1))

    _, d = run(tracer.compile(f), f, Doubling(ab=2, cd=3), torch.ones(2))
    assert d.fallbacks == 0 and d.graphs >= 1


def test_dict_of_a_subclass_that_changes_iteration_reads_through_its_getitem():
    """CPython's dict(obj) copies the storage only when the class keeps dict's iteration;
    otherwise (an OrderedDict subclass, an own __iter__) it reads keys() and the class's []:
    dict(O(a=1)) is {'a': 3} below; the trace copied the storage ({'a': 1} on 2931631)."""
    class O(collections.OrderedDict):
        def __getitem__(self, k):
            return 3 * super().__getitem__(k)

    class T(dict):
        def __iter__(self):
            return iter(sorted(super().keys(), reverse=True))

        def __getitem__(self, k):
            return 2 * super().__getitem__(k)

    class P(dict):   # dict's iteration: the storage is copied, its [] is not asked
        def __getitem__(self, k):
            return 5 * super().__getitem__(k)

    def f(d, x):
        return x + 1, dict(d)

    for make in (lambda: O(a=1), lambda: T(a=1, b=2), lambda: P(a=1)):
        c = tracer.compile(fresh(f))
        for _ in range(2):
            want, got = f(make(), torch.ones(2)), c(make(), torch.ones(2))
            assert torch.equal(want[0], got[0]) and want[1] == got[1]
