"""The implicit trapezoidal rule through the recursive coordinate reduction (formulation
``"rcr"``, seed 004): the same step as every formulation's (:mod:`workbench.integrators.
trapezoidal`: :func:`~workbench.integrators.trapezoidal.trapezoidal_update`,
:func:`~workbench.integrators.trapezoidal.correction_converged`), with the accelerations
of a state given by the O(n + m) RCR evaluation
(:func:`workbench.formulations.rcr.closure.forward_dynamics`) instead of a residual and its
Newton matrix.

Unknown per step: ``a = zdd^i_{n+1}`` (the independent accelerations); the step solves

    a = f(t_{n+1}, z^i(a), zd^i(a)),   z^i(a) = z^i_n + h zd^i_n + h^2/4 (a_n + a),
                                      zd^i(a) = zd^i_n + h/2 (a_n + a)

by fixed-point iteration (``a <- f``), which contracts by about ``h/2 |df/dzd| + h^2/4
|df/dz|`` per iteration: no matrix is formed, so every iteration stays O(n + m).  Because
``R^T tau(z, zd, zdd) = Mbar (a - f)``, the converged step is the discrete solution of the
semi-recursive trapezoidal rule (seed 001 eq 29) on the same independent coordinates, and
the semi-recursive sensitivity sweeps differentiate it exactly."""

from __future__ import annotations

import numpy as np
from numba import njit

from workbench.formulations.rcr import closure as RC
from workbench.integrators.trapezoidal import (at_noise_floor, correction_converged,
                                               trapezoidal_update)

#: the fixed-point iteration of a step did not converge (a code of this loop: the RCR
#: evaluation's own codes are ``closure.OK``, ``ST_POSITION``, ``ST_SINGULAR``)
ST_ITERATION = 100


@njit(cache=True, nogil=True)
def integrate_rcr(ma, p, t0, h, nsteps, z0, zd0, indep, ls, lp_ptr, lp_fr, ws, aw, lw, tol,
                  pos_tol, pos_maxit, newton_tol, newton_maxit, T_out, Z_out, ZD_out,
                  ZDD_out, A_out, IT_out):
    """Fixed-step trapezoidal rule on the independent coordinates ``indep`` (see the
    module docstring) from the state ``(z0, zd0)`` (their independent entries; the
    dependent ones are the first Newton guess).  Row ``k`` of the outputs: the state at
    ``t0 + k h``; ``A_out[k]`` the accepted independent accelerations (the unknown of the
    step, the one the positions and velocities were updated with), ``IT_out[k]`` the
    fixed-point iterations.  Returns ``(status, step, time, coordinate)``
    (``closure.ST_*``, or :data:`ST_ITERATION` with the coordinate -1 when the iteration
    does not converge in ``newton_maxit``)."""
    n = z0.shape[0]
    ni = indep.shape[0]
    z = z0.copy()
    zd = zd0.copy()
    zdd = np.zeros(n)
    zi0 = np.zeros(ni)
    zdi0 = np.zeros(ni)
    a0 = np.zeros(ni)
    a = np.zeros(ni)
    zi = np.zeros(ni)
    zdi = np.zeros(ni)
    st, bad, _ = RC.forward_dynamics(ma, p, t0, z, zd, zdd, ls, lp_ptr, lp_fr, ws, aw, lw,
                                     tol, pos_tol, pos_maxit)
    if st != RC.OK:
        return st, 0, t0, bad
    T_out[0] = t0
    Z_out[0] = z
    ZD_out[0] = zd
    ZDD_out[0] = zdd
    for j in range(ni):
        A_out[0, j] = zdd[indep[j]]
    IT_out[0] = 0
    for k in range(1, nsteps + 1):
        t = t0 + k * h
        for j in range(ni):
            zi0[j] = z[indep[j]]
            zdi0[j] = zd[indep[j]]
            a0[j] = A_out[k - 1, j]
            a[j] = a0[j]                      # predictor: the previous accelerations
        # the dependents' first guess: the row's positions moved on by their rates
        for j in range(n):
            z[j] += h * zd[j]
        done = False
        dbest = np.inf
        for it in range(newton_maxit):
            trapezoidal_update(zi0, zdi0, a0, a, h, zi, zdi)
            for j in range(ni):
                z[indep[j]] = zi[j]
                zd[indep[j]] = zdi[j]
            st, bad, _ = RC.forward_dynamics(ma, p, t, z, zd, zdd, ls, lp_ptr, lp_fr, ws, aw,
                                             lw, tol, pos_tol, pos_maxit)
            if st != RC.OK:
                return st, k, t, bad
            dnorm = 0.0
            anorm = 0.0
            for j in range(ni):
                dnorm = max(dnorm, abs(zdd[indep[j]] - a[j]))
                anorm = max(anorm, abs(a[j]))
            if not np.isfinite(dnorm):
                return ST_ITERATION, k, t, -1
            # converged, or stagnating at the rounding-noise floor of the accelerations
            # (next to a singular configuration of the closures, as the Matrix-R loop)
            if (correction_converged(dnorm, newton_tol, 1.0 + anorm)
                    or at_noise_floor(it, dnorm, dnorm, dbest, 1.0 + anorm)):
                IT_out[k] = it + 1
                done = True
                break
            dbest = min(dbest, dnorm)
            for j in range(ni):
                a[j] = zdd[indep[j]]
        if not done:
            return ST_ITERATION, k, t, -1
        T_out[k] = t
        Z_out[k] = z
        ZD_out[k] = zd
        for j in range(ni):
            zdd[indep[j]] = a[j]              # the accepted unknown (see the docstring)
            A_out[k, j] = a[j]
        ZDD_out[k] = zdd
    return RC.OK, nsteps + 1, t0 + nsteps * h, -1
