"""Kernels of the multiplier formulation (seed 000 eqs 58-63).

At a state ``(t, z, zd)`` of the open tree (all ``n`` relative coordinates), with ``M`` the
semi-recursive mass matrix (SR-I or SR-II, seed 000 eqs 45/52), ``Q`` the generalized
forces (``tau(z, zd, 0) = -Q``) and the closure ``Phi(z, t) = 0`` (``m`` equations), the
accelerations and multipliers solve the augmented index-1 system (seed 000 eq 61, with the
OCR fix ``[zdd; lambda]`` of shared/notes/seeds-000-002.md section 1.8)::

    [ M      Phi_z^T ] [ zdd    ]   [ Q                                   ]
    [ Phi_z  0       ] [ lambda ] = [ -c - 2 alpha Phi_dot - beta^2 Phi   ]

with ``c = Phi_dot_z zd + Phi_tt`` (the acceleration-level constraint at ``zdd = 0``) and
Baumgarte's stabilisation (seed 000 eq 60): the constraint error then obeys
``Phi_ddot + 2 alpha Phi_dot + beta^2 Phi = 0``.  ``lambda`` are the constraint forces
in the directions of ``Phi_z^T`` (the generalized reaction forces of the cut joints).

:func:`integrate_multipliers` applies the implicit trapezoidal rule to all ``n``
coordinates: unknowns ``a = zdd_{k+1}`` and ``lambda_{k+1}``, ``z_{k+1} = z_k + h zd_k +
h^2/4 (a_k + a)``, ``zd_{k+1} = zd_k + h/2 (a_k + a)``, residual ``r = [M a - Q + Phi_z^T
lambda; Phi_z a + c + 2 alpha Phi_dot + beta^2 Phi]``, Newton iteration matrix
``[M + h/2 C + h^2/4 K, Phi_z^T; (1 + alpha h + beta^2 h^2 / 4) Phi_z, 0]`` (``K``, ``C``:
the force elements' stiffness and damping, as in the Matrix-R loop), formed once per step
and solved in the least-squares sense, so that redundant constraints are tolerated (the
multipliers are then the minimum-norm ones).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from workbench.formulations.semirecursive import matrixr as MR
from workbench.kernels import tree as K
from workbench.kernels.status import OK, ST_NEWTON, ST_NONFINITE


@njit(cache=True)
def augmented_terms(ma, p, form, t, z, zd, ws, M, Jc, phi, phid, cacc, tau):
    """The terms of the augmented system at ``(t, z, zd)``: ``M``, ``tau = -Q`` (inverse
    dynamics at ``zdd = 0``), ``Phi``, ``Phi_dot``, ``c`` and ``Phi_z``.  Returns the
    mechanical energy (kinetic + gravity + springs)."""
    n = z.shape[0]
    A, r, u, bcol, Z, Zd = ws.A, ws.r, ws.u, ws.bcol, ws.Z, ws.Zd
    zero = ws.zero_n
    K.frame_positions(ma, p, z, A, r, u)
    K.joint_columns(ma, r, u, bcol)
    V = MR.residual_tau(ma, p, t, z, zd, zero, ws, form, tau)
    MR.mass_matrix(ma, p, ws, form, n, M)
    K.constraints(ma, p, t, z, zd, zero, A, r, Z, Zd, 0, phi)
    K.constraints(ma, p, t, z, zd, zero, A, r, Z, Zd, 1, phid)
    K.constraints(ma, p, t, z, zd, zero, A, r, Z, Zd, 2, cacc)
    K.constraint_jacobian(ma, p, A, r, bcol, n, Jc)
    return V + K.kinetic_energy(ma, p, A, r, Z)


@njit(cache=True)
def constraint_rhs(phi, phid, cacc, alpha, beta, out):
    """``-c - 2 alpha Phi_dot - beta^2 Phi`` (seed 000 eq 60)."""
    for i in range(phi.shape[0]):
        out[i] = -cacc[i] - 2.0 * alpha * phid[i] - beta * beta * phi[i]


@njit(cache=True)
def solve_augmented(M, Jc, tau, crhs, S, rhs):
    """Accelerations and multipliers of the augmented system (least squares: redundant
    constraints give the minimum-norm multipliers).  Returns the solution vector
    ``[zdd; lambda]``."""
    n = M.shape[0]
    m = Jc.shape[0]
    S[:, :] = 0.0
    S[:n, :n] = M
    S[:n, n:] = Jc.T
    S[n:, :n] = Jc
    for i in range(n):
        rhs[i] = -tau[i]
    for i in range(m):
        rhs[n + i] = crhs[i]
    return np.linalg.lstsq(S, rhs, rcond=1e-13)[0]


@njit(cache=True)
def _record(k, t, z, zd, zdd, lam, phi, phid, E, iters, T_out, Z_out, ZD_out, ZDD_out, L_out,
            VIOL_out, VVIOL_out, E_out, IT_out):
    T_out[k] = t
    Z_out[k] = z
    ZD_out[k] = zd
    ZDD_out[k] = zdd
    L_out[k] = lam
    VIOL_out[k] = np.abs(phi).max() if phi.shape[0] else 0.0
    VVIOL_out[k] = np.abs(phid).max() if phid.shape[0] else 0.0
    E_out[k] = E
    IT_out[k] = iters


@njit(cache=True, nogil=True)
def integrate_multipliers(ma, p, form, t0, h, nsteps, z0, zd0, alpha, beta, newton_tol,
                          newton_maxit, T_out, Z_out, ZD_out, ZDD_out, L_out, VIOL_out,
                          VVIOL_out, E_out, IT_out, progress):
    """Fixed-step implicit trapezoidal rule on all coordinates with the multipliers (module
    docstring).  ``(z0, zd0)``: a consistent initial state.  Returns (status, step, time,
    value, bad) like the other loops; ``progress[0]`` counts the rows written."""
    n = z0.shape[0]
    m = ma.c_type.shape[0]
    ws = MR.make_workspace(ma, n)
    M = np.zeros((n, n))
    Jc = np.zeros((m, n))
    phi = np.zeros(m)
    phid = np.zeros(m)
    cacc = np.zeros(m)
    crhs = np.zeros(m)
    tau = np.zeros(n)
    Kd = np.zeros((n, n))
    Cd = np.zeros((n, n))
    S = np.zeros((n + m, n + m))
    rhs = np.zeros(n + m)
    z = z0.copy()
    zd = zd0.copy()
    E = augmented_terms(ma, p, form, t0, z, zd, ws, M, Jc, phi, phid, cacc, tau)
    constraint_rhs(phi, phid, cacc, alpha, beta, crhs)
    x = solve_augmented(M, Jc, tau, crhs, S, rhs)
    a = x[:n].copy()
    lam = x[n:].copy()
    if not (np.isfinite(a).all() and np.isfinite(lam).all()):
        return ST_NONFINITE, 0, t0, np.nan, -1
    _record(0, t0, z, zd, a, lam, phi, phid, E, 0, T_out, Z_out, ZD_out, ZDD_out, L_out,
            VIOL_out, VVIOL_out, E_out, IT_out)
    progress[0] = 1
    zn = z.copy()
    zdn = zd.copy()
    an = a.copy()
    W = np.zeros((n + m, n + m))
    r = np.zeros(n + m)
    g = 1.0 + alpha * h + 0.25 * beta * beta * h * h
    for k in range(1, nsteps + 1):
        t = t0 + k * h
        zn[:] = Z_out[k - 1]
        zdn[:] = ZD_out[k - 1]
        an[:] = ZDD_out[k - 1]
        a[:] = an
        lam[:] = L_out[k - 1]
        converged = False
        it = 0
        err = np.inf
        while it < newton_maxit:
            for i in range(n):
                z[i] = zn[i] + h * zdn[i] + 0.25 * h * h * (an[i] + a[i])
                zd[i] = zdn[i] + 0.5 * h * (an[i] + a[i])
            E = augmented_terms(ma, p, form, t, z, zd, ws, M, Jc, phi, phid, cacc, tau)
            constraint_rhs(phi, phid, cacc, alpha, beta, crhs)
            # residual [M a + tau + Phi_z^T lambda; Phi_z a - crhs]
            r[:n] = M @ a + tau + Jc.T @ lam
            r[n:] = Jc @ a - crhs
            if it == 0:
                MR.force_jacobians(ma, p, t, z, zd, ws, n, Kd, Cd)
                W[:, :] = 0.0
                W[:n, :n] = M + 0.5 * h * Cd + 0.25 * h * h * Kd
                W[:n, n:] = Jc.T
                W[n:, :n] = g * Jc
            dx = np.linalg.lstsq(W, -r, rcond=1e-13)[0]
            if not np.isfinite(dx).all():
                return ST_NONFINITE, k, t, np.nan, -1
            scale = 1.0
            err = 0.0
            for i in range(n):
                a[i] += dx[i]
                scale = max(scale, abs(a[i]))
                err = max(err, abs(dx[i]))
            for i in range(m):
                lam[i] += dx[n + i]
            it += 1
            if err <= newton_tol * scale:
                converged = True
                break
        if not converged:
            return ST_NEWTON, k, t, err, -1
        # the state that goes with the converged accelerations
        for i in range(n):
            z[i] = zn[i] + h * zdn[i] + 0.25 * h * h * (an[i] + a[i])
            zd[i] = zdn[i] + 0.5 * h * (an[i] + a[i])
        E = augmented_terms(ma, p, form, t, z, zd, ws, M, Jc, phi, phid, cacc, tau)
        if not (np.isfinite(z).all() and np.isfinite(zd).all()):
            return ST_NONFINITE, k, t, np.nan, -1
        _record(k, t, z, zd, a, lam, phi, phid, E, it, T_out, Z_out, ZD_out, ZDD_out, L_out,
                VIOL_out, VVIOL_out, E_out, IT_out)
        progress[0] = k + 1
    return OK, nsteps + 1, t0 + nsteps * h, 0.0, -1
