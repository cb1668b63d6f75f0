"""Template strings (PEP 750, 3.14+): `t"..."` made in the traced frame.

Why this module exists: a t-string is not a string but a `string.templatelib.Template` holding
its literal parts and one `Interpolation` per field (the value, its source text, its
conversion and format spec), for a library to process. Each was a graph break, two or more
per t-string; most code only reads the parts. Both are immutable, so they are modelled as
plain values here: their attributes, iterating a template, and the objects rebuilt after the
graph with the same parts (`Template(*parts)`, `Interpolation(...)`). Anything else done to
them (`+`, `repr`, a call that takes them) is Unsupported, a graph break there.
"""
from ..exc import Unsupported
from .base import ConstantVariable, Variable

try:
    from string.templatelib import Interpolation, Template
except ImportError:  # before 3.14: no t-strings, nothing here is used
    Interpolation = Template = None

#: BUILD_INTERPOLATION's conversion (its oparg >> 2), as Interpolation.conversion says it.
CONVERSIONS = (None, "s", "r", "a")


class InterpolationVariable(Variable):
    """`Interpolation(value, expression, conversion, format_spec)` of a t-string's field."""

    rebuilt_once = True  # (one object after the graph, however often it is referenced)

    def __init__(self, value, expression, conversion, format_spec):
        super().__init__(None)
        self.parts = {"value": value, "expression": expression,
                      "conversion": ConstantVariable(conversion), "format_spec": format_spec}

    def python_type(self):
        return Interpolation

    def getattr(self, tx, name):
        if name in self.parts:
            return self.parts[name]
        raise Unsupported(f"attribute {name!r} of a t-string's Interpolation")

    def reconstruct(self, cg):
        cg.call_with(Interpolation, [self.parts[k] for k in Interpolation.__match_args__])

    def __repr__(self):
        return f"Interpolation({self.parts['expression']})"


class TemplateVariable(Variable):
    """`Template` made by a t-string: its literal strings (one more than its interpolations,
    empty ones included, as CPython keeps them) and its InterpolationVariables."""

    rebuilt_once = True

    def __init__(self, strings, interpolations):
        super().__init__(None)
        self.strings = tuple(strings)
        self.interpolations = containers.TupleVariable(list(interpolations))  # (one tuple: `is` holds)

    def python_type(self):
        return Template

    def getattr(self, tx, name):
        if name == "strings":
            return ConstantVariable(self.strings)
        if name == "interpolations":
            return self.interpolations
        if name == "values":  # (a new tuple at each read, as CPython makes it)
            return containers.TupleVariable([i.parts["value"] for i in self.interpolations.items])
        raise Unsupported(f"attribute {name!r} of a t-string's Template")

    def _parts(self):
        """The strings and interpolations interleaved, in order."""
        out = [ConstantVariable(self.strings[0])]
        for s, i in zip(self.strings[1:], self.interpolations.items):
            out += [i, ConstantVariable(s)]
        return out

    def iterate(self, tx):
        """Template.__iter__: the parts in order, its empty strings left out."""
        return [p for p in self._parts() if not (p.is_constant() and p.as_constant() == "")]

    def reconstruct(self, cg):
        cg.call_with(Template, self._parts())  # (Template(*parts) keeps the empty strings)

    def __repr__(self):
        return f"Template({self.strings!r})"


def build_template(tx, strings, interpolations):
    """BUILD_TEMPLATE's operands: a constant tuple of the strings, and a tuple of the
    Interpolations (a constant `()` when there are none)."""
    strs = strings.as_constant() if strings.is_constant() else None
    if interpolations.is_constant() and interpolations.as_constant() == ():
        items = []
    elif isinstance(interpolations, containers.TupleVariable):
        items = interpolations.iterate(tx)
    else:
        items = None
    if type(strs) is not tuple or not all(type(s) is str for s in strs) or items is None or \
            not all(isinstance(i, InterpolationVariable) for i in items) or len(strs) != len(items) + 1:
        raise Unsupported("template string (t-string, PEP 750) of parts it does not make")
    return TemplateVariable(strs, items)


# Modules of the value model that also import this one (the one import cycle, see
# docs/design.md): imported as modules, after this module's own definitions, so that
# either may be imported first; their names are read when a function runs.
from . import containers  # noqa: E402
