"""The implicit trapezoidal rule through the recursive coordinate reduction (formulation
``"rcr"``, seed 004): the same step as every formulation's (:mod:`workbench.integrators.
trapezoidal`: :func:`~workbench.integrators.trapezoidal.trapezoidal_update`,
:func:`~workbench.integrators.trapezoidal.correction_converged`), with the accelerations
of a state given by the O(n + m) RCR evaluation
(:func:`workbench.formulations.rcr.closure.forward_dynamics`) instead of a residual and its
Newton matrix.

Unknown per step: ``a = zdd^i_{n+1}`` (the independent accelerations); the step solves

    g(a) = a - f(t_{n+1}, z^i(a), zd^i(a)) = 0,
           z^i(a) = z^i_n + h zd^i_n + h^2/4 (a_n + a),   zd^i(a) = zd^i_n + h/2 (a_n + a)

* by **Newton** (default): ``a <- a - J^-1 g(a)`` with the ``ni x ni`` iteration matrix
  ``J ~ dg/da = I - h/2 df/dzd - h^2/4 df/dz``, taken by forward difference quotients of the
  O(n + m) evaluation ``f`` (:func:`_iteration_matrix`: one extra evaluation per independent
  coordinate, ``ni = 1`` on the N-four-bar), kept across steps and formed again only when
  an iteration contracts by less than :data:`REFORM_RATIO` or a step fails.  The matrix
  only sets how fast the iteration converges: the converged ``a`` solves ``g(a) = 0`` to
  ``newton_tol`` whatever ``J`` is, so a difference-quotient matrix changes no result and
  is not in the gradient path (the sensitivities differentiate the converged steps with the
  semi-recursive sweeps' exact step Jacobians).
* by **fixed-point iteration** (``newton=False``, ``a <- f``): no matrix, contracts by about
  ``h/2 |df/dzd| + h^2/4 |df/dz|`` per iteration, which can pass 1 next to a singular
  configuration of the closures (``df/dz`` grows like ``1/sigma^2``): the N-four-bar at
  N = 40 stops at t = 18.93 s that way, the Newton steps run through its 20 s.

Both start from Matrix-R's predictor (cubic extrapolation of the last plain steps).
Positions within the position tolerance of the last evaluated ones are kept as they are,
and moved ones get at least one Gauss-Newton correction per loop
(:func:`~workbench.formulations.rcr.closure.solve_positions` with ``min_it = 1``), as
Matrix-R's position problem behaves: next to a singular configuration the accelerations
amplify position changes of 1e-13 to 1e-5, and independents that move while the
dependents stay put (the closure residual hardly changes there) made the iteration
diverge (the stop at 0.72 s of N = 40 before).

Because ``R^T tau(z, zd, zdd) = Mbar (a - f)``, the converged step is the discrete solution
of the semi-recursive trapezoidal rule (seed 001 eq 29) on the same independent
coordinates, and the semi-recursive sensitivity sweeps differentiate it exactly.

**Steps over a singular node** (as :func:`workbench.integrators.trapezoidal.
integrate_semirecursive`): a node whose accelerations are rounding noise (``Theta_z``
nearly singular, ``sigma_min / sigma_max < MR.SING_SKIP`` along a direction the DOF rows
hardly measure, ``MR.dof_share < MR.SING_DOF_SHARE``) is not used: the step is merged with
the next (at most ``MAX_SPAN`` intervals) and the skipped rows are the Matrix-R dense
output.  The test is Matrix-R's own (a QR of ``Theta_z``, O(n^3)), evaluated only at the
nodes whose smallest relative RCR pivot is below :data:`MERGE_GATE` (a handful per
crossing of a singular configuration), so that the discrete map is Matrix-R's step for
step; all other nodes stay O(n + m).

:func:`simulate_loops` runs the same steps on the independents of a
:class:`~workbench.formulations.rcr.LoopSolver` (not the model's DOF), with the dependents
selected again when a pivot degrades."""

from __future__ import annotations

import numpy as np
from numba import njit

from workbench.formulations.rcr import closure as RC
from workbench.formulations.semirecursive import matrixr as MR
from workbench.integrators.trapezoidal import (MAX_SPAN, _dense_output, at_noise_floor,
                                               correction_converged, trapezoidal_update)
from workbench.kernels.linalg import lu_solve_inplace, sigma_ratio
from workbench.kernels.status import OK as MR_OK

#: the iteration of a step did not converge (a code of this loop: the RCR
#: evaluation's own codes are ``closure.OK``, ``ST_POSITION``, ``ST_SINGULAR``)
ST_ITERATION = 100
#: the difference-quotient iteration matrix ``J`` is singular
ST_MATRIX = 101
#: the dense output of a row inside a merged step failed (value: the Matrix-R status)
ST_DENSE = 102
#: the smallest relative pivot of an accepted row fell below the re-selection threshold
#: (the row is written; :func:`simulate_loops` selects other dependents there)
ST_RESELECT = 103
#: a Newton iteration that contracts by less than this factor (``|g_{k+1}| > REFORM_RATIO
#: |g_k|``) forms the iteration matrix again (once per step)
REFORM_RATIO = 0.25
#: the position change ``h^2/4 eps`` of a difference quotient of ``J``: far above the
#: position tolerance (1e-12, the quotient's noise is ~ tol / delta = 1e-6 relative) and
#: small enough for the curvature (error ~ delta |f_zz| / |f_z|)
FD_DELTA = 1e-6
#: the merge test (Matrix-R's, O(n^3)) is evaluated at nodes whose smallest relative RCR
#: pivot is below this (measured on the N-four-bar at N = 40 over 20 s: the 15 nodes
#: Matrix-R skips have pivots 2.3e-10 .. 4.1e-6; 264 of the 20 000 nodes are tested)
MERGE_GATE = 1e-3
#: ``stats`` entries of :func:`integrate_rcr`
S_EVALS, S_MATRICES, S_MERGED, S_GATED = 0, 1, 2, 3


@njit(cache=True)
def _set_indep(indep, zi, zdi, z, zd):
    for j in range(indep.shape[0]):
        z[indep[j]] = zi[j]
        zd[indep[j]] = zdi[j]


@njit(cache=True)
def _iteration_matrix(ma, p, t, hs, indep, czi, czdi, ca, a, f, z, zd, zs, zds, zdds, ls,
                      lp_ptr, lp_fr, ws, aw, lw, tol, pos_tol, pos_maxit, J):
    """``J[:, j] = e_j - (f(a + eps_j e_j) - f(a)) / eps_j`` (forward difference quotients
    of the O(n + m) evaluation along each independent acceleration), ``eps_j = 4
    FD_DELTA / hs^2`` (a position change ``FD_DELTA``, a velocity change ``2 FD_DELTA /
    hs``).  Each quotient's position problem starts from the converged dependents of
    ``f(a)`` (``z``).  Returns ``(status, coordinate)`` of the evaluations."""
    ni = indep.shape[0]
    n = z.shape[0]
    zi = np.empty(ni)
    zdi = np.empty(ni)
    eps = 4.0 * FD_DELTA / (hs * hs)
    for j in range(ni):
        for k in range(n):
            zs[k] = z[k]
            zds[k] = zd[k]
        aj = a[j]
        a[j] = aj + eps
        trapezoidal_update(czi, czdi, ca, a, hs, zi, zdi)
        a[j] = aj
        _set_indep(indep, zi, zdi, zs, zds)
        st, bad, _ = RC.forward_dynamics(ma, p, t, zs, zds, zdds, ls, lp_ptr, lp_fr, ws, aw,
                                         lw, tol, pos_tol, pos_maxit, 1)
        if st != RC.OK:
            return st, bad
        for i in range(ni):
            J[i, j] = (1.0 if i == j else 0.0) - (zdds[indep[i]] - f[i]) / eps
    return RC.OK, -1


@njit(cache=True)
def _merge_test(ma, p, z, ws, vnull):
    """Matrix-R's test for a node next to a singular configuration
    (:func:`workbench.integrators.trapezoidal.integrate_semirecursive`): ``Theta_z`` at
    ``z`` factorised (O(n^3)), ``rho < MR.SING_SKIP`` along a near-null direction the DOF
    rows hardly measure."""
    m = ma.c_type.shape[0]
    MR.factor_theta(ma, p, z, ws)
    return (sigma_ratio(ws.Rm, vnull) < MR.SING_SKIP
            and MR.dof_share(ws.Th, m, vnull) < MR.SING_DOF_SHARE)


@njit(cache=True)
def _step(ma, p, t, hs, indep, czi, czdi, ca, a, z, zd, zdd, zi, zdi, f, g, da, zs, zds,
          zdds, zfirst, J, Jw, jac, ls, lp_ptr, lp_fr, ws, aw, lw, tol, pos_tol, pos_maxit,
          newton_tol, newton_maxit, newton, stats, pivs):
    """One trapezoidal step of length ``hs`` from the node ``(czi, czdi, ca)`` to time
    ``t``: ``a`` (the predictor on entry) is solved in place; ``z`` holds the dependents'
    guess on entry and the state evaluated at the accepted ``a`` on return.  ``J`` is the
    iteration matrix, valid while ``jac[0]``.  ``pivs[0]`` gets the smallest relative
    pivot of the last evaluation at an iterate, ``pivs[1]`` that of the first (whose
    positions are left in ``zfirst``; 0 and the guess if it failed): a failed step is
    judged at its first iterate (later ones may have run far off next to a singular
    configuration).  Returns ``(status, iterations, coordinate)``."""
    ni = indep.shape[0]
    for k in range(z.shape[0]):
        zfirst[k] = z[k]
    pivs[1] = 0.0
    rbest = np.inf
    rprev = np.inf
    dnorm = np.inf
    reformed = False
    for it in range(newton_maxit):
        trapezoidal_update(czi, czdi, ca, a, hs, zi, zdi)
        # positions within the position tolerance of the last evaluated ones are kept as
        # they are (as Matrix-R's position problem, which does not iterate then): next to a
        # singular configuration the accelerations amplify position changes of 1e-13 to
        # 1e-5 (rounding noise the iteration could not converge through)
        dzi = 0.0
        for j in range(ni):
            dzi = max(dzi, abs(zi[j] - z[indep[j]]))
        moved = dzi > pos_tol
        if moved:
            _set_indep(indep, zi, zdi, z, zd)
        else:
            for j in range(ni):
                zd[indep[j]] = zdi[j]
        # moved positions: at least one Gauss-Newton correction of every loop (see
        # closure.solve_positions), so that the dependents follow the independents
        st, bad, _ = RC.forward_dynamics(ma, p, t, z, zd, zdd, ls, lp_ptr, lp_fr, ws, aw, lw,
                                         tol, pos_tol, pos_maxit, 1 if moved else 0)
        stats[S_EVALS] += 1
        pivs[0] = lw.piv[0]
        pivs[2] = lw.piv[1]
        if st != RC.OK:
            return st, it, bad
        if it == 0:
            pivs[1] = pivs[0]
            for k in range(z.shape[0]):
                zfirst[k] = z[k]
        rn = 0.0
        anorm = 0.0
        for j in range(ni):
            f[j] = zdd[indep[j]]
            g[j] = a[j] - f[j]
            rn = max(rn, abs(g[j]))
            anorm = max(anorm, abs(a[j]))
        anorm += 1.0
        if not np.isfinite(rn):
            return ST_ITERATION, it, -1
        if not newton:
            # fixed point: the correction is f - a
            if (correction_converged(rn, newton_tol, anorm)
                    or at_noise_floor(it, rn, rn, rbest, anorm)):
                return RC.OK, it + 1, -1
            rbest = min(rbest, rn)
            for j in range(ni):
                a[j] = f[j]
            continue
        # Newton: the matrix is formed again at the first step, when the last iteration
        # contracted poorly, or kept from earlier steps
        if not jac[0] or (it > 0 and rn > REFORM_RATIO * rprev and not reformed):
            st, bad = _iteration_matrix(ma, p, t, hs, indep, czi, czdi, ca, a, f, z, zd, zs,
                                        zds, zdds, ls, lp_ptr, lp_fr, ws, aw, lw, tol,
                                        pos_tol, pos_maxit, J)
            stats[S_EVALS] += ni
            stats[S_MATRICES] += 1
            if st != RC.OK:
                return st, it, bad
            jac[0] = True
            reformed = True
            jac[1] = hs
        for j in range(ni):
            da[j] = -g[j]
        if not lu_solve_inplace(J, da.reshape((ni, 1)), Jw):
            jac[0] = False
            return ST_MATRIX, it, -1
        dnorm = 0.0
        for j in range(ni):
            dnorm = max(dnorm, abs(da[j]))
        # accept at the rounding-noise floor (as the Matrix-R loop) or a correction below
        # the tolerance (the iterate's evaluated state is the one kept)
        if at_noise_floor(it, dnorm, rn, rbest, anorm):
            return RC.OK, it + 1, -1
        rbest = min(rbest, rn)
        rprev = rn
        if correction_converged(dnorm, newton_tol, anorm):
            return RC.OK, it + 1, -1
        for j in range(ni):
            a[j] += da[j]
    return ST_ITERATION, newton_maxit, -1


@njit(cache=True, nogil=True)
def integrate_rcr(ma, p, t0, h, nsteps, z0, zd0, indep, ls, lp_ptr, lp_fr, ws, aw, lw, tol,
                  pos_tol, pos_maxit, newton_tol, newton_maxit, newton, merge, T_out, Z_out,
                  ZD_out, ZDD_out, A_out, IT_out, STEP_out, stats, reselect_tol=0.0):
    """Fixed-step trapezoidal rule on the independent coordinates ``indep`` (see the
    module docstring) from the state ``(z0, zd0)`` (their independent entries; the
    dependent ones are the first position guess).  ``newton``: Newton steps (else
    fixed-point); ``merge``: steps over singular nodes merged as Matrix-R's loop does.
    Row ``k`` of the outputs: the state at ``t0 + k h``; ``A_out[k]`` the accepted
    independent accelerations (the unknown of the step, the one the positions and velocities
    were updated with), ``IT_out[k]`` the iterations, ``STEP_out[k] = (span, 1)`` as
    Matrix-R's (``(0, 0)`` a row interpolated inside a merged step).  ``stats``: counts
    (:data:`S_EVALS` evaluations, :data:`S_MATRICES` iteration matrices,
    :data:`S_MERGED` merged steps, :data:`S_GATED` merge tests).  Pivot monitoring: a row
    whose smallest relative dependent pivot is below ``reselect_tol`` ends the run after it
    is written, with :data:`ST_RESELECT` (step: that row; coordinate: the dependent of the
    pivot).  Returns ``(status, step, time, coordinate)`` (``closure.ST_*``, or
    :data:`ST_ITERATION` / :data:`ST_MATRIX` / :data:`ST_DENSE` with the coordinate -1)."""
    n = z0.shape[0]
    ni = indep.shape[0]
    z = z0.copy()
    zd = zd0.copy()
    zdd = np.zeros(n)
    cz = np.zeros(n)
    czd = np.zeros(n)
    czdd = np.zeros(n)
    zs = np.zeros(n)
    zds = np.zeros(n)
    zdds = np.zeros(n)
    tau = np.zeros(n)
    vnull = np.zeros(n)
    czi = np.zeros(ni)
    czdi = np.zeros(ni)
    ca = np.zeros(ni)
    a = np.zeros(ni)
    zi = np.zeros(ni)
    zdi = np.zeros(ni)
    f = np.zeros(ni)
    g = np.zeros(ni)
    da = np.zeros(ni)
    J = np.zeros((ni, ni))
    Jw = np.zeros((ni, ni))
    jac = np.zeros(2)
    pivs = np.zeros(3)
    zfirst = np.zeros(n)
    # the dense output's own copies (row state at both ends, and its result)
    dz = np.zeros(n)
    dzd = np.zeros(n)
    dzdd = np.zeros(n)
    dzi = np.zeros(ni)
    dzdi = np.zeros(ni)
    dai = np.zeros(ni)
    st, bad, _ = RC.forward_dynamics(ma, p, t0, z, zd, zdd, ls, lp_ptr, lp_fr, ws, aw, lw,
                                     tol, pos_tol, pos_maxit)
    stats[S_EVALS] += 1
    if st != RC.OK:
        return st, 0, t0, bad
    T_out[0] = t0
    Z_out[0] = z
    ZD_out[0] = zd
    ZDD_out[0] = zdd
    for j in range(ni):
        A_out[0, j] = zdd[indep[j]]
    IT_out[0] = 0
    STEP_out[0, 0] = 0
    STEP_out[0, 1] = 0
    k0 = 0
    t = t0
    while k0 < nsteps:
        # the last row (k0): the node the step starts from
        for j in range(n):
            cz[j] = Z_out[k0, j]
            czd[j] = ZD_out[k0, j]
            czdd[j] = ZDD_out[k0, j]
        for j in range(ni):
            czi[j] = cz[indep[j]]
            czdi[j] = czd[indep[j]]
            ca[j] = A_out[k0, j]
        span = 1
        while True:
            hs = span * h
            t = t0 + (k0 + span) * h
            # predictor: Matrix-R's (integrate_semirecursive), extrapolated from the last
            # rows reached by plain steps of length h: cubic, quadratic, linear, constant
            np_ = 0
            while np_ < 3 and k0 - np_ >= 1 and STEP_out[k0 - np_, 0] == 1:
                np_ += 1
            for j in range(ni):
                if span == 1 and np_ >= 3:
                    a[j] = (4.0 * ca[j] - 6.0 * A_out[k0 - 1, j] + 4.0 * A_out[k0 - 2, j]
                            - A_out[k0 - 3, j])
                elif span == 1 and np_ >= 2:
                    a[j] = 3.0 * ca[j] - 3.0 * A_out[k0 - 1, j] + A_out[k0 - 2, j]
                elif np_ >= 1:
                    a[j] = ca[j] + span * (ca[j] - A_out[k0 - 1, j])
                else:
                    a[j] = ca[j]
            # the dependents' first guess: the row's positions moved on by their rates
            for j in range(n):
                z[j] = cz[j] + hs * czd[j]
            if newton and jac[0] and jac[1] != hs:
                jac[0] = False                # J depends on the step length
            st, iters, bad = _step(ma, p, t, hs, indep, czi, czdi, ca, a, z, zd, zdd, zi,
                                   zdi, f, g, da, zs, zds, zdds, zfirst, J, Jw, jac, ls,
                                   lp_ptr, lp_fr, ws, aw, lw, tol, pos_tol, pos_maxit, newton_tol,
                                   newton_maxit, newton, stats, pivs)
            if st == ST_ITERATION and newton and jac[0]:
                # a kept matrix may be stale: once more with a fresh one
                jac[0] = False
                for j in range(ni):
                    a[j] = ca[j]              # a constant predictor for the retry
                for j in range(n):
                    z[j] = cz[j] + hs * czd[j]
                st, iters, bad = _step(ma, p, t, hs, indep, czi, czdi, ca, a, z, zd, zdd,
                                       zi, zdi, f, g, da, zs, zds, zdds, zfirst, J, Jw,
                                       jac, ls, lp_ptr, lp_fr, ws, aw, lw, tol, pos_tol, pos_maxit,
                                       newton_tol, newton_maxit, newton, stats, pivs)
            if merge and ni > 0 and span < MAX_SPAN and k0 + span < nsteps:
                skip = st == RC.ST_SINGULAR
                if not skip and st == RC.OK and pivs[0] < MERGE_GATE:
                    stats[S_GATED] += 1
                    skip = _merge_test(ma, p, z, ws, vnull)
                elif not skip and pivs[1] < MERGE_GATE:
                    stats[S_GATED] += 1
                    skip = _merge_test(ma, p, zfirst, ws, vnull)
                if skip:
                    span += 1
                    continue
            break
        if st != RC.OK:
            return st, k0 + 1, t, bad
        k1 = k0 + span
        T_out[k1] = t
        Z_out[k1] = z
        ZD_out[k1] = zd
        for j in range(ni):
            zdd[indep[j]] = a[j]              # the accepted unknown (see the docstring)
            A_out[k1, j] = a[j]
        ZDD_out[k1] = zdd
        IT_out[k1] = iters
        STEP_out[k1, 0] = span
        STEP_out[k1, 1] = 1
        if span > 1:
            # rows skipped by a merged step: Matrix-R's dense output (Hermite interpolation
            # corrected onto the constraints; output only)
            stats[S_MERGED] += 1
            H = span * h
            for j in range(1, span):
                tj = t0 + (k0 + j) * h
                sd, _, bad, _ = _dense_output(
                    ma, p, MR.FORM_ORIGIN, tj, j / span, H, ca, czi, czdi, cz, czd, czdd, a,
                    zi, zdi, z, zd, zdd, ws, pos_tol, dz, dzd, dzdd, dzi, dzdi, dai, tau)
                if sd != MR_OK:
                    return ST_DENSE, k0 + j, tj, bad
                T_out[k0 + j] = tj
                Z_out[k0 + j] = dz
                ZD_out[k0 + j] = dzd
                ZDD_out[k0 + j] = dzdd
                for q in range(ni):
                    A_out[k0 + j, q] = dai[q]
                IT_out[k0 + j] = 0
                STEP_out[k0 + j, 0] = 0
                STEP_out[k0 + j, 1] = 0
        k0 = k1
        if pivs[0] < reselect_tol and k0 < nsteps:
            return ST_RESELECT, k0, t, int(pivs[2])
    return RC.OK, nsteps + 1, t, -1


def simulate_loops(solver, t_end, dt, z0=None, zd0=None, t0=0.0, newton_tol=1e-10,
                   newton_maxit=25, pos_tol=1e-12, pos_maxit=30, reselect=None):
    """The trapezoidal rule (Newton steps, :func:`integrate_rcr`, no step merging) on the
    independent coordinates of a :class:`workbench.formulations.rcr.LoopSolver` (not
    necessarily the model's DOF), from ``(z0, zd0)`` (default the model's guess and rates).

    ``reselect`` (a relative pivot, e.g. 1e-3): when the smallest relative dependent pivot
    of an accepted row falls below it, the dependents are selected again there
    (``dependents="pivoted"``, the solver is rebuilt in place) and the run continues from
    that row's state with the new independent coordinates.  Returns ``dict(t, z, zd, zdd,
    iterations, reselections)`` (``reselections`` as
    :meth:`~workbench.formulations.rcr.LoopSolver.simulate_rk4`).  Raises the typed errors
    of the evaluation (:meth:`LoopSolver.raise_for_status`) or
    :class:`~workbench.errors.NewtonConvergenceError`."""
    from workbench.errors import NewtonConvergenceError

    cm = solver.cm
    ma = cm.arrays
    nsteps = int(round((t_end - t0) / dt))
    N = nsteps + 1
    z = np.array(cm.z_guess if z0 is None else z0, dtype=float)
    zd = np.array(cm.zd_guess if zd0 is None else zd0, dtype=float)
    T, Z, ZD, ZDD = np.zeros(N), np.zeros((N, cm.n)), np.zeros((N, cm.n)), np.zeros((N, cm.n))
    IT = np.zeros(N, dtype=np.int64)
    steps = np.zeros((N, 2), dtype=np.int64)
    stats = np.zeros(4, dtype=np.int64)
    rtol = 0.0 if reselect is None else float(reselect)
    changes = []
    k0 = 0
    while True:
        indep = solver.independent
        A = np.zeros((N - k0, indep.size))
        lp_ptr, lp_fr = solver.paths
        st, step, t, bad = integrate_rcr(
            ma, ma.p, float(t0) + k0 * float(dt), float(dt), nsteps - k0, z, zd, indep,
            solver.structure, lp_ptr, lp_fr, solver.ws, solver.aw, solver.lw,
            solver.pivot_tol, float(pos_tol), int(pos_maxit), float(newton_tol),
            int(newton_maxit), True, False, T[k0:], Z[k0:], ZD[k0:], ZDD[k0:], A, IT[k0:],
            steps[k0:], stats, rtol)
        if st != ST_RESELECT:
            break
        k0 += step
        piv = float(solver.lw.piv[0])
        old = [cm.coord_names[c] for c in solver.dependent]
        solver.select_dependents(Z[k0], "pivoted")
        new = [cm.coord_names[c] for c in solver.dependent]
        if new == old:
            rtol = 0.0                    # the best-conditioned set is in use already
        else:
            changes.append({"time": float(T[k0]), "step": int(k0), "pivot": piv,
                            "coordinate": cm.coord_names[bad] if bad >= 0 else None,
                            "from": old, "to": new})
        z = Z[k0].copy()
        zd = ZD[k0].copy()
    if st in (ST_ITERATION, ST_MATRIX):
        raise NewtonConvergenceError(
            f"model {cm.name!r} (rcr loops), step {step + k0}: the Newton iteration of the "
            f"trapezoidal step did not converge in {newton_maxit} iterations", t,
            iterations=newton_maxit)
    solver.raise_for_status(st, bad, t)
    return {"t": T, "z": Z, "zd": ZD, "zdd": ZDD, "iterations": IT, "reselections": changes}
