"""Exact step Jacobians and sensitivity sweeps of the GLOBAL formulation (issue 6).

:func:`step_jacobians_g` returns at one converged state of the natural-coordinate model
the same objects as :func:`workbench.formulations.semirecursive.step_jacobians.step_jacobians` (``K
= dr/dZ``, ``C = dr/dV``, ``Mbar =
R^T M R``, ``P = dr/drho`` and the measure derivatives), for the residual
``r = R^T (M qdd - Q)`` (seed 001 eq 28-29 in natural coordinates).  As in the
semi-recursive kernel, the derivatives follow from the implicit derivatives of the
position, velocity and acceleration problems (eqs 32-38, here ``Theta_q dq = ...`` with the
jets of :mod:`workbench.formulations.natural.kernels`) and of ``R`` (eqs 56-57: ``dR^T tau =
-(dTheta_q R)^T mu`` with
``mu = Theta_q^+T tau``).  ``M`` is constant in ``q`` (natural coordinates), so only its
parameter derivative appears; ``Q`` enters through its virtual power ``Q . R_j``.

:func:`direct_sweep_g` / :func:`adjoint_sweep_g` are the sweeps of
:mod:`workbench.formulations.semirecursive.step_jacobians` (copied
verbatim, with the step-Jacobian call replaced): the states ``ZZ`` are the natural
coordinates ``q`` and ``AREF`` the angle-branch references of every step.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from workbench.formulations.natural import kernels as G
from workbench.formulations.semirecursive import matrixr as MR

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
                f, fd, fdd = G.K.time_function(ma, p, tf, t)
                jet[0] += f
                jet[1] += fd
                jet[2] += fdd
                if tang:
                    df, dfd, dfdd = G.K.time_function_t(ma, p, dp, tf, t)
                    jet[3] += df
                    jet[4] += dfd
                    jet[5] += dfdd
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
    G.generalized_forces(ga, ma, p, t, q, qd, aref, ws.sc, Q)
    G.mass_apply(ga, M, qdd, tau)
    tau -= Q
    return MR.OK


@njit(cache=True)
def constraint_columns_g(ga, ma, Gm):
    """``out[j] = 1`` when parameter column ``j`` of ``Gm`` (a direction in the field
    vector) moves a row of ``Theta``: it has a non-zero entry among the fields that the
    constraint and DOF rows read (their operands' local vectors, a distance constant,
    the coefficients of a drive's time function, counted over ``max(tf_n, 8)`` entries
    from the first).  The other columns (masses, inertias, springs, dampers, tires,
    forces, points that only force elements and measures use) leave the position,
    velocity and acceleration problems at rest: their tangents are exact zeros."""
    nf = Gm.shape[0]
    used = np.zeros(nf, dtype=np.int64)
    m = ga.phi_sf.shape[0]
    for k in range(m + ga.dof_sf.shape[0]):
        s = ga.phi_sf[k] if k < m else ga.dof_sf[k - m]
        for c in range(4):
            o = ga.sf_op[s, c]
            if o < 0 or o >= ga.op_ptr.shape[0] - 1:
                continue
            for t in range(ga.op_ptr[o], ga.op_ptr[o + 1]):
                for f in (ga.tm_f1[t], ga.tm_f2[t]):
                    if f >= 0:
                        for i in range(3):
                            if f + i < nf:
                                used[f + i] = 1
        if ga.sf_fK[s] >= 0:
            used[ga.sf_fK[s]] = 1
        tf = ga.sf_tf[s]
        if tf >= 0:
            o = ma.tf_fld[tf]
            for i in range(max(ma.tf_n[tf], 8)):
                if o + i < nf:
                    used[o + i] = 1
    out = np.zeros(Gm.shape[1], dtype=np.int64)
    for j in range(Gm.shape[1]):
        for i in range(nf):
            if Gm[i, j] != 0.0 and used[i] == 1:
                out[j] = 1
                break
    return out


@njit(cache=True)
def sweep_workspace_g(ga, ma, p, Gm, d, nm):
    """Work arrays of :func:`step_jacobians_w`, made once per sweep (``p`` is fixed over a
    sweep: the constant mass matrix, the row program and the workspace of the
    factorisation serve every row), and the parameter columns that move a constraint
    (:func:`constraint_columns_g`)."""
    N = ga.nq
    md = ga.phi_sf.shape[0] + ga.dof_sf.shape[0]
    ws = G.make_ws(ga)
    pr = G.row_program(ga, p, ws)
    M = np.zeros((N, N))
    G.mass_matrix(ga, ma, p, p, False, M)
    nop = ga.op_ptr.shape[0] - 1
    return (ws, pr, M, np.zeros((11, N)), np.zeros((N, d)), np.zeros((d, N)),
            np.zeros((nop, 3, 3)), np.zeros((nop, 3, 3)), np.zeros((3, md)),
            np.zeros((md, 6)), np.zeros((ma.ty_pt.shape[0], 3, 3, 13)),
            np.zeros((2, p.shape[0])), np.zeros(nm), np.zeros(3), np.zeros((2, nop, 3)),
            constraint_columns_g(ga, ma, Gm))


@njit(cache=True)
def _state_operands(ga, ts, x, Xo, OD, lv):
    """``OD[:, lv]`` = every operand applied to the state direction ``x``
    (:func:`G.operand_dir` without a field part, by :func:`G.prog_operands` with the signed
    term weights ``ts``: the same numbers) through the buffer ``Xo``."""
    G.prog_operands(ga, ts, x, False, Xo)
    for o in range(Xo.shape[0]):
        for i in range(3):
            OD[o, lv, i] = Xo[o, i]


@njit(cache=True)
def _level_solve(ga, ma, p, t, dp, has_p, OB, OD, lv, ws, tg, rhs, x):
    """The tangent problem of level ``lv`` (eqs 32a-c, 37a-c): ``Theta_q x = -dTheta``
    with ``dTheta`` the level-``lv`` tangents of the rows of ``Theta`` from the cached
    operands (and the drives' field part along a parameter direction); the right-hand
    side of a state direction's unit entry is ``R``'s, handled by the caller."""
    G.theta_tangents(ga, p, dp, has_p, OB, OD, lv, tg)
    if has_p:
        G.drive_tangents(ga, ma, p, dp, t, lv, tg)
    for k in range(rhs.shape[0]):
        rhs[k] = -tg[k]
    G.sqr_solve(ga, ws, rhs, x)


@njit(cache=True)
def _project_column(RjT, dtm, Jr, col):
    """``Jr[j, col] = R_j . dtm`` for every column ``j`` of ``R`` (rows of ``RjT``; each sum
    over the coordinates in ascending order)."""
    N = dtm.shape[0]
    for j in range(RjT.shape[0]):
        Rj = RjT[j]
        s = 0.0
        for k in range(N):
            s += Rj[k] * dtm[k]
        Jr[j, col] = s


@njit(cache=True)
def step_jacobians_g(ga, ma, p, t, zi, zdi, a, q, aref, Gm, ms_type, ms_a, ms_c,
                     Jr, Mbar, Jm, mval):
    """Exact partial derivatives of the step residual and of the measures at one state of
    the global formulation; same outputs and layout as
    :func:`workbench.formulations.semirecursive.step_jacobians.step_jacobians`
    (:func:`step_jacobians_w` with its own work arrays).  Returns a status code."""
    W = sweep_workspace_g(ga, ma, p, Gm, zi.shape[0], ms_type.shape[0])
    return step_jacobians_w(ga, ma, p, t, zi, zdi, a, q, aref, Gm, ms_type, ms_a, ms_c, Jr,
                            Mbar, Jm, mval, W)


@njit(cache=True)
def step_jacobians_w(ga, ma, p, t, zi, zdi, a, q, aref, Gm, ms_type, ms_a, ms_c,
                     Jr, Mbar, Jm, mval, W):
    """:func:`step_jacobians_g` with the work arrays ``W`` of :func:`sweep_workspace_g`.

    The state (velocities, accelerations, ``R``, ``tau``) comes from the row program and
    the simulation's factorisation (:func:`G.prog_values`, :func:`G.solve_va_step_p`: the
    static-pivot LU) when the model has one, else from the interpreter and the QR
    (:func:`G.solve_va`).  Per column: the operand tangents from the cached operand values;
    the tangent of ``Theta_q^T mu`` from them (:func:`G.theta_grad_t_grouped`; nothing along
    a velocity or acceleration direction, where ``dq = 0``); the force tangent of a state
    direction from the kept operand values and the tires' Jacobians
    (:func:`G.force_tangent_q`), of a parameter direction by :func:`G.force_tangent`."""
    N = q.shape[0]
    d = zi.shape[0]
    npar = Gm.shape[1]
    nfield = p.shape[0]
    nm = ms_type.shape[0]
    ws, pr, M, vec, R, RjT, OB, OD, md3, J, TJ, pv, dmv, tmp3, X2, kinp = W
    Xo, Gacc = X2[0], X2[1]
    sc = ws.sc
    qd, qdd, tau, Q, zero, dq, dqd, dqdd, dQ, dTm, dtm = (vec[0], vec[1], vec[2], vec[3],
                                                          vec[4], vec[5], vec[6], vec[7],
                                                          vec[8], vec[9], vec[10])
    mu, rhs, tg = md3[0], md3[1], md3[2]
    zp, dp = pv[0], pv[1]
    zero[:] = 0.0
    zp[:] = 0.0
    prog = pr.ok[0] == 1
    if prog:
        # the operand values at q (pr.OV), the factorisation, qd, qdd = qdd_b + R a by one
        # solve, R; pr.OR keeps the operand rates along qd (for force_tangent_q)
        G.prog_values(ga, ma, pr, p, t, q, aref, J)
        st, bad = G.solve_va_step_p(ga, ma, pr, p, t, zdi, a, q, qd, qdd, R, ws, True, rhs, J)
        if st != MR.OK:
            return st
        G.generalized_forces(ga, ma, p, t, q, qd, aref, sc, Q)
        G.mass_apply(ga, M, qdd, tau)
        tau -= Q
        G.tire_state_jacobians(ga, ma, p, q, qd, TJ)
    else:
        st = _state(ga, ma, p, t, zdi, a, q, aref, ws, qd, qdd, R, tau, M, Q)
        if st != MR.OK:
            return st
    G.projected_mass(ga, M, R, Mbar)
    measures_g(ga, ma, p, t, q, qd, qdd, zero, zero, zero, zp, False, aref, sc, ms_type, ms_a,
               ms_c, mval, dmv)
    G.sqr_solve_transpose(ga, ws, tau, mu)
    for j in range(d):
        for k in range(N):
            RjT[j, k] = R[k, j]
    ncol = 2 * d + npar
    G.operand_base(ga, p, q, qd, qdd, OB)
    for col in range(ncol + d):
        has_p = 2 * d <= col < ncol
        if has_p:
            for i in range(nfield):
                dp[i] = Gm[i, col - 2 * d]
            if kinp[col - 2 * d] == 0:
                # no constraint moves: dq = dqd = dqdd = 0 and d(Theta_q^T mu) = 0 exactly
                # (the arithmetic below would add exact zeros); the measures, the mass
                # matrix and the forces keep their field parts
                dq[:] = 0.0
                dqd[:] = 0.0
                dqdd[:] = 0.0
                measures_g(ga, ma, p, t, q, qd, qdd, dq, dqd, dqdd, dp, True, aref, sc, ms_type,
                           ms_a, ms_c, mval, dmv)
                for k in range(nm):
                    Jm[k, col + d] = dmv[k]
                dtm[:] = 0.0
                G.mass_dir_apply(ga, ma, p, dp, qdd, dtm)
                G.force_tangent(ga, ma, p, t, q, qd, dq, dqd, dp, aref, sc, dQ)
                for k in range(N):
                    dtm[k] -= dQ[k]
                _project_column(RjT, dtm, Jr, col)
                continue
            # operand tangents (cached base values OB; theta_tangents = the tangent entries
            # of theta_jets): level 2 has dqdd = 0 (the unknown), so only its field part
            G.operand_dir(ga, p, zero, q, dp, has_p, True, OD, 0, tmp3)
            G.operand_dir(ga, p, zero, qd, dp, has_p, False, OD, 1, tmp3)
            G.operand_dir(ga, p, zero, qdd, dp, has_p, False, OD, 2, tmp3)
        else:
            dp[:] = 0.0
            if col >= ncol:
                # an acceleration direction (measures only): dq = dqd = 0, so every tangent
                # of Theta vanishes and dqdd solves [0; e_j]: the column R_j (the same
                # solve, the same values)
                dq[:] = 0.0
                dqd[:] = 0.0
                for k in range(N):
                    dqdd[k] = R[k, col - ncol]
                measures_g(ga, ma, p, t, q, qd, qdd, dq, dqd, dqdd, dp, True, aref, sc, ms_type,
                           ms_a, ms_c, mval, dmv)
                for k in range(nm):
                    Jm[k, col - npar] = dmv[k]
                continue
            # a state direction: no field part (the velocity level reads the level-1
            # tangents before op(dqd) is formed), op(dq) and op(dqd) below, zero at level 2
            OD[:, 1:, :] = 0.0
        # position level: Theta_q dq = [-Phi_rho; dZ - h_rho]  (eqs 32a, 37a)
        dq[:] = 0.0
        if col < d:
            for k in range(N):
                dq[k] = R[k, col]
        elif has_p:
            _level_solve(ga, ma, p, t, dp, has_p, OB, OD, 0, ws, tg, rhs, dq)
        # velocity level (eqs 32b, 37b)
        moves = col < d or has_p           # dq != 0 or a field direction
        if has_p:
            G.operand_dir(ga, p, dq, q, dp, has_p, True, OD, 0, tmp3)
        elif moves:
            _state_operands(ga, pr.ts, dq, Xo, OD, 0)
        else:
            OD[:, 0, :] = 0.0
        if moves:
            _level_solve(ga, ma, p, t, dp, has_p, OB, OD, 1, ws, tg, rhs, dqd)
        else:
            # a velocity direction: dq = 0, the tangents of Theta at level 1 vanish and dqd
            # solves [0; e_j]: the column R_j
            for k in range(N):
                dqd[k] = R[k, col - d]
        # acceleration level (eqs 32c, 37c)
        if has_p:
            G.operand_dir(ga, p, dqd, qd, dp, has_p, False, OD, 1, tmp3)
        else:
            _state_operands(ga, pr.ts, dqd, Xo, OD, 1)
        _level_solve(ga, ma, p, t, dp, has_p, OB, OD, 2, ws, tg, rhs, dqdd)
        measures_g(ga, ma, p, t, q, qd, qdd, dq, dqd, dqdd, dp, True, aref, sc, ms_type, ms_a,
                   ms_c, mval, dmv)
        # measure columns: [dZ, dV | dA | drho] (an acceleration direction above)
        jc = col if col < 2 * d else col + d
        for k in range(nm):
            Jm[k, jc] = dmv[k]
        # residual: dr_j = R_j . d(M qdd) - d(Q . R_j) - (dTheta_q R_j) . mu  (eqs 53-57)
        G.mass_apply(ga, M, dqdd, dtm)
        if has_p:
            G.mass_dir_apply(ga, ma, p, dp, qdd, dtm)
        if has_p or not prog:
            G.force_tangent(ga, ma, p, t, q, qd, dq, dqd, dp, aref, sc, dQ)
        else:
            G.force_tangent_q(ga, ma, pr, p, t, q, qd, dq, dqd, zp, aref, sc, dQ, TJ)
        if moves:
            G.theta_grad_t_grouped(ga, pr.tw, dp, has_p, OB, OD, mu, Gacc, dTm)
            for k in range(N):
                dtm[k] -= dQ[k] + dTm[k]
        else:
            for k in range(N):
                dtm[k] -= dQ[k]
        _project_column(RjT, dtm, Jr, col)
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
        G.theta_jacobian(ga, p, q, aref, ws.sc, ws.Th)
        st = _state(ga, ma, p, TT[k], ZDI[k], AA[k], q, aref, ws, qd, qdd, R, tau, M, Q)
        if st != MR.OK:
            return st, k
        measures_g(ga, ma, p, TT[k], q, qd, qdd, zero, zero, zero, zp, False, aref, ws.sc,
                   ms_type, ms_a, ms_c, MV[k], dmv)
    return MR.OK, N


# ----------------------------------------------------------------------------------------
# sweeps (verbatim copies of workbench.sensitivities.sweeps.direct_sweep / adjoint_sweep on the
# global Jacobians)
# ----------------------------------------------------------------------------------------


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
    measures_g(ga, ma, p, t, qq, qd, qdd, zero, zero, zero, p, False, ar, ws.sc, ms_type,
               ms_a, ms_c, mv, dmv)
    return MR.OK, r, mv
