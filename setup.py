"""Build script: only the C extensions need it; everything else is in pyproject.toml.

The frame hook relies on CPython frame internals of 3.11 to 3.15 (see
tracer/runtime/_eval_frame.c), so the build refuses other versions with a clear message instead of
producing a broken module.

The guard engine (guards._fastcheck) and its tensor records (guards._tensormeta) are optional:
the run time falls back without them (guards/fastpath.py, with a warning), so a failure to build
either one warns and the install goes on (OptionalBuildExt). _tensormeta is compiled against the
installed torch's C++ headers, whose needs change between releases (2.14 and 2.15 need C++20),
and it is tied to that torch: its module name carries the torch version
(guards._tensormeta_2_15_0_cu132), so that under another torch fastpath does not find it and
says so.
"""
import os
import re
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

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
                                 depends=["guards/_fastcheck.h", "guards/_tensormeta.h"], optional=True))


class OptionalBuildExt(build_ext):
    """Builds each optional extension (Extension(optional=True)) as best it can: any failure,
    not only the compiler errors setuptools forgives, is reported as a warning naming what the
    run time does instead, and the install goes on. The frame hook is not optional."""

    def build_extension(self, ext):
        if not ext.optional:
            return super().build_extension(ext)
        try:
            return super().build_extension(ext)
        except Exception as e:  # noqa: BLE001 - whatever broke, the package works without it
            print(f"WARNING: frametracer: the optional extension {ext.name} did not build ({type(e).__name__}: {e}); "
                  "installing without it (guards/fastpath.py falls back, slower, and warns at import)",
                  file=sys.stderr)


def _tensormeta_extension():
    """guards/_tensormeta.cpp, compiled against the installed torch's headers (optional: without
    it the C check calls TensorGuards for every tensor). None when torch is not importable.
    C++20: torch 2.14's and 2.15's headers need it, and 2.13's compile with it as well (checked
    on 2.13.0, 2.14.1 and 2.15.0 with GCC 12)."""
    try:
        import torch
        from torch.utils import cpp_extension
    except ImportError:
        return None
    try:
        abi = int(torch.compiled_with_cxx11_abi())
        include_dirs, library_dirs = cpp_extension.include_paths(), cpp_extension.library_paths()
    except Exception as e:  # noqa: BLE001 - a torch whose build helpers changed: go on without it
        print(f"WARNING: frametracer: guards._tensormeta left out (torch {torch.__version__}'s cpp_extension: "
              f"{type(e).__name__}: {e})", file=sys.stderr)
        return None
    # one module per torch (guards/fastpath.py's tensormeta_name spells the same name)
    module = "_tensormeta_" + re.sub(r"\W", "_", torch.__version__)
    return Extension(
        "guards." + module, ["guards/_tensormeta.cpp"], depends=["guards/_tensormeta.h"],
        include_dirs=include_dirs, library_dirs=library_dirs,
        libraries=["c10", "torch_cpu"], runtime_library_dirs=library_dirs, language="c++",
        define_macros=[("TM_TORCH_VERSION", f'"{torch.__version__}"'), ("TM_MODULE", module),
                       ("_GLIBCXX_USE_CXX11_ABI", str(abi))],
        extra_compile_args=["-std=c++20", "-O2", "-w"], optional=True)


if os.path.exists(os.path.join(os.path.dirname(os.path.abspath(__file__)), "guards", "_tensormeta.cpp")):
    _tm = _tensormeta_extension()
    if _tm is not None:
        ext_modules.append(_tm)

setup(ext_modules=ext_modules, cmdclass={"build_ext": OptionalBuildExt})
