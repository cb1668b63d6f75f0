"""Build script: only the C frame hook needs it; everything else is in pyproject.toml.

The extension relies on CPython frame internals of 3.11 to 3.15 (see
tracer/runtime/_eval_frame.c), so the build refuses other versions with a clear message instead of
producing a broken module.
"""
import os
import sys

from setuptools import Extension, setup

SUPPORTED = ((3, 11), (3, 12), (3, 13), (3, 14), (3, 15))

ext_modules = []
if os.path.exists(os.path.join(os.path.dirname(os.path.abspath(__file__)), "tracer", "runtime", "_eval_frame.c")):
    if sys.version_info[:2] not in SUPPORTED:
        raise SystemExit(
            "frametracer's frame hook (tracer/runtime/_eval_frame.c) supports CPython 3.11 to 3.15; "
            f"this is {sys.version.split()[0]}"
        )
    ext_modules.append(Extension("tracer.runtime._eval_frame", ["tracer/runtime/_eval_frame.c"]))
    ext_modules.append(Extension("tracer.runtime._dispatch", ["tracer/runtime/_dispatch.c"]))

# The guard engine (guards/_fastcheck*.c): optional at run time (guards/fastpath.py falls back
# to the generated Python check without it), built for CPython 3.11-3.13 (fastpath.py uses it
# on 3.11 and 3.12 only: see guards/_fastcheck.h).
if os.path.exists(os.path.join(os.path.dirname(os.path.abspath(__file__)), "guards", "_fastcheck.c")) \
        and (3, 11) <= sys.version_info[:2] <= (3, 13):
    ext_modules.append(Extension("guards._fastcheck", ["guards/_fastcheck.c", "guards/_fastcheck_capture.c", "guards/_fastcheck_watch.c"],
                                 depends=["guards/_fastcheck.h", "guards/_tensormeta.h"]))


def _tensormeta_extension():
    """guards/_tensormeta.cpp, compiled against the installed torch's headers (optional: without
    it the C check calls TensorGuards for every tensor). None when torch is not importable."""
    try:
        import torch
        from torch.utils import cpp_extension
    except ImportError:
        return None
    abi = int(torch.compiled_with_cxx11_abi())
    return Extension(
        "guards._tensormeta", ["guards/_tensormeta.cpp"], depends=["guards/_tensormeta.h"],
        include_dirs=cpp_extension.include_paths(), library_dirs=cpp_extension.library_paths(),
        libraries=["c10", "torch_cpu"], runtime_library_dirs=cpp_extension.library_paths(), language="c++",
        define_macros=[("TM_TORCH_VERSION", f'"{torch.__version__}"'),
                       ("_GLIBCXX_USE_CXX11_ABI", str(abi))],
        extra_compile_args=["-std=c++17", "-O2", "-w"])


if os.path.exists(os.path.join(os.path.dirname(os.path.abspath(__file__)), "guards", "_tensormeta.cpp")):
    _tm = _tensormeta_extension()
    if _tm is not None:
        ext_modules.append(_tm)

setup(ext_modules=ext_modules)
