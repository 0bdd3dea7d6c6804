"""Forward dynamics: the implicit trapezoidal rule on the independent coordinates."""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time as _time
from dataclasses import dataclass, field

import numpy as np

from workbench.errors import OptionError, SingularConfigurationError
from workbench.formulations import POS_MAXIT, POS_TOL, formulation_code
from workbench.formulations import get as get_formulation
from workbench.formulations.natural import partition as PT
from workbench.formulations.natural.build import global_model
from workbench.formulations.penalty import kernels as PK
from workbench.formulations.penalty import sparsity as PS
from workbench.formulations.semirecursive import matrixr as MR
from workbench.formulations.status import raise_for_status
from workbench.integrators import trapezoidal as TZ
from workbench.integrators.result_kinematics import (angular_velocity_history,
                                                     constraint_force_history, point_history,
                                                     vector_history)
from workbench.model.catalog import as_compiled
from workbench.statics import equilibrium_start

NEWTON_TOL = 1e-10
NEWTON_MAXIT = 25


def energy_trend(t, E) -> float:
    """Secular change of an energy history: the slope of the least-squares straight line
    through ``(t, E)`` times the duration ``t[-1] - t[0]`` (signed, J).

    A bounded oscillation contributes at most about its amplitude times period/duration;
    a steady gain or loss, or a jump early in the run, shows up in full (a jump of size
    ``J`` at a fraction ``f`` of the run contributes ``6 f (1 - f) J``).
    """
    t = np.asarray(t, dtype=float)
    E = np.asarray(E, dtype=float)
    if len(t) < 2 or t[-1] == t[0]:
        return 0.0
    tc = t - t.mean()
    slope = float(np.dot(tc, E - E.mean()) / np.dot(tc, tc))
    return slope * float(t[-1] - t[0])


@dataclass
class SimulationResult:
    """Time history of a simulation (arrays have one row per output instant).

    Attributes
    ----------
    t : ndarray (N,)
    z, zd, zdd : ndarray (N, n)
        Relative coordinates, velocities and accelerations (all of them).
    zi, zdi, zddi : ndarray (N, d)
        Independent coordinates (degrees of freedom) and their derivatives.
    constraint_violation : ndarray (N,)
        ``max |Phi|`` after each step (position level).
    velocity_violation : ndarray (N,)
        ``max |Phi_z zd + Phi_t|`` after each step.
    newton_iterations : ndarray (N,)
        Newton iterations of each step (0 for the initial state).
    energy : ndarray (N,) or None
        Mechanical energy (kinetic + gravity + springs) when the model is conservative.
    step_kind : ndarray (N, 2) of int
        ``(span, nsub)`` per row: ``(1, 1)`` one trapezoidal step from the previous row,
        ``nsub > 1`` the step was retried as sub-steps, ``span > 1`` it was merged over
        ``span`` output intervals next to a singular configuration, ``(0, 0)`` the row was
        interpolated inside a merged step (and the initial row).
    dof_revisions : list of dict
        Automatic choices of the degrees of freedom that were revised (see
        :func:`simulate`): ``{"time", "from", "to"}`` per revision; empty otherwise.
    partition_changes : list of dict
        ``"global-partitioned"``: the re-selections of the independent natural coordinates
        during the run (:mod:`workbench.formulations.natural.partition`), ``{"time",
        "step", "from", "to", "indicator"}`` each (from that output row on, ``zi, zdi,
        zddi`` are the coordinates ``"to"``; ``dof_names`` are those chosen at the start);
        empty otherwise.
    integrator : str
        ``"trapezoidal"`` (implicit, the default) or ``"rk4"`` (explicit, seed 002).
    rods : dict or None
        Models with rod elements: how their inertia was treated, ``{"mode", "extrapolation",
        "extrapolated_rows"}`` (``extrapolated_rows``: with ``"rk4"``, the output rows whose
        accelerations were computed with extrapolated rod forces; see
        :mod:`workbench.integrators.rk4`).  The trapezoidal rule keeps rods exact.
    states : ndarray (N, L) or None
        With ``simulate(..., keep_states=True)``: the converged state of every row reached
        by a plain step (:func:`workbench.formulations.semirecursive.matrixr.store_state`), which
        the sensitivity
        sweeps read instead of re-evaluating it; None otherwise.
    rcr_stats : dict or None
        Formulation ``"rcr"`` with the trapezoidal rule: ``{"evaluations", "matrices",
        "merged_steps", "merge_tests"}`` (O(n + m) evaluations, difference-quotient
        iteration matrices, steps merged over a singular node, Matrix-R merge tests at
        low pivots;
        :mod:`workbench.integrators.trapezoidal_rcr`); None otherwise.
    """

    model: str
    formulation: str
    t: np.ndarray
    z: np.ndarray
    zd: np.ndarray
    zdd: np.ndarray
    zi: np.ndarray
    zdi: np.ndarray
    zddi: np.ndarray
    constraint_violation: np.ndarray
    velocity_violation: np.ndarray
    newton_iterations: np.ndarray
    energy: np.ndarray | None
    step_kind: np.ndarray
    coord_names: tuple
    dof_names: tuple
    dt: float
    wall_time_s: float
    compiled: object = field(repr=False, default=None)
    dof_revisions: list = field(default_factory=list)
    states: np.ndarray | None = field(repr=False, default=None)
    partition_changes: list = field(default_factory=list)
    integrator: str = "trapezoidal"
    rods: dict | None = None
    rcr_stats: dict | None = None

    @property
    def steps(self) -> int:
        return len(self.t) - 1

    @property
    def max_constraint_violation(self) -> float:
        return float(np.max(self.constraint_violation))

    @property
    def energy_drift(self) -> float | None:
        """Secular energy drift over the run (J): the least-squares linear trend of E(t)
        times the duration (:func:`energy_trend`), None when the model is not conservative.

        A drift is the systematic gain or loss of energy; the bounded oscillation that the
        trapezoidal rule superposes on it (O(h^2), not accumulating) is
        :attr:`energy_error_max`.
        """
        if self.energy is None:
            return None
        return abs(energy_trend(self.t, self.energy))

    @property
    def energy_error_max(self) -> float | None:
        """``max |E(t) - E(0)|`` over the run (J): drift plus the integrator's bounded
        energy oscillation; None when the model is not conservative."""
        if self.energy is None:
            return None
        return float(np.max(np.abs(self.energy - self.energy[0])))

    @property
    def energy_change(self) -> float | None:
        """``E(t_end) - E(0)`` (J), None when the model is not conservative."""
        if self.energy is None:
            return None
        return float(self.energy[-1] - self.energy[0])

    def coordinate(self, name: str) -> np.ndarray:
        return self.z[:, self.coord_names.index(name)] if name in self.coord_names else \
            self.z[:, self.compiled.coordinate(name)]

    # -- kinematics of named points, vectors and bodies along the trajectory -------------
    # (evaluated from the stored z, zd, zdd of every row, any formulation; names as in
    # workbench.objectives; see workbench.integrators.result_kinematics)

    def _kinematics_args(self):
        if self.compiled is None:
            raise ValueError("this simulation result carries no compiled model")
        return self.compiled, self.z, self.zd, self.zdd

    def point_kinematics(self, point: str, local=None) -> tuple:
        """``(position, velocity, acceleration)`` of a point, each ``(N, 3)`` in the global
        frame: ``point`` is ``"body.point"`` (a named point of the model, e.g.
        ``"bar_12.2"``), or a body name with ``local`` the point's body-frame coordinates
        (SI, relative to the body reference like the model's named points; global for the
        ground).  Raises UnknownNameError for an unknown point or body."""
        return point_history(*self._kinematics_args(), point, local)

    def point_position(self, point: str, local=None) -> np.ndarray:
        """Global position ``(N, 3)`` of a point (see :meth:`point_kinematics`)."""
        return self.point_kinematics(point, local)[0]

    def point_velocity(self, point: str, local=None) -> np.ndarray:
        """Global velocity ``(N, 3)`` of a point (see :meth:`point_kinematics`)."""
        return self.point_kinematics(point, local)[1]

    def point_acceleration(self, point: str, local=None) -> np.ndarray:
        """Global acceleration ``(N, 3)`` of a point (see :meth:`point_kinematics`)."""
        return self.point_kinematics(point, local)[2]

    def vector(self, name: str, derivative: int = 0) -> np.ndarray:
        """Global components ``(N, 3)`` of the named unit vector ``"body.vector"`` of the
        model (``derivative`` 1 or 2: its first or second time derivative)."""
        if derivative not in (0, 1, 2):
            raise ValueError(f"derivative must be 0, 1 or 2, got {derivative!r}")
        return vector_history(*self._kinematics_args(), name)[derivative]

    def angular_velocity(self, body: str, frame: str = "global") -> np.ndarray:
        """Angular velocity ``(N, 3)`` of a body: components on the global axes
        (``frame="global"``) or on the body's own axes (``frame="body"``, e.g. the roll
        rate of a chassis is the body-x component)."""
        return angular_velocity_history(*self._kinematics_args(), body, frame)

    def constraint_forces(self) -> np.ndarray:
        """Lagrange multipliers ``lambda`` (N x m) of the closure constraints (one column
        per equation, named by ``compiled.constraint_names``): the generalized constraint
        forces are ``-Phi_z^T lambda``; for a point-coincidence cut (revolute, spherical
        cuts' first equations: ``Phi = x_1 - x_2``) ``-lambda`` is the force the cut applies
        to ``body1`` (N), ``+lambda`` the one on ``body2``.  The multiplier formulations
        return the multipliers they integrated; the others recover them from the open-tree
        equations at each stored row (:func:`~workbench.integrators.result_kinematics.constraint_forces_stored`,
        exact for the row's state)."""
        if getattr(self, "multipliers", None) is not None:
            return self.multipliers
        # the natural-coordinate families report the same z: the open-tree terms of the
        # formulation whose statics serve them (SR-I)
        form = get_formulation(get_formulation(self.formulation).statics_formulation).code
        return constraint_force_history(self.compiled, form, self.t, self.z, self.zd,
                                        self.zdd)

    def summary(self) -> dict:
        return {
            "model": self.model,
            "formulation": self.formulation,
            "formulation_label": get_formulation(self.formulation).label,
            "t_end": float(self.t[-1]),
            "dt": self.dt,
            "steps": self.steps,
            "newton_iterations": int(np.sum(self.newton_iterations)),
            "max_newton_iterations_per_step": int(np.max(self.newton_iterations)),
            "max_constraint_violation": self.max_constraint_violation,
            "max_velocity_constraint_violation": float(np.max(self.velocity_violation)),
            "energy_drift": self.energy_drift,
            "energy_error_max": self.energy_error_max,
            "energy_change": self.energy_change,
            "wall_time_s": self.wall_time_s,
            "degrees_of_freedom": list(self.dof_names),
            "dof_revisions": [dict(r) for r in self.dof_revisions],
            "partition_changes": [dict(r) for r in self.partition_changes],
            "integrator": self.integrator,
            **({"rods": dict(self.rods)} if self.rods is not None else {}),
        }

    def to_frame(self):
        """The history as a pandas DataFrame (one column per coordinate and DOF)."""
        import pandas as pd
        cols = {"t": self.t}
        for k, nm in enumerate(self.coord_names):
            cols[f"z[{nm}]"] = self.z[:, k]
        for k, nm in enumerate(self.coord_names):
            cols[f"zd[{nm}]"] = self.zd[:, k]
        for k, nm in enumerate(self.coord_names):
            cols[f"zdd[{nm}]"] = self.zdd[:, k]
        cols["constraint_violation"] = self.constraint_violation
        cols["velocity_violation"] = self.velocity_violation
        cols["newton_iterations"] = self.newton_iterations
        if self.energy is not None:
            cols["energy"] = self.energy
        return pd.DataFrame(cols)


def simulate(model, t_end: float, dt: float, formulation: str = "sr-com",
             t0: float = 0.0, newton_tol: float = NEWTON_TOL,
             newton_maxit: int = NEWTON_MAXIT, keep_states: bool = False,
             progress=None, baumgarte: tuple | None = None,
             penalty: dict | None = None, integrator: str | None = None,
             rods: dict | None = None) -> SimulationResult:
    """Simulate ``model`` from ``t0`` to ``t_end`` with the fixed-step implicit trapezoidal
    rule (step ``dt``) and the semi-recursive Matrix-R formulation.

    Parameters
    ----------
    model : Model, CompiledModel or str
        A builder, a compiled model, or the name of a shipped model.
    formulation : {"sr-com", "sr-origin", "global", "global-partitioned", "multipliers", ...}
        Reference point of the semi-recursive recursion: each body's centre of mass
        (SR-I, RTdyn0) or the global origin (SR-II, RTdyn1); or ``"global"``: the global
        Matrix-R formulation in natural coordinates (:mod:`workbench.formulations.natural.build`)
        on the same
        independent coordinates (``result.natural = (q history, angle branches)``); or
        ``"global-partitioned"``: the same on independent NATURAL coordinates chosen by
        pivoted elimination of ``Phi_q`` and re-chosen when they degrade (coordinate
        partitioning, seed 000 eqs 2-8; :mod:`workbench.formulations.natural.partition`,
        ``result.partition_changes``).

    ``keep_states`` keeps each step's converged state (``result.states``, about
    ``L = 1 + 5 n + n d + n^2 + n (m + d) + 54 nf + 6 nb`` floats per row) so that a
    following :func:`workbench.sensitivities.driver.sensitivity` with ``simulation=result`` skips
    re-evaluating it (the semi-recursive formulations; ignored by ``"global"``).

    ``baumgarte = (alpha, beta)`` (1/s) sets the stabilisation of the multiplier
    formulations (default :data:`BAUMGARTE_DEFAULT`); ``result.multipliers`` (N x m) then
    holds the constraint forces ``lambda`` of every row.

    ``penalty = {"alpha": ..., "jacobian": ..., "reuse": ..., "projection": ...}`` sets
    options of the penalty formulation (seed 003; defaults :data:`PENALTY_DEFAULT`);
    ``result.penalty`` then reports them with the Jacobian's structural non-zeros, its
    column groups and the evaluations spent.

    ``integrator = "rk4"`` integrates with the explicit fourth-order Runge-Kutta method on
    the independent coordinates (seed 002; the semi-recursive formulations and ``"rcr"``;
    :mod:`workbench.integrators.rk4`) instead of the implicit trapezoidal rule (the
    default, ``None`` or ``"trapezoidal"``).  ``rods =
    {"mode": ..., "extrapolation": ...}`` overrides the model's treatment of its rod
    elements (:meth:`workbench.model.builder.Model.rod_options`); the modes other than
    ``"exact"`` need ``"rk4"`` (the trapezoidal rule solves for the accelerations, so it
    keeps rods exact).

    ``progress(done_rows, total_rows)``, when given, is called about every
    0.25 s during long semi-recursive runs (a progress bar; see :data:`PROGRESS`).

    A model whose ``initial_state`` is ``"equilibrium"`` (model meta; the buggy maneuver
    files) starts from the static equilibrium of its current design
    (:func:`workbench.statics.equilibrium_start`), positions only; velocities are the
    model's.

    Raises
    ------
    AssemblyError, SingularConfigurationError, NewtonConvergenceError, NonFiniteError
    """
    if progress is not None or baumgarte is not None or penalty is not None:
        with run_settings(progress, baumgarte, penalty):
            return simulate(model, t_end, dt, formulation, t0, newton_tol, newton_maxit,
                            keep_states, integrator=integrator, rods=rods)
    family = get_formulation(formulation).family
    if integrator is None:
        integrator = "trapezoidal"
    if integrator not in INTEGRATORS:
        raise OptionError(f"integrator {integrator!r} is not one of "
                          f"{', '.join(INTEGRATORS)}")
    cm = as_compiled(model)
    rod_opts = rod_settings(cm, rods, integrator)
    if integrator == "rk4":
        if family not in ("semirecursive", "rcr"):
            raise OptionError(f"integrator 'rk4' runs the semi-recursive formulations "
                              f"(sr-com, sr-origin) and rcr, not {formulation!r}")
        if keep_states:
            raise OptionError("keep_states: the kept states serve the sensitivities of the "
                              "trapezoidal rule; integrator 'rk4' keeps none")
    if cm.initial_state == "equilibrium":
        cm = equilibrium_start(cm, None, formulation)[0]
    form = formulation_code(formulation)
    nsteps = nsteps_of(t0, t_end, dt)
    revisions = []
    tried = {tuple(cm.dof_names)}
    start = _time.perf_counter()
    while True:
        try:
            if integrator == "rk4" and family == "semirecursive":
                res = _run_rk4(cm, formulation, form, float(t0), float(dt), nsteps, rod_opts)
            elif integrator == "rk4":
                res = _run_rcr(cm, formulation, float(t0), float(dt), nsteps, cm.zi0,
                               cm.zdi0, cm.z_guess, newton_tol, newton_maxit, rk4=True)
            else:
                res = integrate_steps(cm, formulation, form, float(t0), float(dt), nsteps,
                                      cm.zi0, cm.zdi0, cm.z_guess, newton_tol, newton_maxit,
                                      keep_states=keep_states)
                if rod_opts is not None:
                    res.rods = rod_opts
        except SingularConfigurationError as err:
            revised = _revise_dof(cm, err, tried, form, float(t0))
            if revised is None:
                raise
            revisions.append({"time": err.time, "from": list(cm.dof_names),
                              "to": list(revised.dof_names)})
            cm = revised
            continue
        if revisions:
            # the stopped attempts count: what the user waited for
            res.wall_time_s = _time.perf_counter() - start
        res.dof_revisions = revisions
        return res


#: the integrators of :func:`simulate`
INTEGRATORS = ("trapezoidal", "rk4")


def rod_settings(cm, rods: dict | None, integrator: str) -> dict | None:
    """The rod treatment of a run: the model's ``rod_mode`` / ``rod_extrapolation``
    overridden by ``rods`` (keys ``mode``, ``extrapolation``); None for a model without
    rods.  OptionError for an unknown key or value, or a mode other than exact with the
    trapezoidal rule; the trapezoidal rule runs a model whose own mode is approximate with
    exact rods (``result.rods`` says so)."""
    from workbench.integrators import rk4 as RK

    rods = dict(rods or {})
    unknown = set(rods) - {"mode", "extrapolation"}
    if unknown:
        raise OptionError(f"rods: unknown option(s) {', '.join(sorted(unknown))}; the options "
                          "are mode, extrapolation")
    for key, choices in (("mode", RK.ROD_MODES), ("extrapolation", RK.EXTRAPOLATIONS)):
        if key in rods and rods[key] not in choices:
            raise OptionError(f"rods {key}: {rods[key]!r} is not one of {', '.join(choices)}")
    if integrator != "rk4" and rods.get("mode", "exact") != "exact":
        raise OptionError(f"rods mode {rods['mode']!r} needs integrator='rk4': the implicit "
                          "trapezoidal rule solves for the accelerations and keeps rods exact")
    if cm.arrays.rd_pt.shape[0] == 0:
        return None
    model = cm.model
    mode = rods.get("mode", getattr(model, "rod_mode", "exact"))
    if integrator != "rk4":
        mode = "exact"
    return {"mode": mode,
            "extrapolation": rods.get("extrapolation",
                                      getattr(model, "rod_extrapolation", "quadratic"))}


def nsteps_of(t0, t_end, dt) -> int:
    """Number of steps of length ``dt`` from ``t0`` to ``t_end`` (ValueError unless it is
    a positive whole number)."""
    if not (dt > 0 and np.isfinite(dt)):
        raise OptionError(f"time step dt must be positive and finite, got {dt!r}")
    if not (t_end > t0 and np.isfinite(t_end)):
        raise OptionError(f"end time t_end = {t_end!r} must be finite and after the start "
                          f"t0 = {t0!r}")
    if t_end - t0 < dt * (1.0 - 1e-9):
        raise OptionError(f"t_end - t0 = {t_end - t0:g} s is shorter than one time step "
                          f"dt = {dt:g} s")
    nsteps = int(round((t_end - t0) / dt))
    if abs(nsteps * dt - (t_end - t0)) > 1e-9 * max(1.0, t_end):
        raise OptionError(f"t_end - t0 = {t_end - t0} s is not a multiple of dt = {dt} s")
    return nsteps


#: at most this many revisions of an automatic choice of degrees of freedom per run
MAX_DOF_REVISIONS = 3


def _revise_dof(cm, err, tried, form, t0):
    """A copy of ``cm`` whose degrees of freedom are ``err.suggested_dof``, starting from
    the same assembled initial state, or None when the choice may not be revised.

    Only an automatic choice (no ``dof`` in the model) is revised: it was made at the
    initial configuration, and a run that stops where those coordinates no longer
    determine the configuration (a turning point of a DOF while the mechanism moves on,
    e.g. Bricard's mechanism) is started again from t0 with the coordinates that do
    determine it there.  A user's own choice is never overridden (the error names the
    suggestion instead)."""
    import copy
    import dataclasses

    if getattr(cm.model, "dof_spec", None) is not None or not err.suggested_dof:
        return None
    names = tuple(err.suggested_dof)
    if names in tried or len(tried) > MAX_DOF_REVISIONS:
        return None
    tried.add(names)
    # the initial configuration assembled with the current choice (kept: a revision must
    # not change the initial state)
    out = MR.evaluate_state(cm.arrays, cm.arrays.p, form, t0, cm.zi0, cm.zdi0,
                            np.ascontiguousarray(cm.z_guess, dtype=float), POS_TOL, POS_MAXIT)
    if out.status != MR.OK:
        return None
    z0, zd0 = out.z, out.zd
    model = copy.deepcopy(cm.model)
    model.dof(*names)
    new = model.compile(cm._current_overrides())
    cols = [new.coord_names.index(nm) for nm in names]
    # the model stays "automatic" for later revisions and for the caller's view
    new.model.dof_spec = None
    return dataclasses.replace(new, z_guess=z0.copy(), zd_guess=zd0.copy(),
                               zi0=z0[cols].copy(), zdi0=zd0[cols].copy(),
                               initial_state=cm.initial_state)


def integrate_steps(cm, formulation, form, t0, dt, nsteps, zi0, zdi0, z0,
                    newton_tol=NEWTON_TOL, newton_maxit=NEWTON_MAXIT, resume=None, kofs=0,
                    keep_states=False) -> SimulationResult:
    """Integrate ``nsteps`` steps from ``(zi0, zdi0)`` (position guess ``z0``) with the
    trapezoidal loop of the formulation's family (:data:`FAMILY_RUNS`).

    ``resume = (a, aprev, nplain)`` continues a stored trajectory from one of its rows (the
    row's acceleration, the previous rows' (``TZ.PRED_HIST`` x d, newest first) and how
    many of those were reached by plain steps, at most ``TZ.PRED_HIST``): the rows are
    reproduced bit for bit (used by the checkpointed adjoint); ``kofs`` is then the index of
    the starting row in the whole run (``t0`` stays the start time of the whole run)."""
    run = FAMILY_RUNS[get_formulation(formulation).family]
    return run(cm, formulation, form, t0, dt, nsteps, zi0, zdi0, z0, newton_tol, newton_maxit,
               resume, kofs, keep_states)


#: ``progress(done_rows, total_rows)`` of the running :func:`simulate` call (set by its
#: ``progress`` argument); runs with fewer steps than :data:`PROGRESS_MIN_STEPS` don't report
PROGRESS = contextvars.ContextVar("workbench_simulation_progress", default=None)
PROGRESS_MIN_STEPS = 2000
PROGRESS_POLL_S = 0.25


#: Baumgarte parameters ``(alpha, beta)`` in 1/s of the multiplier formulation (seed 000
#: eq 60: ``Phi_ddot + 2 alpha Phi_dot + beta^2 Phi = 0``): critically damped constraint
#: error with time constant 1/beta = 50 ms.  Rule of thumb: alpha = beta, between the
#: inverse of the motion's time scale and 1/(10 h); larger values hold the constraints
#: tighter but stiffen the equations.  Set per run with ``simulate(..., baumgarte=...)``.
BAUMGARTE_DEFAULT = (20.0, 20.0)
BAUMGARTE = contextvars.ContextVar("workbench_baumgarte", default=BAUMGARTE_DEFAULT)


@contextlib.contextmanager
def run_settings(progress=None, baumgarte=None, penalty=None):
    """Within the block, runs (also those inside a sensitivity computation) use these
    settings: ``progress(done_rows, total_rows)`` is called about every
    :data:`PROGRESS_POLL_S` during long runs (:data:`PROGRESS`), ``baumgarte = (alpha,
    beta)`` stabilises the multiplier formulations (:data:`BAUMGARTE`), ``penalty`` (a
    dict) sets options of the penalty formulation (:data:`PENALTY_OPTIONS`).  None keeps
    the current setting."""
    tokens = []
    if penalty is not None:
        tokens.append((PENALTY_OPTIONS, PENALTY_OPTIONS.set(penalty_options(penalty))))
    if baumgarte is not None:
        alpha, beta = (float(v) for v in baumgarte)
        if not (np.isfinite(alpha) and np.isfinite(beta) and alpha >= 0 and beta >= 0):
            raise OptionError(f"baumgarte = {baumgarte!r}: (alpha, beta) must be finite and "
                              "not negative")
        tokens.append((BAUMGARTE, BAUMGARTE.set((alpha, beta))))
    if progress is not None:
        tokens.append((PROGRESS, PROGRESS.set(progress)))
    try:
        yield
    finally:
        for var, token in reversed(tokens):
            var.reset(token)


def _run_semirecursive(cm, formulation, form, t0, dt, nsteps, zi0, zdi0, z0, newton_tol,
                       newton_maxit, resume, kofs, keep_states) -> SimulationResult:
    job = RunJob(cm, formulation, form, t0, dt, nsteps, zi0, zdi0, z0, newton_tol,
                 newton_maxit, resume, kofs, keep_states)
    return _run_job(job, nsteps)


def _run_job(job, nsteps):
    """Run ``job.integrate()`` (a kernel that releases the GIL and counts its finished
    rows in ``job.progress[0]``), on a thread reporting progress when a progress callback
    is set and the run is long; returns ``job.result()``."""
    report = PROGRESS.get()
    if report is None or nsteps < PROGRESS_MIN_STEPS:
        job.integrate()
        return job.result()
    # the kernel releases the GIL: run it on a thread and read its row counter here
    failure = []

    def target():
        try:
            job.integrate()
        except BaseException as exc:                   # noqa: BLE001 - re-raised below
            failure.append(exc)
    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(PROGRESS_POLL_S)
        report(int(job.progress[0]), nsteps + 1)
    if failure:
        raise failure[0]
    return job.result()


def _allocate_rows(job, N, n, d):
    """The output rows of a run on ``job``: times ``T``, coordinates ``Z``, ``ZD``,
    ``ZDD`` (N x n), degrees of freedom ``ZI``, ``ZDI``, ``ZDDI`` (N x d), violations
    ``viol``, ``vviol``, iterations ``iters`` and energy ``energy`` (N)."""
    job.T = np.zeros(N)
    job.Z, job.ZD, job.ZDD = np.zeros((N, n)), np.zeros((N, n)), np.zeros((N, n))
    job.ZI, job.ZDI, job.ZDDI = np.zeros((N, d)), np.zeros((N, d)), np.zeros((N, d))
    job.viol, job.vviol = np.zeros(N), np.zeros(N)
    job.iters = np.zeros(N, dtype=np.int64)
    job.energy = np.zeros(N)


class RunJob:
    """One semi-recursive integration (:func:`integrate_steps`) split into its parts: the output
    arrays (allocated here), :meth:`integrate` (the kernel, which releases the GIL: it may
    run on another thread while ``progress[0]``, the number of finished rows, is read
    here) and :meth:`result` (typed error or the :class:`SimulationResult`)."""

    def __init__(self, cm, formulation, form, t0, dt, nsteps, zi0, zdi0, z0,
                 newton_tol=NEWTON_TOL, newton_maxit=NEWTON_MAXIT, resume=None, kofs=0,
                 keep_states=False):
        n, d = cm.n, cm.d
        N = nsteps + 1
        self.cm, self.formulation, self.form = cm, formulation, form
        self.keep_states = keep_states
        _allocate_rows(self, N, n, d)
        self.steps = np.zeros((N, 2), dtype=np.int64)
        # kept states: only the flag column needs a value before the run (a row is read
        # only when flagged); the rest is written by the integrator (np.empty: no zeroing
        # pass over the ~N x 300 floats; five-bar 5 s run with kept states, best of 10:
        # 53.5 -> 52.8 ms)
        self.KS = np.empty((N, MR.state_record_size(cm.arrays, n) if keep_states else 0))
        self.KS[:, :1] = 0.0
        self.progress = np.zeros(1, dtype=np.int64)
        if resume is None:
            res_flag, a_init, nplain = False, np.zeros(d), 0
            aprev = np.zeros((TZ.PRED_HIST, d))
        else:
            res_flag = True
            a_init = np.ascontiguousarray(resume[0], dtype=float)
            aprev = np.ascontiguousarray(np.reshape(resume[1], (TZ.PRED_HIST, d)), dtype=float)
            nplain = int(resume[2])
        self._args = (
            cm.arrays, cm.arrays.p, form, float(t0), float(dt), nsteps,
            np.ascontiguousarray(zi0, dtype=float), np.ascontiguousarray(zdi0, dtype=float),
            np.ascontiguousarray(z0, dtype=float), newton_tol, newton_maxit, POS_TOL,
            POS_MAXIT, cm.conservative, self.T, self.Z, self.ZD, self.ZDD, self.ZI, self.ZDI,
            self.ZDDI, self.viol, self.vviol, self.iters, self.energy, self.steps, res_flag,
            a_init, aprev, nplain, int(kofs), self.KS, self.progress)
        self.status = None
        self.wall = 0.0

    def integrate(self):
        start = _time.perf_counter()
        self.status = TZ.integrate_semirecursive(*self._args)
        self.wall = _time.perf_counter() - start

    def result(self) -> SimulationResult:
        cm = self.cm
        st, step, t, value, bad = self.status
        ctx = f"model {cm.name!r}" + (" (initial state)" if step == 0 else f", step {step}")
        raise_for_status(cm, st, t, value, bad, ctx, z=self.Z[step - 1] if step >= 1 else None,
                         dt=float(self._args[4]))
        return SimulationResult(
            model=cm.name, formulation=self.formulation, t=self.T, z=self.Z, zd=self.ZD,
            zdd=self.ZDD, zi=self.ZI, zdi=self.ZDI, zddi=self.ZDDI,
            constraint_violation=self.viol, velocity_violation=self.vviol,
            newton_iterations=self.iters, energy=self.energy if cm.conservative else None,
            step_kind=self.steps, coord_names=cm.coord_names, dof_names=cm.dof_names,
            dt=float(self._args[4]), wall_time_s=self.wall, compiled=cm,
            states=self.KS if self.keep_states else None)


class RK4Job:
    """One explicit RK4 run (:mod:`workbench.integrators.rk4`): output arrays, the kernel
    (:meth:`integrate`, releases the GIL) and the result or typed error (:meth:`result`)."""

    def __init__(self, cm, formulation, form, t0, dt, nsteps, rod_opts):
        from workbench.integrators import rk4 as RK

        n, d = cm.n, cm.d
        N = nsteps + 1
        self.cm, self.formulation, self.dt, self.rod_opts = cm, formulation, dt, rod_opts
        _allocate_rows(self, N, n, d)
        self.extrapolated = np.zeros(N, dtype=np.int64)
        self.progress = np.zeros(1, dtype=np.int64)
        opts = rod_opts or {"mode": "exact", "extrapolation": "quadratic"}
        self._args = (
            cm.arrays, cm.arrays.p, form, float(t0), float(dt), nsteps,
            np.ascontiguousarray(cm.zi0, dtype=float),
            np.ascontiguousarray(cm.zdi0, dtype=float),
            np.ascontiguousarray(cm.z_guess, dtype=float), POS_TOL, POS_MAXIT,
            cm.conservative, RK.ROD_MODES[opts["mode"]], RK.EXTRAPOLATIONS[opts["extrapolation"]],
            self.T, self.Z, self.ZD, self.ZDD, self.ZI, self.ZDI, self.ZDDI, self.viol,
            self.vviol, self.iters, self.energy, self.extrapolated, self.progress)
        self.status = None
        self.wall = 0.0

    def integrate(self):
        from workbench.integrators import rk4 as RK

        start = _time.perf_counter()
        self.status = RK.integrate_rk4(*self._args)
        self.wall = _time.perf_counter() - start

    def result(self) -> SimulationResult:
        cm = self.cm
        st, step, t, value, bad = self.status
        ctx = f"model {cm.name!r} (rk4)" + (" (initial state)" if step == 0
                                            else f", step {step}")
        raise_for_status(cm, st, t, value, bad, ctx, z=self.Z[step - 1] if step >= 1 else None,
                         dt=self.dt)
        rods = None
        if self.rod_opts is not None:
            rods = dict(self.rod_opts, extrapolated_rows=int(self.extrapolated.sum()))
        steps = np.ones((len(self.T), 2), dtype=np.int64)
        steps[0] = 0
        return SimulationResult(
            model=cm.name, formulation=self.formulation, t=self.T, z=self.Z, zd=self.ZD,
            zdd=self.ZDD, zi=self.ZI, zdi=self.ZDI, zddi=self.ZDDI,
            constraint_violation=self.viol, velocity_violation=self.vviol,
            newton_iterations=self.iters, energy=self.energy if cm.conservative else None,
            step_kind=steps,
            coord_names=cm.coord_names, dof_names=cm.dof_names, dt=self.dt,
            wall_time_s=self.wall, compiled=cm, integrator="rk4", rods=rods)


def _run_rk4(cm, formulation, form, t0, dt, nsteps, rod_opts) -> SimulationResult:
    if cm.d == 0:
        raise OptionError(
            f"model {cm.name!r} has no degrees of freedom (every motion driven): RK4 "
            f"through {formulation!r} integrates the independent coordinates and there are "
            "none; use the trapezoidal rule (the default), which solves the position, "
            "velocity and acceleration problems at every step, or formulation 'rcr'")
    return _run_job(RK4Job(cm, formulation, form, t0, dt, nsteps, rod_opts), nsteps)


#: the kernels' status "no error" (:mod:`workbench.kernels.status`)
OK_STATUS = MR.OK
#: relative pivot below which formulation "rcr" stops with a typed error naming the
#: dependent coordinate: rounding level, so that a run crosses a bifurcation of the closures
#: (the N-four-bar's aligned position: relative pivots ~1e-12 at the nearest RK4 stage) as
#: Matrix-R's least squares does, with the same rounding-dominated accelerations there
RCR_PIVOT_TOL = 1e-14
#: options of the rcr trapezoidal steps (:func:`workbench.integrators.trapezoidal_rcr.
#: integrate_rcr`): ``newton`` (Newton steps with a difference-quotient iteration matrix;
#: ``False``: fixed-point iteration), ``merge`` (steps over singular nodes merged as
#: Matrix-R's loop does).  A context variable, for measurements and tests.
RCR_STEP = contextvars.ContextVar("RCR_STEP", default={})


def _run_rcr_trapezoidal(cm, formulation, form, t0, dt, nsteps, zi0, zdi0, z0, newton_tol,
                         newton_maxit, resume, kofs, keep_states) -> SimulationResult:
    """Formulation ``"rcr"`` with the trapezoidal rule (:data:`FAMILY_RUNS`)."""
    if keep_states or resume is not None:
        raise OptionError("formulation 'rcr' keeps no states and has no restarts (its "
                          "sensitivities re-evaluate each state)")
    return _run_rcr(cm, formulation, t0, dt, nsteps, zi0, zdi0, z0, newton_tol, newton_maxit)


def _run_rcr(cm, formulation, t0, dt, nsteps, zi0, zdi0, z0, newton_tol, newton_maxit,
             rk4=False) -> SimulationResult:
    """Formulation ``"rcr"`` (seed 004): the model's degrees of freedom integrated through
    the O(n + m) RCR evaluation (:class:`workbench.formulations.rcr.LoopSolver`, the other
    coordinates the loops' dependents, arbitrary coordinate selection), by the implicit
    trapezoidal rule (:mod:`workbench.integrators.trapezoidal_rcr`, Newton steps; the
    same discrete solution as Matrix-R's) or, with ``rk4``, by explicit RK4."""
    from workbench.formulations.rcr import LoopSolver
    from workbench.formulations.rcr import closure as RC
    from workbench.integrators import trapezoidal_rcr as TR
    from workbench.kernels.layout import C_DRIVE, DOF_COORD

    ma = cm.arrays
    if any(int(t) != DOF_COORD for t in ma.dof_type):
        raise OptionError(f"model {cm.name!r}: formulation 'rcr' needs joint coordinates as "
                          "degrees of freedom (the model has natural-coordinate DOFs)")
    cols = [int(ma.dof_i[k, 0]) for k in range(cm.d)]
    # driven coordinates (drive rows) are prescribed, neither DOF nor dependents
    driven = {int(ma.c_i[k, 0]) for k in range(ma.c_type.shape[0])
              if int(ma.c_type[k]) == C_DRIVE}
    if driven & set(cols):
        raise OptionError(f"model {cm.name!r}: degrees of freedom "
                          f"{sorted(cm.coord_names[c] for c in driven & set(cols))} are driven")
    dependents = [cm.coord_names[c] for c in range(cm.n) if c not in cols and c not in driven]
    z = np.array(z0, dtype=float)
    zd = np.array(cm.zd_guess, dtype=float)
    z[cols] = zi0
    zd[cols] = zdi0
    solver = LoopSolver(cm, dependents=dependents, z0=z, pivot_tol=RCR_PIVOT_TOL)
    N = nsteps + 1
    start = _time.perf_counter()
    if rk4:
        out = solver.simulate_rk4(t0 + nsteps * dt, dt, z0=z, zd0=zd, t0=t0)
        T, Z, ZD, ZDD = out["t"], out["z"], out["zd"], out["zdd"]
        iters = np.full(N, 4, dtype=np.int64)
        iters[0] = 0
    else:
        T, Z, ZD, ZDD = np.zeros(N), np.zeros((N, cm.n)), np.zeros((N, cm.n)), np.zeros(
            (N, cm.n))
        A = np.zeros((N, cm.d))
        iters = np.zeros(N, dtype=np.int64)
        steps = np.zeros((N, 2), dtype=np.int64)
        stats = np.zeros(4, dtype=np.int64)
        lp_ptr, lp_fr = solver.paths
        opts = RCR_STEP.get()
        st, step, t, bad = TR.integrate_rcr(
            ma, ma.p, float(t0), float(dt), nsteps, z, zd, np.asarray(cols, dtype=np.int64),
            solver.structure, lp_ptr, lp_fr, solver.ws, solver.aw, solver.lw,
            solver.pivot_tol, POS_TOL, POS_MAXIT, newton_tol, newton_maxit,
            bool(opts.get("newton", True)), bool(opts.get("merge", True)), T, Z, ZD, ZDD, A,
            iters, steps, stats)
        from workbench.errors import NewtonConvergenceError
        if st in (TR.ST_ITERATION, TR.ST_MATRIX):
            piv, coord = solver.min_pivot
            if st == TR.ST_MATRIX:
                why = "its difference-quotient iteration matrix is singular"
            elif piv < 1e-6:
                why = (f"next to a singular configuration of the closures (smallest relative "
                       f"pivot {piv:.1e}, dependent {coord!r}), where the accelerations are "
                       "rounding noise")
            elif not opts.get("newton", True):
                why = ("the fixed point contracts only while h/2 |df/dzd| + h^2/4 |df/dz| "
                       "< 1: a stiff model for this step, or the neighbourhood of a "
                       "singular configuration of the closures, where df/dz grows")
            else:
                why = "a stiff or discontinuous model for this step"
            raise NewtonConvergenceError(
                f"model {cm.name!r} (rcr), step {step}: the "
                f"{'Newton' if opts.get('newton', True) else 'fixed-point'} iteration of the "
                f"trapezoidal step did not converge in {newton_maxit} iterations ({why}); "
                "use integrator='rk4', a smaller dt or a Matrix-R formulation", t,
                iterations=newton_maxit)
        if st == TR.ST_DENSE:
            raise NewtonConvergenceError(
                f"model {cm.name!r} (rcr), step {step}: the dense output of a row inside a "
                "step merged over a singular configuration did not converge", t, iterations=0)
        solver.raise_for_status(st, bad, t)
    wall = _time.perf_counter() - start
    viol, vviol, E = np.zeros(N), np.zeros(N), np.zeros(N)
    RC.record_rows(ma, ma.p, T, Z, ZD, ZDD, cm.conservative, viol, vviol, E)
    res = _all_coordinate_result(cm, formulation, dt, (OK_STATUS, N, float(T[-1]), 0.0, -1),
                                 wall, T, Z, ZD, ZDD, viol, vviol, E, iters)
    res.integrator = "rk4" if rk4 else "trapezoidal"
    if not rk4:
        res.step_kind = steps
        res.rcr_stats = dict(zip(("evaluations", "matrices", "merged_steps", "merge_tests"),
                                 (int(v) for v in stats)))
    return res


def raise_global_singular(cm, bad: int, t: float, ctx: str):
    """Raise :class:`SingularConfigurationError` for a rank-deficient ``Theta_q`` of the
    global formulation, naming the natural coordinate (body, point or unit-vector
    component) of the first dependent column."""
    ga = global_model(cm)[0]
    D, nqb = int(ga.D), int(ga.nqb)
    b, i = divmod(int(bad), nqb)
    body = cm.body_names[b] if 0 <= b < len(cm.body_names) else f"#{b}"
    comp = ("r" if i < D else f"e{i // D}") + "_" + "xyz"[i % D]
    raise SingularConfigurationError(
        f"{ctx}: the leading matrix Theta_q = [Phi_q; B] of the global formulation is "
        f"singular at natural coordinate {comp} of body {body!r}; the degrees of freedom "
        f"{list(cm.dof_names)} do not determine the configuration (singular position or "
        "a poor choice of degrees of freedom)", t, [])


def _run_global(cm, formulation, form, t0, dt, nsteps, zi0, zdi0, z0, newton_tol,
                newton_maxit, resume, kofs, keep_states) -> SimulationResult:
    """The natural-coordinate loop from the model's initial state (it has no restarts,
    ``resume``/``kofs``, and keeps no states: :attr:`Formulation.checkpointing`,
    :attr:`Formulation.keeps_states`)."""
    (st, step, t, value, bad), o = _run_natural(cm, t0, dt, nsteps, newton_tol,
                                                newton_maxit, POS_TOL, POS_MAXIT)
    ctx = f"model {cm.name!r} (global)" + (" (initial state)" if step == 0 else f", step {step}")
    if st == MR.ST_SINGULAR and bad >= 0:
        raise_global_singular(cm, bad, t, ctx)
    raise_for_status(cm, st, t, value, bad, ctx, z=None)
    res = SimulationResult(
        model=cm.name, formulation="global", t=o["T"], z=o["Z"], zd=o["ZD"], zdd=o["ZDD"],
        zi=o["ZI"], zdi=o["ZDI"], zddi=o["ZDDI"], constraint_violation=o["viol"],
        velocity_violation=o["vviol"], newton_iterations=o["iters"],
        energy=o["energy"] if cm.conservative else None, step_kind=o["steps"],
        coord_names=cm.coord_names, dof_names=cm.dof_names, dt=float(dt),
        wall_time_s=o["wall"], compiled=cm)
    res.natural = (o["Q"], o["AREF"])
    return res


def _run_natural(cm, t0, dt, nsteps, newton_tol, newton_maxit, pos_tol, pos_maxit):
    """Run :func:`workbench.integrators.trapezoidal.integrate_natural`; returns the status and
    the output arrays."""
    ga, q0, aref0, _ = global_model(cm)
    n, d = cm.n, cm.d
    N = nsteps + 1
    out = dict(T=np.zeros(N), Q=np.zeros((N, ga.nq)), Z=np.zeros((N, n)),
               ZD=np.zeros((N, n)), ZDD=np.zeros((N, n)), ZI=np.zeros((N, d)),
               ZDI=np.zeros((N, d)), ZDDI=np.zeros((N, d)), viol=np.zeros(N),
               vviol=np.zeros(N), iters=np.zeros(N, dtype=np.int64), energy=np.zeros(N),
               steps=np.zeros((N, 2), dtype=np.int64),
               AREF=np.zeros((N, aref0.shape[0])))
    ma = cm.arrays
    start = _time.perf_counter()
    status = TZ.integrate_natural(
        ga, ma, ma.p, float(t0), float(dt), nsteps, cm.zi0, cm.zdi0, q0, aref0, newton_tol,
        newton_maxit, pos_tol, pos_maxit, cm.conservative, out["T"], out["Q"], out["Z"],
        out["ZD"], out["ZDD"], out["ZI"], out["ZDI"], out["ZDDI"], out["viol"], out["vviol"],
        out["iters"], out["energy"], out["steps"], out["AREF"], 0, np.zeros(0), 0.0,
        np.zeros(N))
    out["wall"] = _time.perf_counter() - start
    return status, out


def _all_coordinate_start(cm, formulation, form, t0, zi0, zdi0, z0):
    """The consistent initial state of the loops that integrate all joint coordinates
    (multipliers, penalty): the Matrix-R position and velocity problems at ``t0`` (typed
    errors; OptionError when a degree of freedom is not a joint coordinate)."""
    other = [nm for nm in cm.dof_names if nm not in cm.coord_names]
    if other:
        raise OptionError(f"model {cm.name!r}: formulation {formulation!r} needs degrees of "
                          f"freedom that are joint coordinates; {other} are not (natural "
                          "coordinates of points): not supported yet")
    ev = MR.evaluate_state(cm.arrays, cm.arrays.p, form, float(t0),
                           np.ascontiguousarray(zi0, dtype=float),
                           np.ascontiguousarray(zdi0, dtype=float),
                           np.ascontiguousarray(z0, dtype=float), POS_TOL, POS_MAXIT)
    raise_for_status(cm, ev.status, float(t0), ev.err, ev.bad,
                     f"model {cm.name!r} (initial state)")
    return ev


def _all_coordinate_result(cm, formulation, dt, status, wall, T, Z, ZD, ZDD, viol, vviol, E,
                           iters) -> SimulationResult:
    """The result of a loop over all joint coordinates (its ``status = (st, step, t,
    value, bad)`` raised as a typed error first): the degrees of freedom are columns of
    the rows, every step a plain one."""
    st, step, t, value, bad = status
    ctx = f"model {cm.name!r} ({formulation})" + (" (initial state)" if step == 0
                                                   else f", step {step}")
    raise_for_status(cm, st, t, value, bad, ctx, dt=float(dt))
    cols = [cm.coordinate(nm) for nm in cm.dof_names]
    steps = np.ones((len(T), 2), dtype=np.int64)
    steps[0] = 0
    return SimulationResult(
        model=cm.name, formulation=formulation, t=T, z=Z, zd=ZD, zdd=ZDD, zi=Z[:, cols],
        zdi=ZD[:, cols], zddi=ZDD[:, cols], constraint_violation=viol,
        velocity_violation=vviol, newton_iterations=iters,
        energy=E if cm.conservative else None, step_kind=steps, coord_names=cm.coord_names,
        dof_names=cm.dof_names, dt=float(dt), wall_time_s=wall, compiled=cm)


#: the trapezoidal loop of each formulation family (:attr:`Formulation.family`)
def _run_multipliers(cm, formulation, form, t0, dt, nsteps, zi0, zdi0, z0, newton_tol,
                     newton_maxit, resume, kofs, keep_states) -> SimulationResult:
    """The multiplier loop (:func:`workbench.integrators.trapezoidal.integrate_multipliers`)
    from the consistent initial state of the Matrix-R position and velocity problems (no
    restarts and no kept states: :attr:`Formulation.checkpointing`,
    :attr:`Formulation.keeps_states`)."""
    ev = _all_coordinate_start(cm, formulation, form, t0, zi0, zdi0, z0)
    alpha, beta = (float(v) for v in BAUMGARTE.get())
    n, m, N = cm.n, cm.m, nsteps + 1
    T, Z, ZD, ZDD = np.zeros(N), np.zeros((N, n)), np.zeros((N, n)), np.zeros((N, n))
    L, viol, vviol, E = np.zeros((N, m)), np.zeros(N), np.zeros(N), np.zeros(N)
    iters = np.zeros(N, dtype=np.int64)
    progress = np.zeros(1, dtype=np.int64)
    start = _time.perf_counter()
    st, step, t, value, bad = TZ.integrate_multipliers(
        cm.arrays, cm.arrays.p, form, float(t0), float(dt), nsteps, ev.z, ev.zd, alpha, beta,
        newton_tol, newton_maxit, T, Z, ZD, ZDD, L, viol, vviol, E, iters, progress)
    res = _all_coordinate_result(cm, formulation, dt, (st, step, t, value, bad),
                                 _time.perf_counter() - start, T, Z, ZD, ZDD, viol, vviol, E,
                                 iters)
    res.multipliers = L
    return res


def _run_partitioned(cm, formulation, form, t0, dt, nsteps, zi0, zdi0, z0, newton_tol,
                     newton_maxit, resume, kofs, keep_states) -> SimulationResult:
    """Coordinate partitioning in natural coordinates (seed 000 eqs 6-8): the natural loop
    on independent natural coordinates chosen by pivoted elimination, re-chosen when the
    dependent block degrades (:func:`workbench.formulations.natural.partition.run_partitioned`;
    no restarts, no kept states)."""
    (st, step, t, value, bad), o, segments, changes = PT.run_partitioned(
        cm, t0, dt, nsteps, newton_tol, newton_maxit, TZ.integrate_natural)
    ctx = f"model {cm.name!r} ({formulation}), step {step}"
    names = PT.coordinate_names(cm)
    if st == MR.ST_SINGULAR and bad >= 0:
        raise SingularConfigurationError(
            f"{ctx}: Theta_q = [Phi_q; E^i] is singular at natural coordinate {names[bad]}: "
            f"the independent coordinates {[names[i] for i in segments[-1][1]]} do not "
            "determine the configuration", t, [])
    raise_for_status(cm, st, t, value, bad, ctx + o["note"], dt=float(dt))
    res = SimulationResult(
        model=cm.name, formulation=formulation, t=o["T"], z=o["Z"], zd=o["ZD"], zdd=o["ZDD"],
        zi=o["ZI"], zdi=o["ZDI"], zddi=o["ZDDI"], constraint_violation=o["viol"],
        velocity_violation=o["vviol"], newton_iterations=o["iters"],
        energy=o["energy"] if cm.conservative else None, step_kind=o["steps"],
        coord_names=cm.coord_names, dof_names=tuple(names[i] for i in segments[0][1]),
        dt=float(dt), wall_time_s=o["wall"], compiled=cm, partition_changes=changes)
    res.natural = (o["Q"], o["AREF"])
    res.partition = (segments, o["kappa"])
    return res


#: options of the penalty formulation (seed 003), set per run with ``simulate(...,
#: penalty={...})`` or :func:`run_settings`:
#:
#: * ``alpha``: the penalty factor of eq 14 (one scalar for every constraint equation, so in
#:   N/m for point coincidences; the constraint forces are ``alpha Phi``, the violation is
#:   their size over ``alpha``);
#: * ``jacobian``: how ``J = -dQ/d[z; zd]`` is evaluated: ``"nd"`` dense central
#:   differences (the seed's ND), ``"nd-colored"`` the same by groups of structurally
#:   orthogonal columns, ``"exact"`` forward-mode tangents along the 2n unit directions,
#:   ``"exact-colored"`` along the group directions (compressed);
#: * ``reuse``: ``J`` serves this many Newton iterations (the seed: 3), re-evaluated at the
#:   first iteration of every step;
#: * ``projection``: ``"tangent"`` the velocity and acceleration projections of eqs 24-26
#:   with the last factorisation, ``"none"`` the trapezoidal velocities and accelerations;
#: * ``predictor``: the first Newton iterate of a step's accelerations: ``"previous"`` (the
#:   seed's suggestion ``z_k + h zd_k + h^2/2 zdd_k``), ``"zero"`` or ``"extrapolated"``
#:   (``2 zdd_k - zdd_{k-1}``).
PENALTY_DEFAULT = {"alpha": 1.0e8, "jacobian": "exact-colored", "reuse": 3,
                   "projection": "tangent", "predictor": "previous"}
PENALTY_OPTIONS = contextvars.ContextVar("workbench_penalty", default=PENALTY_DEFAULT)


def penalty_options(options: dict | None) -> dict:
    """The penalty options ``options`` completed with the current ones (OptionError naming
    the bad option)."""
    out = dict(PENALTY_OPTIONS.get())
    for key, value in (options or {}).items():
        if key not in PENALTY_DEFAULT:
            raise OptionError(f"penalty option {key!r} is unknown; known: "
                              f"{sorted(PENALTY_DEFAULT)}")
        out[key] = value
    alpha = out["alpha"]
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) \
            or not (np.isfinite(alpha) and alpha > 0):
        raise OptionError(f"penalty option alpha = {alpha!r}: must be a positive number")
    out["alpha"] = float(alpha)
    if out["jacobian"] not in PK.J_METHODS:
        raise OptionError(f"penalty option jacobian = {out['jacobian']!r}; choose one of "
                          f"{sorted(PK.J_METHODS)}")
    reuse = out["reuse"]
    if isinstance(reuse, bool) or not isinstance(reuse, (int, np.integer)) or reuse < 1:
        raise OptionError(f"penalty option reuse = {reuse!r}: must be an integer >= 1")
    out["reuse"] = int(reuse)
    if out["projection"] not in ("tangent", "none"):
        raise OptionError(f"penalty option projection = {out['projection']!r}; choose "
                          "'tangent' or 'none'")
    if out["predictor"] not in TZ.PREDICTORS:
        raise OptionError(f"penalty option predictor = {out['predictor']!r}; choose one of "
                          f"{sorted(TZ.PREDICTORS)}")
    return out


def penalty_structure(cm, jacobian: str):
    """The structural pattern of ``J`` and the column groups of method ``jacobian``
    (cached on the compiled model)."""
    cache = cm.__dict__.setdefault("_penalty_structure", {})
    colored = jacobian.endswith("-colored")
    if colored not in cache:
        pattern = PS.jacobian_pattern(cm.arrays, cm.n)
        color, ncolor = PS.column_groups(pattern, colored)
        cache[colored] = (pattern, color, ncolor)
    return cache[colored]


def _run_penalty(cm, formulation, form, t0, dt, nsteps, zi0, zdi0, z0, newton_tol,
                 newton_maxit, resume, kofs, keep_states) -> SimulationResult:
    """The penalty loop (:func:`workbench.integrators.trapezoidal.integrate_penalty`) from
    the consistent initial state of the Matrix-R position and velocity problems, with the
    options of :data:`PENALTY_OPTIONS` (``result.penalty`` reports them with the Jacobian's
    pattern, its groups and the evaluations spent)."""
    opts = penalty_options(None)
    ev = _all_coordinate_start(cm, formulation, form, t0, zi0, zdi0, z0)
    pattern, color, ncolor = penalty_structure(cm, opts["jacobian"])
    n, N = cm.n, nsteps + 1
    T, Z, ZD, ZDD = np.zeros(N), np.zeros((N, n)), np.zeros((N, n)), np.zeros((N, n))
    viol, vviol, E = np.zeros(N), np.zeros(N), np.zeros(N)
    iters = np.zeros(N, dtype=np.int64)
    nj = np.zeros(N, dtype=np.int64)
    nev = np.zeros(N, dtype=np.int64)
    progress = np.zeros(1, dtype=np.int64)
    start = _time.perf_counter()
    st, step, t, value, bad = TZ.integrate_penalty(
        cm.arrays, cm.arrays.p, form, float(t0), float(dt), nsteps, ev.z, ev.zd,
        opts["alpha"], PK.J_METHODS[opts["jacobian"]], color, ncolor, pattern, opts["reuse"],
        1 if opts["projection"] == "tangent" else 0, TZ.PREDICTORS[opts["predictor"]],
        newton_tol, newton_maxit, T, Z, ZD, ZDD,
        viol, vviol, E, iters, nj, nev, progress)
    res = _all_coordinate_result(cm, formulation, dt, (st, step, t, value, bad),
                                 _time.perf_counter() - start, T, Z, ZD, ZDD, viol, vviol, E,
                                 iters)
    res.penalty = dict(opts, pattern_nonzeros=int(pattern.sum()), columns=2 * n,
                       groups=int(ncolor), jacobian_evaluations=int(nj.sum()),
                       tau_evaluations=int(nev.sum()), newton_iterations=int(iters.sum()))
    return res


FAMILY_RUNS = {"semirecursive": _run_semirecursive, "natural": _run_global,
               "rcr": _run_rcr_trapezoidal,
               "multipliers": _run_multipliers, "partitioned": _run_partitioned,
               "penalty": _run_penalty}
