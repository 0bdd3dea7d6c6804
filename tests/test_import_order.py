"""Every module of the installed packages can be the first one a program imports.

The import graph has no cycles among modules (tests/test_architecture.py), but a package face
(``__init__.py``) that imports a module above the layer of its own submodules would still
close a cycle at run time, through the face that Python runs before any of its submodules
(e.g. ``workbench/model/__init__.py`` importing the builder, which imports the compiled layer,
which imports ``workbench.model.elements``).  Each module is imported first in a fresh
interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _modules():
    for pkg in ("workbench", "components", "studies"):
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = path.relative_to(ROOT).with_suffix("")
            parts = list(rel.parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            yield ".".join(parts)


def _import_first(mod):
    out = subprocess.run([sys.executable, "-c", f"import {mod}"], capture_output=True,
                         text=True, cwd=ROOT, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    return mod, out.returncode, out.stderr.strip().splitlines()[-1:] if out.returncode else []


def test_every_module_imports_first_in_a_fresh_interpreter():
    mods = list(_modules())
    assert len(mods) > 40
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(_import_first, mods))
    failed = [(m, err) for m, rc, err in results if rc != 0]
    assert not failed, failed
