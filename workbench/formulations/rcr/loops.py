"""Recursive coordinate reduction (RCR) for closed loops: the O(n + m) acceleration solve of
seed 004 (Critchley and Anderson, eqs 23-102) in the project's semi-recursive notation.

Given a consistent state ``(z, zd)`` (closures satisfied at position and velocity level),
:func:`forward_dynamics` computes the relative accelerations ``zdd`` that satisfy the tree
dynamics and the closures at acceleration level, without forming ``M`` or ``Phi_z``.

**From the seed's phantom body to cut joints.**  The seed opens each loop by a massless
phantom copy of the loop base ``0_i`` and asks its velocity and acceleration relative to
``0_i`` to vanish (eqs 23-24).  Here a loop is closed by the constraint rows of a cut joint
between two frames ``F_A``, ``F_B`` (point coincidence, dot products, distances).  Every such
row is invariant under a common rigid motion of both sides, so at a consistent configuration
its velocity is ``C_A^T Z_A + C_B^T Z_B`` with ``C_A = -C_B`` (:func:`row_functionals`:
point ``x``, direction ``e``: ``[e; x x e]``; two vectors: ``[0; e1 x e2]``; distance:
``2 [d; x x d]``), and the Jacobian column of a loop coordinate ``k`` on side ``s`` is
``a_k = C_s^T b_k`` (``b_k`` the joint column).  The coordinates inboard of the loop base
``B`` (the nearest common ancestor of ``F_A``, ``F_B``) drop out: this is the seed's
"relative to ``0_i``".  With ``Y_f = Zd_f - Zd0_f`` (the accelerations explicit in
``zdd``, referred to the global origin so that the seed's shifts ``S`` are identities),
``X_f = Y_f - Y_B = sum_{j in path(B, f)} b_j zdd_j`` and ``kappa`` the closure
accelerations at ``zdd = 0`` (:func:`workbench.kernels.tree.constraints`, level 2), the
acceleration closure of a loop reads ``sum_k a_k zdd_k + kappa = 0`` (eq 24).

**Loop coordinates and their order.**  The loop list is the path ``B -> F_A`` outwards, then
``F_B -> B`` inwards (the seed's numbering ``1_i .. n_i`` of the opened loop, the cut in the
place of the phantom joint).  ``m_i`` = the numerical rank of the loop's closure rows
(seed 004 §2.5: 3 for a planar loop modelled in 3-D; a redundant cut is fine).  The seed's
plain RCR takes the **trailing** ``m_i`` coordinates as dependents; ACS (eqs 65-102) any
``m_i`` of them.  The independents that form an unbroken path ``B -> p`` at the start of the
list are the **chain** ``1 .. p_i`` (recursive, scalar pivots); any other independent is an
**outboard** independent ``f_i .. l_i`` of ACS (dense ``n_I x n_I`` solve, eq 99).

**Kinematic reduction** (:func:`loop_kinematics`, eqs 31-45 and 65-81): backward over the
dependents ``k`` (last first), ``R^{n+1} = U``::

    Q_k = 1 / (a_k^T R^{k+1} a_k)                    (eq 34: the scalar pivot)
    R^k = R^{k+1} - R^{k+1} a_k Q_k a_k^T R^{k+1}     (eq 36/66; R^k = R^{k+1} if independent)

then forward, with ``xi = [X_p; zdd_I]`` (the chain's relative acceleration ``X_p`` and the
outboard independents), every dependent as an affine function of ``xi``::

    zdd_k = K_k xi + k_k = -Q_k a_k^T R^{k+1} [W xi + w]   (eqs 33, 67)
    W xi + w = C_A^T X_p + kappa + sum_{j not a later dependent} a_j zdd_j

and every lumped frame (the loop frames outboard of ``p``, and the loop's other branch)
``Y_f = Y_B + G_f xi + z_f`` (``G_f = G_par + b_f K_f``: the seed's ``Y^k``, ``H^k K_i``
and ``Z^k``, eqs 41-45, 78-81).

**Coupled loops sharing coordinates** (the N-four-bar: each crank belongs to two loops) are
eliminated loop after loop in a *group* with one base: a loop's coordinates that are
dependents of an earlier loop enter its bracket through their affine maps ``K``, ``k``.
This is the seed's GCL (eqs 103-111) for the case of a common base only; loops with
different bases that share coordinates are refused.

**Lumping and the two-coefficient recursion** (:func:`group_inward`): the lumped frames and
``p`` form the virtual terminal body (eqs 53-55, 87-95)::

    M_xx = sum G^T IA G,  M_xB = sum G^T IA,  f_x = sum G^T (IA z + pA) - sum_k K_k^T Q_k

the outboard independents are eliminated densely (eqs 97-102: Cholesky of ``M_II``), which
leaves at ``p`` the residual ``A_p Y_B + B_p X_p + c_p`` (``A``: the seed's ``I^{j;0_i}``,
``B``: ``{}^{0_i}I^j``).  Then from ``p`` inwards (eqs 57-64; scalar pivot ``D_j``)::

    U = B_j b_j,  V = A_j^T b_j,  D_j = b_j^T U,  uq_j = Q_j - b_j^T c_j
    A <- A - U V^T / D,  B <- B - U U^T / D,  c <- c + U uq / D
    (the base force)  I_B <- I_B - V V^T / D,  g_B <- g_B + V uq / D

and at ``B`` the loop rejoins the tree recursion: ``IA_B += I_B``, ``pA_B += g_B``.  The
outward pass (:func:`group_outward`) gives ``zdd_j = (uq_j - V_j^T Y_B - U_j^T X_{j-1}) / D_j``
(eq 59) along the chain, the outboard independents from the Cholesky factor (eq 99) and the
dependents from ``K``, ``k`` (eq 67).

**Drives** (rheonomic coordinate constraints ``z_c - f(t) = 0``, ``ls.coord_drive``): a
driven coordinate is *prescribed*, ``zdd_c = f''(t)`` known (:func:`prescribed_motion`;
hybrid dynamics, Featherstone ch. 9), and is no unknown: it is never a dependent, and

* on a tree frame it has no pivot, the articulated inertia passes to the parent
  unreduced and the bias gets its known acceleration,
  ``IA_par += IA_f``, ``pA_par += pA_f + IA_f b_f zdd_f``, and ``Y_f = Y_par + b_f zdd_f``;
* in a loop list (``ST_PRESCRIBED``) it has ``K_c = 0``, ``k_c = zdd_c``: its column goes to
  the known part of the bracket, ``w += a_c zdd_c`` (like ``kappa``), and its frame's
  ``z_f`` gets ``b_f zdd_c``; it has no generalized force in ``f_x``;
* on the chain it has no pivot either, ``X_j = X_{j-1} + b_j zdd_j`` with ``zdd_j`` known:
  ``c <- c + U zdd_j``, ``g_B <- g_B + V zdd_j`` (``U = B b``, ``V = A^T b``), ``A``, ``B``,
  ``I_B`` unchanged.

Costs: O(n_i) per loop (every step a fixed number of 6 x 6 and ``rows x 6`` operations,
rows <= 6 for a cut joint) plus O(n_I^3) for ACS; O(n + m) for the N-four-bar.
Position-level closure and the velocity problem are not part of this module (the seed
omits them): the state must already be consistent.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

from workbench.formulations.rcr import tree as RT
from workbench.kernels import layout as AR
from workbench.kernels import tree as K

C_PTCOMP, C_DOTVV, C_DOTVP, C_DIST = AR.C_PTCOMP, AR.C_DOTVV, AR.C_DOTVP, AR.C_DIST

# stack buffers of row_functionals (no heap allocation per constraint row)
_S3a = AR.scratch(3)
_S3b = AR.scratch(3)
_S3c = AR.scratch(3)
_S3d = AR.scratch(3)
_S6 = AR.scratch(6)

#: failure kinds reported in ``LoopWorkspace.fail[0]`` (the coordinate in ``fail[1]``)
FAIL_NONE, FAIL_ARTICULATED, FAIL_DEPENDENT, FAIL_OUTBOARD = 0, 1, 2, 3
#: loop-coordinate status codes (``LoopStructure.lc_status``; ``ST_PRESCRIBED``: a driven
#: coordinate outside the chain, whose known acceleration enters the bracket like ``kappa``)
ST_CHAIN, ST_OUTBOARD, ST_EARLIER, ST_OWN, ST_PRESCRIBED = 0, 1, 2, 3, 4
#: frame roles (``LoopStructure.fr_role``)
ROLE_TREE, ROLE_CHAIN, ROLE_LUMP = 0, 1, 2

#: The loop topology of a compiled model (built once by
#: :func:`workbench.formulations.rcr.loop_structure`; flat int arrays, CSR pointers ``*_ptr``).
#: Groups ``g`` (loops sharing coordinates, one base): ``g_base`` (frame, -1 ground),
#: ``g_chain`` (chain frames ``B -> p`` in order), ``g_lump`` (lumped frames, parents
#: first), ``g_xi`` (outboard independent coordinates), ``g_loop`` (its loops, in elimination
#: order: loop ids are contiguous).  Loops ``l``: ``l_fa`` (frame of side A), ``l_chain``
#: (1: the chain lies on its side A), ``l_row`` (constraint rows), ``l_coord`` -> ``lc_coord``,
#: ``lc_frame``, ``lc_side`` (0: A, 1: B), ``lc_status`` (ST_*; own dependents in loop
#: order).  Frames: ``fr_role`` (ROLE_*); ``fb_ptr`` (frame ``f`` + 1, 0 for ground) ->
#: ``fb_grp``: the groups based at each frame.  ``coord_xi``: outboard index or -1.
#: ``coord_drive``: per coordinate, its drive row (a prescribed coordinate ``z_c = f(t)``,
#: :func:`prescribed_motion`) or -1.
LoopStructure = namedtuple("LoopStructure", [
    "g_base", "g_chain_ptr", "g_chain", "g_lump_ptr", "g_lump", "g_xi_ptr", "g_xi",
    "g_loop_ptr", "l_fa", "l_chain", "l_row_ptr", "l_row", "l_coord_ptr", "lc_coord",
    "lc_frame", "lc_side", "lc_status", "fr_role", "fb_ptr", "fb_grp", "coord_xi",
    "coord_drive"])

#: Work arrays (sizes from the structure): lumped-frame maps ``G`` (nf x 6 x nx), ``zv``
#: (nf x 6); affine maps of the dependent and outboard coordinates ``Kd`` (n x nx), ``kd``
#: (n); ``rq`` = Q_k R^{k+1} a_k per own dependent (n x nr); the chain's ``V = A^T b``
#: (nf x 6); per group the Cholesky factor of ``M_II`` (``gL``), ``M_IX``, ``M_IB``,
#: ``f_I``; closure accelerations at ``zdd = 0`` ``kappa`` (m); scratch ``Cs``, ``Rr``,
#: ``Wr``, ``wr``, ``ac``, ``Mxx``, ``Mxb``, ``fx``, ``T6``, ``t6``; pivot monitor
#: ``piv`` = [smallest relative dependent pivot, its coordinate]; ``fail`` = [kind, coord].
LoopWorkspace = namedtuple("LoopWorkspace", [
    "G", "zv", "Kd", "kd", "rq", "V", "gL", "gMIX", "gMIB", "gfI", "kappa", "Cs", "Rr",
    "Wr", "wr", "ac", "Mxx", "Mxb", "fx", "T6", "t6", "Ib", "gb", "Am", "Bm", "cv", "xi",
    "piv", "fail"])


def make_loop_workspace(ma, ls):
    """The work arrays :data:`LoopWorkspace` of a model and its :data:`LoopStructure`."""
    nf = ma.fr_parent.shape[0]
    n = ls.coord_xi.shape[0]
    m = ma.c_type.shape[0]
    ng = ls.g_base.shape[0]
    nI = int(np.diff(ls.g_xi_ptr).max()) if ng else 0
    nr = int(np.diff(ls.l_row_ptr).max()) if ls.l_fa.shape[0] else 1
    nx = 6 + nI
    return LoopWorkspace(
        np.zeros((nf, 6, nx)), np.zeros((nf, 6)), np.zeros((n, nx)), np.zeros(n),
        np.zeros((n, nr)), np.zeros((nf, 6)), np.zeros((ng, max(nI, 1), max(nI, 1))),
        np.zeros((ng, max(nI, 1), 6)), np.zeros((ng, max(nI, 1), 6)),
        np.zeros((ng, max(nI, 1))), np.zeros(m), np.zeros((2, nr, 6)), np.zeros((nr, nr)),
        np.zeros((nr, nx)), np.zeros(nr), np.zeros(nr), np.zeros((nx, nx)), np.zeros((nx, 6)),
        np.zeros(nx), np.zeros((6, nx)), np.zeros(6), np.zeros((6, 6)), np.zeros(6),
        np.zeros((6, 6)), np.zeros((6, 6)), np.zeros(6), np.zeros(nx), np.zeros(2),
        np.zeros(2, dtype=np.int64))


# ----------------------------------------------------------------------------------------
# closure rows as functionals of the frame twists
# ----------------------------------------------------------------------------------------


@njit(cache=True, inline="always")
def _cross_into(a0, a1, a2, b0, b1, b2, out, o):
    out[o] = a1 * b2 - a2 * b1
    out[o + 1] = a2 * b0 - a0 * b2
    out[o + 2] = a0 * b1 - a1 * b0


@njit(cache=True)
def _point_frame(ma, k):
    b = ma.pt_body[k]
    return ma.b_frame[b] if b >= 0 else -1


@njit(cache=True)
def _vector_frame(ma, k):
    b = ma.vc_body[k]
    return ma.b_frame[b] if b >= 0 else -1


@njit(cache=True)
def _add_side(c, fr, fa, Cs, i):
    """Add the 6-vector ``c`` to row ``i`` of side A (``fr == fa``) or side B."""
    s = 0 if fr == fa else 1
    for j in range(6):
        Cs[s, i, j] += c[j]


@njit(cache=True)
def row_functionals(ma, p, A, r, k, fa, Cs, i):
    """Row ``i`` of the side functionals ``Cs[0]`` (side A, frame ``fa``) and ``Cs[1]``
    (side B) of constraint row ``k``: its velocity is ``Cs[0, i]^T Z_A + Cs[1, i]^T Z_B``
    (``Z = [v_O; omega]``).  Point ``x`` of a frame, component along ``e``: ``[e; x x e]``;
    vector ``e1`` against ``e2``: ``[0; e1 x e2]``; ``e . (x2 - x1)``: ``[0; e x d]``,
    ``[e; x2 x e]``, ``-[e; x1 x e]``; ``|x2 - x1|^2``: ``2 [d; x2 x d]``, ``-2 [d; x1 x d]``.
    (The same derivatives as :func:`workbench.kernels.tree.constraint_jacobian`, grouped per
    frame instead of per coordinate.)"""
    for s in range(2):
        for j in range(6):
            Cs[s, i, j] = 0.0
    typ = ma.c_type[k]
    ci = ma.c_i[k]
    x1 = _S3a()
    x2 = _S3b()
    e1 = _S3c()
    e2 = _S3d()
    c = _S6()
    if typ == C_PTCOMP:
        K.point_position(ma, p, A, r, ci[0], x1)
        K.point_position(ma, p, A, r, ci[1], x2)
        for j in range(3):
            e1[j] = 0.0
        e1[ci[2]] = 1.0
        for sgn, x, fr in ((1.0, x1, _point_frame(ma, ci[0])),
                           (-1.0, x2, _point_frame(ma, ci[1]))):
            for j in range(3):
                c[j] = sgn * e1[j]
            _cross_into(sgn * x[0], sgn * x[1], sgn * x[2], e1[0], e1[1], e1[2], c, 3)
            _add_side(c, fr, fa, Cs, i)
    elif typ == C_DOTVV:
        K.vector_global(ma, A, ci[0], e1)
        K.vector_global(ma, A, ci[1], e2)
        c[0] = c[1] = c[2] = 0.0
        _cross_into(e1[0], e1[1], e1[2], e2[0], e2[1], e2[2], c, 3)
        _add_side(c, _vector_frame(ma, ci[0]), fa, Cs, i)
        for j in range(3, 6):
            c[j] = -c[j]
        _add_side(c, _vector_frame(ma, ci[1]), fa, Cs, i)
    elif typ == C_DOTVP:
        K.vector_global(ma, A, ci[0], e1)
        K.point_position(ma, p, A, r, ci[1], x1)
        K.point_position(ma, p, A, r, ci[2], x2)
        c[0] = c[1] = c[2] = 0.0
        _cross_into(e1[0], e1[1], e1[2], x2[0] - x1[0], x2[1] - x1[1], x2[2] - x1[2], c, 3)
        _add_side(c, _vector_frame(ma, ci[0]), fa, Cs, i)
        for sgn, x, fr in ((1.0, x2, _point_frame(ma, ci[2])),
                           (-1.0, x1, _point_frame(ma, ci[1]))):
            for j in range(3):
                c[j] = sgn * e1[j]
            _cross_into(sgn * x[0], sgn * x[1], sgn * x[2], e1[0], e1[1], e1[2], c, 3)
            _add_side(c, fr, fa, Cs, i)
    elif typ == C_DIST:
        K.point_position(ma, p, A, r, ci[0], x1)
        K.point_position(ma, p, A, r, ci[1], x2)
        for j in range(3):
            e1[j] = 2.0 * (x2[j] - x1[j])
        for sgn, x, fr in ((1.0, x2, _point_frame(ma, ci[1])),
                           (-1.0, x1, _point_frame(ma, ci[0]))):
            for j in range(3):
                c[j] = sgn * e1[j]
            _cross_into(sgn * x[0], sgn * x[1], sgn * x[2], e1[0], e1[1], e1[2], c, 3)
            _add_side(c, fr, fa, Cs, i)


# ----------------------------------------------------------------------------------------
# prescribed (driven) coordinates
# ----------------------------------------------------------------------------------------


@njit(cache=True)
def prescribed_motion(ma, p, t, ls, z, zd, zdd, level):
    """The driven coordinates (drive rows ``z_c - f(t) = 0``, ``ls.coord_drive``): with
    ``level`` 0 ``z_c = f(t)``, ``zd_c = f'(t)``; with ``level`` 2 ``zdd_c = f''(t)``
    (:func:`workbench.kernels.tree.time_function`).  A prescribed coordinate is no unknown
    of any of the three problems (hybrid dynamics, Featherstone ch. 9)."""
    for c in range(ls.coord_drive.shape[0]):
        k = ls.coord_drive[c]
        if k >= 0:
            f, fd, fdd = K.time_function(ma, p, ma.c_i[k, 1], t)
            if level == 0:
                z[c] = f
                zd[c] = fd
            else:
                zdd[c] = fdd


# ----------------------------------------------------------------------------------------
# kinematic reduction (eqs 31-45, 65-81)
# ----------------------------------------------------------------------------------------


@njit(cache=True)
def loop_kinematics(ma, p, A, r, bcol, ls, lw, tol, zk):
    """Dependent coordinates of every loop as affine functions ``zdd_k = K_k xi + k_k`` of
    their group's ``xi = [X_p; zdd_I]`` (``lw.Kd``, ``lw.kd``; also set for the outboard
    independents: ``K = e_{6+i}``, and for the prescribed coordinates: ``K = 0``,
    ``k = zk_c``, their known acceleration, which so enters the bracket ``W xi + w`` next
    to ``kappa``), and the lumped frames' maps ``Y_f = Y_B + G_f xi + z_f``
    (``lw.G``, ``lw.zv``).  Needs ``lw.kappa`` (closure accelerations at ``zdd = 0``) and
    ``zk`` (the prescribed coordinates' accelerations; their velocities for the velocity
    problem, with ``kappa = 0``).

    Returns -1, or the first dependent coordinate whose pivot ``a_k^T R^{k+1} a_k`` (eq 34)
    is below ``tol`` times ``a_k^T a_k`` (the dependent set does not span the loop's
    closure there: a singular choice or configuration).  ``lw.piv`` records the smallest
    relative pivot and its coordinate."""
    fr_parent = ma.fr_parent
    fr_coord = ma.fr_coord
    ng = ls.g_base.shape[0]
    Cs, Rr, Wr, wr, ac = lw.Cs, lw.Rr, lw.Wr, lw.wr, lw.ac
    Kd, kd, G, zv, rq = lw.Kd, lw.kd, lw.G, lw.zv, lw.rq
    nx = Kd.shape[1]
    lw.piv[0] = np.inf
    lw.piv[1] = -1.0
    for c in range(ls.coord_drive.shape[0]):
        if ls.coord_drive[c] >= 0:
            for j in range(nx):
                Kd[c, j] = 0.0
            kd[c] = zk[c]
    for g in range(ng):
        for q in range(ls.g_xi_ptr[g], ls.g_xi_ptr[g + 1]):
            c = ls.g_xi[q]
            for j in range(nx):
                Kd[c, j] = 0.0
            Kd[c, 6 + q - ls.g_xi_ptr[g]] = 1.0
            kd[c] = 0.0
        for lo in range(ls.g_loop_ptr[g], ls.g_loop_ptr[g + 1]):
            r0 = ls.l_row_ptr[lo]
            nr = ls.l_row_ptr[lo + 1] - r0
            fa = ls.l_fa[lo]
            for i in range(nr):
                row_functionals(ma, p, A, r, ls.l_row[r0 + i], fa, Cs, i)
            c0 = ls.l_coord_ptr[lo]
            c1 = ls.l_coord_ptr[lo + 1]
            # backward over the own dependents: R^{n+1} = U, eqs 34, 36
            for i in range(nr):
                for j in range(nr):
                    Rr[i, j] = 1.0 if i == j else 0.0
            for q in range(c1 - 1, c0 - 1, -1):
                if ls.lc_status[q] != ST_OWN:
                    continue
                c = ls.lc_coord[q]
                f = ls.lc_frame[q]
                s = ls.lc_side[q]
                aa = 0.0
                for i in range(nr):
                    t = 0.0
                    for j in range(6):
                        t += Cs[s, i, j] * bcol[f, j]
                    ac[i] = t
                    aa += t * t
                piv = 0.0
                for i in range(nr):
                    t = 0.0
                    for j in range(nr):
                        t += Rr[i, j] * ac[j]
                    rq[c, i] = t
                    piv += ac[i] * t
                rel = piv / aa if aa > 0.0 else 0.0
                if rel < lw.piv[0]:
                    lw.piv[0] = rel
                    lw.piv[1] = c
                if not (rel > tol and rel < np.inf):
                    return c
                for i in range(nr):
                    for j in range(nr):
                        Rr[i, j] -= rq[c, i] * rq[c, j] / piv
                for i in range(nr):
                    rq[c, i] /= piv
            # the bracket W xi + w of eq 67: chain, kappa, all but the own dependents
            for i in range(nr):
                wr[i] = lw.kappa[ls.l_row[r0 + i]]
                for j in range(nx):
                    Wr[i, j] = 0.0
                if ls.l_chain[lo] == 1:
                    for j in range(6):
                        Wr[i, j] = Cs[0, i, j]
            for q in range(c0, c1):
                st = ls.lc_status[q]
                if st == ST_CHAIN or st == ST_OWN:
                    continue
                c = ls.lc_coord[q]
                f = ls.lc_frame[q]
                s = ls.lc_side[q]
                for i in range(nr):
                    t = 0.0
                    for j in range(6):
                        t += Cs[s, i, j] * bcol[f, j]
                    for j in range(nx):
                        Wr[i, j] += t * Kd[c, j]
                    wr[i] += t * kd[c]
            # forward over the own dependents, eqs 33, 67
            for q in range(c0, c1):
                if ls.lc_status[q] != ST_OWN:
                    continue
                c = ls.lc_coord[q]
                f = ls.lc_frame[q]
                s = ls.lc_side[q]
                for j in range(nx):
                    t = 0.0
                    for i in range(nr):
                        t -= rq[c, i] * Wr[i, j]
                    Kd[c, j] = t
                t = 0.0
                for i in range(nr):
                    t -= rq[c, i] * wr[i]
                kd[c] = t
                for i in range(nr):
                    t = 0.0
                    for j in range(6):
                        t += Cs[s, i, j] * bcol[f, j]
                    for j in range(nx):
                        Wr[i, j] += t * Kd[c, j]
                    wr[i] += t * kd[c]
        # lumped frames, parents first: G_f = G_par + b_f K_f (eqs 41-43, 78-81)
        for q in range(ls.g_lump_ptr[g], ls.g_lump_ptr[g + 1]):
            f = ls.g_lump[q]
            par = fr_parent[f]
            # the base's children start from Y_B (G = 0), p's children from Y_B + X_p
            role = ROLE_TREE if par == ls.g_base[g] else ls.fr_role[par]
            for i in range(6):
                for j in range(nx):
                    G[f, i, j] = G[par, i, j] if role == ROLE_LUMP else 0.0
                zv[f, i] = zv[par, i] if role == ROLE_LUMP else 0.0
                if role == ROLE_CHAIN:
                    G[f, i, i] = 1.0
            c = fr_coord[f]
            if c >= 0:
                for i in range(6):
                    bi = bcol[f, i]
                    for j in range(nx):
                        G[f, i, j] += bi * Kd[c, j]
                    zv[f, i] += bi * kd[c]
    return -1


# ----------------------------------------------------------------------------------------
# dynamics: lumping, the two-coefficient recursion, the outward pass (eqs 46-64, 82-102)
# ----------------------------------------------------------------------------------------


@njit(cache=True)
def _cholesky(M, nI, L):
    """Lower Cholesky factor of ``M[:nI, :nI]`` into ``L``; returns -1 or the failing row."""
    for i in range(nI):
        for j in range(i + 1):
            s = M[i, j]
            for k in range(j):
                s -= L[i, k] * L[j, k]
            if i == j:
                if not (s > 0.0 and s < np.inf):
                    return i
                L[i, i] = np.sqrt(s)
            else:
                L[i, j] = s / L[j, j]
    return -1


@njit(cache=True)
def _forward_sub(L, nI, b):
    for i in range(nI):
        s = b[i]
        for k in range(i):
            s -= L[i, k] * b[k]
        b[i] = s / L[i, i]


@njit(cache=True)
def _backward_sub(L, nI, b):
    for i in range(nI - 1, -1, -1):
        s = b[i]
        for k in range(i + 1, nI):
            s -= L[k, i] * b[k]
        b[i] = s / L[i, i]


@njit(cache=True)
def group_inward(ma, bcol, Qj, ls, g, aw, lw, zdd):
    """Inward pass of group ``g`` (after its frames' ``aw.IA``, ``aw.pA`` are complete):
    lumping into the virtual terminal body (eqs 53-55, 87-95), the dense elimination of the
    outboard independents (eqs 97-102), the two-coefficient recursion along the chain
    (eqs 57-64) and the merge into the base (``IA_B += I_B``, ``pA_B += g_B``).  A
    prescribed chain coordinate (known ``zdd_j``, entries of ``zdd``) has no pivot: with
    ``X_j = X_{j-1} + b_j zdd_j`` its terms pass through unreduced,
    ``c <- c + U zdd_j``, ``g_B <- g_B + V zdd_j`` (``A``, ``B``, ``I_B`` unchanged).

    Returns -1 or the coordinate of a failed pivot (``lw.fail`` set)."""
    IA, pA = aw.IA, aw.pA
    G, zv, Kd = lw.G, lw.zv, lw.Kd
    Mxx, Mxb, fx, T6, t6 = lw.Mxx, lw.Mxb, lw.fx, lw.T6, lw.t6
    Ib, gb, Am, Bm, cv = lw.Ib, lw.gb, lw.Am, lw.Bm, lw.cv
    nI = ls.g_xi_ptr[g + 1] - ls.g_xi_ptr[g]
    nx = 6 + nI
    ch0 = ls.g_chain_ptr[g]
    ch1 = ls.g_chain_ptr[g + 1]
    for i in range(nx):
        fx[i] = 0.0
        for j in range(nx):
            Mxx[i, j] = 0.0
        for j in range(6):
            Mxb[i, j] = 0.0
    for i in range(6):
        gb[i] = 0.0
        for j in range(6):
            Ib[i, j] = 0.0
    if ch1 > ch0:
        # p itself: G_p = [U 0], z_p = 0
        pf = ls.g_chain[ch1 - 1]
        for i in range(6):
            fx[i] += pA[pf, i]
            gb[i] += pA[pf, i]
            for j in range(6):
                Mxx[i, j] += IA[pf, i, j]
                Mxb[i, j] += IA[pf, i, j]
                Ib[i, j] += IA[pf, i, j]
    for q in range(ls.g_lump_ptr[g], ls.g_lump_ptr[g + 1]):
        f = ls.g_lump[q]
        for i in range(6):
            s = pA[f, i]
            for j in range(6):
                s += IA[f, i, j] * zv[f, j]
                Ib[i, j] += IA[f, i, j]
            t6[i] = s
            gb[i] += s
            for j in range(nx):
                s = 0.0
                for k in range(6):
                    s += IA[f, i, k] * G[f, k, j]
                T6[i, j] = s
        for a in range(nx):
            s = 0.0
            for i in range(6):
                s += G[f, i, a] * t6[i]
                for j in range(6):
                    Mxb[a, j] += G[f, i, a] * IA[f, i, j]
            fx[a] += s
            for b in range(a, nx):
                s = 0.0
                for i in range(6):
                    s += G[f, i, a] * T6[i, b]
                Mxx[a, b] += s
    for a in range(nx):
        for b in range(a):
            Mxx[a, b] = Mxx[b, a]
    # generalized forces of the reduced coordinates: - sum_k K_k^T Q_k
    for lo in range(ls.g_loop_ptr[g], ls.g_loop_ptr[g + 1]):
        for q in range(ls.l_coord_ptr[lo], ls.l_coord_ptr[lo + 1]):
            if ls.lc_status[q] == ST_OWN:
                c = ls.lc_coord[q]
                for a in range(nx):
                    fx[a] -= Kd[c, a] * Qj[c]
    for q in range(ls.g_xi_ptr[g], ls.g_xi_ptr[g + 1]):
        c = ls.g_xi[q]
        fx[6 + q - ls.g_xi_ptr[g]] -= Qj[c]
    # eqs 97-102: eliminate the outboard independents (Schur complement onto X_p, Y_B)
    for i in range(6):
        cv[i] = fx[i]
        for j in range(6):
            Bm[i, j] = Mxx[i, j]
            Am[i, j] = Mxb[i, j]
    if nI > 0:
        L = lw.gL[g]
        MIX = lw.gMIX[g]
        MIB = lw.gMIB[g]
        fI = lw.gfI[g]
        bad = _cholesky(Mxx[6:, 6:], nI, L)
        if bad >= 0:
            lw.fail[0] = FAIL_OUTBOARD
            lw.fail[1] = ls.g_xi[ls.g_xi_ptr[g] + bad]
            return lw.fail[1]
        for a in range(nI):
            fI[a] = fx[6 + a]
            for j in range(6):
                MIX[a, j] = Mxx[6 + a, j]
                MIB[a, j] = Mxb[6 + a, j]
        # Y1 = L^-1 M_IX, Y2 = L^-1 M_IB, y3 = L^-1 f_I (in the columns of T6 / t6 scratch)
        Y1 = np.empty((nI, 6))
        Y2 = np.empty((nI, 6))
        y3 = fI.copy()
        col = np.empty(nI)
        for j in range(6):
            for a in range(nI):
                col[a] = MIX[a, j]
            _forward_sub(L, nI, col)
            for a in range(nI):
                Y1[a, j] = col[a]
                col[a] = MIB[a, j]
            _forward_sub(L, nI, col)
            for a in range(nI):
                Y2[a, j] = col[a]
        _forward_sub(L, nI, y3)
        for i in range(6):
            for j in range(6):
                s1 = 0.0
                s2 = 0.0
                s3 = 0.0
                for a in range(nI):
                    s1 += Y1[a, i] * Y1[a, j]
                    s2 += Y1[a, i] * Y2[a, j]
                    s3 += Y2[a, i] * Y2[a, j]
                Bm[i, j] -= s1
                Am[i, j] -= s2
                Ib[i, j] -= s3
            s1 = 0.0
            s2 = 0.0
            for a in range(nI):
                s1 += Y1[a, i] * y3[a]
                s2 += Y2[a, i] * y3[a]
            cv[i] -= s1
            gb[i] -= s2
    # eqs 57-64: the two-coefficient recursion from p inwards
    U = aw.U
    V = lw.V
    for q in range(ch1 - 1, ch0 - 1, -1):
        j = ls.g_chain[q]
        if q < ch1 - 1:
            for i in range(6):
                cv[i] += pA[j, i]
                gb[i] += pA[j, i]
                for k in range(6):
                    Am[i, k] += IA[j, i, k]
                    Bm[i, k] += IA[j, i, k]
                    Ib[i, k] += IA[j, i, k]
        c = ma.fr_coord[j]
        if c < 0:
            aw.D[j] = 0.0
            continue
        d = 0.0
        uq = Qj[c]
        for i in range(6):
            su = 0.0
            sv = 0.0
            for k in range(6):
                su += Bm[i, k] * bcol[j, k]
                sv += Am[k, i] * bcol[j, k]
            U[j, i] = su
            V[j, i] = sv
            d += bcol[j, i] * su
            uq -= bcol[j, i] * cv[i]
        if ls.coord_drive[c] >= 0:
            # prescribed: no pivot, the known acceleration passes inwards
            aw.D[j] = 0.0
            a = zdd[c]
            for i in range(6):
                cv[i] += U[j, i] * a
                gb[i] += V[j, i] * a
            continue
        aw.D[j] = d
        aw.uq[j] = uq
        if not (d > 0.0 and d < np.inf):
            lw.fail[0] = FAIL_ARTICULATED
            lw.fail[1] = c
            return c
        inv = 1.0 / d
        for i in range(6):
            ui = U[j, i] * inv
            vi = V[j, i] * inv
            cv[i] += ui * uq
            gb[i] += vi * uq
            for k in range(6):
                Am[i, k] -= ui * V[j, k]
                Bm[i, k] -= ui * U[j, k]
                Ib[i, k] -= vi * V[j, k]
    base = ls.g_base[g]
    if base >= 0:
        for i in range(6):
            pA[base, i] += gb[i]
            for k in range(6):
                IA[base, i, k] += Ib[i, k]
    return -1


@njit(cache=True)
def group_outward(ma, bcol, ls, g, YB, aw, lw, zdd):
    """Outward pass of group ``g`` given the base's explicit acceleration ``YB``: the chain
    (eq 59), the outboard independents (eq 99, Cholesky factor of :func:`group_inward`) and
    the dependents ``zdd_k = K_k xi + k_k`` (eq 67)."""
    xi = lw.xi
    nI = ls.g_xi_ptr[g + 1] - ls.g_xi_ptr[g]
    for i in range(6):
        xi[i] = 0.0
    for q in range(ls.g_chain_ptr[g], ls.g_chain_ptr[g + 1]):
        j = ls.g_chain[q]
        c = ma.fr_coord[j]
        if c < 0:
            continue
        if ls.coord_drive[c] >= 0:
            a = zdd[c]
        else:
            s = aw.uq[j]
            for i in range(6):
                s -= lw.V[j, i] * YB[i] + aw.U[j, i] * xi[i]
            a = s / aw.D[j]
            zdd[c] = a
        for i in range(6):
            xi[i] += bcol[j, i] * a
    if nI > 0:
        L = lw.gL[g]
        rhs = np.empty(nI)
        for a in range(nI):
            s = -lw.gfI[g, a]
            for i in range(6):
                s -= lw.gMIX[g, a, i] * xi[i] + lw.gMIB[g, a, i] * YB[i]
            rhs[a] = s
        _forward_sub(L, nI, rhs)
        _backward_sub(L, nI, rhs)
        for a in range(nI):
            xi[6 + a] = rhs[a]
            zdd[ls.g_xi[ls.g_xi_ptr[g] + a]] = rhs[a]
    nx = 6 + nI
    for lo in range(ls.g_loop_ptr[g], ls.g_loop_ptr[g + 1]):
        for q in range(ls.l_coord_ptr[lo], ls.l_coord_ptr[lo + 1]):
            if ls.lc_status[q] == ST_OWN:
                c = ls.lc_coord[q]
                s = lw.kd[c]
                for a in range(nx):
                    s += lw.Kd[c, a] * xi[a]
                zdd[c] = s


@njit(cache=True)
def forward_dynamics(ma, p, t, z, zd, ls, ws, aw, lw, zdd, tol):
    """RCR accelerations ``zdd`` at a consistent state ``(t, z, zd)``, O(n + m).  The driven
    coordinates' entries of ``zdd`` are their drives' ``f''(t)`` (the state must satisfy the
    drives at position and velocity level too).

    ``ws``: the semi-recursive workspace (frame kinematics and applied forces are left set,
    ``ws.Zd`` holds the frame accelerations of the solution); ``aw``:
    :func:`workbench.formulations.rcr.tree.make_aba_workspace`; ``lw``:
    :func:`make_loop_workspace`; ``tol``: relative pivot threshold of the dependents.

    Returns -1, or the coordinate of a failed pivot, with ``lw.fail[0]`` its kind
    (``FAIL_DEPENDENT``: the dependent set does not span the loop's closure, eq 34;
    ``FAIL_ARTICULATED``: an articulated-body pivot, eqs 13/64; ``FAIL_OUTBOARD``: ``M_II``
    of ACS not positive definite)."""
    A, r, u, bcol, Z, Zd = ws.A, ws.r, ws.u, ws.bcol, ws.Z, ws.Zd
    lw.fail[0] = FAIL_NONE
    lw.fail[1] = -1
    K.frame_positions(ma, p, z, A, r, u)
    K.joint_columns(ma, r, u, bcol)
    K.frame_velocities(ma, zd, bcol, Z)
    K.frame_accelerations(ma, zd, ws.zero_n, r, u, bcol, Z, Zd)
    K.applied_forces(ma, p, t, z, zd, A, r, Z, Zd, ws.fb, ws.nb, ws.Qj)
    # closure accelerations at zdd = 0 (kappa; the seed's A_t^n of the phantom)
    K.constraints(ma, p, t, z, zd, ws.zero_n, A, r, Z, Zd, 2, lw.kappa)
    # driven coordinates: their known accelerations (hybrid dynamics)
    prescribed_motion(ma, p, t, ls, z, zd, zdd, 2)
    bad = loop_kinematics(ma, p, A, r, bcol, ls, lw, tol, zdd)
    if bad >= 0:
        lw.fail[0] = FAIL_DEPENDENT
        lw.fail[1] = bad
        return bad
    RT.body_terms(ma, p, A, r, Z, Zd, ws.fb, ws.nb, aw.IA, aw.pA)
    IA, pA, U, D, uq, Y = aw.IA, aw.pA, aw.U, aw.D, aw.uq, aw.Y
    Qj = ws.Qj
    fr_parent = ma.fr_parent
    fr_coord = ma.fr_coord
    nf = fr_parent.shape[0]
    # inward: the tree recursion (eqs 13, 20-22); loops are merged at their base
    for f in range(nf - 1, -2, -1):
        for q in range(ls.fb_ptr[f + 1], ls.fb_ptr[f + 2]):
            bad = group_inward(ma, bcol, Qj, ls, ls.fb_grp[q], aw, lw, zdd)
            if bad >= 0:
                return bad
        if f < 0 or ls.fr_role[f] != ROLE_TREE:
            continue
        par = fr_parent[f]
        c = fr_coord[f]
        if c < 0 or ls.coord_drive[c] >= 0:
            # no coordinate, or a prescribed one (known zdd_f, no pivot): the articulated
            # inertia passes unreduced, the bias gets IA_f b_f zdd_f
            D[f] = 0.0
            if par >= 0:
                a = zdd[c] if c >= 0 else 0.0
                for i in range(6):
                    s = pA[f, i]
                    for j in range(6):
                        IA[par, i, j] += IA[f, i, j]
                        if c >= 0:
                            s += IA[f, i, j] * bcol[f, j] * a
                    pA[par, i] += s
            continue
        d = 0.0
        s = Qj[c]
        for i in range(6):
            t6 = 0.0
            for j in range(6):
                t6 += IA[f, i, j] * bcol[f, j]
            U[f, i] = t6
            d += bcol[f, i] * t6
            s -= bcol[f, i] * pA[f, i]
        D[f] = d
        uq[f] = s
        if not (d > 0.0 and d < np.inf):
            lw.fail[0] = FAIL_ARTICULATED
            lw.fail[1] = c
            return c
        if par >= 0:
            inv = 1.0 / d
            for i in range(6):
                ui = U[f, i] * inv
                pA[par, i] += pA[f, i] + ui * s
                for j in range(6):
                    IA[par, i, j] += IA[f, i, j] - ui * U[f, j]
    # outward (eqs 12, 4, 59, 67)
    zero6 = _S6()
    for i in range(6):
        zero6[i] = 0.0
    for q in range(ls.fb_ptr[0], ls.fb_ptr[1]):
        group_outward(ma, bcol, ls, ls.fb_grp[q], zero6, aw, lw, zdd)
    for f in range(nf):
        par = fr_parent[f]
        c = fr_coord[f]
        for i in range(6):
            Y[f, i] = Y[par, i] if par >= 0 else 0.0
        if c >= 0:
            if ls.fr_role[f] == ROLE_TREE and ls.coord_drive[c] < 0:
                s = uq[f]
                for i in range(6):
                    s -= U[f, i] * Y[f, i]
                zdd[c] = s / D[f]
            a = zdd[c]
            for i in range(6):
                Y[f, i] += bcol[f, i] * a
        for q in range(ls.fb_ptr[f + 1], ls.fb_ptr[f + 2]):
            group_outward(ma, bcol, ls, ls.fb_grp[q], Y[f], aw, lw, zdd)
    for f in range(nf):
        for i in range(6):
            Zd[f, i] += Y[f, i]
    return -1
