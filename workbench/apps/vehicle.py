"""Vehicle maneuvers: start a vehicle model from static equilibrium, rolling without slip,
and the ISO 3888-1 double-lane-change geometry.  The maneuvers themselves (ISO 3888-1/-2,
slalom, sine steer, step steer, constant radius) are data: :func:`maneuver` (defined in
:mod:`workbench.maneuvers`, docs/maneuvers.md) applies one to any vehicle model with a
driven steering coordinate.

A maneuver file (``workbench/model/data/buggy-step.toml``, ``buggy-dlc.toml``) declares
``initial_state = "equilibrium"`` in ``[model.meta]``; :func:`prepare` then returns a copy
of the model whose initial coordinates are the static equilibrium of the NOMINAL design
(:func:`workbench.statics.at_equilibrium`); the file's initial velocities make every tire
roll without slip at the initial forward speed (``v0 / R_w``).  These
initial values are data of the maneuver: they are held fixed when a design parameter is
perturbed (also by the finite differences), so every gradient method differentiates the
same map rho -> psi(rho) from the same initial state.
"""

from __future__ import annotations

import copy

from workbench.errors import ModelError, UnknownNameError
from workbench.maneuvers import MANEUVERS, maneuver, path_radius, steering_geometry
from workbench.model.builder import Model
from workbench.model.catalog import load
from workbench.statics import at_equilibrium


def prepare(model, parameters: dict | None = None) -> Model:
    """The maneuver's start: static equilibrium of the positions (if
    ``meta.initial_state`` says so); the initial velocities are the file's (forward speed
    ``v0`` and wheel spins ``v0 / R_w``: the contact law evaluates the slip at the lowest
    point of the rigid disc, at the unloaded radius ``R_w``, so that is rolling without
    slip).  ``model`` is a Model or a shipped
    model name; ``parameters`` override values (own units) before the equilibrium (for a
    name they are applied at load time, so initial conditions such as ``x0`` follow; for
    a Model only the numeric fields change)."""
    if isinstance(model, Model):
        m = copy.deepcopy(model)
        for name, value in (parameters or {}).items():
            if name not in m.parameters:
                raise UnknownNameError("parameter", name, m.parameters)
            m.parameters[name].value = float(value)
    else:
        m = load(model, **(parameters or {}))        # load-time values (x0, v0) follow
    if str(m.meta.get("initial_state", "")).startswith("equilibrium"):
        m = at_equilibrium(m)
    return m


def iso3888_1_lanes(model: Model) -> list[dict]:
    """The three gated sections of the ISO 3888-1 double lane change for the vehicle
    width and course start declared by the model's parameters ``dlc_width``, ``dlc_x0``
    (start of section 1) and ``dlc_offset`` (lateral offset 3.5 m): a list of ``{x0, x1,
    y_left, y_right}`` (m, course frame: x forward, y left, section 1 centred on y = 0).

    Geometry (ISO 3888-1:1999 as implemented in Project Chrono's
    ``demo_VEH_HMMWV_DoubleLaneChange``, ``ISO3888_Helper``): section 1 15 m long and
    ``1.1 b + 0.25`` wide; 30 m transition; section 3 25 m long, ``1.2 b + 0.25`` wide, its
    right boundary ``dlc_offset`` left of the centre line of section 1; 25 m transition;
    section 5 15 m long, ``1.3 b + 0.25`` wide, its right boundary on that of section 1.
    """
    P = {nm: p.si_value for nm, p in model.parameters.items()}
    missing = [k for k in ("dlc_width", "dlc_x0", "dlc_offset") if k not in P]
    if missing:
        raise ModelError(f"model {model.name!r}: the ISO 3888-1 course needs the parameters "
                         f"{', '.join(missing)}")
    b, x0, ofs = P["dlc_width"], P["dlc_x0"], P["dlc_offset"]
    wa, wb, wc = 1.1 * b + 0.25, 1.2 * b + 0.25, 1.3 * b + 0.25
    xa = x0
    xb = xa + 15.0 + 30.0
    xc = xb + 25.0 + 25.0
    return [
        {"x0": xa, "x1": xa + 15.0, "y_left": wa / 2, "y_right": -wa / 2},
        {"x0": xb, "x1": xb + 25.0, "y_left": ofs + wb, "y_right": ofs},
        {"x0": xc, "x1": xc + 15.0, "y_left": -wa / 2 + wc, "y_right": -wa / 2},
    ]


__all__ = ["prepare", "iso3888_1_lanes", "maneuver", "steering_geometry", "path_radius",
           "MANEUVERS"]
