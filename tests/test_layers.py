"""The layers of the tree (docs/design.md, "Layers"), checked on the code's own imports.

Arrows run down this list only: the face (tracer/*.py, and the tracer-dump CLI in
tracer/tools/) -> trace -> rewrite -> variables -> graph -> runtime -> guards -> bytecode_utils. `tracer/exc.py`
holds exception classes only and imports nothing of the project, so every layer may raise
them. Function-level imports count like module-level ones (they are the same arrow, only
hidden), and the rules below are what keeps the layers visible in the folders:

* no import points up a layer;
* the only import cycle among the project's modules is inside tracer/variables/ (the value
  model: a list's sort calls user functions, a user function builds lists);
* trace, rewrite, graph and runtime hold no function-level import of the project's own
  modules, and the whole tree holds at most FUNCTION_LEVEL_BUDGET of them;
* the value model's package loads in its fixed order in a fresh process.
"""
from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ("tracer", "bytecode_utils", "guards")
FUNCTION_LEVEL_BUDGET = 60

# (layer, rank): an import may only go to the same rank or a larger one
LAYERS = [
    ("tracer", 1),             # the face: tracer/*.py and the tracer-dump CLI (tracer/tools/)
    ("tracer.persist", 1.5),   # the disk cache: above the trace's output, below the face
    ("tracer.trace", 2),
    ("tracer.rewrite", 3),
    ("tracer.variables", 4),
    ("tracer.graph", 5),
    ("tracer.runtime", 6),
    ("guards", 7),
    ("bytecode_utils", 8),
]
LEAVES = {"tracer.exc"}  # importable from anywhere; imports nothing of the project
NO_FUNCTION_LEVEL = ("tracer.trace", "tracer.rewrite", "tracer.graph", "tracer.runtime")
CYCLE_ALLOWED = "tracer.variables"


def layer_of(module: str) -> tuple[str, int]:
    best = None
    for name, rank in LAYERS:
        if module == name or module.startswith(name + "."):
            if best is None or len(name) > len(best[0]):
                best = (name, rank)
    assert best is not None, module
    return best


class Imports:
    """Every import of a project module by a project module: (importer, imported, line,
    function-level?)."""

    def __init__(self, root: pathlib.Path):
        self.root = root
        self.modules: dict[str, tuple[pathlib.Path, bool]] = {}
        for pkg in PACKAGES:
            for path in sorted((root / pkg).rglob("*.py")):
                parts = list(path.relative_to(root).with_suffix("").parts)
                is_pkg = parts[-1] == "__init__"
                self.modules[".".join(parts[:-1] if is_pkg else parts)] = (path, is_pkg)
        self.edges: list[tuple[str, str, int, bool]] = []
        for name, (path, is_pkg) in self.modules.items():
            self._scan(name, path, is_pkg)

    def _known(self, module: str) -> str | None:
        """The project module `module` names (a C extension counts as its own module)."""
        if module in self.modules:
            return module
        parent, _, leaf = module.rpartition(".")
        if parent in self.modules and self.modules[parent][1]:
            folder = self.modules[parent][0].parent
            if any(folder.glob(leaf + ".*")):
                return module  # a C extension or data file beside the package
            return parent  # a name defined in the package's __init__
        return None

    def _scan(self, name: str, path: pathlib.Path, is_pkg: bool) -> None:
        tree = ast.parse(path.read_text())
        parents = {}
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                parents[child] = node
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [self._known(a.name) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = name.split(".") if is_pkg else name.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    module = ".".join(base + ([node.module] if node.module else []))
                else:
                    module = node.module
                targets = [self._known(f"{module}.{a.name}") or self._known(module) for a in node.names]
            else:
                continue
            in_function = type_checking = False
            up = node
            while up in parents:
                up = parents[up]
                if isinstance(up, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                    in_function = True
                if isinstance(up, ast.If) and "TYPE_CHECKING" in ast.unparse(up.test):
                    type_checking = True
            if type_checking:
                continue
            for target in targets:
                if target is not None and target != name:
                    self.edges.append((name, target, node.lineno, in_function))

    def where(self, module: str, line: int) -> str:
        return f"{self.modules[module][0].relative_to(self.root)}:{line}"


def upward(imports: Imports) -> list[str]:
    out = []
    for src, dst, line, _fn in imports.edges:
        if dst in LEAVES:
            continue
        (src_layer, src_rank), (dst_layer, dst_rank) = layer_of(src), layer_of(dst)
        if dst_rank < src_rank:
            out.append(f"{imports.where(src, line)}: {src} ({src_layer}) imports {dst} ({dst_layer})")
    for leaf in LEAVES:
        out += [f"{imports.where(s, line)}: {leaf} imports {d}" for s, d, line, _ in imports.edges if s == leaf]
    return out


def cycles(imports: Imports) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    graph: dict[str, set[str]] = {m: set() for m in imports.modules}
    for src, dst, _line, _fn in imports.edges:
        if dst in graph:
            graph[src].add(dst)
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = 0
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_no_import_points_up_a_layer():
    bad = upward(Imports(ROOT))
    assert bad == [], "imports against the layers (docs/design.md):\n" + "\n".join(bad)


def test_the_only_import_cycle_is_inside_the_value_model():
    bad = [c for c in cycles(Imports(ROOT))
           if not all(m.startswith(CYCLE_ALLOWED + ".") for m in c)]
    assert bad == [], "import cycles outside tracer/variables/:\n" + "\n".join(" <-> ".join(c) for c in bad)


def test_function_level_imports_of_the_project_stay_few():
    imports = Imports(ROOT)
    hidden = [(s, d, line) for s, d, line, fn in imports.edges if fn]
    lower = [f"{imports.where(s, line)}: {d}" for s, d, line in hidden if s.startswith(NO_FUNCTION_LEVEL)]
    assert lower == [], "function-level imports in trace/rewrite/graph/runtime:\n" + "\n".join(lower)
    assert len(hidden) <= FUNCTION_LEVEL_BUDGET, "\n".join(f"{imports.where(s, line)}: {d}" for s, d, line in hidden)


def test_the_value_model_loads_in_its_fixed_order():
    """Every import of a tracer/variables module runs the package's __init__ first, which loads
    the modules in one order; a new top-level import that breaks that order fails here."""
    probe = ("import sys, tracer.variables.containers as c; "
             "mods = [m for m in sys.modules if m.startswith('tracer.variables.')]; "
             "print(len(mods), hasattr(c, 'ListVariable'))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    count, has_list = out.stdout.split()
    expected = len(list((ROOT / "tracer" / "variables").glob("[!_]*.py")))
    assert int(count) == expected and has_list == "True"


def _tree(tmp_path, files: dict[str, str]) -> pathlib.Path:
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_the_checks_find_what_they_look_for(tmp_path):
    """A planted upward import, a planted cycle outside variables/ and a planted
    function-level import in the rewrite layer are each reported."""
    root = _tree(tmp_path, {
        "tracer/__init__.py": "",
        "tracer/exc.py": "",
        "tracer/graph/__init__.py": "",
        "tracer/graph/shapes.py": "from ..variables import base\n",          # up
        "tracer/variables/__init__.py": "",
        "tracer/variables/base.py": "from . import containers\n",
        "tracer/variables/containers.py": "from . import base\n",             # allowed cycle
        "tracer/rewrite/__init__.py": "",
        "tracer/rewrite/codegen.py": "from . import graph_break\n",
        "tracer/rewrite/graph_break.py": "def f():\n    from . import codegen\n",  # cycle + fn-level
        "bytecode_utils/__init__.py": "",
        "guards/__init__.py": "",
    })
    imports = Imports(root)
    assert [b.split(": ", 1)[1] for b in upward(imports)] == [
        "tracer.graph.shapes (tracer.graph) imports tracer.variables.base (tracer.variables)"]
    assert sorted(cycles(imports)) == [["tracer.rewrite.codegen", "tracer.rewrite.graph_break"],
                                       ["tracer.variables.base", "tracer.variables.containers"]]
    assert [(s, d, fn) for s, d, _line, fn in imports.edges if fn] == [
        ("tracer.rewrite.graph_break", "tracer.rewrite.codegen", True)]
