"""O(n) forward dynamics of the open kinematic tree: the articulated-body recursion of
seed 004 (Critchley and Anderson, eqs 7-22, Kane form), ``zdd = M^-1 Q`` without forming
``M``.

The seed writes the recursion with spatial vectors referred to each body's centre of mass
(angular part first) and shift operators ``S^k = S(c_k - c_p[k])`` between them.  Here every
spatial quantity is referred to the **global origin** (SR-II, linear part first), the
quantities the semi-recursive kernels of :mod:`workbench.kernels.tree` already compute:

* frame twists ``Z_f = [v_O; omega]`` and joint columns ``b_f`` (the seed's partial velocity
  ``P_k^k``, :func:`~workbench.kernels.tree.joint_columns`: revolute ``[r x u; u]``,
  prismatic ``[u; 0]``);
* body inertias about the origin ``Mb`` (the seed's ``I^k`` shifted to the origin,
  :func:`~workbench.kernels.tree.body_origin_inertia`);
* the velocity-product accelerations (the seed's ``A_t``, eq 2) as the frame accelerations
  ``Zd0`` at ``zdd = 0`` (:func:`~workbench.kernels.tree.frame_accelerations`, material
  convention).

Referred to one point, every shift ``S`` of the seed is the identity (the lever arms live
in ``b_f`` and ``Mb``), and eqs 10-22 become Featherstone's ABA with one scalar pivot per
coordinate (every frame has one coordinate or none).  With ``Y_f = Zd_f - Zd0_f`` (the part
of the frame acceleration explicit in ``zdd``, the seed's ``A-hat``, eq 4:
``Y_f = Y_p + b_f zdd_f``) the body residual is ``F_f = Mb_f Y_f + h_f``,
``h_f = Mb_f Zd0_f + [m w x (w x g); w x (Jbar w)] - [f; n_O]`` (:func:`body_terms`; the
seed's ``-F^k``).  Then, from the leaves inwards (:func:`articulated_inertias`,
:func:`articulated_bias`)::

    IA_f = Mb_f + sum_c (IA_c - U_c U_c^T / D_c)              (eq 20, T^c of eq 22)
    pA_f = h_f  + sum_c (pA_c + U_c (Q_c - b_c^T pA_c) / D_c)   (eq 21)
    U_c = IA_c b_c,  D_c = b_c^T IA_c b_c                      (eq 13, the scalar pivot)

(a frame without a coordinate passes ``IA_c``, ``pA_c`` to its parent unchanged), and from
the root outwards (:func:`forward_accelerations`)::

    zdd_f = (Q_f - b_f^T pA_f - U_f^T Y_p) / D_f               (eq 12)
    Y_f = Y_p + b_f zdd_f                                      (eq 4)

Every pass is O(n).  :func:`forward_dynamics` runs the whole evaluation at ``(t, z, zd)``;
:func:`apply_inverse_mass` reuses the articulated inertias for ``M^-1 x`` of any ``x``.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

from workbench.kernels import layout as AR
from workbench.kernels import tree as K

_S3 = AR.scratch(3)
_S3x3 = AR.scratch(3, 3)
_S6x6 = AR.scratch(6, 6)

#: Work arrays of the recursion (``nf`` frames): articulated inertias ``IA`` (nf x 6 x 6),
#: bias forces ``pA`` (nf x 6), ``U = IA b`` (nf x 6), pivots ``D = b^T IA b`` (nf; 0 for
#: a frame without a coordinate), the reduced joint forces ``uq = Q - b^T pA`` (nf) and
#: the accelerations explicit in ``zdd``, ``Y`` (nf x 6).
AbaWorkspace = namedtuple("AbaWorkspace", ["IA", "pA", "U", "D", "uq", "Y"])


@njit(cache=True)
def make_aba_workspace(ma):
    """The work arrays :data:`AbaWorkspace` of a model."""
    nf = ma.fr_parent.shape[0]
    return AbaWorkspace(np.zeros((nf, 6, 6)), np.zeros((nf, 6)), np.zeros((nf, 6)),
                        np.zeros(nf), np.zeros(nf), np.zeros((nf, 6)))


@njit(cache=True)
def body_terms(ma, p, A, r, Z, Zd, fb, nb_, IA, pA):
    """Per frame, the rigid-body inertia about the origin ``IA_f = Mb_f`` and the body
    residual at ``Y = 0``, ``pA_f = Mb_f Zd_f + [m w x (w x g); w x (Jbar w)] - [fb; nb]``
    (``Zd``: the frame accelerations at ``zdd = 0``; ``fb``, ``nb_``: the applied body
    forces and moments about the origin of :func:`~workbench.kernels.tree.applied_forces`).
    Zero for a frame without a body.  This is the body part of
    :func:`~workbench.kernels.tree.inverse_dynamics_origin`, kept per frame."""
    nf = ma.fr_parent.shape[0]
    fr_body = ma.fr_body
    g = _S3()
    JG = _S3x3()
    Mb = _S6x6()
    for f in range(nf):
        b = fr_body[f]
        if b < 0:
            for i in range(6):
                pA[f, i] = 0.0
                for j in range(6):
                    IA[f, i, j] = 0.0
            continue
        m = K.body_inertia(ma, p, A, r, b, g, JG)
        K.body_origin_inertia(m, g, JG, Mb)
        for i in range(6):
            s = 0.0
            for j in range(6):
                IA[f, i, j] = Mb[i, j]
                s += Mb[i, j] * Zd[f, j]
            pA[f, i] = s
        w0, w1, w2 = Z[f, 3], Z[f, 4], Z[f, 5]
        # m w x (w x g)
        t0 = w1 * g[2] - w2 * g[1]
        t1 = w2 * g[0] - w0 * g[2]
        t2 = w0 * g[1] - w1 * g[0]
        pA[f, 0] += m * (w1 * t2 - w2 * t1) - fb[b, 0]
        pA[f, 1] += m * (w2 * t0 - w0 * t2) - fb[b, 1]
        pA[f, 2] += m * (w0 * t1 - w1 * t0) - fb[b, 2]
        # w x (Jbar w), Jbar = Mb[3:6, 3:6] (the rotational inertia about the origin)
        t0 = Mb[3, 3] * w0 + Mb[3, 4] * w1 + Mb[3, 5] * w2
        t1 = Mb[4, 3] * w0 + Mb[4, 4] * w1 + Mb[4, 5] * w2
        t2 = Mb[5, 3] * w0 + Mb[5, 4] * w1 + Mb[5, 5] * w2
        pA[f, 3] += w1 * t2 - w2 * t1 - nb_[b, 0]
        pA[f, 4] += w2 * t0 - w0 * t2 - nb_[b, 1]
        pA[f, 5] += w0 * t1 - w1 * t0 - nb_[b, 2]


@njit(cache=True)
def articulated_inertias(ma, bcol, IA, U, D):
    """Inward pass of the inertias (seed 004 eqs 10, 13, 20, 22): on entry ``IA`` holds the
    rigid-body inertias (:func:`body_terms`), on exit the articulated inertias; ``U_f =
    IA_f b_f`` and the pivot ``D_f = b_f^T IA_f b_f`` of every frame with a coordinate.

    Returns -1, or the first coordinate (from the leaves) whose pivot is not positive and
    finite (no inertia outboard of the joint along its axis: ``M`` is singular)."""
    fr_parent = ma.fr_parent
    fr_coord = ma.fr_coord
    nf = fr_parent.shape[0]
    for f in range(nf - 1, -1, -1):
        par = fr_parent[f]
        c = fr_coord[f]
        if c < 0:
            D[f] = 0.0
            for i in range(6):
                U[f, i] = 0.0
            if par >= 0:
                for i in range(6):
                    for j in range(6):
                        IA[par, i, j] += IA[f, i, j]
            continue
        d = 0.0
        for i in range(6):
            s = 0.0
            for j in range(6):
                s += IA[f, i, j] * bcol[f, j]
            U[f, i] = s
            d += bcol[f, i] * s
        D[f] = d
        if not (d > 0.0 and d < np.inf):
            return c
        if par >= 0:
            inv = 1.0 / d
            for i in range(6):
                ui = U[f, i] * inv
                for j in range(6):
                    IA[par, i, j] += IA[f, i, j] - ui * U[f, j]
    return -1


@njit(cache=True)
def articulated_bias(ma, bcol, Qj, U, D, pA, uq):
    """Inward pass of the bias forces (seed 004 eq 21): on entry ``pA`` holds the body
    residuals at ``zdd = 0`` (:func:`body_terms`, or zero for :func:`apply_inverse_mass`), on
    exit the articulated bias forces; ``uq_f = Q_c - b_f^T pA_f`` for every frame with a
    coordinate ``c`` (``Qj``: the generalized forces not contained in the body forces,
    the joint spring-dampers).  Needs ``U``, ``D`` of :func:`articulated_inertias`."""
    fr_parent = ma.fr_parent
    fr_coord = ma.fr_coord
    nf = fr_parent.shape[0]
    for f in range(nf - 1, -1, -1):
        par = fr_parent[f]
        c = fr_coord[f]
        if c < 0:
            uq[f] = 0.0
            if par >= 0:
                for i in range(6):
                    pA[par, i] += pA[f, i]
            continue
        s = Qj[c]
        for i in range(6):
            s -= bcol[f, i] * pA[f, i]
        uq[f] = s
        if par >= 0:
            a = s / D[f]
            for i in range(6):
                pA[par, i] += pA[f, i] + U[f, i] * a


@njit(cache=True)
def forward_accelerations(ma, bcol, U, D, uq, Y, zdd):
    """Outward pass (seed 004 eqs 12 and 4, ground at rest): ``zdd_c = (uq_f - U_f^T
    Y_p) / D_f`` and ``Y_f = Y_p + b_f zdd_c``."""
    fr_parent = ma.fr_parent
    fr_coord = ma.fr_coord
    nf = fr_parent.shape[0]
    for f in range(nf):
        par = fr_parent[f]
        c = fr_coord[f]
        if par >= 0:
            for i in range(6):
                Y[f, i] = Y[par, i]
        else:
            for i in range(6):
                Y[f, i] = 0.0
        if c < 0:
            continue
        s = uq[f]
        for i in range(6):
            s -= U[f, i] * Y[f, i]
        a = s / D[f]
        zdd[c] = a
        for i in range(6):
            Y[f, i] += bcol[f, i] * a


@njit(cache=True)
def forward_dynamics(ma, p, t, z, zd, ws, aw, zdd):
    """``zdd = M(z)^-1 Q(t, z, zd)`` of the open tree in O(n) (closures ignored).

    ``ws``: the semi-recursive workspace
    (:func:`workbench.formulations.semirecursive.matrixr.make_workspace`), whose frame
    kinematics, applied forces and ``Zd`` (the frame accelerations at the solution ``zdd``)
    are left set; ``aw``: :func:`make_aba_workspace`.  Returns -1, or the coordinate of the
    first non-positive pivot (``zdd`` is then not set)."""
    A, r, u, bcol, Z, Zd = ws.A, ws.r, ws.u, ws.bcol, ws.Z, ws.Zd
    K.frame_positions(ma, p, z, A, r, u)
    K.joint_columns(ma, r, u, bcol)
    K.frame_velocities(ma, zd, bcol, Z)
    # the velocity-product accelerations (seed 004 A_t): Zd at zdd = 0
    K.frame_accelerations(ma, zd, ws.zero_n, r, u, bcol, Z, Zd)
    K.applied_forces(ma, p, t, z, zd, A, r, Z, Zd, ws.fb, ws.nb, ws.Qj)
    body_terms(ma, p, A, r, Z, Zd, ws.fb, ws.nb, aw.IA, aw.pA)
    bad = articulated_inertias(ma, bcol, aw.IA, aw.U, aw.D)
    if bad >= 0:
        return bad
    articulated_bias(ma, bcol, ws.Qj, aw.U, aw.D, aw.pA, aw.uq)
    forward_accelerations(ma, bcol, aw.U, aw.D, aw.uq, aw.Y, zdd)
    nf = ma.fr_parent.shape[0]
    for f in range(nf):
        for i in range(6):
            Zd[f, i] += aw.Y[f, i]
    return -1


@njit(cache=True)
def apply_inverse_mass(ma, bcol, aw, x, out):
    """``out = M^-1 x`` in O(n) with the articulated inertias ``aw.U``, ``aw.D`` of the
    last :func:`forward_dynamics` (or :func:`articulated_inertias`) at the same
    configuration: the bias pass with no body forces and ``Q = x``, then the outward pass.
    Overwrites ``aw.pA``, ``aw.uq``, ``aw.Y``."""
    aw.pA[:, :] = 0.0
    articulated_bias(ma, bcol, x, aw.U, aw.D, aw.pA, aw.uq)
    forward_accelerations(ma, bcol, aw.U, aw.D, aw.uq, aw.Y, out)
