"""The shipped models (files in ``workbench/model/data/``).

>>> from workbench import catalog
>>> catalog.names()
['bricard', 'buggy-dlc', 'buggy-step', 'buggy-template', 'cam-follower', 'coach',
 'coach-template', 'five-bar', 'four-bar-grid', 'n-four-bar', 'pendulum', 'point-to-line',
 'quick-return', 'sedan', 'sedan-slalom', 'slider-crank', 'spatial-four-bar']
>>> model = catalog.load("n-four-bar", N=4)      # generator option
>>> model = catalog.load("five-bar", mA1=3.5)    # parameter value (in its own unit)

Each model file carries the provenance of every value (see :mod:`workbench.model.files`);
``describe(name)["reconstruction"]`` is true for models rebuilt from incomplete published
descriptions (not the official benchmark data).
"""

from __future__ import annotations

from pathlib import Path

from workbench.errors import UnknownNameError
from workbench.model.builder import Model
from workbench.model.elements import GROUND
from workbench.model.files import GENERATORS, load_model

MODELS_DIR = Path(__file__).resolve().parent / "data"
_SUFFIXES = (".toml", ".json")


def _files() -> dict[str, Path]:
    out: dict[str, Path] = {}
    if MODELS_DIR.is_dir():
        for f in sorted(MODELS_DIR.iterdir()):
            if f.suffix in _SUFFIXES and f.is_file() and f.stem not in out:
                out[f.stem] = f
    return out


def names() -> list[str]:
    """Names of the shipped models, sorted."""
    return sorted(_files())


def path(name: str) -> Path:
    """Path of the file of the shipped model ``name``."""
    files = _files()
    if name not in files:
        raise UnknownNameError("model", name, files)
    return files[name]


def load(name: str, **options) -> Model:
    """Build the shipped model ``name``.

    ``options`` are generator options (``N`` for ``n-four-bar``) or parameter values in the
    parameter's own unit; an unknown option raises :class:`~workbench.errors.ModelError`
    listing the known ones.
    """
    return load_model(path(name), **options)


def describe(name: str) -> dict:
    """Summary of a shipped model: name, title, description, provenance, sizes, flags."""
    model = load(name)
    meta = dict(model.meta)
    gen = meta.pop("generator", None)
    info = {
        "name": name,
        "title": meta.get("title", model.name),
        "description": model.description,
        "provenance": model.provenance,
        "reconstruction": bool(meta.get("reconstruction", False)),
        "bodies": sum(1 for b in model.bodies if b != GROUND),
        "joints": len(model.joints),
        "cuts": len(model.cuts),
        "planar": model.planar,
        "parameters": {p.name: {"value": p.value, "unit": p.unit, "provenance": p.provenance}
                       for p in model.parameters.values()},
        "options": ({k: gen[k] for k in GENERATORS[gen["kind"]][1] if k in gen}
                    if gen else {}),
        "t_end": meta.get("t_end"),
        "dt": meta.get("dt"),
        "meta": meta,
        "path": str(path(name)),
    }
    return info


def as_compiled(model, parameters: dict | None = None):
    """A :class:`~workbench.compiled.CompiledModel` from a builder, a compiled model or the
    name of a shipped model; ``parameters`` (values in each parameter's own unit) override
    the design."""
    if isinstance(model, Model):
        return model.compile(parameters or {})
    if isinstance(model, str):
        return load(model).compile(parameters or {})
    if parameters:
        return model.with_parameters(parameters)
    return model
