"""Static equilibrium: the independent coordinates ``z^i`` at which the projected
generalised forces vanish with zero velocities, ``Qbar(z^i) = R^T Q(z(z^i), 0) = 0``.

>>> import workbench as wb
>>> eq = wb.equilibrium("buggy-step")                 # EquilibriumResult
>>> eq.zi, eq.residual, eq.iterations
>>> start = wb.at_equilibrium(wb.catalog.load("buggy-step"))   # a Model starting there

Method
------
Damped Newton iteration on ``Qbar(z^i) = 0``.  Each iterate solves the position
problem (closure constraints) with :func:`workbench.formulations.semirecursive.state.state_terms`,
so
``Qbar`` is exact.  The Newton matrix is the projected stiffness of the force elements,
``Kbar = R^T K R`` with ``K`` from
:func:`workbench.formulations.semirecursive.matrixr.force_jacobians` (springs,
joint springs and the tires' analytic contact stiffness); it omits the geometric
stiffness (configuration dependence of ``R``, of gravity's lever arms and of the
elements' Jacobians), so the iteration converges linearly, typically by several orders
of magnitude per step on a vehicle whose stiffness is dominated by springs and tires.
Directions without stiffness (e.g. the horizontal position, the heading and the wheel
spins of a vehicle on flat ground, where ``Qbar`` is identically zero) are left
unchanged: the step is the minimum-norm least-squares solution of ``Kbar dz^i = Qbar``.
The step is scaled down to at most ``MAX_STEP`` per coordinate and then halved until the
2-norm of ``Qbar`` decreases.  No finite differences.

At rest (:func:`at_rest`) speed controllers (``Model.speed_control``) are switched off (a
controller measures zero speed there and would drive the free wheel spins with its full
torque) and drives are held at their value at ``t`` (a sine drive moves at ``t = 0``):
otherwise a vehicle with either, such as the coach, has no static equilibrium.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np

from workbench.compiled.parameters import (initial_sensitivities, kinematic_parameters,
                                           parameter_columns)
from workbench.errors import (AssemblyError, ModelError, NewtonConvergenceError,
                              SingularConfigurationError, UnknownNameError)
from workbench.formulations import formulation_code
from workbench.formulations import get as get_formulation
from workbench.formulations.semirecursive import matrixr as MR
from workbench.formulations.semirecursive import step_jacobians as S
from workbench.formulations.semirecursive.state import state_terms
from workbench.formulations.status import raise_for_status
from workbench.kernels import measures as MS
from workbench.kernels import tree as K
from workbench.model.builder import Model
from workbench.model.catalog import as_compiled
from workbench.model.elements import COORD_SUFFIX
from workbench.objectives import compile_objectives

#: default tolerance on max |Qbar|, relative to the total weight of the model (N)
REL_TOL = 1e-10
#: largest change of any independent coordinate in one Newton step (m or rad)
MAX_STEP = 0.02
# : measure codes of :mod:`workbench.formulations.semirecursive.step_jacobians` a static response
# may use (positions)
_STATIC_MEASURES = (MS.MS_POS, MS.MS_COORD)


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


def _rest_fields(cm, t: float) -> np.ndarray:
    """Fields of ``p`` that :func:`at_rest` sets to 0 at time ``t``: the gains of the speed
    controllers, and the coefficients that give a drive its velocity at ``t`` (the
    ``omega`` of a sine drive when ``t <= t_start``; the coefficients of ``t, t^2, ...``
    of a polynomial drive at ``t = 0``).  Zeroing them leaves every value at ``t`` (and its
    derivative with respect to every other field) unchanged: at ``t = t_start`` a sine is
    ``offset + amplitude sin(phase)`` whatever ``omega``, at ``t = 0`` a polynomial is its
    constant term.  Smoothstep and steps drives are at rest outside their transitions and
    are not changed."""
    from workbench.kernels import layout as AR
    ma = cm.arrays
    p = np.asarray(ma.p)
    out = [int(f) for f in np.asarray(ma.sc_fld)]
    c_type, c_i = np.asarray(ma.c_type), np.asarray(ma.c_i)
    for k in range(c_type.shape[0]):
        if c_type[k] != AR.C_DRIVE:
            continue
        tf = int(c_i[k, 1])
        kind, f0, nf = int(ma.tf_kind[tf]), int(ma.tf_fld[tf]), int(ma.tf_n[tf])
        if kind == AR.TF_SINE and t <= p[f0 + 4]:
            out.append(f0 + 1)
        elif kind == AR.TF_POLY and t == 0.0:
            out.extend(range(f0 + 1, f0 + nf))
    return np.array(sorted(set(out)), dtype=np.int64)


def at_rest(cm, t: float = 0.0):
    """``cm`` at rest at time ``t``: the model whose static equilibrium is sought.  A copy
    of the field vector with (:func:`_rest_fields`)

    * every speed controller switched off (gain 0, so its drive torque
      ``T_max tanh(K (v_set - v) / T_max)`` vanishes): a controller measures ``v = 0`` at
      rest and would otherwise apply its full torque to the free wheel spins, where nothing
      balances it (a parked vehicle's speed control is not engaged);
    * every drive held at its value at ``t`` where its time function would move it (a sine
      drive such as the coach's steering ``0.013 sin(pi t)`` has a rate at ``t = 0``, which
      makes the "static" state slide).

    Models with neither are returned unchanged."""
    fields = _rest_fields(cm, t)
    if fields.size == 0:
        return cm
    import dataclasses

    from workbench.kernels import layout as AR
    ma = cm.arrays
    p = np.array(ma.p, dtype=float, copy=True)
    p[fields] = 0.0
    return dataclasses.replace(cm, arrays=AR.with_fields(ma, p=p))


def _rest_columns(cm, Gm, t: float = 0.0):
    """The field x parameter map ``Gm`` with the rows of the fields that :func:`at_rest`
    zeroes set to 0 (at rest they are 0 whatever the parameters)."""
    fields = _rest_fields(cm, t)
    if fields.size == 0:
        return Gm
    Gm = np.array(Gm, dtype=float, copy=True)
    Gm[fields] = 0.0
    return Gm


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
    A, r, u, bcol = ws.A, ws.r, ws.u, ws.bcol
    K.frame_positions(ma, ma.p, z, A, r, u)
    K.joint_columns(ma, r, u, bcol)
    Kd = np.zeros((n, n))
    Cd = np.zeros((n, n))
    MR.force_jacobians(ma, ma.p, float(t), z, np.zeros(n), ws, n, Kd, Cd)
    return R.T @ Kd @ R


def exact_stiffness(cm, t, zi, z, formulation="sr-com"):
    """Exact ``Kbar = -dQbar/dz^i`` at zero velocity: the ``dr/dZ`` block of the exact step
    Jacobians (:func:`workbench.formulations.semirecursive.step_jacobians.step_jacobians` with ``a
    = 0``, ``zd^i = 0``), which
    includes the geometric stiffness (configuration dependence of ``R``, ``M`` and of the
    elements' Jacobians) that :func:`projected_stiffness` omits."""
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
    :func:`~workbench.formulations.semirecursive.state.state_terms`.
    """
    cm = at_rest(as_compiled(model, parameters), t)
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
            raise UnknownNameError("parameter", name, out.parameters)
        out.parameters[name].value = float(value)
    cm = out.compile()
    eq = equilibrium(cm, **kwargs)
    pos = {nm: k for k, nm in enumerate(cm.coord_names)}
    for j in out.joints.values():
        j.q0 = [float(eq.z[pos[j.name + sfx]]) for sfx in COORD_SUFFIX[j.type]]
    if out.meta.get("initial_state") == "equilibrium":
        out.meta["initial_state"] = "equilibrium (applied)"
    out.meta["equilibrium"] = {"residual": eq.residual, "iterations": eq.iterations,
                               "tolerance": eq.tolerance}
    return out


def _jacobians(cm, t, zi, z, Gm, co=None, formulation="sr-com"):
    """Exact ``Jr = [dr/dZ | dr/dV | dr/drho]`` of the step residual and
    ``Jm = dm/d[Z, V, A, rho]`` of the measures of ``co`` at the static state ``(zi, z)``
    (zero velocities and accelerations, so ``r = -Qbar``); also the measure values.
    Speed controllers are off and drives held at rest (:func:`at_rest`)."""
    Gm = _rest_columns(cm, Gm, t)
    cm = at_rest(cm, t)
    ma = cm.arrays
    d, n, npar = cm.d, z.shape[0], Gm.shape[1]
    i64 = np.zeros(0, dtype=np.int64)
    ms = (co.ms_type, co.ms_a, co.ms_c) if co is not None else (i64, i64, i64)
    nm = ms[0].shape[0]
    Jr = np.zeros((d, 2 * d + npar))
    Jm = np.zeros((nm, 3 * d + npar))
    mval = np.zeros(nm)
    st = S.step_jacobians(ma, ma.p, formulation_code(formulation), float(t),
                          np.asarray(zi, float), np.zeros(d), np.zeros(d), z.copy(),
                          np.ascontiguousarray(Gm, dtype=float), kinematic_parameters(cm, Gm),
                          np.zeros(npar, dtype=np.int64), *ms, Jr, np.zeros((d, d)), Jm,
                          mval, np.zeros((n, d)), np.zeros(n), np.zeros(n))
    if st != MR.OK:
        raise_for_status(cm, st, float(t), 0.0, -1,
                         f"model {cm.name!r}, derivatives at the static equilibrium")
    return Jr, Jm, mval


#: singular values of the exact stiffness below this fraction of the largest are treated
#: as the free directions of the equilibrium (horizontal position, heading, wheel spins)
STIFFNESS_RCOND = 1e-9


def equilibrium_sensitivity(cm, eq: EquilibriumResult, Gm, formulation="sr-com",
                            t: float = 0.0) -> np.ndarray:
    """``dz^i_eq / drho`` (d x np) of a static equilibrium by the implicit function theorem
    on ``Qbar(z^i, rho) = 0``: ``Kbar dz^i = dQbar/drho`` with the exact ``Kbar`` and
    ``dQbar/drho`` of :func:`workbench.formulations.semirecursive.step_jacobians.step_jacobians`
    (the ``r = Mbar a - Qbar``
    residual at ``a = 0``, zero velocities).  Free directions of the equilibrium (where
    ``Qbar`` vanishes identically, e.g. a vehicle's horizontal position, heading and wheel
    spins) get zero: the minimum-norm least-squares solution, matching
    :func:`equilibrium`, which leaves them at their starting values."""
    d = cm.d
    Jr, _, _ = _jacobians(cm, t, eq.zi, eq.z, Gm, None, formulation)
    return -np.linalg.lstsq(Jr[:, :d], Jr[:, 2 * d:], rcond=STIFFNESS_RCOND)[0]


def equilibrium_start(cm, Gm=None, formulation="sr-com"):
    """For a compiled model with ``initial_state == "equilibrium"``: a copy whose
    ``zi0``/``z_guess`` are the static equilibrium of ITS design (parameters included),
    and, when ``Gm`` (field x parameter map) is given, ``dz^i_0/drho`` of that start
    (:func:`equilibrium_sensitivity`), else None.  Other models are returned unchanged
    (with None).  Initial velocities are the model's."""
    import dataclasses
    if cm.initial_state != "equilibrium":
        return cm, None
    eq = equilibrium(cm, formulation=get_formulation(formulation).statics_formulation)
    out = dataclasses.replace(cm, zi0=eq.zi.copy(), z_guess=eq.z.copy(),
                              initial_state="equilibrium (solved)")
    SZ = None
    if Gm is not None:
        SZ = equilibrium_sensitivity(cm, eq, Gm,
                                     get_formulation(formulation).statics_formulation)
    return out, SZ


@dataclass
class StaticResult:
    """Static responses at the equilibrium of a design and their exact gradient.

    Attributes
    ----------
    responses, parameters, units : tuple of str
    values : ndarray (nr,)
        Each response: ``sum_k w_k m_k`` over its terms (``m_k`` a measure at equilibrium;
        ``relative`` terms minus the same measure in the model's given configuration).
    gradient : ndarray (nr, np)
        ``d values / d rho`` (per unit of each parameter), exact: the implicit-function
        derivative of the equilibrium (:func:`equilibrium_sensitivity`) chained with the
        measures' exact partials.
    equilibrium : EquilibriumResult
    """

    model: str
    responses: tuple
    parameters: tuple
    units: tuple
    values: np.ndarray
    gradient: np.ndarray
    equilibrium: EquilibriumResult
    method: str = "exact"

    def to_frame(self):
        import pandas as pd
        return pd.DataFrame([{"response": r, "parameter": p, "unit": u,
                              "value": self.values[k], "gradient": self.gradient[k, j]}
                             for k, r in enumerate(self.responses)
                             for j, (p, u) in enumerate(zip(self.parameters, self.units))])


def static_responses(model, responses, parameters=None, formulation: str = "sr-com",
                     method: str = "exact", fd_step: float = 1e-6) -> StaticResult:
    """Static responses of ``model`` at its static equilibrium and their gradient.

    Parameters
    ----------
    model : Model, CompiledModel or str
    responses : list of :class:`workbench.objectives.Objective`
        Each a sum of ``power = 1`` terms on position measures (point coordinates, joint
        coordinates), e.g. a suspension's static travel
        ``z(chassis.fl_coil_top) - z(fl_wheel.c)`` relative to the design configuration.
    parameters : list of str, optional
        Default: the model's ``design_parameters``.
    method : {"exact", "fd"}
        ``"fd"``: central differences of re-solved equilibria (a check, not a product
        path), relative step ``fd_step``.
    """
    cm = as_compiled(model)
    names, Gm, units = parameter_columns(cm, parameters)
    co = compile_objectives(cm, responses)
    if co.param_terms or np.any(co.power != 1.0):
        raise ModelError(f"model {cm.name!r}: static responses are linear in the measures "
                         "(power 1, no parameter terms)")
    bad = [int(c) for c in co.ms_type if c not in _STATIC_MEASURES]
    if bad:
        raise ModelError(f"model {cm.name!r}: static responses take positions and "
                         "coordinates only (no velocities, accelerations or angular rates)")
    nr, npar = len(co.names), len(names)

    def values_at(c):
        eq = equilibrium(c, formulation=get_formulation(formulation).statics_formulation)
        _, Jm, mval = _jacobians(c, 0.0, eq.zi, eq.z, Gm, co)
        _, Jm0, mval0 = _jacobians(c, 0.0, c.zi0, c.z_guess, Gm, co)
        m = mval - co.relative * mval0
        vals = np.zeros(nr)
        np.add.at(vals, co.term_obj, co.weight * m)
        return vals, eq, Jm, Jm0

    vals, eq, Jm, Jm0 = values_at(cm)
    d = cm.d
    if method == "exact":
        SZ = equilibrium_sensitivity(cm, eq, Gm)
        SZ0, _ = initial_sensitivities(cm, Gm)
        dm = Jm[:, :d] @ SZ + Jm[:, 3 * d:]
        dm0 = Jm0[:, :d] @ SZ0 + Jm0[:, 3 * d:]
        dm = dm - co.relative[:, None] * dm0
        grad = np.zeros((nr, npar))
        np.add.at(grad, co.term_obj, co.weight[:, None] * dm)
    elif method == "fd":
        base = dict(zip(cm.param_names, cm.param_values))
        grad = np.zeros((nr, npar))
        for j, nm in enumerate(names):
            delta = fd_step * max(abs(base[nm]), 1e-3)
            vp = values_at(cm.with_parameters({nm: base[nm] + delta}))[0]
            vm = values_at(cm.with_parameters({nm: base[nm] - delta}))[0]
            grad[:, j] = (vp - vm) / (2 * delta)
    else:
        raise ValueError(f"unknown method {method!r}; choose 'exact' or 'fd'")
    return StaticResult(model=cm.name, responses=co.names, parameters=names, units=units,
                        values=vals, gradient=grad, equilibrium=eq, method=method)


__all__ = ["EquilibriumResult", "equilibrium", "at_equilibrium", "equilibrium_start",
           "equilibrium_sensitivity", "StaticResult", "static_responses"]
