"""Vehicle templates (issue 24): a compact vehicle description -> an ordinary model::

    from workbench.model.vehicle import build_vehicle
    model = build_vehicle(spec, parameters=params)     # spec: the [vehicle] table

The description format, the templates and the names they generate: docs/vehicle-templates.md;
the expansion itself: :mod:`workbench.model.vehicle_templates`.  In a model file the same
description is a ``[vehicle]`` section (``workbench/model/data/buggy-template.toml``,
``coach-template.toml``).
"""

from __future__ import annotations

from typing import Any

from workbench.model.builder import Model
from workbench.model.files import model_from_dict
from workbench.model.vehicle_templates import (STEERINGS, SUSPENSIONS, expand_document,
                                               expand_vehicle)

__all__ = ["build_vehicle", "expand_vehicle", "expand_document", "SUSPENSIONS", "STEERINGS"]


def build_vehicle(spec: dict, parameters: dict | None = None, source: str = "<vehicle>",
                  **document: Any) -> Model:
    """A :class:`~workbench.model.Model` from a vehicle description.

    ``spec`` is the ``[vehicle]`` table (a dict), or a whole model document with a
    ``"vehicle"`` key; ``parameters`` the parameter tables (``{name: {"value": ..,
    "unit": .., "provenance": ..}}`` or ``{name: value}``); ``document`` further sections
    of the model-file format (``model={...}``, ``road={...}``, ``objectives={...}``, extra
    ``springs=[...]``).  Errors name the element and the key (:class:`ModelError`)."""
    data = dict(spec) if "vehicle" in spec else {"vehicle": spec}
    if parameters is not None:
        data["parameters"] = parameters
    data.update(document)
    return model_from_dict(data, source=source, default_name="vehicle")
