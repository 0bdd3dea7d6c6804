"""Numba kernels of the sensitivity analysis (seed 001 §3), private and array-only.

The discrete trajectory produced by
:func:`workbench.integrators.trapezoidal.integrate_semirecursive` satisfies, at
every output step ``n`` (unknowns ``Z = z^i``, ``V = zd^i``, ``A = zdd^i``)::

    r_n(Z_n, V_n, A_n, rho) = R^T tau(z, zd, zdd) = 0                          (eq 29)
    Z_{n+1} = Z_n + h V_n + h^2/4 (A_n + A_{n+1}),  V_{n+1} = V_n + h/2 (A_n + A_{n+1})

:func:`step_jacobians` returns, at one converged state, the exact partial derivatives

    K = dr/dZ,  C = dr/dV,  Mbar = dr/dA = R^T M R,  P = dr/drho,  and  dm/d(Z, V, A, rho)

of the residual and of the objective *measures* ``m`` (point positions, velocities,
accelerations, angular velocities, coordinates).  ``K`` and ``C`` are
the seed's ``Kbar + Mbar_z zdd^i`` and ``Cbar`` (eqs 50-52) and ``P`` is
``-(Qbar_rho - Mbar_rho zdd^i)`` (eq 49); they are built from the tangent kernels of
:mod:`workbench.kernels.tangents` (the inverse-dynamics tangent of the formulation in use:
SR-I/RTdyn0 or
SR-II/RTdyn1) through the implicit derivatives of the position, velocity and
acceleration problems (eqs 32-38) and of ``R^Phi`` (eqs 56-57: ``dR = -Theta^+ dTheta R``).

:func:`direct_sweep` propagates the sensitivities forward (discrete direct method = the
tangent linear model eq 48 integrated by the same trapezoidal rule);
:func:`adjoint_sweep` runs backward either the exact transpose of that recursion
(``variant=0``, discrete adjoint) or the seed's continuous adjoint ODE (eqs 68-69)
discretised by the trapezoidal rule (``variant=1``).  Both take the step Jacobians by
blocks of rows (:func:`step_jacobian_block`, rows independent, in parallel) and run their
recursion over each block (:func:`direct_block`, :func:`adjoint_block`, sequential; the
global formulation's sweeps use the same two with its own Jacobians).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from workbench.formulations.semirecursive import matrixr as MR
from workbench.kernels import layout as AR
from workbench.kernels import tangents as T
from workbench.kernels import tree as K
from workbench.kernels.layout import C_CAM, C_DIST, C_DOTVP, C_DOTVV, C_PTCOMP, DOF_COORD
from workbench.kernels.linalg import (column_pattern, projected_matrix, qr_factor,
                                      qr_solve_transpose)
from workbench.kernels.measures import (MS_ACC, MS_COORD_ACC, MS_REACTION, measures, measures_t,
                                        point_cot, point_pos_t, vector_cot, vector_pos_t)
from workbench.kernels.scalar import cam_profile_cs

# stack temporaries of constant shape (no allocation in the hot kernels)
_S1x6x3 = AR.scratch(1, 6, 3)
_S3 = AR.scratch(3)
_S3x3 = AR.scratch(3, 3)
_S12x3 = AR.scratch(12, 3)
_S64 = AR.scratch(64)


# ----------------------------------------------------------------------------------------
# measures
# ----------------------------------------------------------------------------------------


# ----------------------------------------------------------------------------------------
# the derivative of R: mu^T dTheta R_j for all j in one pass per direction
# ----------------------------------------------------------------------------------------


@njit(cache=True, inline="always")
def dtheta_mu(ma, p, dp, A, r, th, dr, db, bcol, R, mu, X, cZ, cdZ, w, sub):
    """``sub[j] = mu^T dTheta R_j`` for every column ``R_j`` of ``R^Phi`` along one
    direction (position tangents ``th, dr, db``, field direction ``dp``; eqs 56-57).

    ``dTheta R_j`` is the velocity-level constraint and DOF tangent of
    :func:`workbench.kernels.tangents.constraints_t` /
    :func:`workbench.kernels.tangents.dof_values_t` with ``zd = R_j``,
    ``dzd = 0``: linear in the frame twists ``Z = F(R_j)`` and their tangents ``dZ =
    dF(R_j)`` (:func:`workbench.kernels.tree.frame_velocities`,
    :func:`workbench.kernels.tangents.frame_velocities_t`).
    Reverse mode over that linear map: the constraint rows give, from the positions
    of their points and vectors and the position tangents (independent of ``j``), the
    cotangents ``cZ, cdZ`` (frames x 6) of the twists they read (:func:`point_cot`,
    :func:`vector_cot`); summed over each frame's subtree they give ``w_c = bcol_f .
    cZ_f + db_f . cdZ_f`` for the coordinate ``c`` of frame ``f``, and ``sub = R^T w``.
    One pass per direction instead of one per column.  Work arrays: ``X`` (3 x 2 x 3),
    ``cZ, cdZ`` (frames x 6), ``w`` (n).

    A cam relation ``z_a - s(z_b; p)`` reads the joint rates directly: ``Theta_z R_j =
    R_j[a] - s'(z_b) R_j[b]``, whose tangent is ``-(s''(z_b) dz_b + ds'(z_b)) R_j[b]``
    (``ds'`` along the coefficient directions ``dp``), so ``w_b -= mu (s'' dz_b + ds')``.
    ``cos z_b, sin z_b`` come from the frame rotations
    (:func:`workbench.kernels.tree.joint_angle_cs`) and ``dz_b`` from the rotation tangents of
    the polar coordinate's revolute frame ``f``: ``th_f = th_parent + u_f dz_b``
    (:func:`workbench.kernels.tangents.frame_positions_t`), so ``dz_b = u_f . (th_f -
    th_parent)`` with ``u_f`` the rotation part of ``bcol_f``."""
    n, d = R.shape
    m = ma.c_type.shape[0]
    nf = ma.fr_parent.shape[0]
    c_type = ma.c_type
    c_i = ma.c_i
    for f in range(nf):
        for i in range(6):
            cZ[f, i] = 0.0
            cdZ[f, i] = 0.0
    for k in range(m):
        typ = c_type[k]
        muk = mu[k]
        if typ == C_PTCOMP:
            if K._same_points(c_type, c_i, k):
                continue                  # added with the first row of its joint
            # rows k .. ke-1: components of the same two points (one cut joint)
            ke = k + 1
            while ke < m and K._same_points(c_type, c_i, ke):
                ke += 1
            fa = point_pos_t(ma, p, dp, A, r, th, dr, c_i[k, 0], X, 0)
            fb = point_pos_t(ma, p, dp, A, r, th, dr, c_i[k, 1], X, 1)
            h0 = 0.0
            h1 = 0.0
            h2 = 0.0
            for kk in range(k, ke):
                c = c_i[kk, 2]
                if c == 0:
                    h0 += mu[kk]
                elif c == 1:
                    h1 += mu[kk]
                else:
                    h2 += mu[kk]
            # sum_kk mu_kk (dv_a - dv_b)[c_kk]
            point_cot(X, 0, fa, 0.0, 0.0, 0.0, h0, h1, h2, cZ, cdZ)
            point_cot(X, 1, fb, 0.0, 0.0, 0.0, -h0, -h1, -h2, cZ, cdZ)
        elif typ == C_DOTVV:
            fa = vector_pos_t(ma, A, th, c_i[k, 0], X, 0)
            fb = vector_pos_t(ma, A, th, c_i[k, 1], X, 1)
            # mu (ded1.e2 + ed1.de2 + de1.ed2 + e1.ded2)
            vector_cot(X, 0, fa, muk * X[1, 1, 0], muk * X[1, 1, 1], muk * X[1, 1, 2],
                        muk * X[1, 0, 0], muk * X[1, 0, 1], muk * X[1, 0, 2], cZ, cdZ)
            vector_cot(X, 1, fb, muk * X[0, 1, 0], muk * X[0, 1, 1], muk * X[0, 1, 2],
                        muk * X[0, 0, 0], muk * X[0, 0, 1], muk * X[0, 0, 2], cZ, cdZ)
        elif typ == C_DOTVP:
            fe = vector_pos_t(ma, A, th, c_i[k, 0], X, 2)
            fa = point_pos_t(ma, p, dp, A, r, th, dr, c_i[k, 1], X, 0)
            fb = point_pos_t(ma, p, dp, A, r, th, dr, c_i[k, 2], X, 1)
            # mu (ded.dd + ed.td + de.ddd + e.tdd), dd = xb - xa, td = dxb - dxa,
            # ddd = vb - va, tdd = dvb - dva
            dd0 = X[1, 0, 0] - X[0, 0, 0]
            dd1 = X[1, 0, 1] - X[0, 0, 1]
            dd2 = X[1, 0, 2] - X[0, 0, 2]
            td0 = X[1, 1, 0] - X[0, 1, 0]
            td1 = X[1, 1, 1] - X[0, 1, 1]
            td2 = X[1, 1, 2] - X[0, 1, 2]
            vector_cot(X, 2, fe, muk * td0, muk * td1, muk * td2, muk * dd0, muk * dd1,
                        muk * dd2, cZ, cdZ)
            g0, g1, g2 = muk * X[2, 1, 0], muk * X[2, 1, 1], muk * X[2, 1, 2]
            h0, h1, h2 = muk * X[2, 0, 0], muk * X[2, 0, 1], muk * X[2, 0, 2]
            point_cot(X, 1, fb, g0, g1, g2, h0, h1, h2, cZ, cdZ)
            point_cot(X, 0, fa, -g0, -g1, -g2, -h0, -h1, -h2, cZ, cdZ)
        elif typ == C_DIST:
            fa = point_pos_t(ma, p, dp, A, r, th, dr, c_i[k, 0], X, 0)
            fb = point_pos_t(ma, p, dp, A, r, th, dr, c_i[k, 1], X, 1)
            # 2 mu (td.ddd + dd.tdd)
            s2 = 2.0 * muk
            g0 = s2 * (X[1, 1, 0] - X[0, 1, 0])
            g1 = s2 * (X[1, 1, 1] - X[0, 1, 1])
            g2 = s2 * (X[1, 1, 2] - X[0, 1, 2])
            h0 = s2 * (X[1, 0, 0] - X[0, 0, 0])
            h1 = s2 * (X[1, 0, 1] - X[0, 0, 1])
            h2 = s2 * (X[1, 0, 2] - X[0, 0, 2])
            point_cot(X, 1, fb, g0, g1, g2, h0, h1, h2, cZ, cdZ)
            point_cot(X, 0, fa, -g0, -g1, -g2, -h0, -h1, -h2, cZ, cdZ)
        # C_DRIVE: the velocity-level tangent is dzd = 0
    for k in range(ma.dof_type.shape[0]):
        if ma.dof_type[k] != DOF_COORD:
            # a point coordinate: mu dv[c]
            muk = mu[m + k]
            fa = point_pos_t(ma, p, dp, A, r, th, dr, ma.dof_i[k, 0], X, 0)
            c = ma.dof_i[k, 1]
            point_cot(X, 0, fa, 0.0, 0.0, 0.0, muk if c == 0 else 0.0,
                       muk if c == 1 else 0.0, muk if c == 2 else 0.0, cZ, cdZ)
        # a coordinate DOF: its velocity-level tangent is dzd = 0
    # subtree sums (children after their parents), then w_c and R^T w
    for f in range(nf - 1, -1, -1):
        par = ma.fr_parent[f]
        if par >= 0:
            for i in range(6):
                cZ[par, i] += cZ[f, i]
                cdZ[par, i] += cdZ[f, i]
    for c in range(n):
        w[c] = 0.0
    for f in range(nf):
        c = ma.fr_coord[f]
        if c >= 0:
            s = 0.0
            for i in range(6):
                s += bcol[f, i] * cZ[f, i] + db[f, i] * cdZ[f, i]
            w[c] += s
    for k in range(m):
        if c_type[k] == C_CAM:
            f = c_i[k, 2]
            par = ma.fr_parent[f]
            dzb = 0.0
            for i in range(3):
                dzb += bcol[f, 3 + i] * (th[f, i] - (th[par, i] if par >= 0 else 0.0))
            cu, su = K.joint_angle_cs(ma, A, f)
            _, _, s2, _ = cam_profile_cs(p, ma.c_fld[k], c_i[k, 3], cu, su)
            _, ds1, _, _ = cam_profile_cs(dp, ma.c_fld[k], c_i[k, 3], cu, su)
            w[c_i[k, 1]] -= mu[k] * (s2 * dzb + ds1)
    for j in range(d):
        s = 0.0
        for c in range(n):
            s += R[c, j] * w[c]
        sub[j] = s


# ----------------------------------------------------------------------------------------
# one state: the exact step Jacobians
# ----------------------------------------------------------------------------------------


@njit(cache=True, inline="always")
def _state(ma, p, form, t, zi, zdi, a, z, ws, zd, zdd, R, tau, Md, zddb, stored, PL,
           part_able, dyn=True):
    """Kinematics, R, tau and M^d at a converged position ``z`` (status returned;
    ``zddb`` receives the particular accelerations; ``dyn`` False: kinematics only,
    ``tau`` and ``Md`` are not computed).  ``stored``: the state as the integrator kept
    it (:func:`workbench.formulations.semirecursive.matrixr.store_state`), restored instead of
    re-evaluated when flagged
    (``zddb`` is then not set); only ``M^d`` is evaluated.  ``part_able``: the velocity
    and acceleration problems by the coordinate partition's LU (``PL``) where it
    factorises, as the integrator solves them (the same bits)."""
    n = z.shape[0]
    if dyn and MR.load_state(stored, ws, zd, zdd, tau, R):
        Md[:, :] = 0.0
        MR.mass_matrix(ma, p, ws, form, n, Md)
        return MR.OK
    A, r, u = ws.A, ws.r, ws.u
    K.frame_positions(ma, p, z, A, r, u)
    st, bad = MR.factor_r(ma, p, z, R, ws)
    if st != MR.OK:
        return st
    if part_able and MR.partition_factor(ws.Th, PL):
        MR.velocity_acceleration(ma, p, t, zi, zdi, z, zd, zddb, ws, PL)
    else:
        MR.velocity_acceleration(ma, p, t, zi, zdi, z, zd, zddb, ws)
    MR.full_accelerations(zddb, R, a, zdd)
    if not dyn:
        # the frame kinematics of residual_tau (the same calls), without the dynamics
        K.frame_velocities(ma, zd, ws.bcol, ws.Z)
        K.frame_accelerations(ma, zd, zdd, r, u, ws.bcol, ws.Z, ws.Zd)
        return MR.OK
    MR.residual_tau(ma, p, t, z, zd, zdd, ws, form, tau)
    Md[:, :] = 0.0
    MR.mass_matrix(ma, p, ws, form, n, Md)
    return MR.OK


@njit(cache=True)
def theta_columns(V, beta, Rm, m, S):
    """The first ``m`` columns ``S`` (n x m) of ``Theta_z^+`` (the constraint rows; the
    last ``d`` are ``R^Phi``, :func:`workbench.formulations.semirecursive.matrixr.factor_r`), from
    the QR factors of :func:`workbench.kernels.linalg.qr_factor`: the ``m`` solves of
    :func:`workbench.kernels.linalg.qr_solve` with the unit right-hand sides, run side by
    side (each column takes the same operations in the same order as its own solve; the
    loops over the columns are innermost)."""
    n = S.shape[0]
    mr = V.shape[1]
    Y = np.zeros((mr, m))
    sv = np.empty(m)
    for i in range(m):
        Y[i, i] = 1.0
    for k in range(n):
        for c in range(m):
            sv[c] = 0.0
        for i in range(k, mr):
            v = V[k, i]
            for c in range(m):
                sv[c] += v * Y[i, c]
        for c in range(m):
            sv[c] *= beta[k]
        for i in range(k, mr):
            v = V[k, i]
            for c in range(m):
                Y[i, c] -= sv[c] * v
    for i in range(n - 1, -1, -1):
        for c in range(m):
            sv[c] = Y[i, c]
        for j in range(i + 1, n):
            rij = Rm[i, j]
            for c in range(m):
                sv[c] -= rij * S[j, c]
        for c in range(m):
            S[i, c] = sv[c] / Rm[i, i]


@njit(cache=True, inline="always")
def theta_apply(S, R, b, x):
    """``x = Theta_z^+ b = S b[:m] + R^Phi b[m:]`` (:func:`theta_columns`); a zero block of
    ``b`` is skipped (the DOF rows of every tangent solve of a coordinate DOF direction)."""
    n, m = S.shape
    d = R.shape[1]
    for k in range(n):
        x[k] = 0.0
    for i in range(m):
        bi = b[i]
        if bi != 0.0:
            for k in range(n):
                x[k] += S[k, i] * bi
    for j in range(d):
        bj = b[m + j]
        if bj != 0.0:
            for k in range(n):
                x[k] += R[k, j] * bj


@njit(cache=True, inline="always")
def theta_apply_part(ma, dep, S, R, b, x):
    """:func:`theta_apply` when ``S`` and ``R^Phi`` come from the coordinate partition
    (:func:`workbench.formulations.semirecursive.matrixr.theta_partitioned`): on the DOF
    rows ``S`` is zero and ``R^Phi`` a unit row, so ``x = b[m + k]`` there; the dependent
    rows ``dep`` take the sums of :func:`theta_apply` in its order (the same numbers)."""
    m = dep.shape[0]
    d = R.shape[1]
    for k in range(d):
        x[ma.dof_i[k, 0]] = b[m + k]
    for c in range(m):
        row = dep[c]
        s = 0.0
        for i in range(m):
            bi = b[i]
            if bi != 0.0:
                s += S[row, i] * bi
        for j in range(d):
            bj = b[m + j]
            if bj != 0.0:
                s += R[row, j] * bj
        x[row] = s


@njit(cache=True, inline="always")
def add_column_rates(ma, dq, bcol, E, dX, mv):
    """``dX[f] += sum of bcol[g] dq[coord(g)]`` over frame ``f`` and its ancestors ``g``
    (``E`` receives the sums, :func:`workbench.kernels.tree.frame_velocities` of ``dq``, with
    the same operations): the part of
    :func:`workbench.kernels.tangents.frame_velocities_t` (``dq`` = dzd) and
    :func:`workbench.kernels.tangents.frame_accelerations_t` (``dq`` = dzdd) that is linear in the
    joint-rate tangent, added after a first call with ``dq = 0``.  Only at the frames
    :func:`workbench.kernels.tangents.moved_frames` marks (``mv``, widened by ``dq``): at
    the others ``dq`` is zero on the path to the root and so is the sum."""
    fr_parent = ma.fr_parent
    fr_coord = ma.fr_coord
    for f in range(E.shape[0]):
        if mv[f] == 0:
            continue
        par = fr_parent[f]
        c = fr_coord[f]
        q = dq[c] if c >= 0 else 0.0
        lead = par >= 0 and mv[par] != 0
        for i in range(6):
            e = (E[par, i] if lead else 0.0) + bcol[f, i] * q
            E[f, i] = e
            dX[f, i] += e


@njit(cache=True, inline="always")
def reaction_tangents(S, R, Md, dtau, w, static, is_v, col, d, ms_type, ms_a, Jm, jc):
    """The step-Jacobian columns of the reaction measures ``lambda = -mu[:m]``, ``mu =
    Theta_z^{-T} tau``: along one direction ``d mu = Theta_z^{-T} (dtau - dTheta_z^T mu)``,
    whose first ``m`` rows are ``S^T (dtau - w)`` (``Theta_z^{-1} = [S R^Phi]``,
    :func:`theta_columns`; ``w = dTheta_z^T mu`` from :func:`dtheta_mu`, zero for the
    directions that move no position).  A velocity direction ``V_j`` also gives the
    acceleration column ``A_j``: ``dtau/dA_j = M R_j`` (``Md`` the mass matrix).  Exact for
    independent closure equations (a square ``Theta_z``: every planar model, whose compiled
    closures keep the in-plane rows only); with redundant equations the multipliers are
    the minimum-norm ones and the term ``(I - Theta Theta^+) dTheta Theta^+ mu`` of the
    pseudo-inverse's derivative is not included."""
    n, m = S.shape
    for k in range(ms_type.shape[0]):
        if ms_type[k] != MS_REACTION:
            continue
        row = ms_a[k]
        s = 0.0
        for i in range(n):
            s += S[i, row] * (dtau[i] if static else dtau[i] - w[i])
        Jm[k, jc] = -s
        if is_v:
            j = col - d
            s = 0.0
            for i in range(n):
                mr = 0.0
                for l in range(n):
                    mr += Md[i, l] * R[l, j]
                s += S[i, row] * mr
            Jm[k, col + d] = -s


@njit(cache=True)
def make_step_workspace(ma, n, npar, nm, zskip):
    """Work arrays of :func:`jacobian_rows`, allocated once per sweep (``n`` joint
    coordinates, ``npar`` parameters, ``nm`` measures): the kinematic workspace of
    :func:`workbench.formulations.semirecursive.matrixr.make_workspace` (plus the particular
    accelerations) and the primal and
    tangent arrays of every direction; ``zskip`` (d) marks the DOF whose position column is
    zero (:func:`workbench.compiled.parameters.cyclic_dofs`; all zeros: compute every column)."""
    nfield = ma.p.shape[0]
    nf = ma.fr_parent.shape[0]
    m = ma.c_type.shape[0]
    d = ma.dof_type.shape[0]
    nbod = ma.b_frame.shape[0]
    ws = MR.make_workspace(ma, n)
    vec_n = np.zeros((8, n))          # zd, zdd, tau, dz, dzd, dzdd, zero_n, dQj
    vec_n2 = np.zeros((1, n))         # dtau
    mats = (np.zeros((n, d)), np.zeros((n, n)), np.zeros((d, nf, 6)), np.zeros((d, n)),
            np.zeros((d, d)), np.zeros((n, m)))                # R, Md, ZR, RjT, Sdr, S
    f3 = np.zeros((4, nf, 3))         # dPc, th, dr, du
    b3 = np.zeros((3, nbod, 3))       # dfb, dnb, bg
    bm = np.zeros(nbod)
    bJ = np.zeros((nbod, 3, 3))
    f6 = np.zeros((9, nf, 6))         # dbv, dVc, dVdc, db, dZ, dZd, Fs, dFs, E
    small = (np.zeros(m + d), np.zeros(nfield), np.zeros(m), np.zeros(d), np.zeros(d),
             np.zeros(d), np.zeros(m + d), np.zeros(nm), np.zeros(nm))
    # mu, dp, dphi, dh, dhd, dhdd, rhs, dmv, dmA
    rt = (np.zeros((2, nf, 6)), np.zeros((3, 2, 3)), np.zeros(n), np.zeros(d))
    bt = (np.zeros(nbod), np.zeros((nbod, 3)), np.zeros((nbod, 3, 3)),   # bdm, bdg, bdJ
          zskip.copy(), np.ones(nf + 1, dtype=np.int64),                # zskip, moved
          np.zeros(d + 1, dtype=np.int64), np.zeros(n * d, dtype=np.int64))   # rptr, ridx
    return ws, vec_n, vec_n2, mats, f3, f6, b3, small, bm, bJ, rt, bt


def step_jacobians(ma, p, form, t, zi, zdi, a, z, Gm, pkin, pskip, ms_type, ms_a, ms_c,
                   Jr, Mbar, Jm, mval, Rout, zdout, zddout):
    """Exact partial derivatives of the step residual and of the measures at one state.

    ``Jr`` (d x (2d + np)) = ``[dr/dZ | dr/dV | dr/drho]``, ``Mbar`` = ``dr/dA``,
    ``Jm`` (nm x (3d + np)) = ``dm/d[Z, V, A, rho]``, ``mval`` = the measures.
    ``Gm`` (nfield x np) maps parameter directions to field directions (``p = p0 + G rho``);
    ``pkin[j]`` is 0 when parameter ``j`` is bound to no field the kinematics read (then
    its position, velocity and acceleration tangents and dR vanish and are skipped);
    the columns with ``pskip[j] = 1`` are computed in reverse mode
    (:func:`reverse_columns`).  ``Rout``, ``zdout``, ``zddout`` receive ``R^Phi`` and the
    full velocities and accelerations of the state.  Returns a status code (OK when the
    state is regular).  The state ``z`` is a start for its position problem, not changed.

    The one-row case of :func:`jacobian_rows` (one compiled kernel for both).
    """
    d = len(zi)
    npar, nm = Gm.shape[1], len(ms_type)
    row = lambda x: np.array(x, dtype=float).reshape(1, -1)     # copies
    blk = make_block(1, d, npar, nm)
    i64 = lambda x: np.ascontiguousarray(x, dtype=np.int64)
    jacobian_rows(ma, p, form, np.array([float(t)]), row(z), row(zi), row(zdi), row(a),
                  np.zeros((1, 0)), np.ascontiguousarray(Gm, dtype=float), i64(pkin),
                  i64(pskip), np.zeros(d, dtype=np.int64), i64(ms_type), i64(ms_a),
                  i64(ms_c), 0, 0, 1, blk, (Rout, zdout, zddout))
    JR, MB, JM, MVb, STb = blk
    Jr[:, :] = JR[0]
    Mbar[:, :] = MB[0]
    Jm[:, :] = JM[0]
    mval[:] = MVb[0]
    return int(STb[0])


# ----------------------------------------------------------------------------------------
# sweeps over a stored trajectory
# ----------------------------------------------------------------------------------------


#: steps whose Jacobians are evaluated together (in parallel) before the sequential part
#: of a sweep runs over them: bounds the memory of the sweeps' Jacobian blocks
BLOCK = 256


def block_rows(N):
    """Rows per block of a sweep of ``N`` rows: ``min(BLOCK, N)`` (read at each call)."""
    return max(1, min(BLOCK, N))


def blocks_of(N, B, backward=False):
    """Row ranges ``(k0, k1)`` of the blocks of ``B`` rows, in sweep order."""
    out = [(k0, min(N, k0 + B)) for k0 in range(0, N, B)]
    return out[::-1] if backward else out



def make_block(N, d, npar, nm, B=None):
    """The Jacobian block of a sweep (:func:`step_jacobian_block`): ``JR`` (B x d x (2d +
    np)), ``MB`` (B x d x d), ``JM`` (B x nm x (3d + np)), ``MVb`` (B x nm), ``STb`` (B)
    with ``B = block_rows(N)`` unless given."""
    B = block_rows(N) if B is None else B
    return (np.zeros((B, d, 2 * d + npar)), np.zeros((B, d, d)),
            np.zeros((B, nm, 3 * d + npar)), np.zeros((B, nm)), np.zeros(B, dtype=np.int64))


@njit(cache=True)
def residual_column(R, rptr, ridx, dtau, static, col, subv, Sdr, Jr):
    """Column ``col`` of the residual's Jacobian, ``dr = R^T dtau + dR^T tau`` with ``dR^T
    tau = -(dTheta R)^T mu = -subv`` (eqs 53-57; ``R^T dtau`` over the nonzero rows
    ``ridx[rptr[j]:rptr[j + 1]]`` of each column of ``R``).  ``static``: ``dTheta = 0``.
    Along the position directions (``col < d``) ``mu^T dTheta[R_i] R_j = mu^T Phi_zz(R_i,
    R_j)`` is symmetric in ``(i, j)`` (a second derivative; ``Phi_t`` does not depend on
    ``z``): the entries below the diagonal are read from ``Sdr``, where the earlier
    directions left them."""
    d = Jr.shape[0]
    for j in range(d):
        s = 0.0
        for t_ in range(rptr[j], rptr[j + 1]):
            k = ridx[t_]
            s += R[k, j] * dtau[k]
        if static:
            Jr[j, col] = s
            continue
        if col < d and j < col:
            Jr[j, col] = s - Sdr[col, j]
            continue
        sub = subv[j]
        if col < d:
            Sdr[j, col] = sub
        Jr[j, col] = s - sub


@njit(cache=True, nogil=True)
def jacobian_rows(ma, p, form, TT, ZZ, ZI, ZDI, AA, KS, Gm, pkin, pskip, zskip, ms_type, ms_a,
                  ms_c, k0, i0, i1, blk, rzz):
    """The step Jacobians of rows ``k0 + i0 .. k0 + i1 - 1`` into the block ``blk`` of
    :func:`make_block` (row ``k`` at index ``k - k0``), with work arrays of their own (the
    columns of ``P = dr/drho`` of the parameters with ``pskip`` completed in reverse mode,
    :func:`reverse_columns`, the ``d`` unit cotangents in one pass); ``STb`` receives each
    row's status (see :func:`step_jacobians` for the outputs).  ``KS[k]``: the state kept
    by the integrator at row ``k``
    (:func:`workbench.formulations.semirecursive.matrixr.store_state`; length 0 or unflagged:
    the state is evaluated here).  ``rzz = (R, zd, zdd)`` receive ``R^Phi`` and the full
    velocities and accelerations of each row's state.

    One function with the per-row code written in its loop: called once per step, a
    per-step function would receive the ~60 work arrays as a copy of ~600 stack words at
    every call (five-bar: 14.1 -> 10.9 us per step when it was compiled into this loop),
    and compiled into the loop by numba's IR inlining (``inline="always"``) its IR is
    deep-copied block by block, each copy taking the whole variable scope along: a cost
    quadratic in the size of the function (numba 0.68, ``InlineWorker.inline_ir``), 150 s
    of compilation for this one (the kernels called once per direction are small enough
    to be inlined)."""
    JR, MB, JM, MVb, STb = blk
    d = ZI.shape[1]
    npar = Gm.shape[1]
    nm = ms_type.shape[0]
    n = ZZ.shape[1]
    nskip = 0
    for q in range(npar):
        nskip += pskip[q]
    gsp = sparse_columns(Gm, pskip)
    own = (make_step_workspace(ma, n, npar, nm, zskip), np.zeros((d, p.shape[0])), gsp,
           fields_read(gsp[2], p.shape[0]), np.zeros((ma.ty_pt.shape[0], 3, 3, 13)),
           (np.zeros(ma.c_type.shape[0], dtype=np.int64),
            np.zeros((ma.c_type.shape[0], ma.c_type.shape[0])),
            np.zeros(ma.c_type.shape[0], dtype=np.int64)))
    # views without reference counts (the owners above and the caller's arrays outlive
    # the loop): no atomic increments when they are passed to the kernels
    sw, gl, gsp, need, TJ, PL = AR.borrow(own)
    gcol, gptr, gidx, gval = gsp
    p, TT, ZZ, ZI, ZDI, AA, KS, Gm, pkin, pskip = AR.borrow((p, TT, ZZ, ZI, ZDI, AA, KS, Gm,
                                                             pkin, pskip))
    ms_type, ms_a, ms_c, JR, MB, JM, MVb, STb = AR.borrow((ms_type, ms_a, ms_c, JR, MB, JM,
                                                           MVb, STb))
    Rout, zdout, zddout = AR.borrow(rzz)
    m = ma.c_type.shape[0]
    nfield = p.shape[0]
    ws, vec_n, vec_n2, mats, f3, f6, b3, small, bm, bJ, rt, bt = sw
    cZd, Xb, wv, subv = rt
    bdm, bdg, bdJ, zskip, mvf, rptr, ridx = bt
    zd, zdd, tau, dz, dzd, dzdd, zero_n, dQj = (vec_n[0], vec_n[1], vec_n[2], vec_n[3],
                                                vec_n[4], vec_n[5], vec_n[6], vec_n[7])
    dtau = vec_n2[0]
    R, Md, ZR, RjT, Sdr, Sm = mats
    dPc, th, dr, du = f3[0], f3[1], f3[2], f3[3]
    dbv, dVc, dVdc = f6[0], f6[1], f6[2]
    db, dZ, dZd = f6[3], f6[4], f6[5]
    dfb, dnb, bg = b3[0], b3[1], b3[2]
    Fs, dFs, Ef = f6[6], f6[7], f6[8]
    mu, dp, dphi, dh, dhd, dhdd, rhs, dmv, dmA = small
    # the tangent arrays a direction may find nonzero from an earlier one: dp (after a
    # parameter direction), the position-level (th, dr, du, db) and the SR-I reference-point
    # and column tangents (dPc, dbv) after a direction that moves them
    dp_dirty = True
    pos_dirty = True
    com_dirty = True
    # closed loops with coordinate DOF: Theta_z^+ by the coordinate partition
    part_able = MR.partition_setup(ma, n, PL[0]) and not MR.constant_theta(ma)
    for i in range(i0, i1):
        kr = k0 + i
        t, zi, zdi, a, z, stored = TT[kr], ZI[kr], ZDI[kr], AA[kr], ZZ[kr], KS[kr]
        Jr, Mbar, Jm, mval = JR[i], MB[i], JM[i], MVb[i]
        st = _state(ma, p, form, t, zi, zdi, a, z, ws, zd, zdd, R, tau, Md, ws.zddb, stored, PL,
                    part_able)
        STb[i] = st
        if st != MR.OK:
            continue
        Rout[:, :] = R
        zdout[:] = zd
        zddout[:] = zdd
        A, r, u, bcol, Z, Zd = ws.A, ws.r, ws.u, ws.bcol, ws.Z, ws.Zd
        V, beta, Rm = ws.V, ws.beta, ws.Rm
        fb, nb_ = ws.fb, ws.nb
        projected_matrix(R, Md, Mbar)
        measures(ma, p, A, r, Z, Zd, z, zd, zdd, ms_type, ms_a, ms_c, mval)
        # the tires' wrenches and their state Jacobians, once per row: the Z and V
        # directions take their tangents as products (T.tire_forces_t)
        T.tire_state_jacobians(ma, p, A, r, Z, Zd, TJ)
        # mu = (Theta_z^+)^T tau for the derivative of R (eqs 56-57) and the constraint
        # columns S of Theta_z^+ = [S R^Phi]: every tangent solve below is then x = S a +
        # R b (theta_apply), a product instead of a triangular solve.  Closed loops with
        # coordinate DOF: by the coordinate partition (the integrator's iterates far from
        # singular keep no QR), else (or Phi_dep singular) by the QR of Theta_z
        part = part_able and MR.theta_partitioned(ma, p, ws, PL, tau, mu, Sm)
        if not part:
            if part_able:
                # the QR of the leading matrix theta_partitioned formed
                qr_factor(ws.Th, V, beta, Rm, 1e-12)
            qr_solve_transpose(V, beta, Rm, tau, mu)
            theta_columns(V, beta, Rm, m, Sm)
        # reaction measures: lambda = -mu[:m] (Theta_z^T mu = tau and R^T tau = 0 on the
        # converged state: Phi_z^T lambda = -tau, seed 000 eq 61 on the manifold)
        for k in range(nm):
            if ms_type[k] == MS_REACTION:
                mval[k] = -mu[ms_a[k]]
        # frame velocities with zd = R_j (Theta_z R_j as a velocity-level constraint)
        for j in range(d):
            for k in range(n):
                RjT[j, k] = R[k, j]
        for j in range(d):
            K.frame_velocities(ma, RjT[j], bcol, ZR[j])
        # SR-I primal terms (reference points, columns, velocities at the centres of mass):
        # those the inverse dynamics of the state left in ws (MR.residual_tau)
        Pc, bv, Vc, Vdc = ws.P, ws.bv, ws.Vc, ws.Vdc
        nbod = ma.b_frame.shape[0]
        for b in range(nbod):
            bm[b] = K.body_inertia(ma, p, A, r, b, bg[b], bJ[b])
        if form != MR.FORM_ORIGIN:
            # the subtree wrenches of the state, read by every direction's inverse dynamics
            T.com_wrenches(ma, Pc, Vc, Vdc, fb, nb_, bm, bg, bJ, Fs)
        ncol = 2 * d + npar
        coord_dofs = True
        for k in range(d):
            if ma.dof_type[k] != DOF_COORD:
                coord_dofs = False
        # an open tree whose DOF are its joint coordinates: Theta_z is a selection of
        # coordinates, dTheta = 0 and R^Phi does not move (dtheta_mu would return zeros)
        theta_rows = m > 0 or not coord_dofs
        if not theta_rows:
            subv[:] = 0.0
        # the nonzero rows of each column of R^Phi, for R^T dtau below
        column_pattern(R, rptr, ridx)
        # the acceleration directions change only the measures; none of them depends on the
        # accelerations unless it is a point or coordinate acceleration (exact zeros otherwise)
        acc_meas = False
        reactions = False
        for k in range(nm):
            if ms_type[k] == MS_ACC or ms_type[k] == MS_COORD_ACC:
                acc_meas = True
            elif ms_type[k] == MS_REACTION:
                acc_meas = True
                reactions = True
        if not acc_meas:
            for k in range(nm):
                for j in range(d):
                    Jm[k, 2 * d + j] = 0.0
        for col in range(ncol):
            # direction: Z (col < d), V (d <= col < 2d), rho (2d <= col < ncol)
            if col < d and zskip[col] != 0:
                # the position of a cyclic DOF (compiled.parameters.cyclic_dofs, e.g. a wheel spin
                # angle): nothing the residual or the measures read moves, dTheta = 0
                for k in range(d):
                    Jr[k, col] = 0.0
                    Sdr[k, col] = 0.0
                for k in range(nm):
                    Jm[k, col] = 0.0
                continue
            has_p = 2 * d <= col < ncol
            is_v = d <= col < 2 * d
            if has_p and pskip[col - 2 * d] != 0:
                for k in range(d):
                    Jr[k, col] = 0.0
                for k in range(nm):
                    Jm[k, col + d] = 0.0
                continue
            if has_p:
                for i in range(nfield):
                    dp[i] = Gm[i, col - 2 * d]
                dp_dirty = True
            elif dp_dirty:
                # zero once after the parameter directions (the state directions keep it)
                dp[:] = 0.0
                dp_dirty = False
            # V directions and parameters bound to no kinematic field (masses, inertias,
            # force-element data) leave the position problem (and so R, Theta_z) unchanged:
            # dz = 0 and dTheta = 0.  V directions only seed dzd = R e_k (Theta_z dzd = [0;
            # e_k]); the other zero tangents are set directly.
            static = is_v or (has_p and pkin[col - 2 * d] == 0)
            # the joint-coordinate tangents start at zero (each level's unknown must be zero
            # while its right-hand side is taken, below)
            dz[:] = 0.0
            dzd[:] = 0.0
            dzdd[:] = 0.0
            if static:
                # the position-level tangents are zero along it: cleared once after a
                # direction that wrote them (consecutive static directions leave them so)
                if pos_dirty:
                    th[:, :] = 0.0
                    dr[:, :] = 0.0
                    du[:, :] = 0.0
                    db[:, :] = 0.0
                    pos_dirty = False
                if not is_v:
                    # no level is solved: the frame velocity and acceleration tangents
                    # are zero (a V direction sets dZ below, and its level 2 writes dZd)
                    dZ[:, :] = 0.0
                    dZd[:, :] = 0.0
            else:
                pos_dirty = True
            if is_v:
                for k in range(n):
                    dzd[k] = R[k, col - d]
                # with db = 0 the frame-velocity tangent is the frame velocities of R_j: ZR[j]
                # (element by element: an array assignment may copy its source first)
                for f in range(dZ.shape[0]):
                    for i in range(6):
                        dZ[f, i] = ZR[col - d, f, i]
                lev0 = 2
            elif static:
                lev0 = 3
            else:
                lev0 = 0
                if col < d:
                    for k in range(n):
                        dz[k] = R[k, col]
                    lev0 = 1
            # the frames this direction moves (all of them when it moves a field), widened
            # after each level's solve
            T.reset_moved(mvf)
            T.moved_frames(ma, dz, dzd, dzdd, has_p, mvf)
            # ---- the position (a parameter moving the geometry: Theta_z dz = [-Phi_rho;
            # -h_rho]), velocity and acceleration levels (eqs 32a-c, 37a-c): at level ``lev``
            # Theta_z x = -[Phi'; h'] for x = dz, dzd, dzdd, with Phi' and h' the constraint
            # and DOF tangents at that level taken while x is still zero (one call site of
            # each: the tangent kernels are compiled into this function)
            for lev in range(lev0, 3):
                if lev <= 1:
                    T.frame_positions_t(ma, p, dp, z, dz, A, r, u, th, dr, du, mvf)
                if lev == 1:
                    T.joint_columns_t(ma, r, u, dr, du, db, mvf)
                    T.frame_velocities_t(ma, zd, zero_n, bcol, db, dZ, mvf)
                elif lev == 2:
                    T.frame_accelerations_t(ma, zd, zdd, dzd, zero_n, r, u, bcol, Z, dr, du, db,
                                            dZ, dZd, mvf)
                T.constraints_t(ma, p, dp, t, z, zd, zdd, dz, dzd, dzdd, A, r, Z, Zd, th, dr, dZ,
                                dZd, lev, dphi)
                if coord_dofs:
                    T.dof_coords_t(ma, dz, dzd, dzdd, dh, dhd, dhdd)
                else:
                    T.dof_values_t(ma, p, dp, A, r, Z, Zd, th, dr, dZ, dZd, dz, dzd, dzdd, dh, dhd,
                                   dhdd)
                hl = dh if lev == 0 else (dhd if lev == 1 else dhdd)
                x = dz if lev == 0 else (dzd if lev == 1 else dzdd)
                for k in range(m):
                    rhs[k] = -dphi[k]
                for k in range(d):
                    rhs[m + k] = -hl[k]
                if part:
                    theta_apply_part(ma, PL[0], Sm, R, rhs, x)
                else:
                    theta_apply(Sm, R, rhs, x)
                T.moved_frames(ma, dz, dzd, dzdd, has_p, mvf)
                # + the columns times dzd (dzdd): frame_velocities_t (frame_accelerations_t) is
                # linear in it
                if lev == 1:
                    add_column_rates(ma, dzd, bcol, Ef, dZ, mvf)
                elif lev == 2:
                    add_column_rates(ma, dzdd, bcol, Ef, dZd, mvf)
            # ---- measures (a velocity direction also gives the acceleration column: dm/dA_j
            # = dm/dV_j of the velocity level, :func:`measures_t`)
            measures_t(ma, p, dp, A, r, Z, Zd, th, dr, dZ, dZd, dz, dzd, dzdd, ms_type, ms_a, ms_c,
                       dmv, is_v and acc_meas, dmA)
            jc = col if col < 2 * d else col + d
            for k in range(nm):
                Jm[k, jc] = dmv[k]
            if is_v and acc_meas:
                for k in range(nm):
                    Jm[k, col + d] = dmA[k]
            # ---- residual: dr = R^T dtau + dR^T tau,  dR^T tau = -(dTheta R)^T mu  (eqs 53-57)
            # velocity directions and the static parameters' directions with dp = 0 move no
            # position and no field
            kin = not is_v
            if kin:
                # the bodies' mass, centre-of-mass and inertia tangents, once per direction
                T.body_inertias_t(ma, p, dp, A, r, th, dr, bg, bJ, bdm, bdg, bdJ, mvf)
            T.applied_forces_t(ma, p, dp, t, z, zd, dz, dzd, A, r, Z, Zd, th, dr, dZ, dZd, dfb,
                               dnb, dQj, kin, bm, bg, bdm, bdg, TJ, not has_p, mvf)
            if form == MR.FORM_ORIGIN:
                T.inverse_dynamics_origin_t(ma, bcol, Z, Zd, fb, nb_, db, dZ, dZd, dfb, dnb, dQj,
                                            dtau, bm, bg, bJ, kin, bdm, bdg, bdJ, Fs, dFs)
            else:
                if is_v:
                    # a velocity direction moves no reference point and no column (cleared
                    # once after a direction that wrote them)
                    if com_dirty:
                        dPc[:, :] = 0.0
                        dbv[:, :] = 0.0
                        com_dirty = False
                else:
                    com_dirty = True
                    T.reference_points_t(ma, dr, dPc, bdg)
                    T.com_columns_t(ma, r, u, Pc, dr, du, dPc, dbv, mvf)
                T.com_kinematics_t(ma, zd, zdd, dzd, dzdd, r, u, Pc, bv, Vc, Vdc, dr, du, dPc, dbv,
                                   dVc, dVdc, mvf)
                T.inverse_dynamics_com_t(ma, Pc, bv, Vc, Vdc, fb, nb_, dPc, dbv, dVc, dVdc, dfb, dnb,
                                         dQj, dtau, bm, bg, bJ, kin, Fs, dFs, bdm, bdg, bdJ, mvf)
            if not static and theta_rows:
                dtheta_mu(ma, p, dp, A, r, th, dr, db, bcol, R, mu, Xb, cZd[0], cZd[1], wv, subv)
            if reactions:
                reaction_tangents(Sm, R, Md, dtau, wv, static, is_v, col, d, ms_type, ms_a, Jm,
                                  jc)
            residual_column(R, rptr, ridx, dtau, static, col, subv, Sdr, Jr)
        if nskip > 0:
            reverse_columns(ma, p, z, zd, (A, r, bcol, Z, Zd), RjT, ZR, gcol, gptr, gidx, gval,
                            need, Jr, gl)
    AR.keepalive(own)


@njit(cache=True, parallel=True, nogil=True)
def _jacobian_chunks(mas, p, form, TT, ZZ, ZI, ZDI, AA, KS, Gm, pkin, pskip, zskip, ms_type,
                     ms_a, ms_c, k0, k1, blk):
    nb = k1 - k0
    nch = max(1, min(len(mas), nb))
    n, d = ZZ.shape[1], ZI.shape[1]
    for c in prange(nch):
        jacobian_rows(mas[c], p, form, TT, ZZ, ZI, ZDI, AA, KS, Gm, pkin, pskip, zskip,
                      ms_type, ms_a, ms_c, k0, nb * c // nch, nb * (c + 1) // nch, blk,
                      (np.zeros((n, d)), np.zeros(n), np.zeros(n)))


def step_jacobian_block(ma, p, form, TT, ZZ, ZI, ZDI, AA, KS, Gm, pkin, pskip, zskip,
                        ms_type, ms_a, ms_c, k0, k1, nth, blk):
    """The step Jacobians of rows ``k0 .. k1 - 1`` (:func:`jacobian_rows`).  The rows are
    independent (each reads only its own stored state): with ``nth > 1`` they are split
    into ``nth`` contiguous chunks run in parallel (numba ``prange``), each with its own
    work arrays and its own StructRef of the model (:func:`workbench.kernels.layout.replicas`);
    with one
    thread no thread pool is involved (a pipelined sweep runs beside
    the simulation's thread, where idle pool workers would compete with it).  Called from
    Python: a cached kernel that calls a parallel one may not start the thread pool when
    loaded from the cache (numba PR 9950)."""
    if nth <= 1 or k1 - k0 <= 1:
        n, d = ZZ.shape[1], ZI.shape[1]
        jacobian_rows(ma, p, form, TT, ZZ, ZI, ZDI, AA, KS, Gm, pkin, pskip, zskip, ms_type,
                      ms_a, ms_c, k0, 0, k1 - k0, blk,
                      (np.zeros((n, d)), np.zeros(n), np.zeros(n)))
    else:
        _jacobian_chunks(AR.replicas(ma, nth), p, form, TT, ZZ, ZI, ZDI, AA, KS, Gm, pkin,
                         pskip, zskip, ms_type, ms_a, ms_c, k0, k1, blk)


def trajectory_jacobians(ma, p, form, TT, ZZ, ZI, ZDI, AA, KS, Gm, pkin, pskip, zskip,
                         ms_type, ms_a, ms_c, ready):
    """The step Jacobians of every row, as one block of ``N`` rows (for
    :func:`adjoint_block` over the whole trajectory), evaluated forward by blocks of
    ``BLOCK`` rows as ``ready`` (see :func:`direct_sweep`) releases them."""
    N, d, npar, nm = TT.shape[0], ZI.shape[1], Gm.shape[1], ms_type.shape[0]
    blk = make_block(N, d, npar, nm, N)
    for k0, k1 in blocks_of(N, block_rows(N)):
        nth = ready(k1)
        # rows k0 .. k1 - 1 into the views of the block that start at row k0
        step_jacobian_block(ma, p, form, TT, ZZ, ZI, ZDI, AA, KS, Gm, pkin, pskip, zskip,
                            ms_type, ms_a, ms_c, k0, k1, nth, tuple(a[k0:] for a in blk))
    return blk


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
    zddb = np.zeros(n)
    mu = np.zeros(ma.c_type.shape[0] + d)
    m = ma.c_type.shape[0]
    PL = (np.zeros(m, dtype=np.int64), np.zeros((m, m)), np.zeros(m, dtype=np.int64))
    part_able = MR.partition_setup(ma, n, PL[0]) and not MR.constant_theta(ma)
    reactions = False
    for k in range(ms_type.shape[0]):
        if ms_type[k] == MS_REACTION:
            reactions = True
    for k in range(N):
        st = _state(ma, p, form, TT[k], ZI[k], ZDI[k], AA[k], ZZ[k].copy(), ws, zd, zdd, R,
                    tau, Md, zddb, zddb[:0], PL, part_able, reactions)
        if st != MR.OK:
            return st, k
        measures(ma, p, ws.A, ws.r, ws.Z, ws.Zd, ZZ[k], zd, zdd, ms_type, ms_a, ms_c, MV[k])
        if reactions:
            # the multipliers as the step Jacobians take them (:func:`reaction_tangents`)
            qr_solve_transpose(ws.V, ws.beta, ws.Rm, tau, mu)
            for j in range(ms_type.shape[0]):
                if ms_type[j] == MS_REACTION:
                    MV[k, j] = -mu[ms_a[j]]
    return MR.OK, N



@njit(cache=True)
def measures_stored(ma, p, ZZ, ZD, ZDD, ms_type, ms_a, ms_c, MV):
    """Measures along a stored trajectory from its full coordinates, rates and
    accelerations (``MV[n]``): the frame kinematics only, no position, velocity or
    acceleration problem (those were solved by the simulation that stored the rows;
    :func:`measure_history` re-solves them from the independent coordinates)."""
    N = ZZ.shape[0]
    n = ZZ.shape[1]
    ws = MR.make_workspace(ma, n)
    A, r, u, bcol, Z, Zd = ws.A, ws.r, ws.u, ws.bcol, ws.Z, ws.Zd
    for k in range(N):
        K.frame_kinematics(ma, p, ZZ[k], ZD[k], ZDD[k], A, r, u, bcol, Z, Zd)
        measures(ma, p, A, r, Z, Zd, ZZ[k], ZD[k], ZDD[k], ms_type, ms_a, ms_c, MV[k])


# ----------------------------------------------------------------------------------------
# reverse mode for the parameters that only enter inertia and force elements
# ----------------------------------------------------------------------------------------


@njit(cache=True)
def reverse_columns(ma, p, z, zd, kin, RjT, ZR, gcol, gptr, gidx, gval, need, Jr, gl):
    """The columns ``Jr[:, 2d + q] = R^T dtau/drho_q`` of the parameters ``q = gcol[e]``
    bound to no kinematic field (``pskip``), in reverse mode: one pass of
    :func:`virtual_power_lanes` over the bodies with the ``d`` columns ``R_j`` of
    ``R^Phi`` as lanes, then ``dtau/drho_q = sum_i Gm[i, q] dtau/dp_i`` over the nonzero
    entries of ``Gm``'s column (``gptr, gidx, gval``: the compressed columns,
    :func:`sparse_columns`).  ``kin = (A, r, bcol, Z, Zd)``: the frame kinematics of the
    state, ``RjT`` (d x n) = ``R^T`` and ``ZR`` (d x frames x 6) their frame velocities
    (left by :func:`jacobian_rows`); ``need``: :func:`fields_read` of ``gidx`` (the
    bodies and springs whose fields no column reads are skipped); ``gl`` (d x nfield): work
    array."""
    d = RjT.shape[0]
    A, r, bcol, Z, Zd = kin
    gl[:, :] = 0.0
    virtual_power_lanes(ma, p, z, zd, A, r, bcol, Z, Zd, RjT, gl, ZR, need)
    for e in range(gcol.shape[0]):
        col = 2 * d + gcol[e]
        for j in range(d):
            s = 0.0
            for t in range(gptr[e], gptr[e + 1]):
                s += gval[t] * gl[j, gidx[t]]
            Jr[j, col] = s


@njit(cache=True)
def sparse_columns(Gm, pskip):
    """The columns ``q`` of ``Gm`` with ``pskip[q]`` in compressed form: ``(gcol, gptr,
    gidx, gval)``, column ``gcol[e]`` holding ``gval[t]`` at rows ``gidx[t]`` for ``t`` in
    ``gptr[e] .. gptr[e + 1] - 1`` (a parameter binds a few of the model's fields; rows in
    increasing order)."""
    nfield, npar = Gm.shape
    nc = 0
    nnz = 0
    for q in range(npar):
        if pskip[q] != 0:
            nc += 1
            for i in range(nfield):
                if Gm[i, q] != 0.0:
                    nnz += 1
    gcol = np.zeros(nc, dtype=np.int64)
    gptr = np.zeros(nc + 1, dtype=np.int64)
    gidx = np.zeros(nnz, dtype=np.int64)
    gval = np.zeros(nnz)
    e = 0
    t = 0
    for q in range(npar):
        if pskip[q] != 0:
            gcol[e] = q
            for i in range(nfield):
                if Gm[i, q] != 0.0:
                    gidx[t] = i
                    gval[t] = Gm[i, q]
                    t += 1
            e += 1
            gptr[e] = t
    return gcol, gptr, gidx, gval


@njit(cache=True)
def fields_read(gidx, nfield):
    """``1`` at each field index in ``gidx`` (the fields the reverse-mode parameter columns
    read, :func:`sparse_columns`), else ``0``: the ``need`` mask of
    :func:`virtual_power_lanes`."""
    need = np.zeros(nfield, dtype=np.int64)
    for t in range(gidx.shape[0]):
        need[gidx[t]] = 1
    return need


@njit(cache=True)
def _cross(a, b, out):
    out[0] = a[1] * b[2] - a[2] * b[1]
    out[1] = a[2] * b[0] - a[0] * b[2]
    out[2] = a[0] * b[1] - a[1] * b[0]


@njit(cache=True)
def virtual_power_gradient(ma, p, z, zd, zdd, v, gfield):
    """``gfield += d(v^T tau)/dp`` for the *static* fields (one generalised velocity
    ``v``; computes the frame kinematics of the state, then :func:`virtual_power_lanes`)."""
    nf = ma.fr_parent.shape[0]
    A = np.zeros((nf, 3, 3))
    r = np.zeros((nf, 3))
    u = np.zeros((nf, 3))
    bcol = np.zeros((nf, 6))
    Z = np.zeros((nf, 6))
    Zd = np.zeros((nf, 6))
    K.frame_kinematics(ma, p, z, zd, zdd, A, r, u, bcol, Z, Zd)
    gl = np.zeros((1, gfield.shape[0]))
    Vv = np.zeros((1, z.shape[0]))
    Vv[0, :] = v
    Zv = np.zeros((1, nf, 6))
    K.frame_velocities(ma, Vv[0], bcol, Zv[0])
    virtual_power_lanes(ma, p, z, zd, A, r, bcol, Z, Zd, Vv, gl, Zv,
                        np.ones(gfield.shape[0], dtype=np.int64))
    for i in range(gfield.shape[0]):
        gfield[i] += gl[0, i]


@njit(cache=True)
def virtual_power_lanes(ma, p, z, zd, A, r, bcol, Z, Zd, Vv, gl, Zv, need):
    """``gl[j] += d(v_j^T tau)/dp`` for the *static* fields: masses, centres of mass,
    inertias, point-to-point spring-dampers (k, c, natural length) and joint spring-dampers
    (k, c, q0) -- the reverse-mode (vector-Jacobian) products the adjoint needs, one pass
    over the bodies for all the generalised velocities ``v_j = Vv[j]`` (the lanes).
    ``A, r, bcol, Z, Zd``: frame kinematics of the state; ``Zv`` (lanes x frames x 6):
    the virtual twists of the lanes (``Zv[j]`` = :func:`workbench.kernels.tree.frame_velocities` of
    ``Vv[j]``, given by the caller: the step Jacobians have them already).  ``need``
    (nfield, 0/1): a body, spring or joint spring none of whose fields is flagged is
    skipped (its entries of ``gl`` are left as they are); the others are computed exactly
    as with every flag set.

    ``v^T tau`` with ``tau = M zdd - Q`` is the virtual power of the inertia forces minus
    the applied forces on the virtual twists ``Zv`` of the generalised velocity ``v``
    (seed 001 eq 29 written as virtual power, formulation independent):
    body ``b``: ``m (a_g - g_vec) . v_g + (J_G alpha + omega x J_G omega) . omega_v`` with
    ``v_g = v_O + omega_v x g``; spring: ``- T u . (v_1 - v_2)``; joint spring: ``- Q v_c``.
    Fields that enter the kinematics (and tire or other elements) are not handled here.
    """
    nl = Vv.shape[0]
    b3 = _S12x3()
    g, w, al, wv, ag, vg, t1, t2, dg, wb, alb, wvb = (b3[0], b3[1], b3[2], b3[3], b3[4], b3[5],
                                                      b3[6], b3[7], b3[8], b3[9], b3[10],
                                                      b3[11])
    ac = _S3()
    JG = _S3x3()
    grav = ma.gravity
    for b in range(ma.b_frame.shape[0]):
        c0 = ma.b_com[b]
        ki = ma.b_inr[b]
        im = ma.b_mass[b]
        used = need[im] + need[c0] + need[c0 + 1] + need[c0 + 2]
        for k in range(6):
            used += need[ki + k]
        if used == 0:
            continue
        f = ma.b_frame[b]
        m = K.body_inertia(ma, p, A, r, b, g, JG)
        for i in range(3):
            w[i] = Z[f, 3 + i]
            al[i] = Zd[f, 3 + i]
        # acceleration of the centre of mass (lane independent)
        _cross(w, g, t1)
        _cross(w, t1, t2)
        _cross(al, g, ag)
        for i in range(3):
            ag[i] += Zd[f, i] + t2[i]
            ac[i] = ag[i] - grav[i]
        for k in range(3):
            wb[k] = A[f, 0, k] * w[0] + A[f, 1, k] * w[1] + A[f, 2, k] * w[2]
            alb[k] = A[f, 0, k] * al[0] + A[f, 1, k] * al[1] + A[f, 2, k] * al[2]
        for j in range(nl):
            for i in range(3):
                wv[i] = Zv[j, f, 3 + i]
            # virtual velocity of the centre of mass
            _cross(wv, g, vg)
            for i in range(3):
                vg[i] += Zv[j, f, i]
            # mass
            gl[j, im] += ac[0] * vg[0] + ac[1] * vg[1] + ac[2] * vg[2]
            # centre of mass: dP/dg = m [vg x alpha + (vg x omega) x omega + (a_g - grav) x wv]
            _cross(vg, al, dg)
            _cross(vg, w, t1)
            _cross(t1, w, t2)
            for i in range(3):
                dg[i] += t2[i]
            _cross(ac, wv, t2)
            for k in range(3):
                gl[j, c0 + k] += m * (A[f, 0, k] * (dg[0] + t2[0]) + A[f, 1, k] * (dg[1] + t2[1])
                                      + A[f, 2, k] * (dg[2] + t2[2]))
            # inertia (body axes): dP/dJ_kl = wvb_k alb_l + (wvb x wb)_k wb_l
            for k in range(3):
                wvb[k] = A[f, 0, k] * wv[0] + A[f, 1, k] * wv[1] + A[f, 2, k] * wv[2]
            _cross(wvb, wb, t1)
            for k in range(3):
                gl[j, ki + k] += wvb[k] * alb[k] + t1[k] * wb[k]
            gl[j, ki + 3] += wvb[0] * alb[1] + t1[0] * wb[1] + wvb[1] * alb[0] + t1[1] * wb[0]
            gl[j, ki + 4] += wvb[0] * alb[2] + t1[0] * wb[2] + wvb[2] * alb[0] + t1[2] * wb[0]
            gl[j, ki + 5] += wvb[1] * alb[2] + t1[1] * wb[2] + wvb[2] * alb[1] + t1[2] * wb[1]
    # point-to-point spring-dampers
    x1, x2, v1, v2, a1, a2 = b3[0], b3[1], b3[2], b3[3], b3[4], b3[5]
    for s_ in range(ma.sp_pt.shape[0]):
        if need[ma.sp_k[s_]] + need[ma.sp_c[s_]] + need[ma.sp_L0[s_]] == 0:
            continue
        if ma.sp_law[s_, 0] != 0 or ma.sp_law[s_, 1] != 0:
            continue          # not a reverse-mode field (compiled.parameters.reverse_parameters)
        k1 = ma.sp_pt[s_, 0]
        k2 = ma.sp_pt[s_, 1]
        K.point_kinematics(ma, p, A, r, Z, Zd, k1, x1, v1, a1)
        K.point_kinematics(ma, p, A, r, Z, Zd, k2, x2, v2, a2)
        L = 0.0
        Ld = 0.0
        for i in range(3):
            L += (x2[i] - x1[i]) ** 2
        L = np.sqrt(L)
        for i in range(3):
            Ld += (x2[i] - x1[i]) * (v2[i] - v1[i])
        Ld /= L
        L0 = p[ma.sp_L0[s_]]
        kk_ = p[ma.sp_k[s_]]
        for j in range(nl):
            # virtual velocities of the two points along the spring
            proj = 0.0
            for e in range(2):
                kk = k1 if e == 0 else k2
                x = x1 if e == 0 else x2
                bb = ma.pt_body[kk]
                if bb >= 0:
                    f = ma.b_frame[bb]
                    for i in range(3):
                        wv[i] = Zv[j, f, 3 + i]
                    _cross(wv, x, t1)
                    sgn = 1.0 if e == 0 else -1.0
                    for i in range(3):
                        proj += sgn * (x2[i] - x1[i]) / L * (Zv[j, f, i] + t1[i])
            gl[j, ma.sp_k[s_]] -= (L - L0) * proj
            gl[j, ma.sp_c[s_]] -= Ld * proj
            gl[j, ma.sp_L0[s_]] += kk_ * proj
    # joint spring-dampers: Q_c = -k (z_c - z0) - c zd_c
    for s_ in range(ma.js_coord.shape[0]):
        if need[ma.js_k[s_]] + need[ma.js_c[s_]] + need[ma.js_z0[s_]] == 0:
            continue
        c_ = ma.js_coord[s_]
        for j in range(nl):
            vc = Vv[j, c_]
            gl[j, ma.js_k[s_]] += (z[c_] - p[ma.js_z0[s_]]) * vc
            gl[j, ma.js_c[s_]] += zd[c_] * vc
            gl[j, ma.js_z0[s_]] -= p[ma.js_k[s_]] * vc
