"""Formulations behind one seam (:mod:`~workbench.formulations.interface`): the
semi-recursive Matrix-R formulation with both reference points
(:mod:`~workbench.formulations.semirecursive`), the global Matrix-R formulation in natural
coordinates and its coordinate-partitioning variant (:mod:`~workbench.formulations.natural`)
the closures by Lagrange multipliers (:mod:`~workbench.formulations.multipliers`), by
penalty forces (:mod:`~workbench.formulations.penalty`, seed 003) and by recursive
coordinate reduction (:mod:`~workbench.formulations.rcr`, seed 004).

:data:`REGISTRY` maps each formulation name to its
:class:`~workbench.formulations.interface.Formulation`; :func:`get` resolves a name with a
typed error."""

from __future__ import annotations

from workbench.errors import ModelError
from workbench.formulations.interface import (FORM_COM, FORM_GLOBAL, FORM_ORIGIN, POS_MAXIT,
                                              POS_TOL, Formulation)
from workbench.formulations.multipliers import MULT_COM, MULT_ORIGIN
from workbench.formulations.natural import NATURAL, PARTITIONED
from workbench.formulations.penalty import PENALTY
from workbench.formulations.rcr import RCR
from workbench.formulations.semirecursive import SR_COM, SR_ORIGIN

#: every formulation by name
REGISTRY: dict[str, Formulation] = {f.name: f for f in (SR_COM, SR_ORIGIN, NATURAL, PARTITIONED,
                                                        MULT_COM, MULT_ORIGIN, PENALTY, RCR)}


class UnknownFormulationError(ModelError, ValueError):
    """A formulation name that is not registered."""


def get(name: str) -> Formulation:
    """The formulation registered under ``name`` (:class:`UnknownFormulationError` naming the
    choices otherwise)."""
    if name not in REGISTRY:
        raise UnknownFormulationError(
            f"unknown formulation {name!r}; choose one of {sorted(REGISTRY)}")
    return REGISTRY[name]


def formulation_code(name: str) -> int:
    """The integer code of formulation ``name`` passed to the numba kernels."""
    return get(name).code


__all__ = ["REGISTRY", "Formulation", "get",
           "formulation_code", "POS_TOL", "POS_MAXIT", "FORM_COM", "FORM_ORIGIN",
           "FORM_GLOBAL", "UnknownFormulationError"]
