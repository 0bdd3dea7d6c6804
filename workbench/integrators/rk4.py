"""Explicit fourth-order Runge-Kutta on the independent coordinates (seed 002 eqs 41-46),
with the seed's treatment of rod elements.

The state is ``y = (z^i, zd^i)``; every right-hand-side evaluation at ``(t, z^i, zd^i)``
solves the position problem for all relative coordinates ``z`` (Newton, from the previous
evaluation's ``z``), the velocity problem, and the projected equations of motion of the
semi-recursive Matrix-R formulation (seed 002 eqs 17, 24, 29, 49)::

    (R^T M_rod-mode R) zdd^i = -R^T tau(z, zd, zdd_b; rods as the mode says)

(``zdd_b`` the particular accelerations, :func:`forward_dynamics`).  The classic weights
``(1, 2, 2, 1) / 6``; stage 1 at ``t_n``, stages 2 and 3 at ``t_n + h/2``, stage 4 at
``t_n + h``.

Rods (:func:`workbench.kernels.tree.rod_forces`): ``exact`` keeps their whole inertia in
the mass matrix (eq 24); ``extrapolated`` and ``partitioned`` evaluate all of it, or only
the coupling blocks, at the frame accelerations of *extrapolated* relative accelerations
``zdd_hat`` with the current kinematics (eqs 25-32, 47-51).  The extrapolation history is
the seed's: only the stage-1 accelerations (points of the trajectory) are stored, the three
newest ones; stage 1 of step ``n`` extrapolates from the stage-1 accelerations up to step
``n - 1``, stages 2-4 of step ``n`` from those up to step ``n`` itself, each to its own
stage time (Lagrange weights at ``theta = 1`` for stage 1 and 4, ``theta = 1/2`` for stages
2 and 3: :func:`extrapolation_weights`).  Start-up: an evaluation that would need more
stored accelerations than exist is exact (the first ``q`` stage-1 evaluations for point,
linear, quadratic extrapolation with ``q = 1, 2, 3``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from workbench.formulations.semirecursive import matrixr as MR
from workbench.kernels import tree as K
from workbench.kernels.linalg import lu_solve_inplace, projected_matrix
from workbench.kernels.status import OK, ST_MASS, ST_NONFINITE, ST_ZERO_SPRING

#: extrapolation orders (model option ``rod_extrapolation``)
EXTRAP_POINT, EXTRAP_LINEAR, EXTRAP_QUADRATIC = 0, 1, 2
EXTRAPOLATIONS = {"point": EXTRAP_POINT, "linear": EXTRAP_LINEAR,
                  "quadratic": EXTRAP_QUADRATIC}
ROD_MODES = {"exact": K.ROD_EXACT, "extrapolated": K.ROD_EXTRAPOLATED,
             "partitioned": K.ROD_PARTITIONED}


@njit(cache=True)
def extrapolation_weights(order, theta, w):
    """Weights of the Lagrange extrapolation (seed 002 eqs 33-40) through the stored
    accelerations at ``0, -1, -2`` (in steps ``h``, the newest first) to ``theta`` steps
    after the newest: point ``[1]``; linear ``[1 + theta, -theta]``; quadratic ``[(1 +
    theta)(2 + theta)/2, -theta (2 + theta), theta (1 + theta)/2]``.  At ``theta = 1``
    these are the seed's one-step weights ``1``; ``2, -1``; ``3, -3, 1``."""
    w[0] = 1.0
    w[1] = 0.0
    w[2] = 0.0
    if order == EXTRAP_LINEAR:
        w[0] = 1.0 + theta
        w[1] = -theta
    elif order == EXTRAP_QUADRATIC:
        w[0] = 0.5 * (1.0 + theta) * (2.0 + theta)
        w[1] = -theta * (2.0 + theta)
        w[2] = 0.5 * theta * (1.0 + theta)


@njit(cache=True)
def forward_dynamics(ma, p, form, t, zi, zdi, z, ws, zd, zdd, R, tau, Md, Mb, Mw, a,
                     rod_mode, zhat, Zdh, pos_tol, pos_maxit):
    """The accelerations ``a = zdd^i`` and ``zdd = zdd_b + R a`` at ``(t, z^i, zd^i)``
    (``z``: the guess of the position problem on entry, the solution on return;
    ``zd``: the velocities on return).

    The projected equations (seed 002 eq 24 exact, eq 29 extrapolated, eq 49
    partitioned) with ``R`` = R^Phi and the particular accelerations ``zdd_b`` of the
    acceleration problem (the ``zdd^i = 0`` solution)::

        (R^T M R) a = -R^T tau(z, zd, zdd_b)

    ``M`` holds the rods' share as ``rod_mode`` says
    (:func:`workbench.kernels.tree.rod_mass_matrix`), ``tau`` their loads
    (:func:`workbench.kernels.tree.rod_forces`, with ``Zdh`` the frame accelerations of
    the extrapolated relative accelerations ``zhat``, when the mode is not exact).
    Returns (status, value, bad column) and the potential energy."""
    n = z.shape[0]
    d = zi.shape[0]
    st, it, err, bad = MR.solve_position(ma, p, t, zi, z, ws, pos_tol, pos_maxit, True)
    if st != OK:
        return st, err, bad, 0.0
    zddb = ws.zddb
    st, bad = MR.solve_velocity_acceleration(ma, p, t, zi, zdi, z, zd, zddb, R, ws)
    if st != OK:
        return st, 0.0, bad, 0.0
    if rod_mode != K.ROD_EXACT and ma.rd_pt.shape[0] > 0:
        # the extrapolated relative accelerations through the current kinematics (eq 30)
        K.frame_accelerations(ma, zd, zhat, ws.r, ws.u, ws.bcol, ws.Z, Zdh)
    V = MR.residual_tau_rods(ma, p, t, z, zd, zddb, ws, form, tau, Zdh, rod_mode)
    MR.mass_matrix(ma, p, ws, form, n, Md, rod_mode)
    projected_matrix(R, Md, Mb)
    for j in range(d):
        s = 0.0
        for k in range(n):
            s -= R[k, j] * tau[k]
        a[j] = s
    if not lu_solve_inplace(Mb, a.reshape((d, 1)), Mw):
        return ST_MASS, 0.0, -1, V
    MR.full_accelerations(zddb, R, a, zdd)
    for j in range(d):
        if not np.isfinite(a[j]):
            return ST_NONFINITE, a[j], j, V
    return OK, 0.0, -1, V


@njit(cache=True)
def _hat(H, nh, q, order, theta, w, zhat):
    """``zhat`` = the extrapolation of the stored accelerations ``H`` (newest first) to
    ``theta``; returns False (evaluate exactly) while fewer than ``q`` are stored."""
    if nh < q:
        return False
    extrapolation_weights(order, theta, w)
    n = zhat.shape[0]
    for k in range(n):
        s = 0.0
        for j in range(q):
            s += w[j] * H[j, k]
        zhat[k] = s
    return True


@njit(cache=True, nogil=True)
def integrate_rk4(ma, p, form, t0, h, nsteps, zi0, zdi0, z0, pos_tol, pos_maxit,
                  conservative, rod_mode, order, T_out, Z_out, ZD_out, ZDD_out, ZI_out,
                  ZDI_out, ZDDI_out, VIOL_out, VVIOL_out, IT_out, E_out, EX_out, progress):
    """Fixed-step explicit RK4 (seed 002 eqs 41-46) from ``(t0, z^i_0, zd^i_0)``; output
    row ``k`` is the state at ``t0 + k h`` with its stage-1 accelerations.  ``rod_mode``:
    :data:`workbench.kernels.tree.ROD_EXACT`, ...; ``order``: :data:`EXTRAP_POINT`, ...
    (see the module docstring for the history and start-up rules).  ``EX_out[k]`` = 1
    when row ``k``'s accelerations were computed with extrapolated rod forces; ``IT_out``
    = 4 evaluations per step.  Returns (status, step, time, value, bad column)."""
    n = z0.shape[0]
    d = zi0.shape[0]
    ws = MR.make_workspace(ma, n)
    nf = ma.fr_parent.shape[0]
    Zdh = np.zeros((nf, 6))
    zd = np.zeros(n)
    zdd = np.zeros(n)
    tau = np.zeros(n)
    R = np.zeros((n, d))
    Md = np.zeros((n, n))
    Mb = np.zeros((d, d))
    Mw = np.zeros((d, d))
    H = np.zeros((3, n))
    zhat = np.zeros(n)
    w = np.zeros(3)
    z = z0.copy()
    zi = zi0.copy()
    zdi = zdi0.copy()
    ks = np.zeros((4, 2, d))          # stage slopes (dz^i, dzd^i)
    ys = np.zeros(d)
    yv = np.zeros(d)
    a = np.zeros(d)
    approx = rod_mode != K.ROD_EXACT and ma.rd_pt.shape[0] > 0
    q = order + 1
    nh = 0
    iters = 0
    for k in range(nsteps + 1):
        t = t0 + k * h
        # ---- stage 1 (a point of the trajectory): output row k, stored in the history
        use = approx and _hat(H, nh, q, order, 1.0, w, zhat)
        mode = rod_mode if use else K.ROD_EXACT
        st, val, bad, V = forward_dynamics(ma, p, form, t, zi, zdi, z, ws, zd, zdd, R, tau,
                                           Md, Mb, Mw, a, mode, zhat, Zdh, pos_tol, pos_maxit)
        if st == OK:
            bad = K.zero_length_spring(ma, p, ws.A, ws.r)
            if bad >= 0:
                st = ST_ZERO_SPRING
        if st != OK:
            return st, k, t, val, bad
        MR.record_row(ma, p, ws, k, t, z, zd, zdd, zi, zdi, a, iters, V, conservative,
                      T_out, Z_out, ZD_out, ZDD_out, ZI_out, ZDI_out, ZDDI_out, VIOL_out,
                      VVIOL_out, IT_out, E_out)
        EX_out[k] = 1 if use else 0
        progress[0] = k + 1
        for j in range(2, 0, -1):
            H[j] = H[j - 1]
        H[0] = zdd
        nh = min(nh + 1, 3)
        if k == nsteps:
            break
        iters = 4
        for j in range(d):
            ks[0, 0, j] = zdi[j]
            ks[0, 1, j] = a[j]
        # ---- stages 2-4 (not points of the trajectory: not stored)
        for s_ in range(1, 4):
            c = 0.5 * h if s_ < 3 else h
            for j in range(d):
                ys[j] = zi[j] + c * ks[s_ - 1, 0, j]
                yv[j] = zdi[j] + c * ks[s_ - 1, 1, j]
            theta = 0.5 if s_ < 3 else 1.0
            use = approx and _hat(H, nh, q, order, theta, w, zhat)
            mode = rod_mode if use else K.ROD_EXACT
            st, val, bad, V = forward_dynamics(ma, p, form, t + c, ys, yv, z, ws, zd, zdd, R,
                                               tau, Md, Mb, Mw, a, mode, zhat, Zdh, pos_tol,
                                               pos_maxit)
            if st != OK:
                return st, k + 1, t + c, val, bad
            for j in range(d):
                ks[s_, 0, j] = yv[j]
                ks[s_, 1, j] = a[j]
        for j in range(d):
            zi[j] += h / 6.0 * (ks[0, 0, j] + 2.0 * ks[1, 0, j] + 2.0 * ks[2, 0, j]
                                + ks[3, 0, j])
            zdi[j] += h / 6.0 * (ks[0, 1, j] + 2.0 * ks[1, 1, j] + 2.0 * ks[2, 1, j]
                                 + ks[3, 1, j])
    return OK, nsteps + 1, t0 + nsteps * h, 0.0, -1
