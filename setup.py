"""Build script: only the C frame hook needs it; everything else is in pyproject.toml.

The extension relies on CPython frame internals of 3.11, 3.12 and 3.13 (see
tracer/_eval_frame.c), so the build refuses other versions with a clear message instead of
producing a broken module.
"""
import os
import sys

from setuptools import Extension, setup

SUPPORTED = ((3, 11), (3, 12), (3, 13))

ext_modules = []
if os.path.exists(os.path.join(os.path.dirname(os.path.abspath(__file__)), "tracer", "_eval_frame.c")):
    if sys.version_info[:2] not in SUPPORTED:
        raise SystemExit(
            "frametracer's frame hook (tracer/_eval_frame.c) supports CPython 3.11, 3.12 and 3.13; "
            f"this is {sys.version.split()[0]}"
        )
    ext_modules.append(Extension("tracer._eval_frame", ["tracer/_eval_frame.c"]))

# The guard engine (guards/_fastcheck*.c): optional at run time (guards/fastpath.py falls back
# to the generated Python check without it), built for CPython 3.11-3.13.
if os.path.exists(os.path.join(os.path.dirname(os.path.abspath(__file__)), "guards", "_fastcheck.c")) \
        and (3, 11) <= sys.version_info[:2] <= (3, 13):
    ext_modules.append(Extension("guards._fastcheck", ["guards/_fastcheck.c", "guards/_fastcheck_capture.c"],
                                 depends=["guards/_fastcheck.h"]))

setup(ext_modules=ext_modules)
