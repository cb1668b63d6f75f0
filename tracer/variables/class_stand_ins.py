"""The real objects a class made in the frame is traced through (variables/frame_classes.py):
the class made at trace time and its methods' stand-in functions. Small and without imports of
its siblings, so that the modules that meet these objects (objects, new_objects, functions)
import it at their top.

Neither kind may reach the program: a stand-in method is traced as the function the class
body made (`method_var`), and the class is made again, per call, wherever the rewritten code
needs it (`load_class`).
"""
import weakref

from ..exc import Unsupported

# class made at trace time -> weakref to its FrameClassVariable (alive while its trace is)
_CLASSES = weakref.WeakKeyDictionary()
_METHODS = weakref.WeakSet()  # the stand-in functions of their methods


def register(cls, var, methods):
    """Note `cls`, made at trace time for `var`, and the stand-ins among its attributes."""
    _CLASSES[cls] = weakref.ref(var)
    _METHODS.update(methods)


def method_var(tx, fn):
    """The Variable of the function made in the frame that `fn`, a stand-in method, stands
    for (the trace's memo holds it); None for any other function."""
    if fn not in _METHODS:
        return None
    hit = tx.wrap_memo.get(id(fn))
    if hit is None or hit[0] is not fn:
        raise Unsupported(f"a method of class made in an earlier trace: {fn.__qualname__}")
    return hit[1]


def load_class(cg, cls):
    """Emit code loading `cls`: a class made at trace time is made again by its Variable
    (once per rewritten code: CodeGen.reconstruct), any other is the object itself."""
    ref = _CLASSES.get(cls)
    if ref is None:
        return cg.load_const(cls)
    var = ref()
    if var is None:
        raise Unsupported(f"class {cls.__qualname__} made in an earlier trace reaches the rewritten code")
    cg.reconstruct(var)
