"""Kernel status codes of a step or a state evaluation turned into typed exceptions that
name model elements (:func:`raise_for_status`)."""

from __future__ import annotations

import numpy as np

from workbench.compiled.dof import near_null_joints, suggest_dof
from workbench.errors import (AssemblyError, NewtonConvergenceError, NonFiniteError,
                              SingularConfigurationError)
from workbench.formulations.semirecursive import matrixr as MR


def _value(cm, v):
    """A numeric field of a model element (a number or a parameter name), else None."""
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str) and v in cm.param_names:
        return float(cm.param_values[cm.param_names.index(v)])
    return None


def stiffness_hint(cm, dt) -> str:
    """A note naming the stiffest spring when its period sqrt(m/k) 2 pi is far shorter
    than the time step ``dt`` (the implicit step then diverges and the position problem
    that follows fails, which would otherwise be blamed), else ''."""
    if dt is None:
        return ""
    worst = None
    model = getattr(cm, "model", None)
    for sp in (getattr(model, "springs", None) or {}).values():
        k = _value(cm, sp.k)
        masses = [_value(cm, model.bodies[b].mass) for b in (sp.body1, sp.body2)
                  if b in model.bodies and b != "ground"]
        masses = [m for m in masses if m is not None and m > 0]
        if k is None or k <= 0 or not masses:
            continue
        period = 2 * np.pi * np.sqrt(min(masses) / k)
        if worst is None or period < worst[0]:
            worst = (period, sp.name, k, min(masses))
    if worst is None or worst[0] > dt / 10:
        return ""
    return (f"; note: spring {worst[1]!r} (k = {worst[2]:.3g} N/m on a body of "
            f"{worst[3]:.3g} kg) has a period of {worst[0]:.2g} s, far shorter than the time "
            f"step {dt:g} s: check its stiffness, or reduce the time step")


def raise_for_status(cm, status: int, time: float, value: float, bad: int, context: str,
                     z=None, dt=None):
    """Translate a kernel status code into a typed exception naming model elements.

    ``z``: the last accepted configuration of a run (used to name the joints of a
    near-singular configuration); ``dt``: the run's time step (for the note of
    :func:`stiffness_hint` on a failed step)."""
    if status == MR.OK:
        return
    if status == MR.ST_NEAR_SINGULAR:
        joints = near_null_joints(cm, z) if z is not None else []
        if not joints:
            joints = cm.joints_of_coordinates([bad])
        better = suggest_dof(cm, z) if z is not None else []
        if better is None:
            better = []
            hint = ("; the constraint Jacobian Phi_z itself loses rank there (a singular "
                    "position of the mechanism)")
        elif better:
            hint = (f"; the coordinates {better} determine the configuration there: choose "
                    "them with Model.dof(...) or 'dof' in the model file")
        else:
            hint = ""
        raise SingularConfigurationError(
            f"{context}: the step cannot be completed next to a singular configuration: "
            f"the leading matrix Theta_z = [Phi_z; B] is near-singular (sigma_min/sigma_max "
            f"~ {value:.1e} < {MR.SING_DIAG:g} at the last accepted state; joints: "
            f"{', '.join(joints)}); the degrees of freedom {list(cm.dof_names)} do not "
            f"determine the motion through it (singular position such as a dead point, or a "
            f"poor choice of degrees of freedom){hint}", time, joints, better)
    if status == MR.ST_SINGULAR:
        joints = cm.joints_of_coordinates([bad])
        raise SingularConfigurationError(
            f"{context}: the leading matrix Theta_z = [Phi_z; B] is singular at coordinate "
            f"{cm.coord_names[bad] if 0 <= bad < cm.n else bad!r} (joints: {', '.join(joints)}); "
            f"the degrees of freedom {list(cm.dof_names)} do not determine the configuration "
            f"(singular position or a poor choice of degrees of freedom)", time, joints)
    if status == MR.ST_POSITION:
        raise AssemblyError(
            f"{context}: the position problem did not converge (max |Phi| = {value:.3g}); "
            f"closure constraints: {sorted(set(cm.constraint_names))}"
            f"{stiffness_hint(cm, dt)}", time, value,
            sorted(set(cm.constraint_names)))
    if status == MR.ST_NEWTON:
        raise NewtonConvergenceError(
            f"{context}: Newton-Raphson of the trapezoidal step did not converge "
            f"(residual {value:.3g}); reduce the time step{stiffness_hint(cm, dt)}", time,
            value)
    if status == MR.ST_NONFINITE:
        raise NonFiniteError(f"{context}: a NaN or infinite value appeared (model "
                             f"{cm.name!r})", time)
    if status == MR.ST_ZERO_SPRING:
        name = cm.spring_names[bad] if 0 <= bad < len(cm.spring_names) else f"#{bad}"
        raise NonFiniteError(
            f"{context}: spring {name!r} has zero length (its two end points coincide), so "
            f"the direction of its force T (x2 - x1) / L is undefined (0/0); move one of its "
            f"end points", time, element=name)
    if status == MR.ST_MASS:
        raise SingularConfigurationError(
            f"{context}: the projected mass matrix R^T M R is singular (a degree of freedom "
            f"without inertia?) in model {cm.name!r}", time, [])
    raise RuntimeError(f"unknown kernel status {status}")

