"""guards/shape.py: ShapeMatch (one ShapeEnv guard over input sizes) and TensorMatch with
dynamic dims, compiled into the one check function with no user strings (rule 6)."""
import operator

import pytest
import torch

from guards import ComputedNumberSource, LocalSource, ShapeMatch, TensorMatch, TensorPropSource, compile_guards

X, Y = LocalSource("x", 0), LocalSource("y", 1)


def _set(ex, ey):
    return compile_guards([
        TensorMatch(X, ex).with_dynamic((None, 4), (4, 1), ("s0", "s1")),
        TensorMatch(Y, ey).with_dynamic((None,), (1,), ("s0",)),
        ShapeMatch("2 <= _z0", [TensorPropSource(X, "size", 0)]),
        ShapeMatch("_z0 == _z1", [TensorPropSource(Y, "size", 0), TensorPropSource(X, "size", 0)]),
        ShapeMatch("max(1, _z0) % 2 == 1 and math.floor(_z0 / 2) >= 1", [TensorPropSource(X, "size", 0)]),
    ], builtins={})


def test_check_describe_and_failures_agree():
    ex, ey = torch.randn(5, 4), torch.randn(5)
    gs = _set(ex, ey)
    assert gs.check((torch.randn(7, 4), torch.randn(7)), {}, None)
    assert gs.failures((torch.randn(7, 4), torch.randn(7)), {}, None) == []
    assert not gs.check((torch.randn(7, 4), torch.randn(6)), {}, None)
    assert gs.failures((torch.randn(7, 4), torch.randn(6)), {}, None) == ["y.size(0) == x.size(0)"]
    assert not gs.check((torch.randn(8, 4), torch.randn(8)), {}, None)  # even
    assert not gs.check((torch.randn(7, 3), torch.randn(7)), {}, None)  # a static dim
    d = gs.describe()
    assert "x: tensor float32 cpu shape (s0, 4) stride (4, 1)" in d
    assert "2 <= x.size(0)" in d and "y.size(0) == x.size(0)" in d
    assert "math.floor(x.size(0) / 2)" in d


def test_generated_text_holds_no_names_of_the_expression():
    gs = _set(torch.randn(5, 4), torch.randn(5))
    src = gs.source_code
    for word in ("size", "max", "math", "floor", "'", '"'):
        assert word not in src, word


@pytest.mark.parametrize("expr", ["_z0 == 'a'", "_z0.foo == 1", "__import__ == 1", "_z1 == 2",
                                  "[_z0][0] == 1", "(lambda: 1)() == 1"])
def test_anything_but_numbers_and_known_names_is_rejected(expr):
    with pytest.raises(ValueError):
        ShapeMatch(expr, [TensorPropSource(X, "size", 0)])


def test_tensor_prop_source_names_and_reconstruct():
    s = TensorPropSource(X, "stride", 1)
    assert s.name() == "x.stride(1)" and s.base is X
    assert TensorPropSource(X, "storage_offset").name() == "x.storage_offset()"
    assert s.reconstruct()  # bytecode that loads x.stride(1)
    with pytest.raises(ValueError):
        TensorPropSource(X, "data_ptr")


def _computed():
    """`(x.size(0) + 0.1) - x.size(0)`, as the tracer hands a float computed from a size."""
    n = TensorPropSource(X, "size", 0)
    return ComputedNumberSource(operator.sub, ["torch.sym_float(_z0) + 0.1", "_z0"], [n])


def test_a_computed_number_is_computed_again_in_floats():
    """A guard on a float the trace computed from sizes reads it as the program computes it
    (not as sympy would simplify it: 0.1): 0.10000000000000009 for sizes 2 and 3, another
    float for 4."""
    c = _computed()
    gs = compile_guards([ShapeMatch("_z0 == 0.10000000000000009", [c])], builtins={})
    assert gs.check((torch.randn(2),), {}, None) and gs.check((torch.randn(3),), {}, None)
    assert not gs.check((torch.randn(4),), {}, None)
    assert gs.failures((torch.randn(4),), {}, None) == ["sub(torch.sym_float(x.size(0)) + 0.1, x.size(0)) "
                                                        "== 0.10000000000000009"]
    for word in ("sym_float", "sub", "'", '"'):
        assert word not in gs.source_code, word
    assert c.depth() == 2 and TensorPropSource(X, "size", 0) in c.ancestors()


@pytest.mark.parametrize("arg", ["_z0 == 'a'", "_z0.foo", "__import__", "_z1", "[_z0][0]"])
def test_a_computed_number_takes_only_numbers_and_known_names(arg):
    with pytest.raises(ValueError):
        ComputedNumberSource(operator.add, [arg, "1"], [TensorPropSource(X, "size", 0)])
