"""Exact step Jacobians of the penalty formulation for the generic sweeps
(:func:`workbench.sensitivities.sweeps.direct_block`,
:func:`~workbench.sensitivities.sweeps.adjoint_block`).

The differentiated discrete map is the trapezoidal rule on all ``n`` coordinates with the
penalty residual and **without** the projections of eqs 24-26 (``projection = "none"``:
the projected velocities would need the derivatives of ``P = M + h/2 C + h^2/4 K``, i.e.
second derivatives of ``Q``)::

    rows k >= 1:  r(Z, V, A, rho) = tau(z, zd, a; rho) + Phi_z^T alpha Phi = 0      (eq 17)
    row 0:        r_0 = A - a_0(Z, V, rho),  [M Phi_z^T; Phi_z 0] [a_0; lambda] = [Q; -c]

(the consistent start of :func:`workbench.integrators.trapezoidal.integrate_penalty`).
Their partial derivatives along a direction ``(dz, dzd, dp)``:

* ``dtau`` by the forward-mode tangent kernels
  (:func:`~workbench.formulations.penalty.kernels.tau_tangent`);
* the penalty term ``Phi_z^T alpha dPhi + dPhi_z^T alpha Phi``: ``dPhi`` is the level-0
  constraint tangent, and component ``j`` of ``dPhi_z^T w`` is ``w^T d(Phi_z e_j)``, the
  tangent of the level-1 constraint at the velocity ``zd = e_j`` minus that at ``zd = 0``
  (the ``Phi_t`` part): :func:`closure_hessian_term`, ``n + 1`` constraint tangents per
  direction;
* row 0: ``[M Phi_z^T; Phi_z 0] [da; dlambda] = -[dtau + dPhi_z^T lambda; dPhi_ddot]``
  with ``dPhi_ddot`` the level-2 constraint tangent at ``zdd = a_0``.

``Mbar = dr/dA`` is ``M`` (rows k >= 1) or the identity (row 0).  The measures' partials
come from :func:`workbench.kernels.measures.measures_t` along the same directions."""

from __future__ import annotations

import numpy as np
from numba import njit

from workbench.formulations.multipliers import kernels as MU
from workbench.formulations.penalty import kernels as PK
from workbench.formulations.semirecursive import matrixr as MR
from workbench.kernels import tangents as T
from workbench.kernels import tree as K
from workbench.kernels.measures import MS_ACC, MS_COORD_ACC, measures, measures_t
from workbench.kernels.status import OK, ST_NONFINITE


@njit(cache=True)
def closure_hessian_term(ma, p, t, z, dz, dp, w, ws, tw, Zj, dZj, Zd0, g):
    """``g = dPhi_z[dz, dp]^T w`` (``n``): component ``j`` is ``w^T d(Phi_z e_j + Phi_t) -
    w^T dPhi_t``, the level-1 constraint tangents at ``zd = e_j`` and at ``zd = 0`` along
    ``(dz, dp)`` (``ws`` holds the frames at ``z``; ``Zj, dZj, Zd0`` (nf x 6) are work
    arrays)."""
    n = z.shape[0]
    m = w.shape[0]
    f3, f6 = tw[0], tw[1]
    th, dr, du = f3[0], f3[1], f3[2]
    db = f6[0]
    A, r, u, bcol = ws.A, ws.r, ws.u, ws.bcol
    every = np.ones(ma.fr_parent.shape[0] + 1, dtype=np.int64)
    T.frame_positions_t(ma, p, dp, z, dz, A, r, u, th, dr, du, every)
    T.joint_columns_t(ma, r, u, dr, du, db, every)
    ej = np.zeros(n)
    zero = np.zeros(n)
    dphi = np.zeros(m)
    Zd0[:, :] = 0.0
    base = 0.0
    for j in range(-1, n):
        if j >= 0:
            ej[j] = 1.0
        K.frame_velocities(ma, ej, bcol, Zj)
        T.frame_velocities_t(ma, ej, zero, bcol, db, dZj, every)
        T.constraints_t(ma, p, dp, t, z, ej, zero, dz, zero, zero, A, r, Zj, Zd0, th, dr, dZj,
                        Zd0, 1, dphi)
        s = 0.0
        for k in range(m):
            s += w[k] * dphi[k]
        if j < 0:
            base = s
        else:
            g[j] = s - base
            ej[j] = 0.0


@njit(cache=True)
def penalty_step_jacobians(ma, p, form, t, z, zd, a, alpha, first, Gm, ms_type, ms_a, ms_c,
                           Jr, Mb, Jm, mval):
    """The step Jacobians of one output row (see the module docstring): ``Jr = [dr/dZ |
    dr/dV | dr/drho]`` (n x (2n + np)), ``Mb = dr/dA`` (n x n), ``Jm = [dm/dZ | dm/dV |
    dm/dA | dm/drho]`` (nm x (3n + np)) and the measures ``mval``; ``first``: row 0 (the
    consistent start).  Returns the status."""
    n = z.shape[0]
    m = ma.c_type.shape[0]
    npar = Gm.shape[1]
    nm = ms_type.shape[0]
    nfield = p.shape[0]
    nf = ma.fr_parent.shape[0]
    ws = MR.make_workspace(ma, n)
    tw = PK.make_tangent_workspace(ma, n)
    M = np.zeros((n, n))
    Jc = np.zeros((m, n))
    phi = np.zeros(m)
    tau = np.zeros(n)
    w = np.zeros(m)
    lam = np.zeros(m)
    if first:
        # lambda of the augmented system at the start (a = a_0 solves it)
        phid = np.zeros(m)
        cacc = np.zeros(m)
        crhs = np.zeros(m)
        tau0 = np.zeros(n)
        MU.augmented_terms(ma, p, form, t, z, zd, ws, M, Jc, phi, phid, cacc, tau0)
        MU.constraint_rhs(phi, phid, cacc, 0.0, 0.0, crhs)
        x = MU.solve_augmented(M, Jc, tau0, crhs, np.zeros((n + m, n + m)), np.zeros(n + m))
        for k in range(m):
            lam[k] = x[n + k]
    PK.dynamics_terms(ma, p, form, t, z, zd, a, ws, M, Jc, phi, tau)
    measures(ma, p, ws.A, ws.r, ws.Z, ws.Zd, z, zd, a, ms_type, ms_a, ms_c, mval)
    for k in range(m):
        w[k] = lam[k] if first else alpha * phi[k]
    Zj = np.zeros((nf, 6))
    dZj = np.zeros((nf, 6))
    Zd0 = np.zeros((nf, 6))
    dz = np.zeros(n)
    dzd = np.zeros(n)
    zero = np.zeros(n)
    dp = np.zeros(nfield)
    dtau = np.zeros(n)
    g = np.zeros(n)
    dphi = np.zeros(m)
    dmv = np.zeros(nm)
    dmA = np.zeros(nm)
    ncol = 2 * n + npar
    cols = np.zeros((n + m, ncol))
    acc_meas = False
    for k in range(nm):
        if ms_type[k] == MS_ACC or ms_type[k] == MS_COORD_ACC:
            acc_meas = True
    for col in range(ncol):
        is_v = n <= col < 2 * n
        dz[:] = 0.0
        dzd[:] = 0.0
        dp[:] = 0.0
        if col < n:
            dz[col] = 1.0
        elif is_v:
            dzd[col - n] = 1.0
        else:
            for i in range(nfield):
                dp[i] = Gm[i, col - 2 * n]
        # dtau at the state (z, zd, a); the tangents of the frames stay in tw
        PK.tau_tangent(ma, p, form, t, z, zd, a, dz, dzd, zero, dp, ws, tw, dtau)
        th, dr = tw[0][0], tw[0][1]
        dZ, dZd = tw[1][1], tw[1][2]
        measures_t(ma, p, dp, ws.A, ws.r, ws.Z, ws.Zd, th, dr, dZ, dZd, dz, dzd, zero,
                   ms_type, ms_a, ms_c, dmv, is_v and acc_meas, dmA)
        jc = col if col < 2 * n else col + n
        for k in range(nm):
            Jm[k, jc] = dmv[k]
        if is_v:
            for k in range(nm):
                Jm[k, col + n] = dmA[k] if acc_meas else 0.0
        if first:
            # the level-2 constraint along the direction (frames of tau_tangent)
            T.constraints_t(ma, p, dp, t, z, zd, a, dz, dzd, zero, ws.A, ws.r, ws.Z, ws.Zd,
                            th, dr, dZ, dZd, 2, dphi)
        else:
            T.constraints_t(ma, p, dp, t, z, zd, a, dz, dzd, zero, ws.A, ws.r, ws.Z, ws.Zd,
                            th, dr, dZ, dZd, 0, dphi)
        if is_v:
            g[:] = 0.0
        else:
            closure_hessian_term(ma, p, t, z, dz, dp, w, ws, tw, Zj, dZj, Zd0, g)
        if first:
            for i in range(n):
                cols[i, col] = -(dtau[i] + g[i])
            for k in range(m):
                cols[n + k, col] = -dphi[k]
        else:
            for i in range(n):
                s = dtau[i] + g[i]
                for k in range(m):
                    s += Jc[k, i] * alpha * dphi[k]
                Jr[i, col] = s
    if first:
        # r_0 = A - a_0: Jr = -da_0/d(Z, V, rho), Mb = I
        S = np.zeros((n + m, n + m))
        S[:n, :n] = M
        S[:n, n:] = Jc.T
        S[n:, :n] = Jc
        X = np.linalg.lstsq(S, cols, rcond=1e-13)[0]
        for i in range(n):
            for c in range(ncol):
                Jr[i, c] = -X[i, c]
        Mb[:, :] = 0.0
        for i in range(n):
            Mb[i, i] = 1.0
        # the measures read the accelerations of row 0 directly: dm/dA stays as it is
    else:
        Mb[:, :] = M
    if not (np.isfinite(Jr).all() and np.isfinite(Jm).all()):
        return ST_NONFINITE
    return OK


@njit(cache=True)
def trajectory_step_jacobians(ma, p, form, TT, ZZ, ZD, AA, alpha, Gm, ms_type, ms_a, ms_c,
                              blk):
    """:func:`penalty_step_jacobians` of every row into the block ``blk = (JR, MB, JM, MVb,
    STb)`` of the generic sweeps (one block over the whole trajectory)."""
    JR, MB, JM, MVb, STb = blk
    for k in range(TT.shape[0]):
        STb[k] = penalty_step_jacobians(ma, p, form, TT[k], ZZ[k], ZD[k], AA[k], alpha, k == 0,
                                        Gm, ms_type, ms_a, ms_c, JR[k], MB[k], JM[k], MVb[k])
        if STb[k] != OK:
            break


@njit(cache=True)
def initial_tangents(ma, p, t, z, zd, Gm, SZi, SVi, SZ, SV):
    """Sensitivities of the full initial state ``(z_0, zd_0)`` (``SZ``, ``SV``: n x np)
    from those of the degrees of freedom (``SZi``, ``SVi``: d x np; the DOF are joint
    coordinates): the position and velocity problems of the assembly differentiated
    along each parameter's field direction ``dp``::

        Theta_z dz_0  = [-Phi_p dp; SZi]                     (level 0)
        Theta_z dzd_0 = [-d(Phi_z zd_0 + Phi_t)[dz_0, dp]; SVi] (level 1)

    with ``Theta_z = [Phi_z; B]`` (least squares: redundant closures allowed).  Returns
    False when ``Theta_z`` is rank deficient beyond the redundancy of the closures."""
    n = z.shape[0]
    m = ma.c_type.shape[0]
    d = ma.dof_i.shape[0]
    npar = Gm.shape[1]
    nf = ma.fr_parent.shape[0]
    ws = MR.make_workspace(ma, n)
    A, r, u, bcol, Z, Zd = ws.A, ws.r, ws.u, ws.bcol, ws.Z, ws.Zd
    K.frame_positions(ma, p, z, A, r, u)
    K.joint_columns(ma, r, u, bcol)
    K.frame_velocities(ma, zd, bcol, Z)
    Th = np.zeros((m + d, n))
    Jc = np.zeros((m, n))
    K.constraint_jacobian(ma, p, A, r, bcol, n, Jc)
    Th[:m] = Jc
    for k in range(d):
        Th[m + k, ma.dof_i[k, 0]] = 1.0
    th = np.zeros((nf, 3))
    dr = np.zeros((nf, 3))
    du = np.zeros((nf, 3))
    db = np.zeros((nf, 6))
    dZ = np.zeros((nf, 6))
    dZd = np.zeros((nf, 6))
    zero = np.zeros(n)
    dz = np.zeros(n)
    dphi = np.zeros(m)
    rhs = np.zeros(m + d)
    every = np.ones(nf + 1, dtype=np.int64)
    for j in range(npar):
        dp = Gm[:, j].copy()
        for lev in range(2):
            T.frame_positions_t(ma, p, dp, z, dz if lev == 1 else zero, A, r, u, th, dr, du,
                                every)
            T.joint_columns_t(ma, r, u, dr, du, db, every)
            T.frame_velocities_t(ma, zd, zero, bcol, db, dZ, every)
            T.constraints_t(ma, p, dp, t, z, zd, zero, dz if lev == 1 else zero, zero, zero,
                            A, r, Z, Zd, th, dr, dZ, dZd, lev, dphi)
            for k in range(m):
                rhs[k] = -dphi[k]
            for k in range(d):
                rhs[m + k] = SZi[k, j] if lev == 0 else SVi[k, j]
            x = np.linalg.lstsq(Th, rhs, rcond=1e-12)[0]
            for k in range(n):
                if lev == 0:
                    SZ[k, j] = x[k]
                    dz[k] = x[k]
                else:
                    SV[k, j] = x[k]
    return np.isfinite(SZ).all() and np.isfinite(SV).all()
