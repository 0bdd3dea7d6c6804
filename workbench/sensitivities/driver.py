"""Design sensitivities of integral objectives: direct, adjoint and central differences.

One entry point, :func:`sensitivity`, returns a :class:`SensitivityResult` (``psi``, the
gradient ``dpsi/drho`` with ``rho`` in the parameters' own units, the running gradient
over time and a timing breakdown).

Methods and variants (seed 001 §3)
----------------------------------
``method="direct"``
    Tangent linear model (eq 48): one sensitivity system per parameter, forward in time.
``method="adjoint"``
    Adjoint variables (eqs 62-69): one system per objective, backward in time over the
    stored forward trajectory.
``method="fd"``
    Central differences of the simulated objectives (a reference, not a product path).

``variant="discrete"`` gives the exact derivative of the discrete trapezoidal solution
(what an optimiser actually sees): the direct method differentiates each step's Newton
residual, the adjoint method is the exact transpose of that recursion, so both agree to
rounding.  ``variant="continuous"`` is the seed's differentiate-then-discretise route:
the adjoint ODE (eq 68) integrated backward by the trapezoidal rule with the quadrature of
eq 69, which differs from the discrete adjoint by O(h^2).  For the direct method the two
routes coincide: integrating the TLM (eq 48) with the same trapezoidal rule on the same
trajectory *is* the linearisation of the trapezoidal steps (the rule is linear and
one-step), so ``direct``/``continuous`` returns the discrete direct gradient.

All partial derivatives (``Kbar``, ``Cbar``, ``Mbar``, ``Qbar_rho``, the derivatives of the
dependent coordinates and of ``R^Phi`` for a non-constant ``B``) come from hand-written
tangent kernels (:mod:`workbench.kernels.tangents`,
:mod:`workbench.formulations.semirecursive.step_jacobians`); there is no finite
difference in the direct or adjoint path.

Threads
-------
The step Jacobians of different rows of the trajectory do not depend on each other; only
the recursions (forward for the direct method, backward for the adjoint) are sequential.
The sweeps evaluate the Jacobians by blocks of rows on ``threads`` threads (default:
numba's), and when :func:`sensitivity` runs the simulation itself with more than one
thread it pipelines them: the integrator runs on a second Python thread (its kernel
releases the GIL) and publishes the number of finished rows, the Jacobians of those rows
are evaluated here while it runs, and the rows left when it ends are shared by all the
threads (``timings["pipelined"]``).  The gradient is the same bit for bit on any number
of threads, pipelined or not.

Initial state
-------------
A model whose ``initial_state`` is ``"equilibrium"`` (model meta of the buggy maneuver
files, loaded by name or compiled from the file) starts every design from ITS OWN static
equilibrium: :func:`sensitivity` solves it (:func:`workbench.statics.equilibrium_start`)
and seeds the sweeps with its exact derivative ``dz^i_0/drho = -Kbar^+ dr/drho`` (implicit
function theorem on ``Qbar = 0``, exact ``Kbar``); the finite differences re-solve the
equilibrium of every perturbed design.  A model prepared with
:func:`workbench.apps.vehicle.prepare` (``"equilibrium (applied)"``, as ``workbench reproduce``
uses) instead holds the nominal equilibrium fixed for every design.

Adjoint memory
--------------
With full storage the forward trajectory and, per step, the measures, the integrand
partials and the running gradient are kept: ``8 (N + 1) (3 n + 3 d + n_m (1 + n_o) +
n_rho n_o)`` bytes for ``N`` steps, ``n`` joint coordinates, ``d`` degrees of freedom,
``n_m`` measures, ``n_o`` objectives and ``n_rho`` parameters (the step Jacobians are
recomputed from the stored states during the backward sweep, never stored).  When
``8 (N + 1) L`` bytes more fit in the same limit, the forward run also keeps each step's
converged state (``L`` floats per row, :func:`workbench.integrators.simulation.simulate` with
``keep_states``: kinematics, QR factors of ``Theta_z``, ``R``, forces), which both sweeps
read instead of re-evaluating (the direct method likewise).  When the trajectory alone
exceeds ``memory_limit_mb`` (default :data:`MEMORY_LIMIT_MB`), or when
``checkpoint_steps = S`` is given, the adjoint checkpoints instead: the forward run keeps
the state at every ``S``-th step (``S = ceil(sqrt(N + 1))`` by default) and the backward
sweep re-runs one segment at a time from its checkpoint (bit-identical rows) carrying the
adjoint state across segments.  Memory is then bounded by ``N / S`` checkpoints of
``4 d + n`` floats plus one segment of ``S + 1`` rows (with their kept states), i.e.
``O(sqrt(N))``; the price is one extra forward simulation.  The gradient is the same to
rounding.
"""

from __future__ import annotations

import time as _time
from dataclasses import dataclass, field

import numpy as np

from workbench.compiled.build import CompiledModel
from workbench.compiled.parameters import (cyclic_dofs, initial_sensitivities,
                                           kinematic_parameters, parameter_columns,
                                           reverse_parameters)
from workbench.errors import (NonFiniteError, OptionError, SensitivityError,
                              SingularConfigurationError)
from workbench.formulations import REGISTRY, formulation_code
from workbench.formulations import get as get_formulation
from workbench.formulations.semirecursive import matrixr as MR
from workbench.formulations.semirecursive import step_jacobians as S
from workbench.formulations.semirecursive import step_vjp as SV
from workbench.formulations.status import raise_for_status
from workbench.integrators.result_kinematics import constraint_force_history, redundant_closures
from workbench.integrators.simulation import (NEWTON_MAXIT, NEWTON_TOL, PENALTY_OPTIONS, PROGRESS,
                                              PROGRESS_MIN_STEPS, PROGRESS_POLL_S, RunJob,
                                              integrate_steps, nsteps_of, run_settings, simulate)
from workbench.integrators.trapezoidal import PRED_HIST
from workbench.kernels import layout as AR
from workbench.model.catalog import as_compiled
from workbench.objectives import resolve_objectives
from workbench.sensitivities import sweeps as SW
from workbench.statics import equilibrium_start

METHODS = ("direct", "adjoint", "fd")
VARIANTS = ("discrete", "continuous")
#: how the discrete adjoint takes its step products ``K^T mu, C^T mu, P^T mu`` (see
#: :func:`sensitivity`)
PRODUCTS = ("auto", "forward", "reverse")
#: ``products="auto"`` takes the reverse products (where they cover the model) when it has
#: at least this many DOF per objective, twice as many with closure equations: one reverse
#: pass costs about one forward state direction on the open chains and about three on the
#: closed chain (its constraint passes), a solve takes ~6 passes per objective against
#: ``2d`` directions per row shared by the objectives (``docs/performance.md``, session 24:
#: open chains d = 5 about equal, d = 10 and 20 reverse 1.8x and 2.8x faster; closed chain
#: d = 9 with two objectives and the five-bar d = 2 with three, forward 1.5x and 4x faster)
AUTO_DOF_PER_OBJECTIVE = 6
FD_REL_STEP = 1e-5
#: full-storage adjoint above this size (MB) switches to checkpointing
MEMORY_LIMIT_MB = 512.0
FD_NEWTON_TOL = 1e-13


@dataclass
class SensitivityResult:
    """Objectives and their gradient with respect to the design parameters.

    Attributes
    ----------
    objectives, parameters : tuple of str
    units : tuple of str
        Unit of each parameter (the gradient is per unit of the parameter).
    psi : ndarray (no,)
        Objective values.
    gradient : ndarray (no, np)
        ``dpsi_k / drho_j``.
    t : ndarray (N,)
    running : ndarray (N, no, np)
        Direct: the gradient of ``int_t0^t g``; adjoint: the part accumulated backward from
        ``tF`` to ``t`` (equal to ``gradient`` at ``t0``), as in seed 001 Fig. 2.
    timings : dict
        ``simulation_s``, ``sensitivity_s`` (derivatives and sweeps), ``total_s``; with
        ``pipelined`` True the step Jacobians (and the direct recursion) ran on a second
        thread during the simulation, whose time then includes that overlapped work.
    """

    model: str
    method: str
    variant: str
    formulation: str
    objectives: tuple
    parameters: tuple
    units: tuple
    psi: np.ndarray
    gradient: np.ndarray
    t: np.ndarray
    running: np.ndarray
    timings: dict
    fd_steps: np.ndarray | None = None
    simulation: object = field(repr=False, default=None)

    def to_frame(self):
        """Long table: one row per (objective, parameter)."""
        import pandas as pd
        rows = []
        for k, o in enumerate(self.objectives):
            for j, p in enumerate(self.parameters):
                rows.append({"objective": o, "parameter": p, "unit": self.units[j],
                             "psi": self.psi[k], "gradient": self.gradient[k, j]})
        return pd.DataFrame(rows)


def _start(cm: CompiledModel, Gm, formulation):
    """The compiled model to integrate and ``dz^i(t0)/drho``, ``dzd^i(t0)/drho``: for a
    model starting from static equilibrium (``cm.initial_state == "equilibrium"``) the
    equilibrium of this design and its implicit-function derivative
    (:func:`workbench.statics.equilibrium_start`; the velocities are given data), else
    :func:`initial_sensitivities`."""
    if cm.initial_state == "equilibrium":
        cm, SZ0 = equilibrium_start(cm, Gm, formulation)
        return cm, np.ascontiguousarray(SZ0), np.zeros_like(SZ0)
    return (cm, *initial_sensitivities(cm, Gm))


def _revised_start(cm: CompiledModel, sim, Gm, names):
    """The model and initial sensitivities after the forward run revised an automatic
    choice of degrees of freedom (:func:`workbench.integrators.simulation.simulate`): the run
    started
    again from the same assembled initial state with other independent coordinates, so
    the sweeps use that model.  Exact when no parameter moves the initial assembly (the
    initial values of the new coordinates are then design-independent, as the direct and
    adjoint sweeps assume); otherwise a typed error asks for an explicit choice."""
    rev = sim.dof_revisions[-1]
    new = sim.compiled
    pkin = kinematic_parameters(cm, Gm)
    bad = [nm for nm, k in zip(names, pkin) if k]
    if bad or cm.initial_state != "given":
        why = (f"the parameters {bad} move the initial assembly" if bad else
               f"the initial state is {cm.initial_state!r}")
        raise SingularConfigurationError(
            f"model {cm.name!r}: the automatic degrees of freedom {rev['from']} stop "
            f"determining the configuration at t = {rev['time']:.6g} s and the forward run "
            f"was repeated with {rev['to']}; {why}, so the initial values of the new "
            f"coordinates depend on the design: declare the degrees of freedom with "
            f"Model.dof({', '.join(repr(n) for n in rev['to'])}) (or 'dof' in the model "
            f"file) for exact sensitivities", rev["time"], [], rev["to"])
    return (new, *initial_sensitivities(new, Gm))


def _weights(N, h):
    W = np.full(N, h)
    W[0] = W[-1] = 0.5 * h
    return W


def _param_terms(co, names, values, T):
    """Contribution of explicit parameter terms ``w rho^p`` integrated over ``T``."""
    psi = np.zeros(len(co.names))
    grad = np.zeros((len(co.names), len(names)))
    for k, pname, pw, w in co.param_terms:
        val = values[pname]
        psi[k] += w * val ** pw * T
        if pname in names:
            grad[k, names.index(pname)] += w * pw * val ** (pw - 1) * T
    return psi, grad


def _sweeps(cm, sim, co):
    """The sweep kernels of the simulation's formulation (semi-recursive or global)."""
    return SW.FAMILY_SWEEPS[get_formulation(sim.formulation).family](cm, sim)


def measure_values(sim, co) -> np.ndarray:
    """The measures of compiled objectives ``co`` along a simulation, ``(N, n_measures)``
    (one column per term, in the order of ``co.ms_type``)."""
    cm = sim.compiled
    ma = cm.arrays
    N = len(sim.t)
    MV = np.zeros((N, co.n_measures))
    family = get_formulation(sim.formulation).family
    if family not in SW.FAMILY_SWEEPS or (co.has_reactions and family != "semirecursive"):
        # a simulation-only family (multipliers; or reaction measures of another family):
        # its rows hold every coordinate, rate and acceleration, so the measures need the
        # frame kinematics only, and the reactions are the result's constraint forces
        S.measures_stored(ma, ma.p, sim.z, sim.zd, sim.zdd, co.ms_type, co.ms_a, co.ms_c, MV)
        if co.has_reactions:
            react = co.reaction_columns
            MV[:, react] = sim.constraint_forces()[:, co.ms_a[react]]
        return MV
    measure_history = _sweeps(cm, sim, co)[2]
    st, k = measure_history(ma, ma.p, formulation_code(sim.formulation), sim.t, sim.z,
                            sim.zi, sim.zdi, sim.zddi, co.ms_type, co.ms_a, co.ms_c, MV)
    raise_for_status(cm, st, float(sim.t[min(k, N - 1)]), 0.0, -1,
                     f"model {cm.name!r}, objective evaluation")
    return MV


def _stored_measures(cm, form, co, t, z, zd, zdd) -> np.ndarray:
    """The measures of ``co`` along stored rows of full coordinates, rates and
    accelerations: the frame kinematics (:func:`~workbench.formulations.semirecursive.step_jacobians.measures_stored`)
    and, for the reaction measures, the closure multipliers recovered from each row
    (:func:`~workbench.integrators.result_kinematics.constraint_force_history`)."""
    ma = cm.arrays
    MV = np.zeros((len(t), co.n_measures))
    S.measures_stored(ma, ma.p, z, zd, zdd, co.ms_type, co.ms_a, co.ms_c, MV)
    if co.has_reactions:
        react = co.reaction_columns
        MV[:, react] = constraint_force_history(cm, form, t, z, zd, zdd)[:, co.ms_a[react]]
    return MV


def objective_values(sim, co) -> np.ndarray:
    """``psi`` of a simulation result (trapezoidal quadrature on the output grid)."""
    cm = sim.compiled
    N = len(sim.t)
    MV = measure_values(sim, co)
    g, _ = co.integrand_partials(MV)
    psi = _weights(N, sim.dt) @ g
    values = dict(zip(cm.param_names, cm.param_values))
    psi += _param_terms(co, [], values, sim.t[-1] - sim.t[0])[0]
    return psi


def sensitivity(model, objectives=None, parameters=None, method: str = "adjoint",
                variant: str = "discrete", formulation: str = "sr-com", t_end=None, dt=None,
                fd_step: float = FD_REL_STEP, simulation=None, checkpoint_steps=None,
                memory_limit_mb: float = MEMORY_LIMIT_MB,
                threads: int | None = None, products: str = "auto") -> SensitivityResult:
    """Objectives ``psi = int g dt`` and their gradient with respect to parameters.

    Parameters
    ----------
    model : Model, CompiledModel or str (shipped model name)
    objectives : Objective or list of Objective, optional
        Default: the objectives declared in the model (``[objectives]``).
    parameters : list of str, optional
        Names of model parameters; default: the model's ``design_parameters``.
    method : {"direct", "adjoint", "fd"}
    variant : {"discrete", "continuous"}
        See the module documentation.
    formulation : {"sr-com", "sr-origin", "global"}
        ``"global"``: the global formulation in natural coordinates
        (:mod:`workbench.formulations.natural.build`,
        step Jacobians :mod:`workbench.formulations.natural.step_jacobians`).
    t_end, dt : float, optional
        Default: the model's ``t_end`` and ``dt`` (``[model.meta]``).
    fd_step : float
        Relative step of the central differences (``method="fd"``):
        ``delta_j = fd_step * max(|rho_j|, 1e-3)``.
    simulation : SimulationResult, optional
        A simulation of the same model/formulation/grid to reuse (skips the forward run).
        Checked: another model, design (parameter values), formulation, step or number of
        rows, or a non-finite value, raises SensitivityError (NonFiniteError); ``t_end``
        and ``dt`` default to its grid.
    checkpoint_steps : int, optional
        Adjoint only: keep the forward trajectory at every ``checkpoint_steps``-th step and
        re-run each segment during the backward sweep (see "Adjoint memory" in the module
        documentation).  Default: full storage when it fits in ``memory_limit_mb``, else
        segments of ``ceil(sqrt(N))`` steps.  With checkpoints the result's running
        gradient is sampled at the checkpoints and ``simulation`` is None.
    memory_limit_mb : float
        Full-storage adjoint up to this size, and the kept converged states (both methods)
        when they fit too (see "Adjoint memory" in the module documentation).
    threads : int, optional
        Threads that evaluate the step Jacobians of the stored trajectory (they are
        independent from step to step; the recursions themselves are sequential).
        Default: ``numba.get_num_threads()`` (the machine's cores unless
        ``NUMBA_NUM_THREADS`` says otherwise).  The gradient does not depend on it.
    products : {"auto", "forward", "reverse"}
        Discrete adjoint only: ``"forward"`` forms the step Jacobians by forward tangent
        directions (``2d`` state directions per step plus one per geometric parameter);
        ``"reverse"`` forms none: one reverse-mode pass per objective gives the step
        products and the transposed solve with ``T`` takes a few passes preconditioned by
        the simulation's iteration matrix
        (:mod:`workbench.formulations.semirecursive.step_vjp`).  The same gradient to
        rounding.  ``"reverse"`` covers trees and closed loops whose DOF are joint
        coordinates, closed by point-coincidence or distance rows, loaded by gravity,
        inertia, joint and linear point spring-dampers, without reaction measures
        (OptionError otherwise); it runs on one thread.  ``"auto"`` (default): reverse in
        the semi-recursive formulations where it covers the model and the model has at
        least :data:`AUTO_DOF_PER_OBJECTIVE` DOF per objective (twice as many with
        closures), else forward; ``result.timings["products"]`` says which ran.
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose one of {METHODS}")
    nthreads = _threads(threads)
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; choose one of {VARIANTS}")
    if products not in PRODUCTS:
        raise OptionError(f"products: unknown value {products!r}; choose one of {PRODUCTS}")
    for label, v in (("fd_step", fd_step), ("memory_limit_mb", memory_limit_mb)):
        if not (isinstance(v, (int, float, np.integer, np.floating)) and np.isfinite(v)
                and v > 0):
            raise ValueError(f"{label} must be a positive number, got {v!r}")
    cm = as_compiled(model)
    form = formulation_code(formulation)
    family = get_formulation(formulation).family
    if family == "penalty" and PENALTY_OPTIONS.get()["projection"] != "none":
        # the differentiated penalty map is the rule without the projections of eqs 24-26
        # (their matrix P = M + h/2 C + h^2/4 K would need second derivatives of Q): the
        # forward run, the sweeps and the differences all use it
        with run_settings(penalty={"projection": "none"}):
            return sensitivity(model, objectives, parameters, method, variant, formulation,
                               t_end, dt, fd_step, simulation, checkpoint_steps,
                               memory_limit_mb, threads, products)
    if family not in SW.FAMILY_SWEEPS:
        raise OptionError(f"formulation {formulation!r} (family {family!r}) has no design "
                          "sensitivities yet; choose one of "
                          + ", ".join(sorted(k for k, f in REGISTRY.items()
                                             if f.family in SW.FAMILY_SWEEPS)))
    meta = getattr(cm.model, "meta", {}) or {}
    if simulation is not None:
        # its grid is the default; a different model, design, formulation or grid is refused
        t_end, dt = _match_simulation(cm, simulation, formulation, t_end, dt)
    t_end = float(meta.get("t_end", 1.0) if t_end is None else t_end)
    dt = float(meta.get("dt", 1e-3) if dt is None else dt)
    nrows = nsteps_of(0.0, t_end, dt) + 1    # ValueError for a bad grid, before any work
    if simulation is not None:
        if len(simulation.t) != nrows:
            raise SensitivityError(
                f"model {cm.name!r}: the given simulation has {len(simulation.t)} output rows, "
                f"t_end = {t_end:g} s with dt = {dt:g} s needs {nrows}")
        _check_plain_steps(cm, simulation)
        _check_finite(cm, simulation)
    names, Gm, units = parameter_columns(cm, parameters)
    co = resolve_objectives(cm, objectives)
    values = dict(zip(cm.param_names, cm.param_values))
    if co.has_reactions and family != "semirecursive" and method != "fd":
        raise OptionError(f"formulation {formulation!r}: the gradients of reaction measures "
                          "(closure multipliers) are built in the semi-recursive Matrix-R "
                          "formulations only; choose sr-com or sr-origin")
    if co.has_reactions and method != "fd":
        rank, m = redundant_closures(cm, cm.z_guess)
        if rank < m:
            raise OptionError(
                f"model {cm.name!r}: its {m} closure equations have rank {rank} (redundant "
                "closures): their multipliers are not unique (the reported ones are the "
                "minimum-norm choice) and the reaction objectives have no exact gradient; "
                "remove the redundant equations (e.g. a cut spherical instead of a cut "
                "revolute) or use method='fd'")
    if method == "fd":
        return _finite_differences(cm, co, names, units, formulation, t_end, dt, fd_step)
    if products == "auto":
        products = _auto_products(cm, co, method, variant, formulation, family)
    elif products == "reverse":
        _check_reverse(cm, co, method, variant, formulation, family)
    fm = get_formulation(formulation)
    if checkpoint_steps is not None and not fm.checkpointing:
        raise ValueError(f"checkpoint_steps: the {formulation!r} formulation stores the whole "
                         "trajectory (no checkpointed adjoint)")
    t0 = _time.perf_counter()
    cm, SZ0, SV0 = _start(cm, Gm, formulation)
    t_start = _time.perf_counter() - t0
    if method == "adjoint" and simulation is None and fm.checkpointing:
        seg = _segment_length(cm, co, len(names), t_end, dt, checkpoint_steps,
                              memory_limit_mb)
        if seg is not None:
            return _adjoint_checkpointed(cm, co, names, Gm, units, formulation, form, t_end,
                                         dt, variant, seg, values, SZ0, SV0, nthreads,
                                         products)
    jac = None
    if simulation is None:
        # (the reverse products read the stored rows only: no kept integrator states)
        keep = fm.keeps_states and products == "forward" and _fits(
            _full_storage_bytes(cm, co, len(names), nrows, True), memory_limit_mb)
        if keep and nthreads > 1 and cm.initial_state != "equilibrium" and (
                method == "direct" or _fits(_jacobian_bytes(cm, co, len(names), nrows),
                                            memory_limit_mb)):
            # pipelined: the step Jacobians of the rows the simulation has finished are
            # evaluated beside it while it runs (the direct recursion too; the adjoint
            # holds the whole trajectory's Jacobians)
            sim, jac = _pipelined(cm, co, Gm, formulation, form, t_end, dt, method, nthreads,
                                  SZ0, SV0)
        else:
            sim = simulate(cm, t_end, dt, formulation, keep_states=keep)
    else:
        sim = simulation
    t_sim = _time.perf_counter() - t0 if simulation is None else sim.wall_time_s
    if getattr(sim, "dof_revisions", None):
        cm, SZ0, SV0 = _revised_start(cm, sim, Gm, names)
    if simulation is None:
        _check_plain_steps(cm, sim)
    ma = cm.arrays
    N = len(sim.t)
    nm, no, npar = co.n_measures, len(co.names), len(names)
    W = _weights(N, dt)
    # (the pipelined sweeps have run already)
    args = None if jac is not None or products == "reverse" else _sweep_args(
        _masks(cm, co, Gm), co, Gm, sim.t, sim.z, sim.zi, sim.zdi, sim.zddi, _kept_states(sim))
    direct_sweep, adjoint_sweep, _ = _sweeps(cm, sim, co)
    t1 = _time.perf_counter()
    extra = {}
    if method == "direct":
        if jac is not None:
            MV, DM = jac
        else:
            MV = np.zeros((N, nm))
            DM = np.zeros((N, nm, npar))
            SA = np.zeros((N, cm.d, npar))
            st, k = direct_sweep(ma, ma.p, form, dt, *args, SZ0, SV0, MV, DM, SA,
                                 nthreads=nthreads)
            _raise(cm, st, sim, k)
        g, GM = co.integrand_partials(MV)
        # total derivative of each measure (relative terms: minus its initial derivative)
        DMrel = DM - co.relative[None, :, None] * DM[0:1]
        contrib = np.einsum("ntk,ntj->nkj", GM, DMrel)          # (N, no, np)
        running = np.zeros((N, no, npar))
        running[1:] = np.cumsum(0.5 * dt * (contrib[1:] + contrib[:-1]), axis=0)
        grad = running[-1].copy()
    else:
        GRAD = np.zeros((npar, no))
        RUN = np.zeros((N, npar, no))
        carry = np.zeros((7, cm.d, no))
        vcode = 0 if variant == "discrete" else 1
        if products == "reverse" or not fm.keeps_states or jac is not None:
            # no kept states (global formulation): a pass of its own; pipelined: the
            # measures came with the step Jacobians; reverse products: from the stored
            # rates and accelerations (no step Jacobian evaluates them)
            MV = (_stored_measures(cm, form, co, sim.t, sim.z, sim.zd, sim.zdd)
                  if products == "reverse" else
                  measure_values(sim, co) if jac is None else jac[3])
            g, GM = co.integrand_partials(MV)
            C0 = np.ascontiguousarray(-np.einsum("n,ntk->tk", W, GM) * co.relative[:, None])
            kw = {}
        else:
            # the step Jacobians evaluate the measures of their rows: the integrand partials
            # of each block are taken from them before its recursion (only the initial
            # measures, the base of the relative terms, are evaluated ahead)
            MV0 = _stored_measures(cm, form, co, sim.t[:1], sim.z[:1], sim.zd[:1],
                                   sim.zdd[:1])
            g, GM, C0 = np.zeros((N, no)), np.zeros((N, nm, no)), np.zeros((nm, no))

            def partials(k0, k1, MVb, STb):
                ok = STb == MR.OK          # (a failed row stops the recursion there)
                if ok.all():
                    g[k0:k1], GM[k0:k1] = co.integrand_partials(MVb, base=MV0[0])
                else:
                    g[k0:k1][ok], GM[k0:k1][ok] = co.integrand_partials(MVb[ok], base=MV0[0])
                if k0 == 0:
                    C0[:] = -np.einsum("n,ntk->tk", W, GM) * co.relative[:, None]
            kw = {"partials": partials}
        if products == "reverse":
            st, k, npass = _reverse_rows(cm, co, Gm, form, dt, sim.t, sim.z, sim.zi, sim.zdi,
                                         sim.zddi, SZ0, SV0, GM, C0, W, GRAD, RUN, 0, N, carry)
            extra["reverse_passes_per_row"] = npass
        elif jac is not None:
            st, k = SW.adjoint_block(dt, vcode, 0, N, jac, SZ0, SV0, GM, C0, W, GRAD, RUN, 0,
                                    N, carry)
        else:
            st, k = adjoint_sweep(ma, ma.p, form, dt, vcode, *args, SZ0, SV0, GM, C0, W, GRAD,
                                  RUN, 0, N, carry, nthreads=nthreads, **kw)
        _raise(cm, st, sim, k)
        grad = GRAD.T.copy()
        running = np.transpose(RUN, (0, 2, 1)).copy()
    t_sens = _time.perf_counter() - t1
    psi = W @ g
    ppsi, pgrad = _param_terms(co, list(names), values, sim.t[-1] - sim.t[0])
    psi = psi + ppsi
    grad = grad + pgrad
    running = running + pgrad[None] * ((sim.t - sim.t[0]) / (sim.t[-1] - sim.t[0]))[:, None, None] \
        if method == "direct" else running + pgrad[None] * \
        ((sim.t[-1] - sim.t) / (sim.t[-1] - sim.t[0]))[:, None, None]
    return SensitivityResult(
        model=cm.name, method=method, variant=variant, formulation=formulation,
        objectives=co.names, parameters=names, units=units, psi=psi, gradient=grad, t=sim.t,
        running=running,
        timings={"simulation_s": t_sim, "sensitivity_s": t_sens,
                 "total_s": t_sim + t_sens, "equilibrium_s": t_start,
                 "pipelined": jac is not None, "products": products,
                 **extra},
        simulation=sim)


class _SimulationStopped(Exception):
    """The forward run of a pipelined sensitivity stopped (its error is raised by the
    sequential path that then runs the simulation again)."""


def _pipelined(cm, co, Gm, formulation, form, t_end, dt, method, nthreads, SZ0, SV0):
    """Forward run on a background thread (the integrator releases the GIL) while this one
    evaluates the step Jacobians of the rows it has finished (one thread; all of them
    once the run has ended) and, for the direct method, runs the recursion.

    Returns ``(simulation, jac)``: ``jac = (MV, DM)`` for the direct method, the Jacobian
    block of the whole trajectory
    (:func:`workbench.formulations.semirecursive.step_jacobians.trajectory_jacobians`) for the
    adjoint,
    or None when the run or the sweep stopped (the caller then takes the sequential path,
    which raises the typed error or revises the degrees of freedom)."""
    import threading
    nsteps = nsteps_of(0.0, t_end, dt)
    job = RunJob(cm, formulation, form, 0.0, dt, nsteps, cm.zi0, cm.zdi0, cm.z_guess,
                 keep_states=True)
    N = nsteps + 1
    npar, nm = Gm.shape[1], co.n_measures

    report = PROGRESS.get() if nsteps >= PROGRESS_MIN_STEPS else None
    last = [0.0]

    def ready(k1):
        # rows below k1 are final once the run has written row k1 (or has ended)
        if report is not None and _time.perf_counter() - last[0] > PROGRESS_POLL_S:
            last[0] = _time.perf_counter()
            report(int(job.progress[0]), N)
        while True:
            if job.status is not None:
                if job.status[0] != MR.OK:
                    raise _SimulationStopped
                return nthreads
            if job.progress[0] > k1:
                return 1
            _time.sleep(2e-5)

    # the sweep's own StructRef of the model: the simulation thread's reference counts
    # of cm.arrays then live on another cache line (workbench.kernels.layout.replicas)
    ma = AR.replicas(cm.arrays, 2)[1]
    args = _sweep_args(_masks(cm, co, Gm), co, Gm, job.T, job.Z, job.ZI, job.ZDI, job.ZDDI,
                       job.KS)
    thread = threading.Thread(target=job.integrate, daemon=True)
    thread.start()
    jac = None
    try:
        if method == "direct":
            MV = np.zeros((N, nm))
            DM = np.zeros((N, nm, npar))
            SA = np.zeros((N, cm.d, npar))
            st, _ = SW.direct_sweep(ma, ma.p, form, dt, *args, SZ0, SV0, MV, DM, SA,
                                   ready=ready)
            jac = (MV, DM) if st == MR.OK else None
        else:
            jac = S.trajectory_jacobians(ma, ma.p, form, *args, ready)
    except _SimulationStopped:
        jac = None
    finally:
        thread.join()
    if job.status[0] != MR.OK:
        return simulate(cm, t_end, dt, formulation, keep_states=True), None
    return job.result(), jac


def _masks(cm, co, Gm) -> tuple:
    """``(pkin, pskip, zskip)`` of the sweeps: kinematic and reverse-mode parameters,
    cyclic degrees of freedom."""
    # reaction measures read every force through tau: no parameter column is left to the
    # reverse-mode residual columns (which fill the residual only, not the measures)
    pskip = reverse_parameters(cm, Gm)
    if co.has_reactions:
        pskip = np.zeros_like(pskip)
    return kinematic_parameters(cm, Gm), pskip, cyclic_dofs(cm, co)


def _sweep_args(masks, co, Gm, T, Z, ZI, ZDI, ZDDI, KS) -> tuple:
    """The trajectory, parameter and measure arguments of the semi-recursive sweeps, from
    ``TT`` to ``ms_c`` (:func:`workbench.sensitivities.sweeps.direct_sweep`); ``masks`` from :func:`_masks`."""
    return (T, Z, ZI, ZDI, ZDDI, KS, Gm, *masks, co.ms_type, co.ms_a, co.ms_c)


def _jacobian_bytes(cm, co, npar, N) -> int:
    """Bytes of the step Jacobians of a whole trajectory (pipelined adjoint): ``N`` rows
    of the layout of :func:`workbench.formulations.semirecursive.step_jacobians.make_block`."""
    return N * sum(a.nbytes for a in S.make_block(1, cm.d, npar, co.n_measures))


def _threads(threads) -> int:
    """The number of threads of the sweeps' Jacobian evaluation (see :func:`sensitivity`)."""
    import numba
    if threads is None:
        return numba.get_num_threads()
    if not (isinstance(threads, (int, np.integer)) and threads >= 1):
        raise ValueError(f"threads must be a positive integer, got {threads!r}")
    return int(min(threads, numba.config.NUMBA_NUM_THREADS))


def _kept_states(sim) -> np.ndarray:
    """The converged states the simulation kept (``simulate(..., keep_states=True)``) or
    an empty array (the sweeps then evaluate them)."""
    if getattr(sim, "states", None) is None:
        return np.zeros((len(sim.t), 0))
    return sim.states


def _full_storage_bytes(cm, co, npar, N, states=False) -> int:
    """Bytes held by a full-storage adjoint: trajectory, measures, integrand partials and
    the running gradient, and with ``states`` the kept converged states, 8 bytes per
    float."""
    n, d, nm, no = cm.n, cm.d, co.n_measures, len(co.names)
    L = MR.state_record_size(cm.arrays, n) if states else 0
    return 8 * N * (3 * n + 3 * d + nm * (1 + no) + npar * no + 4 + L)


def _fits(nbytes, memory_limit_mb) -> bool:
    return nbytes <= memory_limit_mb * 2 ** 20


def _segment_length(cm, co, npar, t_end, dt, checkpoint_steps, memory_limit_mb):
    nsteps = int(round(t_end / dt))
    if checkpoint_steps is not None:
        seg = int(checkpoint_steps)
        if seg < 1:
            raise ValueError(f"checkpoint_steps must be >= 1, got {checkpoint_steps!r}")
        return seg if seg < nsteps else None
    if _fits(_full_storage_bytes(cm, co, npar, nsteps + 1), memory_limit_mb):
        return None
    return max(1, int(np.ceil(np.sqrt(nsteps + 1))))


def _adjoint_checkpointed(cm, co, names, Gm, units, formulation, form, t_end, dt, variant,
                          seg, values, SZ0, SV0, nthreads, products="forward"):
    """Adjoint with checkpointing: the forward run keeps only the states at every
    ``seg``-th step (with the predictor state, so a segment re-run reproduces its rows bit
    for bit); the backward sweep re-runs one segment at a time and carries the adjoint
    state across segments.  Memory ~ (N / seg + seg) rows; cost ~ one extra forward
    simulation."""
    ma = cm.arrays
    nsteps = int(round(t_end / dt))
    N = nsteps + 1
    no, npar, nm = len(co.names), len(names), co.n_measures
    bounds = list(range(0, nsteps, seg)) + [nsteps]
    nseg = len(bounds) - 1
    masks = _masks(cm, co, Gm)

    def rows_of(s):
        k0, k1 = bounds[s], bounds[s + 1]
        return k0, (k1 + 1 if s == nseg - 1 else k1)     # rows k0 .. end-1 of the segment

    def weights(k0, k1):
        w = np.full(k1 - k0, dt)
        if k0 == 0:
            w[0] = 0.5 * dt
        if k1 == N:
            w[-1] = 0.5 * dt
        return w

    def run_segment(s, ck, keep):
        k0, k1 = bounds[s], bounds[s + 1]
        zi, zdi, z, res = ck
        sim = integrate_steps(cm, formulation, form, 0.0, dt, k1 - k0, zi, zdi, z, NEWTON_TOL,
                   NEWTON_MAXIT, resume=res, kofs=k0, keep_states=keep)
        _check_plain_steps(cm, sim, offset=k0)
        return sim, _stored_measures(cm, form, co, sim.t, sim.z, sim.zd, sim.zdd)

    t0 = _time.perf_counter()
    checkpoints = []
    ck = (cm.zi0, cm.zdi0, cm.z_guess, None)
    psi = np.zeros(no)
    C0 = np.zeros((nm, no))
    MV0 = None
    last = None
    hist = np.zeros((0, cm.d))
    for s in range(nseg):
        checkpoints.append(ck)
        sim, MV = run_segment(s, ck, s == nseg - 1)
        if MV0 is None:
            MV0 = MV[0].copy()
            hist = sim.zddi[:1].copy()
        k0, kend = rows_of(s)
        g, GM = co.integrand_partials(MV, MV0)
        w = weights(k0, kend)
        psi += w @ g[:kend - k0]
        C0 -= np.einsum("n,ntk->tk", w, GM[:kend - k0]) * co.relative[:, None]
        # the predictor state at the checkpoint row: the previous rows' accelerations
        hist = np.concatenate([hist, sim.zddi[1:]])[-(PRED_HIST + 1):]
        k1 = bounds[s + 1]
        prev = np.zeros((PRED_HIST, cm.d))
        for i in range(min(k1, PRED_HIST)):
            prev[i] = hist[-2 - i]
        ck = (sim.zi[-1].copy(), sim.zdi[-1].copy(), sim.z[-1].copy(),
              (sim.zddi[-1].copy(), prev, min(k1, PRED_HIST)))
        last = (sim, MV)
    t_fwd = _time.perf_counter() - t0
    t1 = _time.perf_counter()
    GRAD = np.zeros((npar, no))
    carry = np.zeros((7, cm.d, no))
    run_t, run_g = [], []
    vcode = 0 if variant == "discrete" else 1
    for s in range(nseg - 1, -1, -1):
        sim, MV = last if s == nseg - 1 else run_segment(s, checkpoints[s], True)
        k0, kend = rows_of(s)
        r = slice(0, kend - k0)
        _, GM = co.integrand_partials(MV, MV0)
        RUN = np.zeros((kend - k0, npar, no))
        if products == "reverse":
            st, k, _ = _reverse_rows(cm, co, Gm, form, dt, sim.t[r], sim.z[r], sim.zi[r],
                                     sim.zdi[r], sim.zddi[r], SZ0, SV0,
                                     np.ascontiguousarray(GM[r]), np.ascontiguousarray(C0),
                                     weights(k0, kend), GRAD, RUN, k0, N, carry)
        else:
            args = _sweep_args(masks, co, Gm, sim.t[r], sim.z[r], sim.zi[r], sim.zdi[r],
                               sim.zddi[r], sim.states[r])
            st, k = SW.adjoint_sweep(
                ma, ma.p, form, dt, vcode, *args, SZ0, SV0, np.ascontiguousarray(GM[r]),
                np.ascontiguousarray(C0), weights(k0, kend), GRAD, RUN, k0, N, carry,
                nthreads=nthreads)
        _raise(cm, st, sim, k)
        if s == nseg - 1:
            run_t.append(sim.t[kend - k0 - 1])
            run_g.append(RUN[-1].T.copy())
        run_t.append(sim.t[0])
        run_g.append(RUN[0].T.copy())
    t_sens = _time.perf_counter() - t1
    grad = GRAD.T.copy()
    ppsi, pgrad = _param_terms(co, list(names), values, t_end)
    t_run = np.array(run_t[::-1])
    running = np.array(run_g[::-1]) + pgrad[None] * ((t_end - t_run) / t_end)[:, None, None]
    return SensitivityResult(
        model=cm.name, method="adjoint", variant=variant, formulation=formulation,
        objectives=co.names, parameters=names, units=units, psi=psi + ppsi,
        gradient=grad + pgrad, t=t_run, running=running,
        timings={"simulation_s": t_fwd, "sensitivity_s": t_sens, "total_s": t_fwd + t_sens,
                 "checkpoint_steps": seg, "segments": nseg},
        simulation=None)


def _reverse_refusal(cm, co, method, variant, formulation, family) -> str | None:
    """Why ``products="reverse"`` is not possible here, or None."""
    if method != "adjoint" or variant != "discrete":
        return (f"products='reverse' is the discrete adjoint's (method='adjoint', "
                f"variant='discrete'), not method={method!r}, variant={variant!r}")
    if family not in ("semirecursive", "rcr"):
        return (f"products='reverse': formulation {formulation!r} has no reverse-mode step "
                "products; choose sr-com or sr-origin")
    if not SV.reverse_supported(cm.arrays, co.ms_type):
        return (f"model {cm.name!r}: products='reverse' covers trees and closed loops whose "
                "DOF are joint coordinates, closed by point-coincidence or distance rows, "
                "loaded by gravity, inertia, joint spring-dampers and linear point "
                "spring-dampers, without reaction measures; this model has other closures, "
                "other DOF, other loads or reaction objectives: use products='forward'")
    return None


def _check_reverse(cm, co, method, variant, formulation, family):
    """``products="reverse"`` is possible here, else OptionError saying why."""
    why = _reverse_refusal(cm, co, method, variant, formulation, family)
    if why is not None:
        raise OptionError(why)


def _auto_products(cm, co, method, variant, formulation, family) -> str:
    """The products ``products="auto"`` takes (:data:`AUTO_DOF_PER_OBJECTIVE`; the
    semi-recursive formulations only)."""
    if family != "semirecursive" or _reverse_refusal(cm, co, method, variant, formulation,
                                                     family) is not None:
        return "forward"
    per = AUTO_DOF_PER_OBJECTIVE * (2 if cm.arrays.c_type.shape[0] else 1)
    return "reverse" if cm.d >= per * len(co.names) else "forward"


def _reverse_rows(cm, co, Gm, form, dt, T, Z, ZI, ZDI, ZDDI, SZ0, SV0, GM, C0, W, GRAD, RUN,
                  row0, nglob, carry):
    """:func:`workbench.formulations.semirecursive.step_vjp.adjoint_sweep_reverse` over
    the rows given; returns (status, row, mean reverse passes per row)."""
    ma = cm.arrays
    c = np.ascontiguousarray
    passes = np.zeros(len(T), dtype=np.int64)
    st, k = SV.adjoint_sweep_reverse(
        ma, ma.p, form, dt, c(T, dtype=float), c(Z), c(ZI), c(ZDI), c(ZDDI),
        c(Gm, dtype=float), c(co.ms_type, dtype=np.int64), c(co.ms_a, dtype=np.int64),
        c(co.ms_c, dtype=np.int64), c(SZ0), c(SV0), GM, C0, W, GRAD, RUN, row0, nglob, carry,
        passes)
    return st, k, float(passes.mean()) if len(passes) else 0.0


def _raise(cm, st, sim, k):
    if st != MR.OK:
        k = min(max(k, 0), len(sim.t) - 1)
        raise_for_status(cm, st, float(sim.t[k]), 0.0, -1,
                         f"model {cm.name!r}, sensitivity analysis, step {k}")


def _check_plain_steps(cm, sim, offset=0):
    """The discrete sweeps differentiate one trapezoidal step per output interval."""
    kind = getattr(sim, "step_kind", None)
    if kind is None or len(kind) < 2:
        return
    bad = np.flatnonzero((kind[1:, 0] != 1) | (kind[1:, 1] != 1))
    if bad.size:
        k = int(bad[0]) + 1 + offset
        span, nsub = (int(v) for v in kind[k - offset])
        how = ("interpolated inside a step merged over a singular configuration" if span == 0
               else f"reached by a step merged over {span} intervals" if span > 1
               else f"reached by {nsub} sub-steps after Newton failed at the full step")
        raise SensitivityError(
            f"model {cm.name!r}: output row {k} was {how} ({bad.size} such rows); the "
            f"discrete sensitivities need one trapezoidal step per interval -- use a smaller "
            f"dt or keep the motion away from the singular configuration",
            time=float(sim.t[k - offset]), step=k)


def _match_simulation(cm, sim, formulation, t_end, dt):
    """``(t_end, dt)`` for a given simulation ``sim``: its own grid where they are None.
    A simulation of another model or design (different parameter values), another
    formulation or another step is refused (SensitivityError): the sweeps would
    differentiate a trajectory that the model does not produce."""
    other = getattr(sim, "compiled", None)
    why = None
    if sim.model != cm.name or (other is not None and other.name != cm.name):
        why = f"it is a simulation of model {sim.model!r}"
    elif np.shape(sim.z)[1:] != (cm.n,) or np.shape(sim.zi)[1:] != (cm.d,):
        why = (f"its coordinates ({np.shape(sim.z)[1:]}, {np.shape(sim.zi)[1:]}) are not the "
               f"model's ({cm.n} coordinates, {cm.d} degrees of freedom)")
    elif other is not None and not np.array_equal(other.arrays.p, cm.arrays.p):
        i = int(np.flatnonzero(other.arrays.p != cm.arrays.p)[0])
        names = [nm for nm, col in zip(cm.param_names, cm.G.T) if col[i] != 0.0]
        why = (f"it was run with other parameter values (field {i}"
               f"{', parameter ' + names[0] if names else ''}: {float(other.arrays.p[i]):g} there, "
               f"{float(cm.arrays.p[i]):g} here)")
    elif sim.formulation != formulation:
        why = f"it was run with formulation {sim.formulation!r}, not {formulation!r}"
    elif getattr(sim, "integrator", "trapezoidal") != "trapezoidal":
        why = (f"it was integrated with {sim.integrator!r}; the sensitivities differentiate "
               "the trapezoidal rule")
    elif dt is not None and not np.isclose(float(dt), sim.dt, rtol=1e-12, atol=0.0):
        why = f"its step is dt = {sim.dt:g} s, not {float(dt):g} s"
    if why is not None:
        raise SensitivityError(f"model {cm.name!r}: the given simulation cannot be used: "
                               f"{why}; pass a simulation of this model and grid, or none")
    t_end = float(sim.t[-1]) if t_end is None else t_end
    return t_end, sim.dt if dt is None else dt


def _check_finite(cm, sim):
    """A given simulation's rows are finite (the integrator raises rather than return a
    NaN; a result edited or made elsewhere may hold one): NonFiniteError naming the first
    bad row's time and array."""
    for name in ("t", "z", "zd", "zdd", "zi", "zdi", "zddi"):
        a = np.asarray(getattr(sim, name))
        bad = ~np.isfinite(a.reshape(len(a), -1)).all(axis=1)
        if bad.any():
            k = int(np.argmax(bad))
            t = float(sim.t[k]) if np.isfinite(sim.t[k]) else None
            raise NonFiniteError(
                f"model {cm.name!r}: the given simulation holds a NaN or infinite value in "
                f"{name!r} at output row {k} (t = {t}); the sensitivity sweeps need a finite "
                f"trajectory", t, element=name)


def _finite_differences(cm, co, names, units, formulation, t_end, dt, rel):
    """Central differences of the simulated objectives (reference values only)."""
    start = _time.perf_counter()
    base = dict(zip(cm.param_names, cm.param_values))
    sim = simulate(cm, t_end, dt, formulation)
    psi0 = objective_values(sim, co)
    grad = np.zeros((len(co.names), len(names)))
    steps = np.zeros(len(names))
    for j, nm in enumerate(names):
        delta = rel * max(abs(base[nm]), 1e-3)
        steps[j] = delta
        vals = []
        for s in (+1, -1):
            cmj = cm.with_parameters({nm: base[nm] + s * delta})
            simj = simulate(cmj, t_end, dt, formulation, newton_tol=FD_NEWTON_TOL)
            vals.append(objective_values(simj, co))
        grad[:, j] = (vals[0] - vals[1]) / (2.0 * delta)
    total = _time.perf_counter() - start
    N = len(sim.t)
    return SensitivityResult(
        model=cm.name, method="fd", variant="discrete", formulation=formulation,
        objectives=co.names, parameters=names, units=units, psi=psi0, gradient=grad,
        t=sim.t, running=np.zeros((N, len(co.names), len(names))),
        timings={"simulation_s": sim.wall_time_s, "sensitivity_s": total - sim.wall_time_s,
                 "total_s": total},
        fd_steps=steps, simulation=sim)
