"""Exact step Jacobians and sensitivity sweeps of the GLOBAL formulation (issue 6).

:func:`step_jacobians_g` returns at one converged state of the natural-coordinate model
the same objects as :func:`_sens.step_jacobians` (``K = dr/dZ``, ``C = dr/dV``, ``Mbar =
R^T M R``, ``P = dr/drho`` and the measure derivatives), for the residual
``r = R^T (M qdd - Q)`` (seed 001 eq 28-29 in natural coordinates).  As in the
semi-recursive kernel, the derivatives follow from the implicit derivatives of the
position, velocity and acceleration problems (eqs 32-38, here ``Theta_q dq = ...`` with the
jets of :mod:`_global`) and of ``R`` (eqs 56-57: ``dR^T tau = -(dTheta_q R)^T mu`` with
``mu = Theta_q^+T tau``).  ``M`` is constant in ``q`` (natural coordinates), so only its
parameter derivative appears; ``Q`` enters through its virtual power ``Q . R_j``.

:func:`direct_sweep_g` / :func:`adjoint_sweep_g` are the sweeps of :mod:`_sens` (copied
verbatim, with the step-Jacobian call replaced): the states ``ZZ`` are the natural
coordinates ``q`` and ``AREF`` the angle-branch references of every step.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from . import _global as G
from . import _matrixr as MR
from . import _sens as S

MS_POS, MS_VEL, MS_ACC, MS_ANGVEL, MS_ANGVEL_BODY, MS_COORD, MS_RATE, MS_COORD_ACC = range(8)


@njit(cache=True)
def measures_g(ga, ma, p, t, q, qd, qdd, dq, dqd, dqdd, dp, tang, aref, sc, ms_type, ms_a,
               ms_c, out, dout):
    """Objective measures (``out``) and their tangents (``dout``) in natural coordinates:
    point position/velocity/acceleration components (linear in q, qd, qdd), body angular
    velocities (bilinear in q, qd) and joint coordinates with their rates (the
    joint-coordinate jets)."""
    Jp = sc[1]
    tmp = sc[2, 0]
    jet = np.zeros(6)
    for k in range(ms_type.shape[0]):
        typ = ms_type[k]
        i = ms_a[k]
        c = ms_c[k]
        if typ <= MS_ACC:
            G.op_jet(ga, p, ga.pt_op[i], q, qd, qdd, dq, dqd, dqdd, dp, tang, Jp, tmp)
            lv = typ - MS_POS
            out[k] = Jp[lv, c]
            dout[k] = Jp[3 + lv, c] if tang else 0.0
        elif typ == MS_ANGVEL or typ == MS_ANGVEL_BODY:
            # bilinear in (q, qd): the tangent is w(dq, qd) + w(q, dqd)
            body = typ == MS_ANGVEL_BODY
            out[k] = G.angvel_bil(ga, i, c, body, q, qd)
            dout[k] = (G.angvel_bil(ga, i, c, body, dq, qd) + G.angvel_bil(ga, i, c, body, q, dqd)
                       if tang else 0.0)
        else:
            s = ga.jc_sf[i]
            G.sf_jet(ga, ma, p, s, t, q, qd, qdd, dq, dqd, dqdd, dp, tang, aref, sc, jet)
            lv = typ - MS_COORD
            tf = ga.sf_tf[s]
            if tf >= 0:
                f, fd, fdd = G.K.time_function(ma, tf, t)
                jet[0] += f
                jet[1] += fd
                jet[2] += fdd
            out[k] = jet[lv]
            dout[k] = jet[3 + lv] if tang else 0.0


@njit(cache=True)
def _state(ga, ma, p, t, zdi, a, q, aref, ws, qd, qdd, R, tau, M, Q):
    """Velocity, acceleration, R and ``tau = M qdd - Q`` at a converged position ``q``."""
    N = q.shape[0]
    qddb = np.zeros(N)
    st, bad = G.solve_va(ga, ma, p, t, zdi, q, qd, qddb, R, aref, ws)
    if st != MR.OK:
        return st
    qdd[:] = qddb + R @ a
    G.generalized_forces(ga, ma, p, t, q, qd, aref, ws[5], Q)
    tau[:] = M @ qdd - Q
    return MR.OK


@njit(cache=True)
def step_jacobians_g(ga, ma, p, t, zi, zdi, a, q, aref, Gm, ms_type, ms_a, ms_c,
                     Jr, Mbar, Jm, mval):
    """Exact partial derivatives of the step residual and of the measures at one state of
    the global formulation; same outputs and layout as :func:`_sens.step_jacobians`.
    Returns a status code."""
    N = q.shape[0]
    d = zi.shape[0]
    m = ga.phi_sf.shape[0]
    npar = Gm.shape[1]
    nfield = p.shape[0]
    nm = ms_type.shape[0]
    ws = G.make_ws(ga)
    J, sc = ws[4], ws[5]
    qd = np.zeros(N)
    qdd = np.zeros(N)
    R = np.zeros((N, d))
    tau = np.zeros(N)
    Q = np.zeros(N)
    M = np.zeros((N, N))
    dM = np.zeros((N, N))
    G.mass_matrix(ga, ma, p, p, False, M)
    st = _state(ga, ma, p, t, zdi, a, q, aref, ws, qd, qdd, R, tau, M, Q)
    if st != MR.OK:
        return st
    Mbar[:, :] = R.T @ (M @ R)
    zero = np.zeros(N)
    zp = np.zeros(nfield)
    dmv = np.zeros(nm)
    measures_g(ga, ma, p, t, q, qd, qdd, zero, zero, zero, zp, False, aref, sc, ms_type, ms_a,
               ms_c, mval, dmv)
    mu = np.zeros(m + d)
    G.sqr_solve_transpose(ga, ws, tau, mu)
    RjT = np.ascontiguousarray(R.T)
    dp = np.zeros(nfield)
    dq = np.zeros(N)
    dqd = np.zeros(N)
    dqdd = np.zeros(N)
    rhs = np.zeros(m + d)
    dQ = np.zeros(N)
    dTm = np.zeros(N)
    Vs = np.zeros((12, 3))
    ncol = 2 * d + npar
    nop = ga.op_ptr.shape[0] - 1
    OB = np.zeros((nop, 3, 3))
    OD = np.zeros((nop, 3, 3))
    tmp3 = np.zeros(3)
    tg = np.zeros(m + d)
    G.operand_base(ga, p, q, qd, qdd, OB)
    for col in range(ncol + d):
        has_p = 2 * d <= col < ncol
        if has_p:
            for i in range(nfield):
                dp[i] = Gm[i, col - 2 * d]
        else:
            dp[:] = 0.0
        # operand tangents (cached base values OB; theta_tangents = the tangent entries of
        # theta_jets): level 2 has dqdd = 0 (the unknown), so only its field part
        G.operand_dir(ga, p, zero, q, dp, has_p, True, OD, 0, tmp3)
        G.operand_dir(ga, p, zero, qd, dp, has_p, False, OD, 1, tmp3)
        G.operand_dir(ga, p, zero, qdd, dp, has_p, False, OD, 2, tmp3)
        # position level: Theta_q dq = [-Phi_rho; dZ - h_rho]  (eqs 32a, 37a)
        dq[:] = 0.0
        if col < d:
            for k in range(N):
                dq[k] = R[k, col]
        elif has_p:
            G.theta_tangents(ga, p, dp, has_p, OB, OD, 0, tg)
            for k in range(m + d):
                rhs[k] = -tg[k]
            G.sqr_solve(ga, ws, rhs, dq)
        # velocity level (eqs 32b, 37b)
        G.operand_dir(ga, p, dq, q, dp, has_p, True, OD, 0, tmp3)
        G.theta_tangents(ga, p, dp, has_p, OB, OD, 1, tg)
        for k in range(m + d):
            rhs[k] = -tg[k]
        if d <= col < 2 * d:
            rhs[m + col - d] += 1.0
        G.sqr_solve(ga, ws, rhs, dqd)
        # acceleration level (eqs 32c, 37c)
        G.operand_dir(ga, p, dqd, qd, dp, has_p, False, OD, 1, tmp3)
        G.theta_tangents(ga, p, dp, has_p, OB, OD, 2, tg)
        for k in range(m + d):
            rhs[k] = -tg[k]
        if col >= ncol:
            rhs[m + col - ncol] += 1.0
        G.sqr_solve(ga, ws, rhs, dqdd)
        measures_g(ga, ma, p, t, q, qd, qdd, dq, dqd, dqdd, dp, True, aref, sc, ms_type, ms_a,
                   ms_c, mval, dmv)
        jc = col if col < 2 * d else (col + d if has_p else col - npar)
        for k in range(nm):
            Jm[k, jc] = dmv[k]
        if col >= ncol:
            continue
        # residual: dr_j = R_j . d(M qdd) - d(Q . R_j) - (dTheta_q R_j) . mu  (eqs 53-57)
        dtm = M @ dqdd
        if has_p:
            G.mass_matrix(ga, ma, p, dp, True, dM)
            dtm += dM @ qdd
        G.force_tangent(ga, ma, p, t, q, qd, dq, dqd, dp, aref, sc, dQ)
        G.theta_grad_t(ga, p, q, dq, dp, mu, Vs, dTm)
        for k in range(N):
            dtm[k] -= dQ[k] + dTm[k]
        for j in range(d):
            Rj = RjT[j]
            s = 0.0
            for k in range(N):
                s += Rj[k] * dtm[k]
            Jr[j, col] = s
    return MR.OK


@njit(cache=True)
def measure_history_g(ga, ma, p, AREF, TT, ZZ, ZI, ZDI, AA, ms_type, ms_a, ms_c, MV):
    """Measures along a stored global trajectory (``ZZ`` = natural coordinates)."""
    N = TT.shape[0]
    n = ZZ.shape[1]
    d = ZI.shape[1]
    ws = G.make_ws(ga)
    qd = np.zeros(n)
    qdd = np.zeros(n)
    R = np.zeros((n, d))
    tau = np.zeros(n)
    Q = np.zeros(n)
    M = np.zeros((n, n))
    G.mass_matrix(ga, ma, p, p, False, M)
    zero = np.zeros(n)
    zp = np.zeros(p.shape[0])
    dmv = np.zeros(ms_type.shape[0])
    for k in range(N):
        q = ZZ[k].copy()
        aref = AREF[k].copy()
        G.theta_jacobian(ga, p, q, aref, ws[5], ws[0])
        st = _state(ga, ma, p, TT[k], ZDI[k], AA[k], q, aref, ws, qd, qdd, R, tau, M, Q)
        if st != MR.OK:
            return st, k
        measures_g(ga, ma, p, TT[k], q, qd, qdd, zero, zero, zero, zp, False, aref, ws[5],
                   ms_type, ms_a, ms_c, MV[k], dmv)
    return MR.OK, N


# ----------------------------------------------------------------------------------------
# sweeps (verbatim copies of _sens.direct_sweep / adjoint_sweep on the global Jacobians)
# ----------------------------------------------------------------------------------------


@njit(cache=True)
def direct_sweep_g(ga, ma, p, AREF, h, TT, ZZ, ZI, ZDI, AA, Gm, ms_type, ms_a, ms_c, SZ0, SV0,
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
        st = step_jacobians_g(ga, ma, p, TT[nstep], ZI[nstep], ZDI[nstep], AA[nstep],
                              ZZ[nstep], AREF[nstep], Gm, ms_type, ms_a, ms_c, Jr, Mb, Jm, MV[nstep])
        if st != MR.OK:
            return st, nstep
        Kz, Cz, P, JmZ, JmV, JmA, JmP = S.jacobian_blocks(Jr, Jm, d)
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
def adjoint_sweep_g(ga, ma, p, AREF, h, variant, TT, ZZ, ZI, ZDI, AA, Gm, ms_type, ms_a, ms_c,
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
        st = step_jacobians_g(ga, ma, p, TT[nstep], ZI[nstep], ZDI[nstep], AA[nstep],
                              ZZ[nstep], AREF[nstep], Gm, ms_type, ms_a, ms_c, Jr, Mb, Jm, mv)
        if st != MR.OK:
            return st, nstep
        Kz, Cz, P, JmZ, JmV, JmA, JmP = S.jacobian_blocks(Jr, Jm, d)
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
def evaluate_g(ga, ma, p, t, zi, zdi, a, q, aref, ms_type, ms_a, ms_c, pos_tol, pos_maxit):
    """Step residual ``r = R^T (M qdd - Q)`` and measures at ``(t, z^i, zd^i, zdd^i = a)``
    (position problem solved from the guess ``q``): the discrete function whose exact
    derivatives :func:`step_jacobians_g` returns (used by the tests).  Returns
    (status, r, measures)."""
    N = q.shape[0]
    d = zi.shape[0]
    ws = G.make_ws(ga)
    qq = q.copy()
    ar = aref.copy()
    r = np.zeros(d)
    mv = np.zeros(ms_type.shape[0])
    st, it, err, bad = G.solve_position(ga, ma, p, t, zi, qq, ar, ws, pos_tol, pos_maxit,
                                        False)
    if st != MR.OK:
        return st, r, mv
    qd = np.zeros(N)
    qdd = np.zeros(N)
    R = np.zeros((N, d))
    tau = np.zeros(N)
    Q = np.zeros(N)
    M = np.zeros((N, N))
    G.mass_matrix(ga, ma, p, p, False, M)
    st = _state(ga, ma, p, t, zdi, a, qq, ar, ws, qd, qdd, R, tau, M, Q)
    if st != MR.OK:
        return st, r, mv
    r[:] = R.T @ tau
    zero = np.zeros(N)
    dmv = np.zeros(ms_type.shape[0])
    measures_g(ga, ma, p, t, qq, qd, qdd, zero, zero, zero, p, False, ar, ws[5], ms_type,
               ms_a, ms_c, mv, dmv)
    return MR.OK, r, mv
