"""CPython 3.15: what changed from 3.14 (everything else is inherited from ``py314``).

Checked against 3.15.2's ``dis``. (Filled in as the port goes; see issue 31.)
"""
from __future__ import annotations

from . import py314
from .py314 import *  # noqa: F401,F403
from .py314 import _i, _SHAPES  # noqa: F401

ALIASES = py314.ALIASES
normalize = py314.normalize
