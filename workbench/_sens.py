"""Numba kernels of the sensitivity analysis (seed 001 §3), private and array-only.

The discrete trajectory produced by :func:`_matrixr.integrate_trapezoidal` satisfies, at
every output step ``n`` (unknowns ``Z = z^i``, ``V = zd^i``, ``A = zdd^i``)::

    r_n(Z_n, V_n, A_n, rho) = R^T tau(z, zd, zdd) = 0                          (eq 29)
    Z_{n+1} = Z_n + h V_n + h^2/4 (A_n + A_{n+1}),  V_{n+1} = V_n + h/2 (A_n + A_{n+1})

:func:`step_jacobians` returns, at one converged state, the exact partial derivatives

    K = dr/dZ,  C = dr/dV,  Mbar = dr/dA = R^T M R,  P = dr/drho,  and  dm/d(Z, V, A, rho)

of the residual and of the objective *measures* ``m`` (point positions, velocities,
accelerations, angular velocities, coordinates).  ``K`` and ``C`` are
the seed's ``Kbar + Mbar_z zdd^i`` and ``Cbar`` (eqs 50-52) and ``P`` is
``-(Qbar_rho - Mbar_rho zdd^i)`` (eq 49); they are built from the tangent kernels of
:mod:`_tangent` (the inverse-dynamics tangent of the formulation in use: SR-I/RTdyn0 or
SR-II/RTdyn1) through the implicit derivatives of the position, velocity and
acceleration problems (eqs 32-38) and of ``R^Phi`` (eqs 56-57: ``dR = -Theta^+ dTheta R``).

:func:`direct_sweep` propagates the sensitivities forward (discrete direct method = the
tangent linear model eq 48 integrated by the same trapezoidal rule);
:func:`adjoint_sweep` runs backward either the exact transpose of that recursion
(``variant=0``, discrete adjoint) or the seed's continuous adjoint ODE (eqs 68-69)
discretised by the trapezoidal rule (``variant=1``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._arrays import DOF_COORD
from . import _kernels as K
from . import _matrixr as MR
from . import _tangent as T

# measure kinds
MS_POS, MS_VEL, MS_ACC, MS_ANGVEL, MS_ANGVEL_BODY, MS_COORD, MS_RATE, MS_COORD_ACC = range(8)


@njit(cache=True)
def qr_solve_transpose(V, beta, Rm, c, mu):
    """Minimum-norm solution of ``A^T mu = c`` from :func:`_matrixr.qr_factor` of ``A``
    (``mu = Q [Rm^-T c; 0]``), i.e. ``mu = (A^+)^T c``."""
    mr = V.shape[1]
    n = Rm.shape[0]
    y = np.zeros(mr)
    for i in range(n):
        s = c[i]
        for j in range(i):
            s -= Rm[j, i] * y[j]
        y[i] = s / Rm[i, i]
    for k in range(n - 1, -1, -1):
        vk = V[k]
        s = 0.0
        for i in range(k, mr):
            s += vk[i] * y[i]
        s *= beta[k]
        for i in range(k, mr):
            y[i] -= s * vk[i]
    for i in range(mr):
        mu[i] = y[i]


# ----------------------------------------------------------------------------------------
# measures
# ----------------------------------------------------------------------------------------


@njit(cache=True)
def measures(ma, p, A, r, Z, Zd, z, zd, zdd, ms_type, ms_a, ms_c, out):
    """Values of the objective measures at a state (kinematics in ``A, r, Z, Zd``)."""
    x = np.empty(3)
    v = np.empty(3)
    a = np.empty(3)
    for k in range(ms_type.shape[0]):
        typ = ms_type[k]
        i = ms_a[k]
        c = ms_c[k]
        if typ <= MS_ACC:
            K.point_kinematics(ma, p, A, r, Z, Zd, i, x, v, a)
            out[k] = x[c] if typ == MS_POS else (v[c] if typ == MS_VEL else a[c])
        elif typ == MS_ANGVEL:
            out[k] = Z[ma.b_frame[i], 3 + c]
        elif typ == MS_ANGVEL_BODY:
            f = ma.b_frame[i]
            out[k] = A[f, 0, c] * Z[f, 3] + A[f, 1, c] * Z[f, 4] + A[f, 2, c] * Z[f, 5]
        elif typ == MS_COORD:
            out[k] = z[i]
        elif typ == MS_RATE:
            out[k] = zd[i]
        else:
            out[k] = zdd[i]


@njit(cache=True)
def measures_t(ma, p, dp, A, r, Z, Zd, th, dr, dZ, dZd, dz, dzd, dzdd, ms_type, ms_a, ms_c,
               out):
    """Tangents of :func:`measures`."""
    x = np.empty(3)
    v = np.empty(3)
    a = np.empty(3)
    dx = np.empty(3)
    dv = np.empty(3)
    da = np.empty(3)
    for k in range(ms_type.shape[0]):
        typ = ms_type[k]
        i = ms_a[k]
        c = ms_c[k]
        if typ <= MS_ACC:
            T.point_kinematics_t(ma, p, dp, A, r, Z, Zd, th, dr, dZ, dZd, i, x, v, a, dx, dv, da)
            out[k] = dx[c] if typ == MS_POS else (dv[c] if typ == MS_VEL else da[c])
        elif typ == MS_ANGVEL:
            out[k] = dZ[ma.b_frame[i], 3 + c]
        elif typ == MS_ANGVEL_BODY:
            f = ma.b_frame[i]
            w = th[f]
            # column c of A and of dA = [w]x A
            e0 = A[f, 0, c]
            e1 = A[f, 1, c]
            e2 = A[f, 2, c]
            s = ((w[1] * e2 - w[2] * e1) * Z[f, 3] + (w[2] * e0 - w[0] * e2) * Z[f, 4]
                 + (w[0] * e1 - w[1] * e0) * Z[f, 5]
                 + e0 * dZ[f, 3] + e1 * dZ[f, 4] + e2 * dZ[f, 5])
            out[k] = s
        elif typ == MS_COORD:
            out[k] = dz[i]
        elif typ == MS_RATE:
            out[k] = dzd[i]
        else:
            out[k] = dzdd[i]


# ----------------------------------------------------------------------------------------
# one state: the exact step Jacobians
# ----------------------------------------------------------------------------------------


@njit(cache=True)
def _state(ma, p, form, t, zi, zdi, a, z, ws, zd, zdd, R, tau, Md):
    """Kinematics, R, tau and M^d at a converged position ``z`` (status returned)."""
    n = z.shape[0]
    d = zi.shape[0]
    A, r, u = ws[0], ws[1], ws[2]
    K.frame_positions(ma, p, z, A, r, u)
    zddb = np.zeros(n)
    st, bad = MR.solve_velocity_acceleration(ma, p, t, zi, zdi, z, zd, zddb, R, ws)
    if st != MR.OK:
        return st
    for k in range(n):
        zdd[k] = zddb[k]
        for j in range(d):
            zdd[k] += R[k, j] * a[j]
    MR.residual_tau(ma, p, t, z, zd, zdd, ws, form, tau)
    MR.mass_matrix(ma, p, ws, form, n, Md)
    return MR.OK


@njit(cache=True)
def step_jacobians(ma, p, form, t, zi, zdi, a, z, Gm, ms_type, ms_a, ms_c,
                   Jr, Mbar, Jm, mval):
    """Exact partial derivatives of the step residual and of the measures at one state.

    ``Jr`` (d x (2d + np)) = ``[dr/dZ | dr/dV | dr/drho]``, ``Mbar`` = ``dr/dA``,
    ``Jm`` (nm x (3d + np)) = ``dm/d[Z, V, A, rho]``, ``mval`` = the measures.
    ``Gm`` (nfield x np) maps parameter directions to field directions (``p = p0 + G rho``).
    Returns a status code (OK when the state is regular).
    """
    n = z.shape[0]
    d = zi.shape[0]
    m = ma.c_type.shape[0]
    npar = Gm.shape[1]
    nfield = p.shape[0]
    nf = ma.fr_parent.shape[0]
    nm = ms_type.shape[0]
    ws = MR.make_workspace(ma, n)
    zd = np.zeros(n)
    zdd = np.zeros(n)
    R = np.zeros((n, d))
    tau = np.zeros(n)
    Md = np.zeros((n, n))
    st = _state(ma, p, form, t, zi, zdi, a, z, ws, zd, zdd, R, tau, Md)
    if st != MR.OK:
        return st
    A, r, u, bcol, Z, Zd = ws[0], ws[1], ws[2], ws[3], ws[4], ws[5]
    V, beta, Rm = ws[7], ws[8], ws[9]
    fb, nb_, Qj = ws[14], ws[15], ws[16]
    Mbar[:, :] = R.T @ (Md @ R)
    measures(ma, p, A, r, Z, Zd, z, zd, zdd, ms_type, ms_a, ms_c, mval)
    # mu = (Theta_z^+)^T tau for the derivative of R (eqs 56-57)
    mu = np.zeros(m + d)
    qr_solve_transpose(V, beta, Rm, tau, mu)
    # frame velocities with zd = R_j (Theta_z R_j as a velocity-level constraint)
    ZR = np.zeros((d, nf, 6))
    for j in range(d):
        K.frame_velocities(ma, R[:, j].copy(), bcol, ZR[j])
    RjT = np.ascontiguousarray(R.T)
    # SR-I primal terms (reference points, columns, velocities at the centres of mass)
    Pc = np.zeros((nf, 3))
    bv = np.zeros((nf, 6))
    Vc = np.zeros((nf, 6))
    Vdc = np.zeros((nf, 6))
    dPc = np.zeros((nf, 3))
    dbv = np.zeros((nf, 6))
    dVc = np.zeros((nf, 6))
    dVdc = np.zeros((nf, 6))
    if form == MR.FORM_COM:
        K.reference_points(ma, p, A, r, Pc)
        K.com_columns(ma, r, u, Pc, bv)
        K.com_kinematics(ma, zd, zdd, r, u, Pc, bv, Vc, Vdc)
    # work arrays
    dp = np.zeros(nfield)
    dz = np.zeros(n)
    dzd = np.zeros(n)
    dzdd = np.zeros(n)
    zero_n = np.zeros(n)
    th = np.zeros((nf, 3))
    dr = np.zeros((nf, 3))
    du = np.zeros((nf, 3))
    db = np.zeros((nf, 6))
    dZ = np.zeros((nf, 6))
    dZd = np.zeros((nf, 6))
    dZj = np.zeros((nf, 6))
    zeroF = np.zeros((nf, 6))
    nbod = ma.b_frame.shape[0]
    dfb = np.zeros((nbod, 3))
    dnb = np.zeros((nbod, 3))
    dQj = np.zeros(n)
    dtau = np.zeros(n)
    dphi = np.zeros(m)
    dh = np.zeros(d)
    dhd = np.zeros(d)
    dhdd = np.zeros(d)
    rhs = np.zeros(m + d)
    dmv = np.zeros(nm)
    ncol = 2 * d + npar
    for col in range(ncol + d):
        # direction: Z (col < d), V (d <= col < 2d), rho (2d <= col < ncol), A (ncol <= col)
        has_p = 2 * d <= col < ncol
        if has_p:
            for i in range(nfield):
                dp[i] = Gm[i, col - 2 * d]
        else:
            dp[:] = 0.0
        # ---- position level: Theta_z dz = [-Phi_rho; dZ - h_rho]  (eqs 32a, 37a)
        dz[:] = 0.0
        if col < d:
            for k in range(n):
                dz[k] = R[k, col]
        elif has_p:
            T.frame_positions_t(ma, p, dp, z, zero_n, A, r, u, th, dr, du)
            T.constraints_t(ma, p, dp, t, z, zd, zdd, zero_n, zero_n, zero_n, A, r, Z, Zd, th,
                            dr, zeroF, zeroF, 0, dphi)
            T.dof_values_t(ma, p, dp, A, r, Z, Zd, th, dr, zeroF, zeroF, zero_n, zero_n,
                           zero_n, dh, dhd, dhdd)
            for k in range(m):
                rhs[k] = -dphi[k]
            for k in range(d):
                rhs[m + k] = -dh[k]
            MR.qr_solve(V, beta, Rm, rhs, dz)
        T.frame_positions_t(ma, p, dp, z, dz, A, r, u, th, dr, du)
        T.joint_columns_t(ma, r, u, dr, du, db)
        # ---- velocity level (eqs 32b, 37b)
        T.frame_velocities_t(ma, zd, zero_n, bcol, db, dZ)
        T.constraints_t(ma, p, dp, t, z, zd, zdd, dz, zero_n, zero_n, A, r, Z, Zd, th, dr, dZ,
                        zeroF, 1, dphi)
        T.dof_values_t(ma, p, dp, A, r, Z, Zd, th, dr, dZ, zeroF, dz, zero_n, zero_n, dh, dhd,
                       dhdd)
        for k in range(m):
            rhs[k] = -dphi[k]
        for k in range(d):
            rhs[m + k] = -dhd[k] + (1.0 if col - d == k else 0.0)
        MR.qr_solve(V, beta, Rm, rhs, dzd)
        T.frame_velocities_t(ma, zd, dzd, bcol, db, dZ)
        # ---- acceleration level (eqs 32c, 37c)
        T.frame_accelerations_t(ma, zd, zdd, dzd, zero_n, r, u, bcol, Z, dr, du, db, dZ, dZd)
        T.constraints_t(ma, p, dp, t, z, zd, zdd, dz, dzd, zero_n, A, r, Z, Zd, th, dr, dZ, dZd,
                        2, dphi)
        T.dof_values_t(ma, p, dp, A, r, Z, Zd, th, dr, dZ, dZd, dz, dzd, zero_n, dh, dhd, dhdd)
        for k in range(m):
            rhs[k] = -dphi[k]
        for k in range(d):
            rhs[m + k] = -dhdd[k]
            if col >= ncol and col - ncol == k:
                rhs[m + k] += 1.0
        MR.qr_solve(V, beta, Rm, rhs, dzdd)
        T.frame_accelerations_t(ma, zd, zdd, dzd, dzdd, r, u, bcol, Z, dr, du, db, dZ, dZd)
        # ---- measures
        measures_t(ma, p, dp, A, r, Z, Zd, th, dr, dZ, dZd, dz, dzd, dzdd, ms_type, ms_a, ms_c,
                   dmv)
        jc = col if col < 2 * d else (col + d if has_p else col - npar)
        for k in range(nm):
            Jm[k, jc] = dmv[k]
        if col >= ncol:
            continue
        # ---- residual: dr = R^T dtau + dR^T tau,  dR^T tau = -(dTheta R)^T mu  (eqs 53-57)
        T.applied_forces_t(ma, p, dp, t, z, zd, dz, dzd, A, r, Z, Zd, th, dr, dZ, dZd, dfb,
                           dnb, dQj)
        if form == MR.FORM_ORIGIN:
            T.inverse_dynamics_origin_t(ma, p, dp, A, r, bcol, Z, Zd, fb, nb_, Qj, th, dr, db,
                                        dZ, dZd, dfb, dnb, dQj, dtau)
        else:
            T.reference_points_t(ma, p, dp, A, r, th, dr, Pc, dPc)
            T.com_columns_t(ma, r, u, Pc, dr, du, dPc, dbv)
            T.com_kinematics_t(ma, zd, zdd, dzd, dzdd, r, u, Pc, bv, Vc, Vdc, dr, du, dPc, dbv,
                               dVc, dVdc)
            T.inverse_dynamics_com_t(ma, p, dp, A, r, Pc, bv, Vc, Vdc, fb, nb_, Qj, th, dr, dPc,
                                     dbv, dVc, dVdc, dfb, dnb, dQj, dtau)
        for j in range(d):
            s = 0.0
            for k in range(n):
                s += R[k, j] * dtau[k]
            T.frame_velocities_t(ma, RjT[j], zero_n, bcol, db, dZj)
            T.constraints_t(ma, p, dp, t, z, RjT[j], zdd, dz, zero_n, zero_n, A, r, ZR[j], Zd,
                            th, dr, dZj, zeroF, 1, dphi)
            T.dof_values_t(ma, p, dp, A, r, ZR[j], Zd, th, dr, dZj, zeroF, dz, zero_n, zero_n,
                           dh, dhd, dhdd)
            for k in range(m):
                s -= mu[k] * dphi[k]
            for k in range(d):
                s -= mu[m + k] * dhd[k]
            Jr[j, col] = s
    return MR.OK


# ----------------------------------------------------------------------------------------
# sweeps over a stored trajectory
# ----------------------------------------------------------------------------------------


@njit(cache=True)
def direct_sweep(ma, p, form, h, TT, ZZ, ZI, ZDI, AA, Gm, ms_type, ms_a, ms_c, SZ0, SV0,
                 MV, DM, SA_out):
    """Discrete direct method (tangent linear model of the trapezoidal steps).

    Fills ``MV[n]`` (measures) and ``DM[n]`` (nm x np, their total derivatives) for every
    output step and ``SA_out[n]`` (d x np, sensitivities of ``zdd^i``).  Returns
    (status, step)."""
    N = TT.shape[0]
    d = ZI.shape[1]
    npar = Gm.shape[1]
    nm = ms_type.shape[0]
    Jr = np.zeros((d, 2 * d + npar))
    Mb = np.zeros((d, d))
    Jm = np.zeros((nm, 3 * d + npar))
    SZ = SZ0.copy()
    SV = SV0.copy()
    SA = np.zeros((d, npar))
    pZ = np.zeros((d, npar))
    pV = np.zeros((d, npar))
    for nstep in range(N):
        st = step_jacobians(ma, p, form, TT[nstep], ZI[nstep], ZDI[nstep], AA[nstep],
                            ZZ[nstep], Gm, ms_type, ms_a, ms_c, Jr, Mb, Jm, MV[nstep])
        if st != MR.OK:
            return st, nstep
        Kz = np.ascontiguousarray(Jr[:, 0:d])
        Cz = np.ascontiguousarray(Jr[:, d:2 * d])
        P = np.ascontiguousarray(Jr[:, 2 * d:])
        JmZ = np.ascontiguousarray(Jm[:, 0:d])
        JmV = np.ascontiguousarray(Jm[:, d:2 * d])
        JmA = np.ascontiguousarray(Jm[:, 2 * d:3 * d])
        JmP = np.ascontiguousarray(Jm[:, 3 * d:])
        if nstep == 0:
            rhs = -(Kz @ SZ + Cz @ SV + P)
            Tm = Mb.copy()
            pZ[:, :] = SZ
            pV[:, :] = SV
            cz = 0.0
            cv = 0.0
        else:
            pZ[:, :] = SZ + h * SV + 0.25 * h * h * SA
            pV[:, :] = SV + 0.5 * h * SA
            rhs = -(Kz @ pZ + Cz @ pV + P)
            Tm = Mb + 0.5 * h * Cz + 0.25 * h * h * Kz
            cz = 0.25 * h * h
            cv = 0.5 * h
        for j in range(npar):
            x, ok = MR.lu_solve_small(Tm, rhs[:, j].copy())
            if not ok and d > 0:
                return MR.ST_MASS, nstep
            for k in range(d):
                SA[k, j] = x[k]
        SZ[:, :] = pZ + cz * SA
        SV[:, :] = pV + cv * SA
        SA_out[nstep] = SA
        DM[nstep] = JmZ @ SZ + JmV @ SV + JmA @ SA + JmP
    return MR.OK, N


@njit(cache=True)
def adjoint_sweep(ma, p, form, h, variant, TT, ZZ, ZI, ZDI, AA, Gm, ms_type, ms_a, ms_c,
                  SZ0, SV0, GM, C0, W, GRAD, RUN):
    """Backward sweep of the adjoint method for ``no`` objectives at once.

    ``GM[n]`` (nm x no): partial derivatives of the integrands with respect to the measures
    at step ``n``; ``W[n]``: quadrature weights (``h/2, h, ..., h/2``); ``C0`` (nm x no): an
    extra cotangent on the measures at step 0 (objectives relative to initial values).
    ``variant`` 0: exact transpose of :func:`direct_sweep` (discrete adjoint);
    1: the seed's adjoint ODE (eq 68) integrated backward by the trapezoidal rule with the
    gradient quadrature of eq 69.  ``GRAD`` (np x no) receives the gradient, ``RUN[n]`` the
    part accumulated from ``t_F`` back to step ``n``.  Returns (status, step).
    """
    N = TT.shape[0]
    d = ZI.shape[1]
    npar = Gm.shape[1]
    nm = ms_type.shape[0]
    no = GM.shape[2]
    Jr = np.zeros((d, 2 * d + npar))
    Mb = np.zeros((d, d))
    Jm = np.zeros((nm, 3 * d + npar))
    mv = np.zeros(nm)
    GRAD[:, :] = 0.0
    # discrete: cotangents of (Z, V, A) of the step being processed
    lZ = np.zeros((d, no))
    lV = np.zeros((d, no))
    lA = np.zeros((d, no))
    # continuous: mu = (muZ, muV) and its rate at the later step
    muZ = np.zeros((d, no))
    muV = np.zeros((d, no))
    dmuZ1 = np.zeros((d, no))
    dmuV1 = np.zeros((d, no))
    for nstep in range(N - 1, -1, -1):
        st = step_jacobians(ma, p, form, TT[nstep], ZI[nstep], ZDI[nstep], AA[nstep],
                            ZZ[nstep], Gm, ms_type, ms_a, ms_c, Jr, Mb, Jm, mv)
        if st != MR.OK:
            return st, nstep
        Kz = np.ascontiguousarray(Jr[:, 0:d])
        Cz = np.ascontiguousarray(Jr[:, d:2 * d])
        P = np.ascontiguousarray(Jr[:, 2 * d:])
        JmZ = np.ascontiguousarray(Jm[:, 0:d])
        JmV = np.ascontiguousarray(Jm[:, d:2 * d])
        JmA = np.ascontiguousarray(Jm[:, 2 * d:3 * d])
        JmP = np.ascontiguousarray(Jm[:, 3 * d:])
        g = GM[nstep].copy()
        if nstep == 0:
            gc = C0
        else:
            gc = np.zeros((nm, no))
        if variant == 0:
            cm = W[nstep] * g + gc
            lZ += JmZ.T @ cm
            lV += JmV.T @ cm
            lA += JmA.T @ cm
            GRAD += JmP.T @ cm
            # through S_A = -T^-1 (K pZ + C pV + P), S_Z = pZ + cz S_A, S_V = pV + cv S_A
            if nstep == 0:
                cz = 0.0
                cv = 0.0
                Tm = Mb.copy()
            else:
                cz = 0.25 * h * h
                cv = 0.5 * h
                Tm = Mb + 0.5 * h * Cz + 0.25 * h * h * Kz
            lSA = lA + cz * lZ + cv * lV
            TmT = np.ascontiguousarray(Tm.T)
            muS = np.zeros((d, no))
            for j in range(no):
                x, ok = MR.lu_solve_small(TmT, lSA[:, j].copy())
                if not ok and d > 0:
                    return MR.ST_MASS, nstep
                for k in range(d):
                    muS[k, j] = x[k]
            lpZ = lZ - Kz.T @ muS
            lpV = lV - Cz.T @ muS
            GRAD -= P.T @ muS
            if nstep == 0:
                GRAD += SZ0.T @ lpZ + SV0.T @ lpV
            else:
                # pZ = S_Z + h S_V + h^2/4 S_A (previous step), pV = S_V + h/2 S_A
                lZ = lpZ.copy()
                lV = h * lpZ + lpV
                lA = 0.25 * h * h * lpZ + 0.5 * h * lpV
        else:
            # y = (Z, V); f_y = [[0, I], [-Mb^-1 K, -Mb^-1 C]], f_rho = [0; -Mb^-1 P]
            gZ = JmZ.T @ g
            gV = JmV.T @ g
            gA = JmA.T @ g
            grho = JmP.T @ g
            MbT = np.ascontiguousarray(Mb.T)
            # the continuous adjoint at this step: (I - h/2 f_y^T) mu_n = rhs
            if nstep == N - 1:
                rZ = np.zeros((d, no))
                rV = np.zeros((d, no))
                hh = 0.0
            else:
                rZ = muZ - 0.5 * h * dmuZ1
                rV = muV - 0.5 * h * dmuV1
                hh = 0.5 * h
            # mu_dot = -f_y^T (mu + [0; gA]) - [gZ; gV]
            # with X = Mb^-T (muV + gA):  muZ_dot = K^T X - gZ,  muV_dot = -muZ + C^T X - gV
            # mu_n + hh * mu_dot(mu_n) = r: solve the 2d x 2d system
            Sys = np.zeros((2 * d, 2 * d))
            Minv = np.zeros((d, d))
            for j in range(d):
                e = np.zeros(d)
                e[j] = 1.0
                x, ok = MR.lu_solve_small(MbT, e)
                if not ok and d > 0:
                    return MR.ST_MASS, nstep
                for k in range(d):
                    Minv[k, j] = x[k]
            KX = Kz.T @ Minv
            CX = Cz.T @ Minv
            for i in range(2 * d):
                Sys[i, i] = 1.0
            for i in range(d):
                for j in range(d):
                    Sys[i, d + j] += hh * KX[i, j]
                    Sys[d + i, d + j] += hh * CX[i, j]
                Sys[d + i, i] -= hh
            b0 = rZ - hh * (KX @ gA - gZ)
            b1 = rV - hh * (CX @ gA - gV)
            for j in range(no):
                rhs = np.zeros(2 * d)
                for k in range(d):
                    rhs[k] = b0[k, j]
                    rhs[d + k] = b1[k, j]
                x, ok = MR.lu_solve_small(Sys, rhs)
                if not ok and d > 0:
                    return MR.ST_MASS, nstep
                for k in range(d):
                    muZ[k, j] = x[k]
                    muV[k, j] = x[d + k]
            Xm = Minv @ (muV + gA)
            dmuZ1 = Kz.T @ Xm - gZ
            dmuV1 = -muZ + Cz.T @ Xm - gV
            # gradient integrand f_rho^T (mu + g_ydot^T) + g_rho^T = -P^T Mb^-T (muV + gA) + grho
            GRAD += W[nstep] * (grho - P.T @ Xm)
            if nstep == 0:
                GRAD += SZ0.T @ muZ + SV0.T @ muV
                # measures relative to their initial value: cotangent C0 on m_0
                if no > 0:
                    # dm0/drho = JmZ SZ0 + JmV SV0 + JmA SA0 + Jm_rho,
                    # SA0 = -Mb^-1 (K SZ0 + C SV0 + P)
                    SA0 = np.zeros((d, npar))
                    rhs0 = -(Kz @ SZ0 + Cz @ SV0 + P)
                    for j in range(npar):
                        x, ok = MR.lu_solve_small(Mb, rhs0[:, j].copy())
                        for k in range(d):
                            SA0[k, j] = x[k]
                    dm0 = JmZ @ SZ0 + JmV @ SV0 + JmA @ SA0 + JmP
                    GRAD += dm0.T @ gc
        RUN[nstep] = GRAD
    return MR.OK, 0


@njit(cache=True)
def measure_history(ma, p, form, TT, ZZ, ZI, ZDI, AA, ms_type, ms_a, ms_c, MV):
    """Measures along a stored trajectory (``MV[n]``).  Returns (status, step)."""
    N = TT.shape[0]
    n = ZZ.shape[1]
    d = ZI.shape[1]
    ws = MR.make_workspace(ma, n)
    zd = np.zeros(n)
    zdd = np.zeros(n)
    R = np.zeros((n, d))
    tau = np.zeros(n)
    Md = np.zeros((n, n))
    for k in range(N):
        st = _state(ma, p, form, TT[k], ZI[k], ZDI[k], AA[k], ZZ[k].copy(), ws, zd, zdd, R,
                    tau, Md)
        if st != MR.OK:
            return st, k
        measures(ma, p, ws[0], ws[1], ws[4], ws[5], ZZ[k], zd, zdd, ms_type, ms_a, ms_c, MV[k])
    return MR.OK, N


@njit(cache=True)
def dof_initial_t(ma, p, Gm, z, zd):
    """Derivatives of the DOF values ``h(z_guess)`` and rates with respect to the
    parameters at a fixed joint-coordinate guess (used for point-coordinate DOF whose
    initial value is taken from the initial configuration)."""
    n = z.shape[0]
    d = ma.dof_type.shape[0]
    npar = Gm.shape[1]
    nf = ma.fr_parent.shape[0]
    A = np.zeros((nf, 3, 3))
    r = np.zeros((nf, 3))
    u = np.zeros((nf, 3))
    bcol = np.zeros((nf, 6))
    Z = np.zeros((nf, 6))
    Zd = np.zeros((nf, 6))
    K.frame_positions(ma, p, z, A, r, u)
    K.joint_columns(ma, r, u, bcol)
    K.frame_velocities(ma, zd, bcol, Z)
    th = np.zeros((nf, 3))
    dr = np.zeros((nf, 3))
    du = np.zeros((nf, 3))
    db = np.zeros((nf, 6))
    dZ = np.zeros((nf, 6))
    zero_n = np.zeros(n)
    dh = np.zeros(d)
    dhd = np.zeros(d)
    dhdd = np.zeros(d)
    SZ = np.zeros((d, npar))
    SV = np.zeros((d, npar))
    for j in range(npar):
        dp = Gm[:, j].copy()
        T.frame_positions_t(ma, p, dp, z, zero_n, A, r, u, th, dr, du)
        T.joint_columns_t(ma, r, u, dr, du, db)
        T.frame_velocities_t(ma, zd, zero_n, bcol, db, dZ)
        T.dof_values_t(ma, p, dp, A, r, Z, Zd, th, dr, dZ, dZ, zero_n, zero_n, zero_n, dh, dhd,
                       dhdd)
        for k in range(d):
            if ma.dof_type[k] != DOF_COORD:
                SZ[k, j] = dh[k]
                SV[k, j] = dhd[k]
    return SZ, SV
