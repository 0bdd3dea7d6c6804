"""numba's on-disk cache of the workbench kernels, stamped with the whole package's sources.

numba keys each cached function by the file it is defined in (a hash of that file).  The
machine code it stores also holds every compiled function it calls or inlines from *other*
files and the module constants it read there, so an edit of such a file left the callers'
entries valid: after a ``git pull`` into an editable install (the README's install) a run
could mix old and new code.  Seen on 2026-11-27: a changed layout of the kept states,
written by new code and read by cached old code, ended in a segmentation fault; a changed
constant would have given wrong numbers silently.

Here every cache entry of the package carries one stamp instead: a hash of the package's
numerical sources (:func:`source_fingerprint`: every ``.py`` file outside ``workbench/apps``,
and the files of ``workbench/apps`` that compile kernels of their own).  Any change of them
makes every entry stale, and numba compiles again (``workbench warm`` does it ahead of use);
a change of the applications alone (CLI, reports, templates) keeps the cache.  The
entries stay where numba puts them (``__pycache__`` beside the sources, ``NUMBA_CACHE_DIR``
when set, else the user-wide cache) and are overwritten in place, so nothing accumulates.
Functions outside the package (a user's own kernels) keep numba's own locators.

The locators are numba's own classes with one method replaced
(:meth:`_PackageStamp.get_source_stamp`), put in front of numba's list of locators
(``numba.core.caching.CacheImpl._locator_classes``, named ``_CacheImpl`` in older
numba releases; numba's order: user-provided directory, in-tree ``__pycache__``,
user-wide).
"""

from __future__ import annotations

import hashlib
import os
from functools import lru_cache

from numba.core import caching as _caching

_PKG = os.path.dirname(os.path.abspath(__file__))
_APPS = os.path.join(_PKG, "apps")


def _compiles(path: str) -> bool:
    with open(path, "rb") as fh:
        text = fh.read()
    return b"njit" in text


def _numerical(path: str) -> bool:
    """``path`` is one of the sources the stamp covers (see the module docstring)."""
    path = os.path.abspath(path)
    if not path.startswith(_PKG + os.sep) or not path.endswith(".py"):
        return False
    return not path.startswith(_APPS + os.sep) or _compiles(path)


@lru_cache(maxsize=1)
def source_fingerprint() -> str:
    """SHA-256 of the package's numerical sources (relative path and content of each, in a
    fixed order); read once per process (~1.5 MB)."""
    h = hashlib.sha256()
    for root, dirs, files in os.walk(_PKG):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith("."))
        for name in sorted(files):
            path = os.path.join(root, name)
            if _numerical(path):
                h.update(os.path.relpath(path, _PKG).replace(os.sep, "/").encode())
                h.update(b"\0")
                with open(path, "rb") as fh:
                    h.update(fh.read())
                h.update(b"\0")
    return h.hexdigest()


class _PackageStamp:
    """Mixin: locate only the package's functions and stamp them with
    :func:`source_fingerprint` instead of their own file's hash."""

    @classmethod
    def from_function(cls, py_func, py_file):
        if not _numerical(py_file):
            return None
        return super().from_function(py_func, py_file)

    def get_source_stamp(self):
        return ("workbench-sources", source_fingerprint())


class PackageUserProvidedLocator(_PackageStamp, _caching.UserProvidedCacheLocator):
    """``NUMBA_CACHE_DIR`` set: there, stamped with the package's sources."""


class PackageInTreeLocator(_PackageStamp, _caching.InTreeCacheLocator):
    """``__pycache__`` beside the sources (writable), stamped with the package's sources."""


class PackageUserWideLocator(_PackageStamp, _caching.UserWideCacheLocator):
    """The user-wide cache directory (read-only sources), stamped with the package's
    sources."""


LOCATORS = (PackageUserProvidedLocator, PackageInTreeLocator, PackageUserWideLocator)


def install() -> bool:
    """Put :data:`LOCATORS` in front of numba's locators (once per process; before any
    kernel of the package is defined).  Returns False, changing nothing, on a numba
    without that list (the cache then keeps numba's per-file stamps)."""
    impl = getattr(_caching, "CacheImpl", None) or getattr(_caching, "_CacheImpl", None)
    classes = getattr(impl, "_locator_classes", None)
    if not isinstance(classes, list):
        return False
    if LOCATORS[0] not in classes:
        classes[0:0] = list(LOCATORS)
    return True
