"""Kernels of the penalty formulation (seed 003 eqs 14-26).

All ``n`` relative coordinates ``z`` of the spanning tree are integrated; the closures
``Phi(z, t) = 0`` (cut joints, distances, drives) enter as the penalty forces
``-Phi_z^T alpha Phi`` (eq 14)::

    M(z) zdd + Phi_z^T alpha Phi = Q(z, zd, t)          (eq 14; tau(z, zd, zdd) = M zdd - Q)

With the trapezoidal rule on all coordinates and the unknown ``a = zdd_{k+1}`` (eqs 15-16:
``z = z_k + h zd_k + h^2/4 (a_k + a)``, so ``dz/da = h^2/4``, ``dzd/da = h/2``), the step
residual is eq 17 divided by ``h^2/4``::

    r(a) = tau(z, zd, a) + Phi_z^T alpha Phi = 0                                  (eq 17)

solved by Newton-Raphson with the tangent of eq 20 (times ``4/h^2``)::

    T = M + h/2 C + h^2/4 (Phi_z^T alpha Phi_z + K),   [K C] = J = -dQ/d[z; zd]   (eqs 20-23)

which drops ``dM/dz zdd`` and the second derivatives of ``Phi`` (seed 003 §3).  ``J`` is
evaluated by one of four methods (:data:`J_METHODS`): central differences of ``Q`` column by
column (the seed's ND, eq 1) or by Curtis-Powell-Reid groups of structurally orthogonal
columns (:mod:`workbench.formulations.penalty.sparsity`), or exactly by the forward-mode
tangent kernels of the semi-recursive recursion (:mod:`workbench.kernels.tangents`) along
the ``2n`` unit directions or along the ``p`` group directions (compressed), all through
:func:`jacobian_compressed` + :func:`recover_jacobian`.

After convergence the velocities and accelerations are projected (eqs 24-26) with the last
factorisation of ``T``, ``P = T - h^2/4 Phi_z^T alpha Phi_z``::

    T zd  = P zd*  - h^2/4 Phi_z^T alpha Phi_t                                    (eq 24)
    T zdd = P zdd* - h^2/4 Phi_z^T alpha (Phi_dot_z zd + Phi_dot_t)               (eq 26)

(:func:`project`).
"""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.np.linalg import _LAPACK, ensure_lapack

from workbench.formulations.interface import FORM_ORIGIN
from workbench.formulations.semirecursive import matrixr as MR
from workbench.kernels import tangents as T
from workbench.kernels import tree as K

#: how ``J = -dQ/d[z; zd]`` is evaluated (option ``jacobian`` of the penalty settings)
J_ND, J_ND_COLORED, J_EXACT, J_EXACT_COLORED = 0, 1, 2, 3
J_METHODS = {"nd": J_ND, "nd-colored": J_ND_COLORED, "exact": J_EXACT,
             "exact-colored": J_EXACT_COLORED}
#: relative step of the central differences (eq 1): the cube root of the machine epsilon
#: balances truncation (h^2) against rounding (eps / h)
ND_STEP = 6.0e-6

# LAPACK's dgetrf through numba's own binding (cacheable, unlike a ctypes pointer)
ensure_lapack()
_xxgetrf = _LAPACK().numba_xxgetrf(types.float64)
_KIND = ord("d")


@njit(cache=True)
def make_tangent_workspace(ma, n):
    """Work arrays of :func:`tau_tangent` (tangents of the frames, bodies and forces)."""
    nf = ma.fr_parent.shape[0]
    nb = ma.b_frame.shape[0]
    f3 = np.zeros((4, nf, 3))         # th, dr, du, dPc
    f6 = np.zeros((8, nf, 6))         # db, dZ, dZd, dbv, dVc, dVdc, Fs, dFs
    b3 = np.zeros((4, nb, 3))         # dfb, dnb, bg, bdg
    bm = np.zeros((2, nb))            # bm, bdm
    bJ = np.zeros((2, nb, 3, 3))      # bJ, bdJ
    vn = np.zeros((2, n))             # dQj, zero
    return f3, f6, b3, bm, bJ, vn, np.zeros(ma.p.shape[0])


@njit(cache=True)
def dynamics_terms(ma, p, form, t, z, zd, zdd, ws, M, Jc, phi, tau):
    """At ``(t, z, zd, zdd)``: ``tau = M zdd - Q``, the mass matrix ``M``, the closure
    ``Phi`` and its Jacobian ``Phi_z`` (the state is left in ``ws`` for the tangents).
    Returns the mechanical energy (kinetic + gravity + springs)."""
    n = z.shape[0]
    A, r, u, bcol, Z = ws.A, ws.r, ws.u, ws.bcol, ws.Z
    K.frame_positions(ma, p, z, A, r, u)
    K.joint_columns(ma, r, u, bcol)
    V = MR.residual_tau(ma, p, t, z, zd, zdd, ws, form, tau)
    M[:, :] = 0.0
    MR.mass_matrix(ma, p, ws, form, n, M)
    K.constraints(ma, p, t, z, zd, zdd, A, r, Z, ws.Zd, 0, phi)
    K.constraint_jacobian(ma, p, A, r, ws.bcol, n, Jc)
    return V + K.kinetic_energy(ma, p, A, r, Z)


@njit(cache=True)
def tau_at(ma, p, form, t, z, zd, ws, tau):
    """``tau(z, zd, 0) = -Q(z, zd, t)``: the open-tree generalized forces with the sign of
    the residual (a full evaluation, for the central differences)."""
    K.frame_positions(ma, p, z, ws.A, ws.r, ws.u)
    K.joint_columns(ma, ws.r, ws.u, ws.bcol)
    MR.residual_tau(ma, p, t, z, zd, ws.zero_n, ws, form, tau)


@njit(cache=True)
def tau_tangent(ma, p, form, t, z, zd, zdd, dz, dzd, dzdd, dp, ws, tw, dtau):
    """Directional derivative ``dtau`` of ``tau(z, zd, zdd; p) = M zdd - Q`` along ``(dz,
    dzd, dzdd, dp)`` (``dp``: a direction in the field vector, e.g. a column of the
    parameter map; forward mode, the tangent kernels of :mod:`workbench.kernels.tangents`;
    exact to rounding).  The state must be the one :func:`dynamics_terms` (or
    :func:`workbench.formulations.semirecursive.matrixr.residual_tau`) left in ``ws`` at the
    same ``(t, z, zd, zdd)``; ``tw``: :func:`make_tangent_workspace`."""
    f3, f6, b3, bm2, bJ2, vn, _ = tw
    th, dr, du, dPc = f3[0], f3[1], f3[2], f3[3]
    db, dZ, dZd, dbv, dVc, dVdc, Fs, dFs = f6[0], f6[1], f6[2], f6[3], f6[4], f6[5], f6[6], f6[7]
    dfb, dnb, bg, bdg = b3[0], b3[1], b3[2], b3[3]
    bm, bdm = bm2[0], bm2[1]
    bJ, bdJ = bJ2[0], bJ2[1]
    dQj = vn[0]
    A, r, u, bcol, Z, Zd = ws.A, ws.r, ws.u, ws.bcol, ws.Z, ws.Zd
    fb, nb_ = ws.fb, ws.nb
    # a direction that moves no position and no field leaves the geometry and the inertia
    kin = False
    for k in range(dz.shape[0]):
        if dz[k] != 0.0:
            kin = True
            break
    kin_p = False
    for k in range(dp.shape[0]):
        if dp[k] != 0.0:
            kin = True
            kin_p = True
            break
    # the frames this direction moves (all of them when it moves a field)
    mv = np.zeros(ma.fr_parent.shape[0] + 1, dtype=np.int64)
    T.moved_frames(ma, dz, dzd, dzdd, kin_p, mv)
    if kin:
        T.frame_positions_t(ma, p, dp, z, dz, A, r, u, th, dr, du, mv)
        T.joint_columns_t(ma, r, u, dr, du, db, mv)
    else:
        th[:, :] = 0.0
        dr[:, :] = 0.0
        du[:, :] = 0.0
        db[:, :] = 0.0
    T.frame_velocities_t(ma, zd, dzd, bcol, db, dZ, mv)
    T.frame_accelerations_t(ma, zd, zdd, dzd, dzdd, r, u, bcol, Z, dr, du, db, dZ, dZd, mv)
    for b in range(ma.b_frame.shape[0]):
        bm[b] = K.body_inertia(ma, p, A, r, b, bg[b], bJ[b])
    if kin:
        T.body_inertias_t(ma, p, dp, A, r, th, dr, bg, bJ, bdm, bdg, bdJ, mv)
    T.applied_forces_t(ma, p, dp, t, z, zd, dz, dzd, A, r, Z, Zd, th, dr, dZ, dZd, dfb, dnb,
                       dQj, kin, bm, bg, bdm, bdg, np.zeros((0, 3, 3, 13)), False, mv)
    if form == FORM_ORIGIN:
        T.inverse_dynamics_origin_t(ma, bcol, Z, Zd, fb, nb_, db, dZ, dZd, dfb, dnb, dQj, dtau,
                                    bm, bg, bJ, kin, bdm, bdg, bdJ, Fs, dFs)
    else:
        Pc, bv, Vc, Vdc = ws.P, ws.bv, ws.Vc, ws.Vdc
        if kin:
            T.reference_points_t(ma, dr, dPc, bdg)
            T.com_columns_t(ma, r, u, Pc, dr, du, dPc, dbv, mv)
        else:
            dPc[:, :] = 0.0
            dbv[:, :] = 0.0
        T.com_kinematics_t(ma, zd, zdd, dzd, dzdd, r, u, Pc, bv, Vc, Vdc, dr, du, dPc, dbv, dVc,
                           dVdc, mv)
        T.com_wrenches(ma, Pc, Vc, Vdc, fb, nb_, bm, bg, bJ, Fs)
        T.inverse_dynamics_com_t(ma, Pc, bv, Vc, Vdc, fb, nb_, dPc, dbv, dVc, dVdc, dfb, dnb,
                                 dQj, dtau, bm, bg, bJ, kin, Fs, dFs, bdm, bdg, bdJ, mv)


@njit(cache=True)
def jacobian_compressed(ma, p, form, t, z, zd, exact, color, ncolor, ws, ws2, tw, B):
    """The compressed Jacobian ``B = J S`` of ``tau(z, zd, 0)`` with respect to ``y = [z;
    zd]`` (``J = dtau/dy = -dQ/dy``, eq 23), ``S`` (2n x p) the seed matrix of the column
    groups: ``color[j]`` is the group of column ``j`` (``0 .. ncolor - 1``; one column per
    group gives the dense Jacobian).

    ``exact``: forward-mode tangents along the group directions (``ws`` must hold the state
    at ``(z, zd, 0)``, :func:`tau_at`); otherwise central differences (eq 1) with the step
    ``ND_STEP max(1, |y_j|)`` per column, evaluated in ``ws2``: column ``c`` of ``B`` is then
    ``(tau(y + S_c) - tau(y - S_c)) / 2`` with ``S_c`` the steps of its group, divided by each
    column's own step when recovered (:func:`recover_jacobian`).  Returns the number of
    evaluations of ``tau`` (differences) or of its tangent (exact)."""
    n = z.shape[0]
    dz = np.zeros(n)
    dzd = np.zeros(n)
    zero = np.zeros(n)
    col = np.zeros(n)
    if exact:
        for c in range(ncolor):
            dz[:] = 0.0
            dzd[:] = 0.0
            for j in range(2 * n):
                if color[j] == c:
                    if j < n:
                        dz[j] = 1.0
                    else:
                        dzd[j - n] = 1.0
            tau_tangent(ma, p, form, t, z, zd, zero, dz, dzd, zero, tw[6], ws, tw, col)
            B[:, c] = col
        return ncolor
    zp = np.empty(n)
    zdp = np.empty(n)
    tp = np.empty(n)
    tm = np.empty(n)
    for c in range(ncolor):
        for j in range(n):
            zp[j] = z[j]
            zdp[j] = zd[j]
        for j in range(2 * n):
            if color[j] == c:
                if j < n:
                    zp[j] += ND_STEP * max(1.0, abs(z[j]))
                else:
                    zdp[j - n] += ND_STEP * max(1.0, abs(zd[j - n]))
        tau_at(ma, p, form, t, zp, zdp, ws2, tp)
        for j in range(2 * n):
            if color[j] == c:
                if j < n:
                    zp[j] = z[j] - ND_STEP * max(1.0, abs(z[j]))
                else:
                    zdp[j - n] = zd[j - n] - ND_STEP * max(1.0, abs(zd[j - n]))
        tau_at(ma, p, form, t, zp, zdp, ws2, tm)
        for i in range(n):
            B[i, c] = 0.5 * (tp[i] - tm[i])
    return 2 * ncolor


@njit(cache=True)
def recover_jacobian(B, color, pattern, exact, z, zd, Kd, Cd):
    """``J = [K C]`` from the compressed ``B`` (:func:`jacobian_compressed`): entry ``(i, j)``
    of the structural pattern (n x 2n, boolean) is column ``color[j]`` of row ``i`` of ``B``
    (a valid grouping has at most one column of each group in every row); outside the
    pattern ``J`` is zero.  Central differences are divided by the column's step."""
    n = Kd.shape[0]
    for i in range(n):
        for j in range(2 * n):
            v = 0.0
            if pattern[i, j]:
                v = B[i, color[j]]
                if not exact:
                    y = z[j] if j < n else zd[j - n]
                    v /= ND_STEP * max(1.0, abs(y))
            if j < n:
                Kd[i, j] = v
            else:
                Cd[i, j - n] = v


@njit(cache=True)
def penalty_residual(tau, Jc, phi, alpha, r):
    """``r = tau + Phi_z^T alpha Phi`` (eq 17 times ``4/h^2``)."""
    n = tau.shape[0]
    m = phi.shape[0]
    for i in range(n):
        s = tau[i]
        for k in range(m):
            s += Jc[k, i] * alpha * phi[k]
        r[i] = s


@njit(cache=True)
def penalty_tangent(M, Kd, Cd, Jc, alpha, h, Tm):
    """``T = M + h/2 C + h^2/4 (K + Phi_z^T alpha Phi_z)`` (eq 20 times ``4/h^2``);
    ``Phi_z^T Phi_z`` as a sum of the outer products of the rows over their non-zeros (a
    closure row reads only the coordinates on the root paths of its two bodies)."""
    n = M.shape[0]
    m = Jc.shape[0]
    cz = 0.25 * h * h
    cv = 0.5 * h
    for i in range(n):
        for j in range(n):
            Tm[i, j] = M[i, j] + cv * Cd[i, j] + cz * Kd[i, j]
    nz = np.empty(n, dtype=np.int64)
    ca = cz * alpha
    for k in range(m):
        cnt = 0
        for j in range(n):
            if Jc[k, j] != 0.0:
                nz[cnt] = j
                cnt += 1
        for a in range(cnt):
            i = nz[a]
            v = ca * Jc[k, i]
            for b in range(cnt):
                j = nz[b]
                Tm[i, j] += v * Jc[k, j]


@njit(cache=True)
def project(Tm, LU, piv, Jc, alpha, h, xstar, bias, out):
    """Projection of eqs 24 and 26 with the factorisation of the last tangent: ``T x =
    P x* - h^2/4 Phi_z^T alpha bias`` with ``P x* = T x* - h^2/4 Phi_z^T alpha Phi_z x*``,
    i.e. ``x = x* - T^-1 h^2/4 Phi_z^T alpha (Phi_z x* + bias)``: the velocities
    (``bias = Phi_t``) or the accelerations (``bias = Phi_dot_z zd + Phi_dot_t``).
    ``LU, piv``: :func:`lu_factor`."""
    n = Tm.shape[0]
    m = Jc.shape[0]
    cz = 0.25 * h * h
    w = np.zeros(m)
    for k in range(m):
        s = bias[k]
        for j in range(n):
            s += Jc[k, j] * xstar[j]
        w[k] = s
    g = np.zeros(n)
    for i in range(n):
        s = 0.0
        for k in range(m):
            s += Jc[k, i] * w[k]
        g[i] = cz * alpha * s
    lu_solve(LU, piv, g)
    for i in range(n):
        out[i] = xstar[i] - g[i]


@njit(cache=True)
def lu_factor(A, LU, piv):
    """LU factorisation with partial pivoting of ``A`` by LAPACK's ``dgetrf`` (numba's own
    binding, the one behind ``np.linalg``): ``LU`` receives ``A^T`` in C order, i.e. ``A``
    in LAPACK's column-major order, overwritten by its factors ``P A = L U``; ``piv``
    (int32): LAPACK's 1-based row swaps.  Returns False when ``A`` is singular or not
    finite."""
    n = A.shape[0]
    if n == 0:
        return True
    for i in range(n):
        for j in range(n):
            LU[j, i] = A[i, j]
    if not np.isfinite(LU).all():
        return False
    info = _xxgetrf(_KIND, n, n, LU.ctypes, n, piv.ctypes)
    return info == 0


@njit(cache=True)
def lu_solve(LU, piv, x):
    """``x <- A^-1 x`` with the factors of :func:`lu_factor` (row swaps, then the unit
    lower and the upper triangular solves; element ``(i, j)`` of the factors is
    ``LU[j, i]``)."""
    n = LU.shape[0]
    for k in range(n):
        q = piv[k] - 1
        if q != k:
            tmp = x[k]
            x[k] = x[q]
            x[q] = tmp
    for i in range(n):
        s = x[i]
        for j in range(i):
            s -= LU[j, i] * x[j]
        x[i] = s
    for i in range(n - 1, -1, -1):
        s = x[i]
        for j in range(i + 1, n):
            s -= LU[j, i] * x[j]
        x[i] = s / LU[i, i]
