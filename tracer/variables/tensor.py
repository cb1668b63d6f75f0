"""Tensors: an FX node plus a fake tensor that knows shape, dtype, device, requires_grad.

Metadata queries (`x.shape`, `x.size(0)`, `x.dtype`, `x.dim()`, ...) fold to constants and
never enter the graph, except a dimension that is symbolic (dynamic shapes): it is a
SymNodeVariable computed by an `x.size(d)` node, as in torch.compile's graphs. A fact the
inputs' TensorMatch does not pin (`x.storage_offset()`, `x.is_leaf`) is guarded where it is
folded (tensor_facts.py). Anything that needs tensor *data* at trace time (`bool(x)`,
`x.item()` steering control flow, `x.tolist()`) is Unsupported: a graph break with that
reason.
"""
import functools
import operator

import torch

from guards import AttrSource, Predicate

from ..exc import Unsupported, UserException
from ..graph.shapes import SYM_TYPES, constant_of, is_symbolic
from .base import ConstantVariable, Variable, is_constant_value
from .tensor_facts import fold


@functools.lru_cache(maxsize=None)
def _lacks_instance_attr(name):
    """One predicate per name (equal guards deduplicate): the tensor's __dict__ lacks it."""
    return lambda t: name not in t.__dict__

# Tensor attributes that are pure metadata: folded to constants.
_META_ATTRS = {"shape", "dtype", "device", "ndim", "requires_grad", "is_cuda", "is_sparse",
               "is_quantized", "is_meta", "layout", "is_leaf", "is_nested", "is_mkldnn",
               "is_complex", "itemsize", "nbytes"}
# Methods whose result depends on metadata only.
_META_METHODS = {"size", "dim", "ndimension", "numel", "nelement", "stride", "is_contiguous",
                 "is_floating_point", "is_complex", "element_size", "get_device", "type",
                 "storage_offset", "is_signed", "__len__"}
# Attributes that are tensor-valued views: become graph ops.
_TENSOR_ATTRS = {"T", "mT", "H", "mH", "real", "imag"}
_DATA_METHODS = {"item", "tolist", "numpy", "__bool__", "__int__", "__float__", "__index__",
                 "data_ptr", "untyped_storage", "storage", "cpu_numpy"}


class TensorVariable(Variable):
    def __init__(self, node, example, source=None, real=None, real_source=None):
        super().__init__(source)
        self.node = node
        self.example = example  # a FakeTensor
        # The real tensor object behind an input or a module tensor, and where to find it:
        # Python attributes set on it (`x.flag = 1`) live in its __dict__, not in the fake.
        self.real = real
        self.real_source = real_source if real_source is not None else (source if real is not None else None)

    def python_type(self):
        return torch.nn.Parameter if isinstance(self.example, torch.nn.Parameter) else torch.Tensor

    def truthy(self, tx):
        raise Unsupported("data-dependent branch: bool() of a tensor needs its value")

    def getattr(self, tx, name):
        ex = self.example
        if name in _META_ATTRS:
            if name == "shape":
                return self.sizes(tx, "size")
            if name == "nbytes":  # numel() * itemsize (a node where the sizes are dynamic)
                return operators.binary_op(tx, "mul", self.call_method(tx, "numel", [], {}),
                                           ConstantVariable(ex.itemsize))
            return ConstantVariable(fold(tx, self, name, getattr(ex, name)))
        if name in _TENSOR_ATTRS:
            return torch_calls.call_torch(tx, "call_function", getattr, [self, ConstantVariable(name)], {})
        if name == "grad":
            return self._grad(tx)
        if name == "data":  # not detach(): .data has a version counter of its own
            return torch_calls.call_torch(tx, "call_function", torch._C._autograd._get_data_attr, [self], {})
        if name in _DATA_METHODS and name != "numpy" and not (name == "item" and tx.output.shapes.policy.scalar_outputs):
            raise Unsupported(f"Tensor.{name}() needs the tensor's data at trace time")
        if name == "__class__":  # as type(x): the tensor's type, which its guards pin
            return objects.ClassVariable(self.python_type())
        if hasattr(torch.Tensor, name) and callable(getattr(torch.Tensor, name)):
            return torch_vars.TensorMethodVariable(self, name)
        if not hasattr(torch.Tensor, name):
            return self.instance_attr(tx, name)
        raise Unsupported(f"Tensor attribute {name!r}")

    def _grad(self, tx):
        """`x.grad` of an input tensor (an argument, a parameter): read through its source, so
        it is an input of the graph guarded like any (None, or a tensor's metadata), as
        torch.compile reads it (gradient clipping, `p.grad.zero_()`). A tensor the graph made,
        or a non-leaf (reading its .grad warns), is a break. (A frame cannot have set it:
        setting Tensor.grad is a break, setattr.)"""
        real = self.real
        if real is None or self.real_source is None:
            raise Unsupported("reading .grad of a tensor the graph made")
        if not (real.is_leaf or real.retains_grad):
            raise Unsupported("reading .grad of a non-leaf tensor (torch warns)")
        return builder.wrap(tx, real.grad, AttrSource(self.real_source, "grad"))

    def instance_attr(self, tx, name):
        """A Python attribute set on the tensor object (`x.flag = None`), not a Tensor API name.

        It lives in the real tensor's __dict__: present, its value is wrapped with a source
        (so it is guarded like any input value); absent, the absence is guarded. A tensor a
        graph op made is a fresh object with no such attributes (an in-place op returns its
        input object, whose attributes are not known here: Unsupported)."""
        pending = tx.side_effects.pending_attr(self, name)
        if pending is not None:
            return pending
        if self.real is None:
            target = self.node.target
            tname = target if isinstance(target, str) else getattr(target, "__name__", "")
            if self.node.op in ("call_function", "call_method", "call_module") and \
                    not tname.endswith("_") and target is not operator.setitem:
                raise exceptions.attribute_error("Tensor", name)
            raise Unsupported(f"attribute {name!r} of a tensor whose object is not known at trace time")
        if self.real_source is None:
            raise Unsupported(f"attribute {name!r} of a module tensor reached without a source")
        inst = self.real.__dict__
        if name in inst:
            return builder.wrap(tx, inst[name], AttrSource(self.real_source, name))
        tx.guard(Predicate.made(self.real_source, _lacks_instance_attr, (name,), f"has no attribute {name!r}"))
        raise exceptions.attribute_error("Tensor", name)

    def setattr(self, tx, name, value):
        if hasattr(torch.Tensor, name):
            raise Unsupported(f"setting Tensor.{name} changes the tensor outside the graph")
        if self.source is None:
            raise Unsupported(f"setting attribute {name!r} on a tensor made in the graph")
        tx.side_effects.store_attr(self, name, value)

    def constant_index(self):
        """`operator.index(t)` of a one-element integer tensor the trace made from a constant
        (`torch.as_tensor(2)`): its fake still holds that constant (fake tensors drop it when
        the tensor is written in place); None otherwise."""
        ex = self.example
        const = getattr(ex, "constant", None)
        if const is None or ex.dtype.is_floating_point or ex.dtype.is_complex or ex.dtype is torch.bool \
                or ex.numel() != 1 or not isinstance(ex.numel(), int):
            return None
        return int(const.item())

    def scalar_item(self, tx):
        """`t.item()` as a graph op (config.capture_scalar_outputs, always under fullgraph=True):
        its value is a symbol the ShapeEnv knows nothing of (unbacked), so arithmetic and torch
        ops on it stay in the graph and whatever needs the number itself is a break."""
        return torch_calls.call_torch(tx, "call_method", "item", [self], {})

    # ---- sizes (symbolic where the input dimension is dynamic) --------------------------
    def sizes(self, tx, prop):
        """`x.shape` / `x.stride()`: a constant when static, else a torch.Size (tuple) of
        constants and SymNodeVariables."""
        values = getattr(self.example, prop)()
        if not any(is_symbolic(v) for v in values):
            ints = [constant_of(v) if isinstance(v, SYM_TYPES) else v for v in values]
            return ConstantVariable(torch.Size(ints) if prop == "size" else tuple(ints))
        items = [self.size_at(tx, prop, i) for i in range(len(values))]
        return containers.SizeVariable(items) if prop == "size" else containers.TupleVariable(items)

    def size_at(self, tx, prop, d):
        """`x.size(d)` / `x.stride(d)`."""
        try:
            value = getattr(self.example, prop)(d)
        except (IndexError, TypeError) as e:
            raise Unsupported(f"x.{prop}({d!r}) raises {type(e).__name__} (the user code raises it)") from e
        if not is_symbolic(value):
            return ConstantVariable(constant_of(value) if isinstance(value, SYM_TYPES) else value)
        n = self.example.dim()
        node = tx.output.sym_size_node(self.node, prop, d % n if n else d)
        return sym.SymNodeVariable(node, value)

    def call_method(self, tx, name, args, kwargs):
        if name == "type" and len(args) == 1 and isinstance(args[0], objects.ClassVariable) and \
                args[0].cls in torch_calls.LEGACY_TENSOR_TYPES and args[0].cls is not torch.Tensor:
            args = [ConstantVariable(torch.typename(args[0].cls))]  # x.type(torch.HalfTensor)
        if name in _META_METHODS:
            if name in ("size", "stride") and len(args) + len(kwargs) <= 1 and set(kwargs) <= {"dim"}:
                d = args[0] if args else kwargs.get("dim")
                return self.sizes(tx, name) if d is None else self.size_at(tx, name, d.as_constant())
            cargs = [a.as_constant() for a in args]
            ckw = {k: v.as_constant() for k, v in kwargs.items()}
            value = getattr(self.example, name)(*cargs, **ckw)
            if name == "type" and not args and not kwargs:
                return ConstantVariable(value)
            if is_symbolic(value):  # numel() of a dynamic tensor...
                node = tx.output.graph.create_node("call_method", name, (self.node, *cargs), ckw)
                return sym.SymNodeVariable.create(tx, node, value)
            if isinstance(value, SYM_TYPES):
                value = constant_of(value)
            if is_constant_value(value):
                return ConstantVariable(fold(tx, self, name, value))
        if name == "numpy":  # the same tensor seen as a NumPy array (numpy_vars.py)
            return numpy_vars.tensor_numpy(tx, self, args, kwargs)
        if name == "item" and not args and not kwargs and tx.output.shapes.policy.scalar_outputs:
            return self.scalar_item(tx)
        if name in _DATA_METHODS:
            raise Unsupported(f"Tensor.{name}() needs the tensor's data at trace time")
        if name == "requires_grad_" and len(args) + len(kwargs) <= 1:
            want = (args[0] if args else kwargs.get("requires_grad", ConstantVariable(True))).as_constant()
            if bool(want) == self.example.requires_grad:
                return self  # already so: a no-op (HF's enable_input_require_grads hook in train mode)
        if name in ("requires_grad_", "retain_grad", "register_hook", "backward"):
            raise Unsupported(f"Tensor.{name}() changes autograd state outside the graph")
        return torch_calls.call_torch(tx, "call_method", name, [self, *args], kwargs)

    def getitem(self, tx, key):
        if isinstance(key, sym.SymNodeVariable) and isinstance(key.value, torch.SymInt):
            # x[i], i a symbolic int: indexing reads i through __index__, which specialises it
            # (one entry per value); torch.select(x, 0, i) is the same view, i kept symbolic
            select = torch_vars.TorchFunctionVariable(torch.select)
            return select.call(tx, [self, ConstantVariable(0), key], {})
        return torch_calls.call_torch(tx, "call_function", operator.getitem, [self, key], {})

    def setitem(self, tx, key, value):
        torch_calls.call_torch(tx, "call_function", operator.setitem, [self, key, value], {})

    def iterate(self, tx):
        return [self.getitem(tx, ConstantVariable(i)) for i in range(self.length(tx))]

    def length(self, tx):
        """len(x) as a Python int: a symbolic first dimension is specialised (guarded)."""
        if self.example.dim() == 0:
            raise Unsupported("len() of a 0-d tensor")
        return self.size_at(tx, "size", 0).as_constant()

    def len_var(self, tx):
        """len(x) as a value: symbolic when the first dimension is."""
        if self.example.dim() == 0:
            raise Unsupported("len() of a 0-d tensor")
        return self.size_at(tx, "size", 0)

    def hasattr(self, tx, name):
        if hasattr(torch.Tensor, name):
            return hasattr(self.example, name)
        try:
            self.instance_attr(tx, name)
            return True
        except UserException:
            return False

    def reconstruct(self, cg):
        cg.load_tensor(self)

    def __repr__(self):
        ex = self.example
        return f"Tensor({self.node.name}: {str(ex.dtype).replace('torch.', '')}{list(ex.shape)})"


# Modules of the value model that also import this one (the one import cycle, see
# docs/design.md): imported as modules, after this module's own definitions, so that
# either may be imported first; their names are read when a function runs.
from . import containers, sym, torch_vars, exceptions, builder, torch_calls, numpy_vars, objects, operators  # noqa: E402
