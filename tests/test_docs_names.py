"""The equation -> function table of docs/formulations.md names functions that exist: every
dotted ``workbench...`` name in a backtick span resolves by import and attribute lookup, and
every bare name listed after it in the same cell exists in that module."""

from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "formulations.md"


def _resolve(dotted: str):
    parts = dotted.split(".")
    for k in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:k]))
        except ImportError:
            continue
        for attr in parts[k:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(dotted)


def test_every_function_named_in_the_formulations_doc_exists():
    text = DOC.read_text()
    names = set(re.findall(r"`(workbench(?:\.\w+)+)`", text))
    assert len(names) > 20          # the table is there
    missing = []
    for dotted in sorted(names):
        try:
            _resolve(dotted)
        except (ImportError, AttributeError):
            missing.append(dotted)
    assert not missing, missing


def test_short_names_in_the_equation_table_exist_in_their_module():
    """A cell such as ``matrixr.solve_velocity_acceleration`` or a bare name following a
    fully qualified one in the same cell names a function of that module."""
    text = DOC.read_text()
    missing = []
    for line in text.splitlines():
        if not line.startswith("|") or "workbench." not in line:
            continue
        cell = line.rstrip("|").split("|")[-1]
        module = None
        for token in re.findall(r"`([\w.]+)`", cell):
            if token.startswith("workbench."):
                obj = _resolve(token)
                module = importlib.import_module(obj.__module__) if callable(obj) else obj
                continue
            if module is None:
                continue
            head, _, name = token.rpartition(".")
            if head:
                # ``matrixr.name``: a sibling module of the same package family
                mods = [m for m in (
                    "workbench.formulations.semirecursive." + head,
                    "workbench.formulations.natural." + head,
                    "workbench.kernels." + head)
                    if importlib.util.find_spec(m) is not None]
                if not mods or not hasattr(importlib.import_module(mods[0]), name):
                    missing.append(token)
                else:
                    module = importlib.import_module(mods[0])   # bare names that follow
            elif not hasattr(module, token):
                missing.append(f"{module.__name__}.{token}")
    assert not missing, missing
