"""Static equilibrium: the independent coordinates ``z^i`` at which the projected
generalised forces vanish with zero velocities, ``Qbar(z^i) = R^T Q(z(z^i), 0) = 0``.

>>> import workbench as wb
>>> eq = wb.equilibrium("buggy-step")                 # EquilibriumResult
>>> eq.zi, eq.residual, eq.iterations
>>> start = wb.at_equilibrium(wb.catalog.load("buggy-step"))   # a Model starting there

Method
------
Damped Newton iteration on ``Qbar(z^i) = 0``.  Each iterate solves the position
problem (closure constraints) with :func:`workbench.kinematics.state_terms`, so
``Qbar`` is exact.  The Newton matrix is the projected stiffness of the force elements,
``Kbar = R^T K R`` with ``K`` from :func:`workbench._matrixr.force_jacobians` (springs,
joint springs and the tires' analytic contact stiffness); it omits the geometric
stiffness (configuration dependence of ``R``, of gravity's lever arms and of the
elements' Jacobians), so the iteration converges linearly, typically by several orders
of magnitude per step on a vehicle whose stiffness is dominated by springs and tires.
Directions without stiffness (e.g. the horizontal position, the heading and the wheel
spins of a vehicle on flat ground, where ``Qbar`` is identically zero) are left
unchanged: the step is the minimum-norm least-squares solution of ``Kbar dz^i = Qbar``.
The step is scaled down to at most ``MAX_STEP`` per coordinate and then halved until the
2-norm of ``Qbar`` decreases.  No finite differences.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np

from . import _kernels as K
from . import _matrixr as MR
from .errors import (AssemblyError, NewtonConvergenceError, SingularConfigurationError)
from .kinematics import state_terms
from .model import Model

#: default tolerance on max |Qbar|, relative to the total weight of the model (N)
REL_TOL = 1e-10
#: largest change of any independent coordinate in one Newton step (m or rad)
MAX_STEP = 0.02


@dataclass
class EquilibriumResult:
    """Static equilibrium of a model.

    Attributes
    ----------
    z : ndarray (n,)
        All relative coordinates at equilibrium.
    zi : ndarray (d,)
        The independent coordinates (degrees of freedom) at equilibrium.
    residual : float
        ``max |Qbar|`` at the solution (N or N*m, per coordinate).
    iterations : int
        Newton iterations.
    Q_bar : ndarray (d,)
        Projected generalised forces at the solution.
    tolerance : float
        The tolerance on ``residual`` that was met.
    """

    model: str
    z: np.ndarray
    zi: np.ndarray
    residual: float
    iterations: int
    Q_bar: np.ndarray
    tolerance: float
    dof_names: tuple
    coord_names: tuple
    history: list = field(default_factory=list, repr=False)

    def summary(self) -> dict:
        return {"model": self.model, "residual": self.residual,
                "tolerance": self.tolerance, "iterations": self.iterations,
                "zi": {nm: float(v) for nm, v in zip(self.dof_names, self.zi)},
                "z": {nm: float(v) for nm, v in zip(self.coord_names, self.z)},
                "residual_history": list(self.history)}


def _compiled(model, parameters=None):
    if isinstance(model, Model):
        return model.compile(parameters or {})
    if isinstance(model, str):
        from .catalog import load
        return load(model).compile(parameters or {})
    if parameters:
        return model.with_parameters(parameters)
    return model


def total_weight(cm) -> float:
    """``sum m |g|`` over the bodies (the force scale of the tolerance)."""
    ma = cm.arrays
    g = float(np.linalg.norm(ma.gravity))
    return float(sum(ma.p[ma.b_mass[b]] for b in range(ma.b_mass.shape[0]))) * g


def projected_stiffness(cm, t, z, R):
    """``Kbar = R^T K R`` with the force-element stiffness ``K`` at zero velocity."""
    ma = cm.arrays
    n = cm.n
    ws = MR.make_workspace(ma, n)
    A, r, u, bcol = ws[0], ws[1], ws[2], ws[3]
    K.frame_positions(ma, ma.p, z, A, r, u)
    K.joint_columns(ma, r, u, bcol)
    Kd = np.zeros((n, n))
    Cd = np.zeros((n, n))
    MR.force_jacobians(ma, ma.p, float(t), z, np.zeros(n), ws, n, Kd, Cd)
    return R.T @ Kd @ R


def exact_stiffness(cm, t, zi, z, formulation="sr-com"):
    """Exact ``Kbar = -dQbar/dz^i`` at zero velocity: the ``dr/dZ`` block of the exact step
    Jacobians (:func:`workbench._sens.step_jacobians` with ``a = 0``, ``zd^i = 0``), which
    includes the geometric stiffness (configuration dependence of ``R``, ``M`` and of the
    elements' Jacobians) that :func:`projected_stiffness` omits."""
    from . import _sens as S
    from .kinematics import formulation_code
    ma = cm.arrays
    d = cm.d
    i64 = np.zeros(0, dtype=np.int64)
    Jr = np.zeros((d, 2 * d))
    Mb = np.zeros((d, d))
    n = z.shape[0]
    st = S.step_jacobians(ma, ma.p, formulation_code(formulation), float(t),
                          np.asarray(zi, float), np.zeros(d), np.zeros(d), z.copy(),
                          np.zeros((ma.p.shape[0], 0)), i64, i64, i64, i64, i64, Jr, Mb,
                          np.zeros((0, 3 * d)), np.zeros(0), np.zeros((n, d)), np.zeros(n),
                          np.zeros(n))
    if st != MR.OK:
        return None
    return Jr[:, :d]


def equilibrium(model, t: float = 0.0, formulation: str = "sr-com", tol: float | None = None,
                maxit: int = 100, parameters: dict | None = None,
                max_step: float = MAX_STEP) -> EquilibriumResult:
    """Static equilibrium of ``model`` (a Model, CompiledModel or shipped-model name),
    starting from its initial coordinates; see the module docstring.

    ``tol`` bounds ``max |Qbar|`` (default ``1e-10`` times the total weight, at least
    1e-10).  ``parameters`` overrides parameter values (in their own units).
    ``max_step`` caps the change of every independent coordinate per step (m or rad; a
    trust region for starts far from equilibrium, e.g. tires not yet touching the road,
    where the linearisation misses the ground).

    Raises :class:`~workbench.errors.NewtonConvergenceError` (naming the model) when the
    iteration stalls or exceeds ``maxit``, and the position-problem errors of
    :func:`~workbench.kinematics.state_terms`.
    """
    cm = _compiled(model, parameters)
    d = cm.d
    zeros = np.zeros(d)
    if tol is None:
        tol = REL_TOL * max(1.0, total_weight(cm))
    zi = np.array(cm.zi0, dtype=float)
    st = state_terms(cm, t, zi, zeros, cm.z_guess, formulation)
    Qb = st.Q_bar
    history = [float(np.max(np.abs(Qb))) if d else 0.0]
    it = 0
    while history[-1] > tol:
        if it >= maxit:
            raise NewtonConvergenceError(
                f"static equilibrium of model {cm.name!r}: no convergence in {maxit} "
                f"iterations (max |Qbar| = {history[-1]:.3g}, tolerance {tol:.3g})", t,
                history[-1], it)
        it += 1
        norm0 = float(np.linalg.norm(Qb))
        trial = lam = step = None
        for kind in ("exact", "projected"):
            Kb = (exact_stiffness(cm, t, zi, st.z, formulation) if kind == "exact"
                  else projected_stiffness(cm, t, st.z, st.R))
            if Kb is None:
                continue
            step = np.linalg.lstsq(Kb, Qb, rcond=1e-12)[0]
            big = float(np.max(np.abs(step))) if d else 0.0
            if big > max_step:
                step *= max_step / big
            lam = 1.0
            while lam >= 1e-8:
                try:
                    cand = state_terms(cm, t, zi + lam * step, zeros, st.z, formulation)
                    if float(np.linalg.norm(cand.Q_bar)) < norm0:
                        trial = cand
                        break
                except (AssemblyError, SingularConfigurationError):
                    pass
                lam *= 0.5
            if trial is not None:
                break
        if trial is None:
            raise NewtonConvergenceError(
                f"static equilibrium of model {cm.name!r}: the damped Newton step "
                f"does not reduce the residual (max |Qbar| = {history[-1]:.3g}) after "
                f"{it} iterations", t, history[-1], it)
        zi = zi + lam * step
        st = trial
        Qb = st.Q_bar
        history.append(float(np.max(np.abs(Qb))))
    return EquilibriumResult(model=cm.name, z=st.z.copy(), zi=zi, residual=history[-1],
                             iterations=it, Q_bar=Qb.copy(), tolerance=float(tol),
                             dof_names=cm.dof_names, coord_names=cm.coord_names,
                             history=history)


def at_equilibrium(model: Model, parameters: dict | None = None,
                   **kwargs) -> Model:
    """A copy of ``model`` whose initial coordinates (``q0`` of every joint, hence the
    initial values of the degrees of freedom) are its static equilibrium; initial
    velocities are unchanged.  ``parameters`` (values in their own units) are applied to
    the copy first; ``kwargs`` go to :func:`equilibrium`.  The copy's
    ``meta["equilibrium"]`` records the residual and the iterations."""
    out = copy.deepcopy(model)
    for name, value in (parameters or {}).items():
        if name not in out.parameters:
            from .errors import UnknownNameError
            raise UnknownNameError("parameter", name, out.parameters)
        out.parameters[name].value = float(value)
    cm = out.compile()
    eq = equilibrium(cm, **kwargs)
    pos = {nm: k for k, nm in enumerate(cm.coord_names)}
    from .model import _COORD_SUFFIX
    for j in out.joints.values():
        j.q0 = [float(eq.z[pos[j.name + sfx]]) for sfx in _COORD_SUFFIX[j.type]]
    if out.meta.get("initial_state") == "equilibrium":
        out.meta["initial_state"] = "equilibrium (applied)"
    out.meta["equilibrium"] = {"residual": eq.residual, "iterations": eq.iterations,
                               "tolerance": eq.tolerance}
    return out


__all__ = ["EquilibriumResult", "equilibrium", "at_equilibrium"]
