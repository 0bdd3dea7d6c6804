"""Direct and adjoint sweeps of the discrete trapezoidal trajectory (seed 001 §3), generic
over formulations.

A formulation provides, at every converged step ``n``, the exact partial derivatives of its
step residual ``r_n(Z_n, V_n, A_n, rho) = 0`` (``K = dr/dZ``, ``C = dr/dV``,
``Mbar = dr/dA``, ``P = dr/drho``) and of the objective measures, by blocks of rows
(semi-recursive: :func:`workbench.formulations.semirecursive.step_jacobians.step_jacobian_block`;
natural coordinates: :func:`workbench.formulations.natural.step_jacobians.step_jacobians_g`).
The trapezoidal coupling

    Z_{n+1} = Z_n + h V_n + h^2/4 (A_n + A_{n+1}),  V_{n+1} = V_n + h/2 (A_n + A_{n+1})

is differentiated here once, for every formulation: :func:`direct_block` propagates the
sensitivities forward (the tangent linear model, eq 48, integrated by the same rule) and
:func:`adjoint_block` runs backward either the exact transpose of that recursion
(``variant=0``, discrete adjoint) or the seed's continuous adjoint ODE (eqs 68-69)
discretised by the trapezoidal rule (``variant=1``).  ``direct_sweep``/``adjoint_sweep``
(semi-recursive) and ``direct_sweep_g``/``adjoint_sweep_g`` (natural coordinates) pair each
block of step Jacobians with these two recursions.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from workbench.errors import ModelError, OptionError
from workbench.formulations.natural import partition as PT
from workbench.formulations.natural import step_jacobians as GS
from workbench.formulations.natural.build import global_model
from workbench.formulations.natural.step_jacobians import step_jacobians_w, sweep_workspace_g
from workbench.formulations.penalty import step_jacobians as PJ
from workbench.formulations.semirecursive.step_jacobians import (blocks_of, make_block,
                                                                 measure_history, measures_stored,
                                                                 step_jacobian_block)
from workbench.integrators.trapezoidal import iteration_matrix
from workbench.kernels import layout as AR
from workbench.kernels.linalg import lu_solve_inplace, lu_solve_small
from workbench.kernels.status import OK, ST_MASS


@njit(cache=True)
def jacobian_blocks(Jr, Jm, d):
    """Contiguous copies of the blocks of the step Jacobians: ``K, C, P`` of ``Jr`` and
    ``dm/dZ, dm/dV, dm/dA, dm/drho`` of ``Jm``."""
    return (np.ascontiguousarray(Jr[:, 0:d]), np.ascontiguousarray(Jr[:, d:2 * d]),
            np.ascontiguousarray(Jr[:, 2 * d:]), np.ascontiguousarray(Jm[:, 0:d]),
            np.ascontiguousarray(Jm[:, d:2 * d]), np.ascontiguousarray(Jm[:, 2 * d:3 * d]),
            np.ascontiguousarray(Jm[:, 3 * d:]))


def direct_sweep(ma, p, form, h, TT, ZZ, ZI, ZDI, AA, KS, Gm, pkin, pskip, zskip, ms_type, ms_a,
                 ms_c, SZ0, SV0, MV, DM, SA_out, nthreads=1, ready=None):
    """Discrete direct method (tangent linear model of the trapezoidal steps).

    The step Jacobians come by blocks of rows from :func:`step_jacobian_block` (``nthreads``
    in parallel); :func:`direct_block` runs the recursion over each block.  ``ready(k1)``
    (pipelined with the simulation that is still writing the rows): waits until rows
    ``< k1`` are final and returns the threads to use for them.  Fills
    ``MV[n]`` (measures) and ``DM[n]`` (nm x np, their total derivatives) for every output
    step and ``SA_out[n]`` (d x np, sensitivities of ``zdd^i``).  Returns (status, step)."""
    N, d, npar, nm = TT.shape[0], ZI.shape[1], Gm.shape[1], ms_type.shape[0]
    blk = make_block(N, d, npar, nm)
    # sensitivities of (Z, V, A) of the last row processed
    SS = np.zeros((3, d, npar))
    SS[0] = SZ0
    SS[1] = SV0
    for k0, k1 in blocks_of(N, blk[0].shape[0]):
        nth = nthreads if ready is None else ready(k1)
        step_jacobian_block(ma, p, form, TT, ZZ, ZI, ZDI, AA, KS, Gm, pkin, pskip, zskip,
                            ms_type, ms_a, ms_c, k0, k1, nth, blk)
        st, k = direct_block(h, k0, k1, blk, SS, MV, DM, SA_out)
        if st != OK:
            return st, k
    return OK, N


@njit(cache=True)
def direct_block(h, k0, k1, blk, SS, MV, DM, SA_out):
    """The direct recursion over rows ``k0 .. k1 - 1`` (Jacobians in ``blk``); ``SS`` holds
    the sensitivities ``S_Z, S_V, S_A`` of the previous row (at row 0: the initial ones)
    and is updated.  Returns (status, row)."""
    JR, MB, JM, MVb, STb = AR.borrow(blk)
    d = JR.shape[1]
    npar = JR.shape[2] - 2 * d
    nm = JM.shape[1]
    SS, MV, DM, SA_out = AR.borrow((SS, MV, DM, SA_out))
    SZ, SV, SA = SS[0], SS[1], SS[2]
    own = (np.zeros((2, d, npar)), np.zeros((2, d, d)))
    b2, bd = AR.borrow(own)
    pZ, pV, Tm, Mw = b2[0], b2[1], bd[0], bd[1]
    for nstep in range(k0, k1):
        i = nstep - k0
        if STb[i] != OK:
            return STb[i], nstep
        # Jr = [K | C | P], Jm = [dm/dZ | dm/dV | dm/dA | dm/drho]
        Jr, Mb, Jm = JR[i], MB[i], JM[i]
        MV[nstep] = MVb[i]
        if nstep == 0:
            cz = 0.0
            cv = 0.0
            pZ[:, :] = SZ
            pV[:, :] = SV
        else:
            cz = 0.25 * h * h
            cv = 0.5 * h
            for k in range(d):
                for j in range(npar):
                    pZ[k, j] = SZ[k, j] + h * SV[k, j] + cz * SA[k, j]
                    pV[k, j] = SV[k, j] + cv * SA[k, j]
        # T S_A = -(K pZ + C pV + P),  T = Mbar + h/2 C + h^2/4 K  (Mbar at the first row)
        iteration_matrix(Mb, Jr[:, d:2 * d], Jr[:, :d], cv, cz, Tm)
        for k in range(d):
            for j in range(npar):
                s = Jr[k, 2 * d + j]
                for i2 in range(d):
                    s += Jr[k, i2] * pZ[i2, j] + Jr[k, d + i2] * pV[i2, j]
                SA[k, j] = -s
        if not lu_solve_inplace(Tm, SA, Mw) and d > 0:
            return ST_MASS, nstep
        for k in range(d):
            for j in range(npar):
                SZ[k, j] = pZ[k, j] + cz * SA[k, j]
                SV[k, j] = pV[k, j] + cv * SA[k, j]
        SA_out[nstep] = SA
        Dn = DM[nstep]
        for k in range(nm):
            for j in range(npar):
                s = Jm[k, 3 * d + j]
                for i2 in range(d):
                    s += Jm[k, i2] * SZ[i2, j] + Jm[k, d + i2] * SV[i2, j] \
                        + Jm[k, 2 * d + i2] * SA[i2, j]
                Dn[k, j] = s
    AR.keepalive(own)
    return OK, k1


def adjoint_sweep(ma, p, form, h, variant, TT, ZZ, ZI, ZDI, AA, KS, Gm, pkin, pskip, zskip, ms_type,
                  ms_a, ms_c, SZ0, SV0, GM, C0, W, GRAD, RUN, row0, nglob, carry, nthreads=1,
                  partials=None):
    """Backward sweep of the adjoint method for ``no`` objectives at once.

    ``GM[n]`` (nm x no): partial derivatives of the integrands with respect to the measures
    at step ``n``; ``W[n]``: quadrature weights (``h/2, h, ..., h/2``); ``C0`` (nm x no): an
    extra cotangent on the measures at step 0 (objectives relative to initial values).
    ``variant`` 0: exact transpose of :func:`direct_sweep` (discrete adjoint);
    1: the seed's adjoint ODE (eq 68) integrated backward by the trapezoidal rule with the
    gradient quadrature of eq 69.  ``GRAD`` (np x no) accumulates the gradient (zero it
    before the first call), ``RUN[n]`` the part accumulated from ``t_F`` back to step ``n``.
    The step Jacobians come by blocks of rows from :func:`step_jacobian_block` (``nthreads``
    in parallel, the last block first); :func:`adjoint_block` runs the recursion (which
    may also run over the Jacobians of the whole trajectory at once,
    :func:`trajectory_jacobians`).

    The arrays may hold one segment of the trajectory (checkpointing): its rows are the
    global rows ``row0 .. row0 + N - 1`` of ``nglob``; ``carry`` (7 x d x no) holds the
    adjoint state between segments (zero before the last segment), updated in place.
    ``partials(k0, k1, MVb, STb)``, if given, is called with each block's measures (which
    the step Jacobians evaluate anyway) before its recursion and fills ``GM[k0:k1]`` (and
    ``C0`` by the block of row 0): the measures need no pass of their own.
    Returns (status, step).
    """
    N, d, npar, nm = TT.shape[0], ZI.shape[1], Gm.shape[1], ms_type.shape[0]
    blk = make_block(N, d, npar, nm)
    for k0, k1 in blocks_of(N, blk[0].shape[0], backward=True):
        step_jacobian_block(ma, p, form, TT, ZZ, ZI, ZDI, AA, KS, Gm, pkin, pskip, zskip,
                            ms_type, ms_a, ms_c, k0, k1, nthreads, blk)
        if partials is not None:
            partials(k0, k1, blk[3][:k1 - k0], blk[4][:k1 - k0])
        st, k = adjoint_block(h, variant, k0, k1, blk, SZ0, SV0, GM, C0, W, GRAD, RUN,
                               row0, nglob, carry)
        if st != OK:
            return st, k
    return OK, 0


@njit(cache=True)
def adjoint_block(h, variant, k0, k1, blk, SZ0, SV0, GM, C0, W, GRAD, RUN, row0, nglob,
                   carry):
    """The adjoint recursion over rows ``k1 - 1`` down to ``k0`` (Jacobians in ``blk``);
    ``carry`` holds the adjoint state of the later row (see :func:`adjoint_sweep`) and is
    updated.  Returns (status, row)."""
    JR, MB, JM, MVb, STb = AR.borrow(blk)
    d = JR.shape[1]
    npar = JR.shape[2] - 2 * d
    nm = JM.shape[1]
    no = GM.shape[2]
    SZ0, SV0, GM, C0, W, GRAD, RUN, carry = AR.borrow((SZ0, SV0, GM, C0, W, GRAD, RUN, carry))
    own = (np.zeros((nm, no)), np.zeros((2, d, d)), np.zeros((3, d, no)))
    cmv, bd, bo = AR.borrow(own)
    TmT, Mw, muS, lpZ, lpV = bd[0], bd[1], bo[0], bo[1], bo[2]
    # discrete: cotangents of (Z, V, A) of the step being processed;
    # continuous: mu = (muZ, muV) and its rate at the later step
    lZ, lV, lA, muZ, muV, dmuZ1, dmuV1 = (carry[0], carry[1], carry[2], carry[3], carry[4],
                                          carry[5], carry[6])
    for nstep in range(k1 - 1, k0 - 1, -1):
        i = nstep - k0
        if STb[i] != OK:
            return STb[i], nstep
        Jr, Mb, Jm = JR[i], MB[i], JM[i]
        first = row0 + nstep == 0
        last = row0 + nstep == nglob - 1
        g = GM[nstep]
        if variant == 0:
            st = _adjoint_step_discrete(h, d, npar, nm, no, first, Jr, Mb, Jm, g, W[nstep],
                                        C0, SZ0, SV0, cmv, TmT, Mw, muS, lpZ, lpV, lZ, lV,
                                        lA, GRAD)
        else:
            st = _adjoint_step_continuous(h, d, npar, nm, no, first, last, Jr, Mb, Jm, g,
                                          W[nstep], C0, SZ0, SV0, muZ, muV, dmuZ1, dmuV1,
                                          GRAD)
        if st != OK:
            return st, nstep
        RUN[nstep] = GRAD
    AR.keepalive(own)
    return OK, k0


@njit(cache=True)
def _adjoint_step_discrete(h, d, npar, nm, no, first, Jr, Mb, Jm, g, wn, C0, SZ0, SV0, cmv,
                           TmT, Mw, muS, lpZ, lpV, lZ, lV, lA, GRAD):
    """One step of the discrete adjoint (the transpose of one step of
    :func:`direct_sweep`): updates the cotangents ``lZ, lV, lA`` (to those of the previous
    step) and ``GRAD``; returns a status."""
    # cotangent of the measures at this step: W g (+ C0 at the initial row)
    for k in range(nm):
        for j in range(no):
            cmv[k, j] = wn * g[k, j] + (C0[k, j] if first else 0.0)
    for j in range(no):
        for i in range(d):
            sZ = 0.0
            sV = 0.0
            sA = 0.0
            for k in range(nm):
                sZ += Jm[k, i] * cmv[k, j]
                sV += Jm[k, d + i] * cmv[k, j]
                sA += Jm[k, 2 * d + i] * cmv[k, j]
            lZ[i, j] += sZ
            lV[i, j] += sV
            lA[i, j] += sA
        for q in range(npar):
            s = 0.0
            for k in range(nm):
                s += Jm[k, 3 * d + q] * cmv[k, j]
            GRAD[q, j] += s
    # through S_A = -T^-1 (K pZ + C pV + P), S_Z = pZ + cz S_A, S_V = pV + cv S_A
    if first:
        cz = 0.0
        cv = 0.0
    else:
        cz = 0.25 * h * h
        cv = 0.5 * h
    iteration_matrix(Mb.T, Jr[:, d:2 * d].T, Jr[:, :d].T, cv, cz, TmT)
    for k in range(d):
        for j in range(no):
            muS[k, j] = lA[k, j] + cz * lZ[k, j] + cv * lV[k, j]
    if not lu_solve_inplace(TmT, muS, Mw) and d > 0:
        return ST_MASS
    for j in range(no):
        for i in range(d):
            sZ = lZ[i, j]
            sV = lV[i, j]
            for k in range(d):
                sZ -= Jr[k, i] * muS[k, j]
                sV -= Jr[k, d + i] * muS[k, j]
            lpZ[i, j] = sZ
            lpV[i, j] = sV
        for q in range(npar):
            s = 0.0
            for k in range(d):
                s += Jr[k, 2 * d + q] * muS[k, j]
            GRAD[q, j] -= s
    if first:
        GRAD += SZ0.T @ lpZ + SV0.T @ lpV
    else:
        # pZ = S_Z + h S_V + h^2/4 S_A (previous step), pV = S_V + h/2 S_A
        for i in range(d):
            for j in range(no):
                lZ[i, j] = lpZ[i, j]
                lV[i, j] = h * lpZ[i, j] + lpV[i, j]
                lA[i, j] = 0.25 * h * h * lpZ[i, j] + 0.5 * h * lpV[i, j]
    return OK


@njit(cache=True)
def _adjoint_step_continuous(h, d, npar, nm, no, first, last, Jr, Mb, Jm, g, wn, C0, SZ0,
                             SV0, muZ, muV, dmuZ1, dmuV1, GRAD):
    """One backward trapezoidal step of the seed's continuous adjoint (eqs 68-69): updates
    ``mu = (muZ, muV)``, its rate and ``GRAD``; returns a status."""
    Kz, Cz, P, JmZ, JmV, JmA, JmP = jacobian_blocks(Jr, Jm, d)
    gc = C0 if first else np.zeros((nm, no))
    # y = (Z, V); f_y = [[0, I], [-Mb^-1 K, -Mb^-1 C]], f_rho = [0; -Mb^-1 P]
    gZ = JmZ.T @ g
    gV = JmV.T @ g
    gA = JmA.T @ g
    grho = JmP.T @ g
    MbT = np.ascontiguousarray(Mb.T)
    # the continuous adjoint at this step: (I - h/2 f_y^T) mu_n = rhs
    if last:
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
        x, ok = lu_solve_small(MbT, e)
        if not ok and d > 0:
            return ST_MASS
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
        x, ok = lu_solve_small(Sys, rhs)
        if not ok and d > 0:
            return ST_MASS
        for k in range(d):
            muZ[k, j] = x[k]
            muV[k, j] = x[d + k]
    Xm = Minv @ (muV + gA)
    dmuZ1[:, :] = Kz.T @ Xm - gZ
    dmuV1[:, :] = -muZ + Cz.T @ Xm - gV
    # gradient integrand f_rho^T (mu + g_ydot^T) + g_rho^T = -P^T Mb^-T (muV + gA) + grho
    GRAD += wn * (grho - P.T @ Xm)
    if first:
        GRAD += SZ0.T @ muZ + SV0.T @ muV
        # measures relative to their initial value: cotangent C0 on m_0
        if no > 0:
            # dm0/drho = JmZ SZ0 + JmV SV0 + JmA SA0 + Jm_rho,
            # SA0 = -Mb^-1 (K SZ0 + C SV0 + P)
            SA0 = np.zeros((d, npar))
            rhs0 = -(Kz @ SZ0 + Cz @ SV0 + P)
            for j in range(npar):
                x, ok = lu_solve_small(Mb, rhs0[:, j].copy())
                for k in range(d):
                    SA0[k, j] = x[k]
            dm0 = JmZ @ SZ0 + JmV @ SV0 + JmA @ SA0 + JmP
            GRAD += dm0.T @ gc
    return OK


@njit(cache=True)
def _one_row_block(d, npar, nm):
    """A Jacobian block of one row (the layout of
    :func:`workbench.formulations.semirecursive.step_jacobians.make_block`)."""
    return (np.zeros((1, d, 2 * d + npar)), np.zeros((1, d, d)),
            np.zeros((1, nm, 3 * d + npar)), np.zeros((1, nm)), np.zeros(1, dtype=np.int64))


@njit(cache=True)
def direct_sweep_g(ga, ma, p, AREF, h, TT, ZZ, ZI, ZDI, AA, Gm, ms_type, ms_a, ms_c, SZ0, SV0,
                 MV, DM, SA_out):
    """Discrete direct method (tangent linear model of the trapezoidal steps): the step
    Jacobians of the global formulation (:func:`step_jacobians_w`, its work arrays made once) through the recursion of
    the semi-recursive sweeps (:func:`workbench.sensitivities.sweeps.direct_block`, one row at a
    time).

    Fills ``MV[n]`` (measures) and ``DM[n]`` (nm x np, their total derivatives) for every
    output step and ``SA_out[n]`` (d x np, sensitivities of ``zdd^i``).  Returns
    (status, step)."""
    N = TT.shape[0]
    d = ZI.shape[1]
    npar = Gm.shape[1]
    nm = ms_type.shape[0]
    blk = _one_row_block(d, npar, nm)
    SW = sweep_workspace_g(ga, ma, p, Gm, d, nm)
    SS = np.zeros((3, d, npar))
    SS[0] = SZ0
    SS[1] = SV0
    for nstep in range(N):
        st = step_jacobians_w(ga, ma, p, TT[nstep], ZI[nstep], ZDI[nstep], AA[nstep],
                              ZZ[nstep], AREF[nstep], Gm, ms_type, ms_a, ms_c, blk[0][0],
                              blk[1][0], blk[2][0], blk[3][0], SW)
        if st != OK:
            return st, nstep
        st, k = direct_block(h, nstep, nstep + 1, blk, SS, MV, DM, SA_out)
        if st != OK:
            return st, k
    return OK, N


@njit(cache=True)
def adjoint_sweep_g(ga, ma, p, AREF, h, variant, TT, ZZ, ZI, ZDI, AA, Gm, ms_type, ms_a, ms_c,
                  SZ0, SV0, GM, C0, W, GRAD, RUN):
    """Backward sweep of the adjoint method for ``no`` objectives at once: the step
    Jacobians of the global formulation through the recursion of the semi-recursive
    sweeps (:func:`workbench.sensitivities.sweeps.adjoint_block`, one row at a time; ``variant`` 0
    discrete, 1 the
    seed's continuous adjoint).  ``GRAD`` (np x no) receives the gradient, ``RUN[n]`` the
    part accumulated from ``t_F`` back to step ``n``.  Returns (status, step).
    """
    N = TT.shape[0]
    d = ZI.shape[1]
    npar = Gm.shape[1]
    nm = ms_type.shape[0]
    no = GM.shape[2]
    blk = _one_row_block(d, npar, nm)
    SW = sweep_workspace_g(ga, ma, p, Gm, d, nm)
    carry = np.zeros((7, d, no))
    GRAD[:, :] = 0.0
    for nstep in range(N - 1, -1, -1):
        st = step_jacobians_w(ga, ma, p, TT[nstep], ZI[nstep], ZDI[nstep], AA[nstep],
                              ZZ[nstep], AREF[nstep], Gm, ms_type, ms_a, ms_c, blk[0][0],
                              blk[1][0], blk[2][0], blk[3][0], SW)
        if st != OK:
            return st, nstep
        st, k = adjoint_block(h, variant, nstep, nstep + 1, blk, SZ0, SV0, GM, C0, W, GRAD,
                                RUN, 0, N, carry)
        if st != OK:
            return st, k
    return OK, 0


def _natural_coordinates(sim):
    nat = getattr(sim, "natural", None)
    if nat is None:
        raise ModelError("the simulation result has no natural coordinates (simulate with "
                         "formulation='global')")
    return nat


def natural_sweeps(cm, sim):
    """Functions with the signatures of :func:`direct_sweep`, :func:`adjoint_sweep` and
    ``measure_history`` that run the global versions on ``sim``'s natural coordinates."""
    ga = global_model(cm)[0]
    Qh, AREF = _natural_coordinates(sim)

    # the semi-recursive sweeps also take the kept states KS (unused here) and (pkin,
    # pskip, zskip) after Gm (kinematic / reverse-mode parameter masks, cyclic DOF) and
    # the adjoint a segment (row0, nglob, carry) for checkpointing; the global sweeps
    # compute every column forward over the whole trajectory, on one thread
    def direct(ma, p, form, h, TT, ZZ, ZI, ZDI, AA, KS, Gm, pkin, pskip, zskip, *rest,
               nthreads=1):
        return direct_sweep_g(ga, ma, p, AREF, h, TT, Qh, ZI, ZDI, AA, Gm, *rest)

    def adjoint(ma, p, form, h, variant, TT, ZZ, ZI, ZDI, AA, KS, Gm, pkin, pskip, zskip,
                *rest, nthreads=1):
        *rest, row0, nglob, carry = rest
        if row0 != 0 or nglob != TT.shape[0]:
            raise ValueError("the global formulation has no checkpointed adjoint")
        return adjoint_sweep_g(ga, ma, p, AREF, h, variant, TT, Qh, ZI, ZDI, AA, Gm, *rest)

    def history(ma, p, form, TT, ZZ, *rest):
        return GS.measure_history_g(ga, ma, p, AREF, TT, Qh, *rest)

    return direct, adjoint, history


def partitioned_sweeps(cm, sim):
    """The natural-coordinate sweeps on the selection rows of a ``"global-partitioned"``
    run (:mod:`workbench.formulations.natural.partition`): the independent natural
    coordinates are one more choice of degrees of freedom, with ``h_q = E^i`` constant, so
    the step Jacobians of :func:`step_jacobians_g` serve unchanged; the initial
    sensitivities of the model's degrees of freedom are mapped to those of ``q^i``
    (:func:`~workbench.formulations.natural.partition.initial_tangents`).  The measures
    are evaluated segment by segment; a gradient of a run that re-selected its coordinates
    is refused (OptionError naming the time: mapping the sensitivities across a change of
    the integrated coordinates, and its transpose in the adjoint, is not implemented)."""
    Qh, AREF = _natural_coordinates(sim)
    segments = PT.segment_arrays(cm, sim)

    def start(Gm, SZ0, SV0):
        if len(segments) > 1:
            c = sim.partition_changes[0]
            raise OptionError(
                f"model {cm.name!r}: the 'global-partitioned' run re-selected its independent "
                f"natural coordinates at t = {c['time']:.6g} s ({c['from']} -> {c['to']}); "
                "the sweeps do not carry the sensitivities across a change of the integrated "
                "coordinates: choose a shorter run, a threshold the run survives without "
                "the change (partition_threshold), or formulation 'global' or 'sr-com'")
        return PT.sweep_start(cm, sim, Gm, SZ0, SV0)

    def direct(ma, p, form, h, TT, ZZ, ZI, ZDI, AA, KS, Gm, pkin, pskip, zskip, ms_type, ms_a,
               ms_c, SZ0, SV0, *rest, nthreads=1):
        SZ0, SV0 = start(Gm, SZ0, SV0)
        return direct_sweep_g(segments[0][2], ma, p, AREF, h, TT, Qh, ZI, ZDI, AA, Gm,
                              ms_type, ms_a, ms_c, SZ0, SV0, *rest)

    def adjoint(ma, p, form, h, variant, TT, ZZ, ZI, ZDI, AA, KS, Gm, pkin, pskip, zskip,
                ms_type, ms_a, ms_c, SZ0, SV0, *rest, nthreads=1):
        *rest, row0, nglob, carry = rest
        if row0 != 0 or nglob != TT.shape[0]:
            raise ValueError("the global-partitioned formulation has no checkpointed adjoint")
        SZ0, SV0 = start(Gm, SZ0, SV0)
        return adjoint_sweep_g(segments[0][2], ma, p, AREF, h, variant, TT, Qh, ZI, ZDI, AA,
                               Gm, ms_type, ms_a, ms_c, SZ0, SV0, *rest)

    def history(ma, p, form, TT, ZZ, ZI, ZDI, AA, ms_type, ms_a, ms_c, MV):
        for k0, k1, gp in segments:
            r = slice(k0, k1)
            st, k = GS.measure_history_g(gp, ma, p, AREF[r], TT[r], Qh[r], ZI[r], ZDI[r],
                                         AA[r], ms_type, ms_a, ms_c, MV[r])
            if st != OK:
                return st, k0 + k
        return OK, TT.shape[0]

    return direct, adjoint, history


def penalty_sweeps(cm, sim):
    """The generic recursions on the penalty formulation's rows (all ``n`` coordinates):
    the step Jacobians of every row at once
    (:func:`workbench.formulations.penalty.step_jacobians.trajectory_step_jacobians`),
    then :func:`direct_block` / :func:`adjoint_block` over the whole trajectory.  The
    differentiated map is the rule without projections (the run must have
    ``projection = "none"``, which :func:`workbench.sensitivities.driver.sensitivity`
    sets); the initial sensitivities of all coordinates come from the differentiated
    assembly (:func:`workbench.formulations.penalty.step_jacobians.initial_tangents`)."""
    pen = getattr(sim, "penalty", None)
    if pen is None or pen.get("projection") != "none":
        raise OptionError("penalty gradients differentiate the rule without the projections "
                          "of eqs 24-26: simulate with penalty={'projection': 'none'}")
    alpha = float(pen["alpha"])
    n = cm.n
    Z, ZD, ZDD = (np.ascontiguousarray(a) for a in (sim.z, sim.zd, sim.zdd))

    def blocks(ma, p, form, TT, Gm, ms_type, ms_a, ms_c):
        N, npar, nm = TT.shape[0], Gm.shape[1], ms_type.shape[0]
        blk = (np.zeros((N, n, 2 * n + npar)), np.zeros((N, n, n)),
               np.zeros((N, nm, 3 * n + npar)), np.zeros((N, nm)),
               np.zeros(N, dtype=np.int64))
        PJ.trajectory_step_jacobians(ma, p, form, TT, Z, ZD, ZDD, alpha, Gm, ms_type, ms_a,
                                     ms_c, blk)
        return blk

    def start(ma, p, TT, Gm, SZ0, SV0):
        npar = Gm.shape[1]
        SZ, SV = np.zeros((n, npar)), np.zeros((n, npar))
        if not PJ.initial_tangents(ma, p, TT[0], Z[0], ZD[0], Gm, SZ0, SV0, SZ, SV):
            raise ModelError(f"model {cm.name!r}: the initial sensitivities of the full "
                             "coordinates are not finite (singular initial assembly)")
        return SZ, SV

    def direct(ma, p, form, h, TT, ZZ, ZI, ZDI, AA, KS, Gm, pkin, pskip, zskip, ms_type, ms_a,
               ms_c, SZ0, SV0, MV, DM, SA_out, nthreads=1):
        SZ, SV = start(ma, p, TT, Gm, SZ0, SV0)
        blk = blocks(ma, p, form, TT, Gm, ms_type, ms_a, ms_c)
        SS = np.zeros((3, n, SZ.shape[1]))
        SS[0] = SZ
        SS[1] = SV
        return direct_block(h, 0, TT.shape[0], blk, SS, MV, DM,
                            np.zeros((TT.shape[0], n, SZ.shape[1])))

    def adjoint(ma, p, form, h, variant, TT, ZZ, ZI, ZDI, AA, KS, Gm, pkin, pskip, zskip,
                ms_type, ms_a, ms_c, SZ0, SV0, GM, C0, W, GRAD, RUN, row0, nglob, carry,
                nthreads=1, partials=None):
        if row0 != 0 or nglob != TT.shape[0]:
            raise ValueError("the penalty formulation has no checkpointed adjoint")
        SZ, SV = start(ma, p, TT, Gm, SZ0, SV0)
        blk = blocks(ma, p, form, TT, Gm, ms_type, ms_a, ms_c)
        own = np.zeros((7, n, GM.shape[2]))
        return adjoint_block(h, variant, 0, TT.shape[0], blk, SZ, SV, GM, C0, W, GRAD, RUN, 0,
                             TT.shape[0], own)

    def history(ma, p, form, TT, ZZ, ZI, ZDI, AA, ms_type, ms_a, ms_c, MV):
        measures_stored(ma, p, Z, ZD, ZDD, ms_type, ms_a, ms_c, MV)
        return OK, TT.shape[0]

    return direct, adjoint, history


def semirecursive_sweeps(cm, sim):
    """The semi-recursive sweep kernels (``cm`` and ``sim`` are not needed to choose them)."""
    return direct_sweep, adjoint_sweep, measure_history


#: the sweep kernels of each formulation family (:attr:`Formulation.family`)
#: ``"rcr"`` (seed 004): its trapezoidal steps solve ``a = f(z^i(a), zd^i(a))`` with the RCR
#: accelerations ``f``, and ``R^T tau = Mbar (a - f)``: the discrete solution of the
#: semi-recursive rule on the same independent coordinates, whose sweeps (step Jacobians
#: of ``R^T tau`` at the converged states, SR-II terms) differentiate it exactly
FAMILY_SWEEPS = {"semirecursive": semirecursive_sweeps, "natural": natural_sweeps,
                 "partitioned": partitioned_sweeps, "penalty": penalty_sweeps,
                 "rcr": semirecursive_sweeps}
