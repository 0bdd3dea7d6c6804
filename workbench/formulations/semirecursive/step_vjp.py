"""The discrete adjoint sweep by reverse-mode step products (issue 29 item 1): no step
Jacobian is formed.

At step ``n`` the discrete adjoint (the transpose of the direct recursion of
:func:`workbench.sensitivities.sweeps.direct_block`) needs, for each objective's
cotangents ``(lZ, lV, lA)`` of the step's ``(Z, V, A)``:

1. the measures' share: ``lZ += (dm/dZ)^T c``, ``lV += (dm/dV)^T c``, ``lA += (dm/dA)^T c``,
   ``grad += (dm/drho)^T c`` with ``c = w_n g_n`` (:func:`workbench.kernels.cotangents.measures_r`);
2. ``mu`` from ``T^T mu = lA + h^2/4 lZ + h/2 lV``, ``T = Mbar + h/2 C + h^2/4 K``;
3. ``lZ -= K^T mu``, ``lV -= C^T mu``, ``grad -= P^T mu``.

One reverse pass of the residual (:func:`residual_products`, the virtual power of
``R mu``, :func:`workbench.kernels.cotangents.virtual_power_pass`) gives ``K^T mu``,
``C^T mu``, ``Mbar^T mu`` and ``P^T mu`` together, hence ``T^T mu``.  Step 2 is solved by
the iterations ``mu <- mu + T0^-T (b - T^T mu)`` preconditioned by the simulation's own
iteration matrix ``T0 = R^T (M + h/2 Cd + h^2/4 Kd) R`` (the mass matrix and the force
elements' Jacobians, :func:`workbench.formulations.semirecursive.matrixr.force_jacobians`):
they contract by 4e-4 to 7e-3 per pass on the shipped and benchmark models
(``docs/performance.md``, session 23), and stop once the error left in ``mu`` is below
``TOL``; the last pass (the only one with the field terms) gives the products of step 3.
A row's ``T0`` serves the next rows while the passes keep contracting (``QMAX``,
``REUSE``).  Exact: the same discrete adjoint as the Jacobian-based sweep, to rounding.

On a closed loop ``r = R^T tau`` with ``R = R^Phi`` (eq 16), and ``z, zd, zdd`` follow
from ``(Z, V, A)`` through the position, velocity and acceleration problems: the pass is
taken with ``v = R mu`` and the ``dR^Phi`` term ``-kap^T dTheta(v)`` (``kap = Theta_z^-T
tau``, eq 57), and :func:`implicit_chain` carries its cotangents of every coordinate to
the DOF by three solves with ``Theta_z^T`` (the coordinate partition's LU) and three
passes of the closure rows (:func:`workbench.kernels.cotangents.constraints_r`).

Scope (:func:`reverse_supported`): trees and closed loops whose degrees of freedom are
joint coordinates (the coordinate partition), with point-coincidence and distance
closures, loaded by gravity, inertia, joint spring-dampers and linear point
spring-dampers, with any measure but reactions.  Other models use the step Jacobians.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from workbench.formulations.semirecursive import matrixr as MR
from workbench.formulations.semirecursive.step_jacobians import sparse_columns
from workbench.kernels import cotangents as CT
from workbench.kernels import layout as AR
from workbench.kernels import linalg as LA
from workbench.kernels import tree as K
from workbench.kernels.measures import MS_COORD, MS_REACTION
from workbench.kernels.status import OK, ST_MASS, ST_SINGULAR

#: the largest number of preconditioned passes of one solve with ``T^T`` (each contracts
#: by ~1e-3: rounding is reached in 5-7)
MAX_PASSES = 30
#: the solve with ``T^T`` stops once the error left in ``mu`` (estimated from the
#: contraction of the last two corrections) is below ``TOL`` relative: the next pass is the
#: last.  The passes' rounding floor is 3e-16 (open chain n = 5) to 3e-15 (n = 20; the SR-II
#: terms at the global origin), measured in session 23; the forward-mode adjoint's own
#: solve carries ~eps cond(T) (cond(T) = 3e3 and 1e6 there)
TOL = 1e-13
#: the preconditioner ``T0`` of a row is used for the next rows while the passes contract
#: by ``QMAX`` or better, at most ``REUSE`` rows
QMAX = 5e-3
REUSE = 16


@njit(cache=True)
def reverse_supported(ma, ms_type):
    """True when :func:`adjoint_sweep_reverse` covers the model and the measures: every
    DOF a joint coordinate and the other coordinates as many as the closure rows (the
    coordinate partition of :func:`workbench.formulations.semirecursive.matrixr.partition_setup`),
    closure rows of :func:`workbench.kernels.cotangents.closures_supported`, loads covered
    by :func:`workbench.kernels.cotangents.virtual_power_supported`, no reaction
    measure."""
    m = ma.c_type.shape[0]
    if not MR.coordinate_dofs(ma) or m + ma.dof_type.shape[0] != _n_coords(ma):
        return False
    if not CT.closures_supported(ma):
        return False
    for k in range(ms_type.shape[0]):
        if ms_type[k] == MS_REACTION:
            return False
    return CT.virtual_power_supported(ma)


@njit(cache=True)
def _n_coords(ma):
    n = 0
    for f in range(ma.fr_coord.shape[0]):
        if ma.fr_coord[f] >= 0:
            n += 1
    return n


@njit(cache=True)
def make_vjp_workspace(ma, n, nfield):
    """Work arrays of :func:`residual_products` and :func:`measure_products`: the frame
    kinematics of the row (``MR.make_workspace``), the virtual twists, the frames' and
    coordinates' cotangents (``zb, zdb, zddb``, a zero ``n``-vector and two discarded
    ones), the field cotangents and, for closed loops, the row's partition (``R^Phi``, the
    LU of ``Phi_dep``), the ``dR^Phi`` weights ``kap``, the multipliers ``lam`` and a
    work vector of ``Theta_z^T`` solves."""
    nf = ma.fr_parent.shape[0]
    m = ma.c_type.shape[0]
    d = ma.dof_type.shape[0]
    PL = (np.zeros(m, dtype=np.int64), np.zeros((m, m)), np.zeros(m, dtype=np.int64))
    return (MR.make_workspace(ma, n), np.zeros((4, nf, 6)), np.zeros((3, nf, 3)),
            np.zeros((6, n)), np.zeros(nfield),
            (np.zeros((n, d)), PL, np.zeros(m), np.zeros(m), np.zeros(m + d)))


@njit(cache=True)
def residual_products(ma, p, z, zd, zdd, v, vw, fields=True):
    """One reverse pass of ``v^T tau`` at the row whose frame kinematics ``vw[0]`` holds
    (:func:`workbench.kernels.cotangents.virtual_power_pass`) with ``v = R^Phi mu``:
    ``vw`` receives ``zb = (dtau/dz)^T v``, ``zdb``, ``zddb = M v`` and (``fields``) ``pb
    = (dtau/dp)^T v``; on a closed loop the ``dR^Phi`` term is in ``zb`` and ``pb``, and
    :func:`implicit_chain` carries them to the DOF (``zb`` at the DOF coordinates = ``K^T
    mu``, ``zdb`` = ``C^T mu``, ``zddb`` = ``Mbar^T mu``)."""
    ws, f6, f3, vn, pb, cw = vw
    CT.virtual_power_pass(ma, p, z, zd, zdd, v, ws.A, ws.r, ws.u, ws.bcol, ws.Z, ws.Zd,
                          f6[0], f3[0], f3[1], f3[2], f6[1], f6[2], f6[3], vn[0], vn[1],
                          vn[2], pb, cw[2], fields)
    if ma.c_type.shape[0] > 0:
        implicit_chain(ma, p, zd, zdd, vw, fields)


@njit(cache=True)
def measure_products(ma, p, z, zd, zdd, ms_type, ms_a, ms_c, cmv, frames, vw):
    """One reverse pass of ``sum_k cmv[k] m_k``: ``vw`` receives its gradients with
    respect to ``z, zd, zdd`` and the fields (on a closed loop, carried to the DOF by
    :func:`implicit_chain`).  ``frames``: some measure reads the frames (not only
    coordinates and their rates)."""
    ws, f6, f3, vn, pb, cw = vw
    f6[1:, :, :] = 0.0
    f3[:, :, :] = 0.0
    vn[:, :] = 0.0
    pb[:] = 0.0
    Zb, Zdb, Zvb = f6[1], f6[2], f6[3]
    thb, rb, ub = f3[0], f3[1], f3[2]
    zb, zdb, zddb = vn[0], vn[1], vn[2]
    CT.measures_r(ma, p, ws.A, ws.r, ws.Z, ws.Zd, ms_type, ms_a, ms_c, cmv, thb, rb, Zb, Zdb,
                  zb, zdb, zddb, pb)
    if frames:
        # (no virtual velocity: vn[3] = 0, and the virtual twists' cotangents Zvb are zero)
        CT.frame_kinematics_r(ma, zd, zdd, vn[3], ws.r, ws.u, ws.bcol, ws.Z, Zb, Zdb, Zvb, rb,
                              ub, zdb, zddb)
        CT.frame_positions_r(ma, ws.A, ws.r, ws.u, thb, rb, ub, zb, pb)
    if ma.c_type.shape[0] > 0:
        implicit_chain(ma, p, zd, zdd, vw, True)


@njit(cache=True)
def closed_loop_row(ma, p, form, t, z, zi, zdi, ai, zd, zdd, zddp, tau, vw):
    """The state of a closed loop's stored row ``(t, z, z^i, zd^i, zdd^i)`` in ``vw``: the
    frame kinematics, ``Theta_z`` and its partition's LU, ``R^Phi``, the rates ``zd`` and
    accelerations ``zdd`` of every coordinate (``zddp``: the particular ones), ``tau``
    and the weights of the ``dR^Phi`` term ``kap = -(Theta_z^-T tau)[:m]``.  False when
    ``Phi_dep`` is singular there.  (The partition's dependent coordinates are set once,
    :func:`workbench.formulations.semirecursive.matrixr.partition_setup`.)"""
    ws, cw = vw[0], vw[5]
    Rphi, PL, kap, x = cw[0], cw[1], cw[2], cw[4]
    K.frame_positions(ma, p, z, ws.A, ws.r, ws.u)
    if not MR.factor_r_lu(ma, p, Rphi, ws, PL):
        return False
    MR.velocity_acceleration(ma, p, t, zi, zdi, z, zd, zddp, ws, PL)
    MR.full_accelerations(zddp, Rphi, ai, zdd)
    # (the frame velocities and accelerations of the full state are left in ws by it)
    MR.residual_tau(ma, p, t, z, zd, zdd, ws, form, tau)
    MR.partition_solve_transpose(ma, ws.Th, PL, tau, x)
    for c in range(kap.shape[0]):
        kap[c] = -x[c]
    return True


@njit(cache=True)
def _dof_cotangent(ma, Th, PL, g, x, lam):
    """``Theta_z^T x = g`` (:func:`workbench.formulations.semirecursive.matrixr.partition_solve_transpose`):
    ``g`` at the DOF coordinates receives the DOF's share ``x[m:]``, ``lam`` the negated
    constraint multipliers ``-x[:m]`` (the weights of the constraint pass that follows)."""
    m = lam.shape[0]
    MR.partition_solve_transpose(ma, Th, PL, g, x)
    for c in range(m):
        lam[c] = -x[c]
    for k in range(ma.dof_type.shape[0]):
        g[ma.dof_i[k, 0]] = x[m + k]


@njit(cache=True)
def implicit_chain(ma, p, zd, zdd, vw, fields):
    """Carries the cotangents ``zb, zdb, zddb`` of every coordinate (``vw``) to the DOF
    through the acceleration, velocity and position problems of a closed loop (seed 001
    eqs 10-21, the transposes of their implicit derivatives), in reverse order:

    1. ``Theta_z^T l_a = zddb``: ``zddb`` at the DOF := ``l_a[m:]``; the constraint rows
       ``-l_a[:m]^T c_acc(z, zd, zdd)`` add their cotangents of ``zd`` and the positions;
    2. ``Theta_z^T l_v = zdb``: ``zdb`` := ``l_v[m:]``; ``-l_v[:m]^T Theta(z) zd`` adds
       its cotangents of the positions, which give ``zb`` (every position term
       gathered);
    3. ``Theta_z^T l_z = zb``: ``zb`` := ``l_z[m:]``; (``fields``) ``-l_z[:m]^T Phi(z;
       p)`` adds its field cotangents to ``pb``.

    ``Theta_z = [Phi_z; B]`` and its partition's LU are the row's (``vw[5]``)."""
    ws, f6, f3, vn, pb, cw = vw
    PL, lam, x = cw[1], cw[3], cw[4]
    A, r, u, bcol, Z, Zd, Th = ws.A, ws.r, ws.u, ws.bcol, ws.Z, ws.Zd, ws.Th
    Zb, Zdb, Zvb = f6[1], f6[2], f6[3]
    thb, rb, ub = f3[0], f3[1], f3[2]
    zb, zdb, zddb, v0, j1, j2 = vn[0], vn[1], vn[2], vn[3], vn[4], vn[5]
    f6[1:, :, :] = 0.0
    f3[:, :, :] = 0.0
    # 1. accelerations
    _dof_cotangent(ma, Th, PL, zddb, x, lam)
    CT.constraints_r(ma, p, A, r, Z, Zd, lam, 2, thb, rb, Zb, Zdb, pb, fields)
    CT.frame_kinematics_r(ma, zd, zdd, v0, r, u, bcol, Z, Zb, Zdb, Zvb, rb, ub, zdb, j2)
    # 2. velocities (the position cotangents of both levels gathered in thb, rb, ub)
    _dof_cotangent(ma, Th, PL, zdb, x, lam)
    f6[1:, :, :] = 0.0
    CT.constraints_r(ma, p, A, r, Z, Zd, lam, 1, thb, rb, Zb, Zdb, pb, fields)
    CT.frame_kinematics_r(ma, zd, zdd, v0, r, u, bcol, Z, Zb, Zdb, Zvb, rb, ub, j1, j2)
    CT.frame_positions_r(ma, A, r, u, thb, rb, ub, zb, pb)
    # 3. positions
    _dof_cotangent(ma, Th, PL, zb, x, lam)
    if fields:
        f3[:, :, :] = 0.0
        CT.constraints_r(ma, p, A, r, Z, Zd, lam, 0, thb, rb, Zb, Zdb, pb, True)
        CT.frame_positions_r(ma, A, r, u, thb, rb, ub, j1, pb)


@njit(cache=True)
def _field_products(pb, gsp, out, sign):
    """``out[q] += sign * (Gm^T pb)[q]`` over the compressed columns ``gsp`` of ``Gm``."""
    gcol, gptr, gidx, gval = gsp
    for e in range(gcol.shape[0]):
        s = 0.0
        for t in range(gptr[e], gptr[e + 1]):
            s += gval[t] * pb[gidx[t]]
        out[gcol[e]] += sign * s


@njit(cache=True)
def adjoint_sweep_reverse(ma, p, form, h, TT, ZZ, ZI, ZDI, AA, Gm, ms_type, ms_a, ms_c, SZ0,
                          SV0, GM, C0, W, GRAD, RUN, row0, nglob, carry, passes):
    """The discrete adjoint over rows ``N - 1 .. 0`` by reverse-mode products (see the
    module documentation), for the models of :func:`reverse_supported`: the arguments of
    :func:`workbench.sensitivities.sweeps.adjoint_sweep` (variant 0), the trajectory rows
    ``TT, ZZ, ZI, ZDI, AA`` (times, joint coordinates, DOF positions, velocities and
    accelerations).  ``passes[n]`` receives the reverse passes of row ``n`` (all
    objectives).  Returns (status, row)."""
    N = TT.shape[0]
    d = ZI.shape[1]
    n = ZZ.shape[1]
    nm = ms_type.shape[0]
    no = GM.shape[2]
    npar = Gm.shape[1]
    nfield = p.shape[0]
    m = ma.c_type.shape[0]
    dof0 = np.empty(d, dtype=np.int64)
    for k in range(d):
        dof0[k] = ma.dof_i[k, 0]
    # the work arrays, then views of them and of the arguments without reference counts
    # (their owners outlive the loop): the kernels that receive them make no atomic
    # increments (layout.borrowed)
    own = (make_vjp_workspace(ma, n, nfield), sparse_columns(Gm, np.ones(npar, dtype=np.int64)),
           dof0, np.zeros((5, n)), np.zeros((6, d)), np.zeros((4, n, n)),
           np.zeros((2, d, d)), np.zeros(d, dtype=np.int64), np.zeros(nm), np.zeros(npar))
    vw, gsp, dof, vecn, vecd, matn, matd, piv, cmv, gq = AR.borrow(own)
    p, TT, ZZ, ZI, ZDI, AA, Gm, SZ0, SV0, GM, C0, W, GRAD, RUN = AR.borrow(
        (p, TT, ZZ, ZI, ZDI, AA, Gm, SZ0, SV0, GM, C0, W, GRAD, RUN))
    ms_type, ms_a, ms_c, carry, passes = AR.borrow((ms_type, ms_a, ms_c, carry, passes))
    zd, zdd, zddp, tau, v = vecn[0], vecn[1], vecn[2], vecn[3], vecn[4]
    zi, zdi, ai, b, mu, dl = vecd[0], vecd[1], vecd[2], vecd[3], vecd[4], vecd[5]
    Md, Kd, Cd, Xt = matn[0], matn[1], matn[2], matn[3]
    T0t, LU = matd[0], matd[1]
    ws, vn = vw[0], vw[3]
    zb, zdb, zddb = vn[0], vn[1], vn[2]
    pb = vw[4]
    Rphi, PL = vw[5][0], vw[5][1]
    if m > 0 and not MR.partition_setup(ma, n, PL[0]):
        return ST_SINGULAR, N - 1
    # some measure reads the frames (not only coordinates and their rates)
    frames = False
    for k in range(nm):
        if ms_type[k] < MS_COORD:
            frames = True
    # the contraction per pass last seen (a solve's first correction has no ratio yet)
    qrow = 1e-2
    # rows since T0 was factorised (-1: none yet)
    since = -1
    lZ, lV, lA = carry[0], carry[1], carry[2]
    for nstep in range(N - 1, -1, -1):
        first = row0 + nstep == 0
        cz = 0.0 if first else 0.25 * h * h
        cv = 0.0 if first else 0.5 * h
        t = TT[nstep]
        z = ZZ[nstep]
        if m == 0:
            for k in range(d):
                zd[dof[k]] = ZDI[nstep, k]
                zdd[dof[k]] = AA[nstep, k]
            K.frame_kinematics(ma, p, z, zd, zdd, ws.A, ws.r, ws.u, ws.bcol, ws.Z, ws.Zd)
        else:
            for k in range(d):
                zi[k] = ZI[nstep, k]
                zdi[k] = ZDI[nstep, k]
                ai[k] = AA[nstep, k]
            if not closed_loop_row(ma, p, form, t, z, zi, zdi, ai, zd, zdd, zddp, tau, vw):
                return ST_SINGULAR, nstep
        # the preconditioner T0 = R^T (M + cv Cd + cz Kd) R, factorised transposed; kept
        # for the next rows while the passes contract by QMAX or better (the mass matrix
        # moves little from row to row), at most REUSE rows, and formed again at the
        # initial row (where T = Mbar)
        if since < 0 or first or qrow > QMAX or since >= REUSE:
            K.mass_matrix_origin(ma, p, ws.A, ws.r, ws.bcol, n, Md)
            MR.force_jacobians(ma, p, t, z, zd, ws, n, Kd, Cd)
            if m == 0:
                for i in range(d):
                    for j in range(d):
                        a, c_ = dof[j], dof[i]
                        T0t[i, j] = Md[a, c_] + cv * Cd[a, c_] + cz * Kd[a, c_]
            else:
                # T0^T = R^T X^T R, X = M + cv Cd + cz Kd
                for a in range(n):
                    for c_ in range(n):
                        Xt[a, c_] = Md[c_, a] + cv * Cd[c_, a] + cz * Kd[c_, a]
                LA.projected_matrix(Rphi, Xt, T0t)
            if not LA.lu_factor_small(T0t, LU, piv):
                return ST_MASS, nstep
            since = 0
        else:
            since += 1
        npass = 0
        for j in range(no):
            # 1. the measures' cotangent w_n g_n (+ C0 at the initial row)
            anyc = False
            for k in range(nm):
                cmv[k] = W[nstep] * GM[nstep, k, j] + (C0[k, j] if first else 0.0)
                if cmv[k] != 0.0:
                    anyc = True
            if anyc:
                measure_products(ma, p, z, zd, zdd, ms_type, ms_a, ms_c, cmv, frames, vw)
                npass += 1
                for k in range(d):
                    lZ[k, j] += zb[dof[k]]
                    lV[k, j] += zdb[dof[k]]
                    lA[k, j] += zddb[dof[k]]
                gq[:] = 0.0
                _field_products(pb, gsp, gq, 1.0)
                for q in range(npar):
                    GRAD[q, j] += gq[q]
            # 2. T^T mu = b by passes preconditioned with T0
            bn = 0.0
            for k in range(d):
                b[k] = lA[k, j] + cz * lZ[k, j] + cv * lV[k, j]
                bn = max(bn, abs(b[k]))
            # mu0 = T0^-T b (its error: the contraction times mu; starting from an
            # extrapolation g of the later rows' solutions costs a pass, T^T g, and leaves
            # the contraction times g's error, no smaller: measured)
            for k in range(d):
                mu[k] = b[k]
            LA.lu_solve_factored(LU, piv, mu)
            prev = np.inf
            last = bn == 0.0
            for it in range(MAX_PASSES):
                if m == 0:
                    for k in range(d):
                        v[dof[k]] = mu[k]
                else:
                    for a in range(n):
                        sy = 0.0
                        for k in range(d):
                            sy += Rphi[a, k] * mu[k]
                        v[a] = sy
                # the field terms only in the last pass (its products are the solution's)
                residual_products(ma, p, z, zd, zdd, v, vw, last or it == MAX_PASSES - 1)
                npass += 1
                if last:
                    break
                mn = 0.0
                for k in range(d):
                    dl[k] = b[k] - (zddb[dof[k]] + cv * zdb[dof[k]] + cz * zb[dof[k]])
                    mn = max(mn, abs(mu[k]))
                LA.lu_solve_factored(LU, piv, dl)
                dn = 0.0
                for k in range(d):
                    dn = max(dn, abs(dl[k]))
                # the error left after this correction, from the contraction just seen (a
                # first correction: the one of the rows before), or a correction that no
                # longer contracts (the rounding floor): the next pass is the last
                if prev < np.inf:
                    q = dn / prev
                    if dn > 1e-14 * mn:
                        qrow = min(max(q, 1e-4), 0.5)
                else:
                    q = qrow
                if q * dn <= TOL * mn or dn >= 0.5 * prev:
                    last = True
                prev = dn
                for k in range(d):
                    mu[k] += dl[k]
            # 3. lZ -= K^T mu, lV -= C^T mu, grad -= P^T mu
            for k in range(d):
                lZ[k, j] -= zb[dof[k]]
                lV[k, j] -= zdb[dof[k]]
            gq[:] = 0.0
            _field_products(pb, gsp, gq, 1.0)
            for q in range(npar):
                GRAD[q, j] -= gq[q]
            if first:
                for q in range(npar):
                    s = 0.0
                    for k in range(d):
                        s += SZ0[k, q] * lZ[k, j] + SV0[k, q] * lV[k, j]
                    GRAD[q, j] += s
            else:
                # pZ = S_Z + h S_V + h^2/4 S_A (previous step), pV = S_V + h/2 S_A
                for k in range(d):
                    a_ = lZ[k, j]
                    b_ = lV[k, j]
                    lZ[k, j] = a_
                    lV[k, j] = h * a_ + b_
                    lA[k, j] = 0.25 * h * h * a_ + 0.5 * h * b_
        passes[nstep] = npass
        RUN[nstep] = GRAD
    AR.keepalive(own)
    return OK, 0
