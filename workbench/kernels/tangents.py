"""Tangent-linear (forward-mode) kernels of the semi-recursive formulation.

Each kernel here is the hand-written directional derivative of the kernel of the same name
in :mod:`workbench.kernels.tree`: given the value arrays of the primal kernel and the tangents
of its inputs (``dz``, ``dzd``, ``dzdd`` of the joint coordinates and ``dp`` of the field
vector), it returns the tangents of its outputs.  They implement, in recursive form, the
partial derivatives that seed 001 lists in eqs 49-61 (``Phi_z``, ``Phi_rho``, ``Mbar_z``,
``Qbar_z``, ``Qbar_zd``, ``Qbar_rho``, the derivatives of ``R^Phi`` in eqs 56-57, ...):
contracted with a direction they are exactly those terms.

Conventions for the tangents of the position kinematics:

* ``th[f]`` is the rotation-vector tangent of frame ``f``: ``dA_f = [th_f]x A_f``
  (revolute ``th_f = th_parent + u_f dz_f``);
* ``dr[f]``, ``du[f]`` are the tangents of the frame origin and the global joint axis;
* ``db[f]``, ``dZ[f]``, ``dZd[f]`` are the tangents of the joint columns, the frame
  velocities and the material accelerations (SR-II convention, see :mod:`workbench.kernels.tree`).

Everything is exact: no differences, no step sizes.

The kernels called once per direction by
:func:`workbench.formulations.semirecursive.step_jacobians.jacobian_rows` are compiled into
it (``inline="always"``, numba IR inlining): numba passes every array argument as 7-11
machine words on the stack and counts a reference of the model's StructRef around each
call, which took about a tenth of the step-Jacobian time (``perf``: ``push``/``mov`` of
argument words).  numba cannot inline a call of more than 30 arguments (CPython then
packs them into one ``*args`` tuple), hence the short argument lists.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from workbench.forces import spring_laws as SL
from workbench.forces import tire_mf as TL
from workbench.forces.speed_control import drive_torque_dir
from workbench.kernels import layout as AR
from workbench.kernels import tree as K
from workbench.kernels.layout import (AF_FORCE, C_CAM, C_DIST, C_DOTVP, C_DOTVV, C_DRIVE, C_PTCOMP,
                                      DOF_COORD, PRISMATIC, REVOLUTE)
from workbench.kernels.scalar import cam_profile_cs

# stack temporaries of constant shape (no allocation in the hot kernels)
_S1x6x3 = AR.scratch(1, 6, 3)
_S2x3 = AR.scratch(2, 3)
_S2x6x3 = AR.scratch(2, 6, 3)
_S3 = AR.scratch(3)
_S3x3 = AR.scratch(3, 3)
_S3x6x3 = AR.scratch(3, 6, 3)
_S4x3 = AR.scratch(4, 3)
_S7x3 = AR.scratch(7, 3)
_S20x3 = AR.scratch(20, 3)


@njit(cache=True, inline="always")
def moved_frames(ma, dz, dzd, dzdd, every, mv):
    """``mv[f] = 1`` for the frames whose tangents can be nonzero along a direction,
    ``0`` for the others: a frame moves with its parent and with its own joint
    coordinate (``dz``, ``dzd`` or ``dzdd`` nonzero there); ``every`` (a direction that
    moves a field, ``dp != 0``): every frame.  ``mv`` has one entry more than there are
    frames, the ground's: ``1`` when ``every`` (then the ground's points move too), ``2``
    when every frame moves but the ground does not, else ``0``.  Called again along the
    same direction (after each level's solve, with more tangents nonzero) it returns at
    once when every frame moves already; a new direction must start from ``mv[-1] = 0``
    (:func:`reset_moved`).  The kernels that take ``mv`` write exact
    zeros for a frame with ``mv[f] = 0`` instead of computing them (a state direction of
    one wheel or suspension moves only its subtree; its ancestors receive the subtree's
    force tangents in the backward pass of the inverse dynamics, which runs over every
    frame)."""
    fr_parent = ma.fr_parent
    fr_coord = ma.fr_coord
    nf = fr_parent.shape[0]
    if mv[nf] == 1 or (mv[nf] == 2 and not every):
        return                   # already every frame (ground included, or not)
    for f in range(nf):
        if every:
            mv[f] = 1
            continue
        par = fr_parent[f]
        c = fr_coord[f]
        m = mv[par] if par >= 0 else 0
        if c >= 0 and (dz[c] != 0.0 or dzd[c] != 0.0 or dzdd[c] != 0.0):
            m = 1
        mv[f] = m
    if every:
        mv[nf] = 1
    else:
        mv[nf] = 0
        for f in range(nf):
            if mv[f] == 0:
                return
        mv[nf] = 2


@njit(cache=True, inline="always")
def reset_moved(mv):
    """Start the :func:`moved_frames` of a new direction."""
    mv[mv.shape[0] - 1] = 0


@njit(cache=True, inline="always")
def _cx(a, b, out):
    out[0] = a[1] * b[2] - a[2] * b[1]
    out[1] = a[2] * b[0] - a[0] * b[2]
    out[2] = a[0] * b[1] - a[1] * b[0]


@njit(cache=True, inline="always")
def _cxadd(a, b, out, s):
    """``out += s * (a x b)``."""
    out[0] += s * (a[1] * b[2] - a[2] * b[1])
    out[1] += s * (a[2] * b[0] - a[0] * b[2])
    out[2] += s * (a[0] * b[1] - a[1] * b[0])


# ----------------------------------------------------------------------------------------
# position kinematics
# ----------------------------------------------------------------------------------------


@njit(cache=True)
def frame_positions_t(ma, p, dp, z, dz, A, r, u, th, dr, du, mv):
    """Tangent of :func:`workbench.kernels.tree.frame_positions`.

    ``r_f = r_p + A_p s``: ``dr_f = dr_p + th_p x (r_f - r_p) + A_p ds``;
    ``u_f = A_p a``: ``du_f = th_p x u_f``; ``th_f = th_p + u_f dz_f`` (revolute).
    ``mv``: :func:`moved_frames` (zero at the frames it leaves).  Scalars instead of row
    views (each view is reference-counted); the same operations in the same order as
    ``_cx``.
    """
    fr_parent = ma.fr_parent
    fr_off = ma.fr_off
    fr_axis = ma.fr_axis
    fr_type = ma.fr_type
    fr_coord = ma.fr_coord
    nf = fr_parent.shape[0]
    for f in range(nf):
        if mv[f] == 0:
            for i in range(3):
                th[f, i] = 0.0
                dr[f, i] = 0.0
                du[f, i] = 0.0
            continue
        par = fr_parent[f]
        o = fr_off[f]
        typ = fr_type[f]
        c = fr_coord[f]
        dq = dz[c] if c >= 0 else 0.0
        ds0 = dp[o]
        ds1 = dp[o + 1]
        ds2 = dp[o + 2]
        if typ == PRISMATIC:
            ds0 += fr_axis[f, 0] * dq
            ds1 += fr_axis[f, 1] * dq
            ds2 += fr_axis[f, 2] * dq
        if par < 0:
            for i in range(3):
                th[f, i] = 0.0
                dr[f, i] = ds0 if i == 0 else (ds1 if i == 1 else ds2)
                du[f, i] = 0.0
        else:
            t0 = r[f, 0] - r[par, 0]
            t1 = r[f, 1] - r[par, 1]
            t2 = r[f, 2] - r[par, 2]
            w0, w1, w2 = th[par, 0], th[par, 1], th[par, 2]
            dr[f, 0] = w1 * t2 - w2 * t1
            dr[f, 1] = w2 * t0 - w0 * t2
            dr[f, 2] = w0 * t1 - w1 * t0
            u0, u1, u2 = u[f, 0], u[f, 1], u[f, 2]
            du[f, 0] = w1 * u2 - w2 * u1
            du[f, 1] = w2 * u0 - w0 * u2
            du[f, 2] = w0 * u1 - w1 * u0
            for i in range(3):
                dr[f, i] += (dr[par, i] + A[par, i, 0] * ds0 + A[par, i, 1] * ds1
                             + A[par, i, 2] * ds2)
                th[f, i] = th[par, i]
        if typ == REVOLUTE:
            for i in range(3):
                th[f, i] += u[f, i] * dq


@njit(cache=True)
def body_point_t(ma, p, dp, A, r, th, dr, b, fld, x, dx):
    """Tangent of :func:`workbench.kernels.tree._body_point` (``x`` is the point's global position)."""
    o = ma.b_org[b]
    f = ma.b_frame[b]
    l0 = dp[o] + dp[fld]
    l1 = dp[o + 1] + dp[fld + 1]
    l2 = dp[o + 2] + dp[fld + 2]
    t0 = x[0] - r[f, 0]
    t1 = x[1] - r[f, 1]
    t2 = x[2] - r[f, 2]
    w0, w1, w2 = th[f, 0], th[f, 1], th[f, 2]
    dx[0] = dr[f, 0] + w1 * t2 - w2 * t1 + A[f, 0, 0] * l0 + A[f, 0, 1] * l1 + A[f, 0, 2] * l2
    dx[1] = dr[f, 1] + w2 * t0 - w0 * t2 + A[f, 1, 0] * l0 + A[f, 1, 1] * l1 + A[f, 1, 2] * l2
    dx[2] = dr[f, 2] + w0 * t1 - w1 * t0 + A[f, 2, 0] * l0 + A[f, 2, 1] * l1 + A[f, 2, 2] * l2


@njit(cache=True)
def point_position_t(ma, p, dp, A, r, th, dr, k, x, dx):
    b = ma.pt_body[k]
    fld = ma.pt_fld[k]
    if b < 0:
        for i in range(3):
            dx[i] = dp[fld + i]
        return
    body_point_t(ma, p, dp, A, r, th, dr, b, fld, x, dx)


@njit(cache=True, inline="always")
def body_inertias_t(ma, p, dp, A, r, th, dr, bg, bJ, bdm, bdg, bdJ, mv):
    """Tangent of :func:`workbench.kernels.tree.body_inertia` for every body (``bg, bJ``: the bodies'
    centres of mass and inertias at this state): ``bdm[b] = dm``, ``bdg[b] = dg`` (the
    centre of mass as a body point, :func:`body_point_t`) and ``bdJ[b] = [th]x JG - JG
    [th]x + A dJ_local A^T``; computed once per direction and shared by the gravity loads,
    the reference points and both inverse dynamics.  ``mv``: :func:`moved_frames` (zero
    tangents for the bodies of the frames it leaves)."""
    for b in range(ma.b_frame.shape[0]):
        f = ma.b_frame[b]
        if mv[f] == 0:
            bdm[b] = 0.0
            for i in range(3):
                bdg[b, i] = 0.0
                for j in range(3):
                    bdJ[b, i, j] = 0.0
            continue
        o = ma.b_org[b]
        fld = ma.b_com[b]
        bdm[b] = dp[ma.b_mass[b]]
        # body_point_t of the centre of mass
        l0 = dp[o] + dp[fld]
        l1 = dp[o + 1] + dp[fld + 1]
        l2 = dp[o + 2] + dp[fld + 2]
        t0 = bg[b, 0] - r[f, 0]
        t1 = bg[b, 1] - r[f, 1]
        t2 = bg[b, 2] - r[f, 2]
        w0, w1, w2 = th[f, 0], th[f, 1], th[f, 2]
        bdg[b, 0] = dr[f, 0] + w1 * t2 - w2 * t1 + A[f, 0, 0] * l0 + A[f, 0, 1] * l1 + A[f, 0, 2] * l2
        bdg[b, 1] = dr[f, 1] + w2 * t0 - w0 * t2 + A[f, 1, 0] * l0 + A[f, 1, 1] * l1 + A[f, 1, 2] * l2
        bdg[b, 2] = dr[f, 2] + w0 * t1 - w1 * t0 + A[f, 2, 0] * l0 + A[f, 2, 1] * l1 + A[f, 2, 2] * l2
        k = ma.b_inr[b]
        J00, J11, J22 = dp[k], dp[k + 1], dp[k + 2]
        J01, J02, J12 = dp[k + 3], dp[k + 4], dp[k + 5]
        for i in range(3):
            a0 = A[f, i, 0] * J00 + A[f, i, 1] * J01 + A[f, i, 2] * J02
            a1 = A[f, i, 0] * J01 + A[f, i, 1] * J11 + A[f, i, 2] * J12
            a2 = A[f, i, 0] * J02 + A[f, i, 1] * J12 + A[f, i, 2] * J22
            for j in range(3):
                bdJ[b, i, j] = a0 * A[f, j, 0] + a1 * A[f, j, 1] + a2 * A[f, j, 2]
        for i in range(3):
            for j in range(3):
                if i == 0:
                    lt = -w2 * bJ[b, 1, j] + w1 * bJ[b, 2, j]
                elif i == 1:
                    lt = w2 * bJ[b, 0, j] - w0 * bJ[b, 2, j]
                else:
                    lt = -w1 * bJ[b, 0, j] + w0 * bJ[b, 1, j]
                if j == 0:
                    rt = bJ[b, i, 1] * w2 - bJ[b, i, 2] * w1
                elif j == 1:
                    rt = -bJ[b, i, 0] * w2 + bJ[b, i, 2] * w0
                else:
                    rt = bJ[b, i, 0] * w1 - bJ[b, i, 1] * w0
                bdJ[b, i, j] += lt - rt


# ----------------------------------------------------------------------------------------
# velocities and accelerations (SR-II)
# ----------------------------------------------------------------------------------------


@njit(cache=True, inline="always")
def joint_columns_t(ma, r, u, dr, du, db, mv):
    """Tangent of :func:`workbench.kernels.tree.joint_columns`: revolute ``[dr x u + r x du; du]``
    (``mv``: :func:`moved_frames`)."""
    fr_type = ma.fr_type
    nf = ma.fr_parent.shape[0]
    for f in range(nf):
        typ = fr_type[f]
        if mv[f] == 0:
            typ = -1
        if typ == REVOLUTE:
            # scalars instead of row views (each view is reference-counted)
            r0, r1, r2 = r[f, 0], r[f, 1], r[f, 2]
            u0, u1, u2 = u[f, 0], u[f, 1], u[f, 2]
            dr0, dr1, dr2 = dr[f, 0], dr[f, 1], dr[f, 2]
            du0, du1, du2 = du[f, 0], du[f, 1], du[f, 2]
            db[f, 0] = dr1 * u2 - dr2 * u1 + r1 * du2 - r2 * du1
            db[f, 1] = dr2 * u0 - dr0 * u2 + r2 * du0 - r0 * du2
            db[f, 2] = dr0 * u1 - dr1 * u0 + r0 * du1 - r1 * du0
            db[f, 3] = du0
            db[f, 4] = du1
            db[f, 5] = du2
        elif typ == PRISMATIC:
            for i in range(3):
                db[f, i] = du[f, i]
                db[f, 3 + i] = 0.0
        else:
            for i in range(6):
                db[f, i] = 0.0


@njit(cache=True, inline="always")
def frame_velocities_t(ma, zd, dzd, bcol, db, dZ, mv):
    """Tangent of :func:`workbench.kernels.tree.frame_velocities` (``mv``:
    :func:`moved_frames`)."""
    nf = ma.fr_parent.shape[0]
    for f in range(nf):
        if mv[f] == 0:
            for i in range(6):
                dZ[f, i] = 0.0
            continue
        par = ma.fr_parent[f]
        c = ma.fr_coord[f]
        q = zd[c] if c >= 0 else 0.0
        dq = dzd[c] if c >= 0 else 0.0
        for i in range(6):
            dZ[f, i] = (dZ[par, i] if par >= 0 else 0.0) + db[f, i] * q + bcol[f, i] * dq


@njit(cache=True, inline="always")
def frame_accelerations_t(ma, zd, zdd, dzd, dzdd, r, u, bcol, Z, dr, du, db, dZ, dZd, mv):
    """Tangent of :func:`workbench.kernels.tree.frame_accelerations` (material convention).

    Scalars instead of 3-vector row views (each view is reference-counted); the same
    operations in the same order as ``_cx``, ``_cxadd`` and ``_centripetal_t``.  ``mv``:
    :func:`moved_frames` (zero at the frames it leaves)."""
    fr_parent = ma.fr_parent
    fr_coord = ma.fr_coord
    fr_type = ma.fr_type
    nf = fr_parent.shape[0]
    for f in range(nf):
        if mv[f] == 0:
            for i in range(6):
                dZd[f, i] = 0.0
            continue
        par = fr_parent[f]
        c = fr_coord[f]
        q1 = zd[c] if c >= 0 else 0.0
        q2 = zdd[c] if c >= 0 else 0.0
        dq1 = dzd[c] if c >= 0 else 0.0
        dq2 = dzdd[c] if c >= 0 else 0.0
        for i in range(6):
            dZd[f, i] = (dZd[par, i] if par >= 0 else 0.0) + db[f, i] * q2 + bcol[f, i] * dq2
        if c < 0:
            continue
        if par >= 0:
            p0, p1, p2 = Z[par, 3], Z[par, 4], Z[par, 5]
            dp0, dp1, dp2 = dZ[par, 3], dZ[par, 4], dZ[par, 5]
        else:
            p0, p1, p2 = 0.0, 0.0, 0.0
            dp0, dp1, dp2 = 0.0, 0.0, 0.0
        u0, u1, u2 = u[f, 0], u[f, 1], u[f, 2]
        du0, du1, du2 = du[f, 0], du[f, 1], du[f, 2]
        wpu0 = p1 * u2 - p2 * u1
        wpu1 = p2 * u0 - p0 * u2
        wpu2 = p0 * u1 - p1 * u0
        dwpu0 = dp1 * u2 - dp2 * u1
        dwpu1 = dp2 * u0 - dp0 * u2
        dwpu2 = dp0 * u1 - dp1 * u0
        dwpu0 += 1.0 * (p1 * du2 - p2 * du1)
        dwpu1 += 1.0 * (p2 * du0 - p0 * du2)
        dwpu2 += 1.0 * (p0 * du1 - p1 * du0)
        typ = fr_type[f]
        if typ == REVOLUTE:
            r0, r1, r2 = r[f, 0], r[f, 1], r[f, 2]
            dr0, dr1, dr2 = dr[f, 0], dr[f, 1], dr[f, 2]
            # q1 r x wpu
            t10 = r1 * wpu2 - r2 * wpu1
            t11 = r2 * wpu0 - r0 * wpu2
            t12 = r0 * wpu1 - r1 * wpu0
            t20 = dr1 * wpu2 - dr2 * wpu1
            t21 = dr2 * wpu0 - dr0 * wpu2
            t22 = dr0 * wpu1 - dr1 * wpu0
            t20 += 1.0 * (r1 * dwpu2 - r2 * dwpu1)
            t21 += 1.0 * (r2 * dwpu0 - r0 * dwpu2)
            t22 += 1.0 * (r0 * dwpu1 - r1 * dwpu0)
            o0 = dZd[f, 0] + (dq1 * t10 + q1 * t20)
            o1 = dZd[f, 1] + (dq1 * t11 + q1 * t21)
            o2 = dZd[f, 2] + (dq1 * t12 + q1 * t22)
            dZd[f, 3] += dq1 * wpu0 + q1 * dwpu0
            dZd[f, 4] += dq1 * wpu1 + q1 * dwpu1
            dZd[f, 5] += dq1 * wpu2 + q1 * dwpu2
            # + wp x (wp x r) - wf x (wf x r), tangents (_centripetal_t with s = 1, -1)
            for rep in range(2):
                if rep == 0:
                    w0, w1, w2 = p0, p1, p2
                    dw0, dw1, dw2 = dp0, dp1, dp2
                    sg = 1.0
                else:
                    w0, w1, w2 = Z[f, 3], Z[f, 4], Z[f, 5]
                    dw0, dw1, dw2 = dZ[f, 3], dZ[f, 4], dZ[f, 5]
                    sg = -1.0
                t10 = w1 * r2 - w2 * r1
                t11 = w2 * r0 - w0 * r2
                t12 = w0 * r1 - w1 * r0
                o0 += sg * (dw1 * t12 - dw2 * t11)
                o1 += sg * (dw2 * t10 - dw0 * t12)
                o2 += sg * (dw0 * t11 - dw1 * t10)
                t20 = dw1 * r2 - dw2 * r1
                t21 = dw2 * r0 - dw0 * r2
                t22 = dw0 * r1 - dw1 * r0
                t20 += 1.0 * (w1 * dr2 - w2 * dr1)
                t21 += 1.0 * (w2 * dr0 - w0 * dr2)
                t22 += 1.0 * (w0 * dr1 - w1 * dr0)
                o0 += sg * (w1 * t22 - w2 * t21)
                o1 += sg * (w2 * t20 - w0 * t22)
                o2 += sg * (w0 * t21 - w1 * t20)
            dZd[f, 0] = o0
            dZd[f, 1] = o1
            dZd[f, 2] = o2
        elif typ == PRISMATIC:
            dZd[f, 0] += 2.0 * (dq1 * wpu0 + q1 * dwpu0)
            dZd[f, 1] += 2.0 * (dq1 * wpu1 + q1 * dwpu1)
            dZd[f, 2] += 2.0 * (dq1 * wpu2 + q1 * dwpu2)


@njit(cache=True, inline="always")
def _centripetal_t(w, dw, x, dx, out, s, t1, t2):
    """``out += s * d[w x (w x x)] = s * (dw x (w x x) + w x (dw x x + w x dx))``."""
    _cx(w, x, t1)
    _cxadd(dw, t1, out, s)
    _cx(dw, x, t2)
    _cxadd(w, dx, t2, 1.0)
    _cxadd(w, t2, out, s)


@njit(cache=True)
def point_kinematics_t(ma, p, dp, A, r, Z, Zd, th, dr, dZ, dZd, k, x, v, a, dx, dv, da):
    """Tangent of :func:`workbench.kernels.tree.point_kinematics`: ``x, v, a`` are the primal values
    (filled here), ``dx, dv, da`` their tangents."""
    K.point_kinematics(ma, p, A, r, Z, Zd, k, x, v, a)
    point_position_t(ma, p, dp, A, r, th, dr, k, x, dx)
    b = ma.pt_body[k]
    if b < 0:
        for i in range(3):
            dv[i] = 0.0
            da[i] = 0.0
        return
    f = ma.b_frame[b]
    # scalars instead of row views and work vectors (each view is reference-counted);
    # the same operations in the same order as _cxadd / _centripetal_t
    w0, w1, w2 = Z[f, 3], Z[f, 4], Z[f, 5]
    dw0, dw1, dw2 = dZ[f, 3], dZ[f, 4], dZ[f, 5]
    wd0, wd1, wd2 = Zd[f, 3], Zd[f, 4], Zd[f, 5]
    dwd0, dwd1, dwd2 = dZd[f, 3], dZd[f, 4], dZd[f, 5]
    x0, x1, x2 = x[0], x[1], x[2]
    dx0, dx1, dx2 = dx[0], dx[1], dx[2]
    v0 = dZ[f, 0]
    v1 = dZ[f, 1]
    v2 = dZ[f, 2]
    a0 = dZd[f, 0]
    a1 = dZd[f, 1]
    a2 = dZd[f, 2]
    v0 += 1.0 * (dw1 * x2 - dw2 * x1)
    v1 += 1.0 * (dw2 * x0 - dw0 * x2)
    v2 += 1.0 * (dw0 * x1 - dw1 * x0)
    v0 += 1.0 * (w1 * dx2 - w2 * dx1)
    v1 += 1.0 * (w2 * dx0 - w0 * dx2)
    v2 += 1.0 * (w0 * dx1 - w1 * dx0)
    a0 += 1.0 * (dwd1 * x2 - dwd2 * x1)
    a1 += 1.0 * (dwd2 * x0 - dwd0 * x2)
    a2 += 1.0 * (dwd0 * x1 - dwd1 * x0)
    a0 += 1.0 * (wd1 * dx2 - wd2 * dx1)
    a1 += 1.0 * (wd2 * dx0 - wd0 * dx2)
    a2 += 1.0 * (wd0 * dx1 - wd1 * dx0)
    # centripetal: da += dw x (w x x) + w x (dw x x + w x dx)
    t10 = w1 * x2 - w2 * x1
    t11 = w2 * x0 - w0 * x2
    t12 = w0 * x1 - w1 * x0
    a0 += 1.0 * (dw1 * t12 - dw2 * t11)
    a1 += 1.0 * (dw2 * t10 - dw0 * t12)
    a2 += 1.0 * (dw0 * t11 - dw1 * t10)
    t20 = dw1 * x2 - dw2 * x1
    t21 = dw2 * x0 - dw0 * x2
    t22 = dw0 * x1 - dw1 * x0
    t20 += 1.0 * (w1 * dx2 - w2 * dx1)
    t21 += 1.0 * (w2 * dx0 - w0 * dx2)
    t22 += 1.0 * (w0 * dx1 - w1 * dx0)
    a0 += 1.0 * (w1 * t22 - w2 * t21)
    a1 += 1.0 * (w2 * t20 - w0 * t22)
    a2 += 1.0 * (w0 * t21 - w1 * t20)
    dv[0] = v0
    dv[1] = v1
    dv[2] = v2
    da[0] = a0
    da[1] = a1
    da[2] = a2


@njit(cache=True)
def vector_kinematics_t(ma, A, Z, Zd, th, dZ, dZd, k, e, ed, edd, de, ded, dedd):
    """Tangent of :func:`workbench.kernels.tree.vector_kinematics`."""
    K.vector_kinematics(ma, A, Z, Zd, k, e, ed, edd)
    b = ma.vc_body[k]
    if b < 0:
        for i in range(3):
            de[i] = 0.0
            ded[i] = 0.0
            dedd[i] = 0.0
        return
    f = ma.b_frame[b]
    w = Z[f, 3:6]
    dw = dZ[f, 3:6]
    wd = Zd[f, 3:6]
    dwd = dZd[f, 3:6]
    _cx(th[f], e, de)
    _cx(dw, e, ded)
    _cxadd(w, de, ded, 1.0)
    _cx(dwd, e, dedd)
    _cxadd(wd, de, dedd, 1.0)
    _cxadd(dw, ed, dedd, 1.0)
    _cxadd(w, ded, dedd, 1.0)


# ----------------------------------------------------------------------------------------
# constraints and degrees of freedom
# ----------------------------------------------------------------------------------------


@njit(cache=True, inline="always")
def point_kinematics_tb(ma, p, dp, A, r, Z, Zd, th, dr, dZ, dZd, k, B, s, acc):
    """:func:`point_kinematics_t` into rows ``B[s, 0:6]`` = x, v, a, dx, dv, da (the same
    operations in the same order, without row views: each view is reference-counted).
    ``acc`` False (a constant at the call site: the force elements, which read positions
    and velocities only): rows a and da are left unset and their operations are not done."""
    b = ma.pt_body[k]
    fld = ma.pt_fld[k]
    if b < 0:
        for i in range(3):
            B[s, 0, i] = p[fld + i]
            B[s, 1, i] = 0.0
            B[s, 2, i] = 0.0
            B[s, 3, i] = dp[fld + i]
            B[s, 4, i] = 0.0
            B[s, 5, i] = 0.0
        return
    o = ma.b_org[b]
    f = ma.b_frame[b]
    l0 = p[o] + p[fld]
    l1 = p[o + 1] + p[fld + 1]
    l2 = p[o + 2] + p[fld + 2]
    x0 = r[f, 0] + A[f, 0, 0] * l0 + A[f, 0, 1] * l1 + A[f, 0, 2] * l2
    x1 = r[f, 1] + A[f, 1, 0] * l0 + A[f, 1, 1] * l1 + A[f, 1, 2] * l2
    x2 = r[f, 2] + A[f, 2, 0] * l0 + A[f, 2, 1] * l1 + A[f, 2, 2] * l2
    w0, w1, w2 = Z[f, 3], Z[f, 4], Z[f, 5]
    c0 = w1 * x2 - w2 * x1
    c1 = w2 * x0 - w0 * x2
    c2 = w0 * x1 - w1 * x0
    B[s, 0, 0] = x0
    B[s, 0, 1] = x1
    B[s, 0, 2] = x2
    B[s, 1, 0] = Z[f, 0] + c0
    B[s, 1, 1] = Z[f, 1] + c1
    B[s, 1, 2] = Z[f, 2] + c2
    if acc:
        q0, q1, q2 = Zd[f, 3], Zd[f, 4], Zd[f, 5]
        B[s, 2, 0] = Zd[f, 0] + q1 * x2 - q2 * x1 + w1 * c2 - w2 * c1
        B[s, 2, 1] = Zd[f, 1] + q2 * x0 - q0 * x2 + w2 * c0 - w0 * c2
        B[s, 2, 2] = Zd[f, 2] + q0 * x1 - q1 * x0 + w0 * c1 - w1 * c0
    # body_point_t
    m0 = dp[o] + dp[fld]
    m1 = dp[o + 1] + dp[fld + 1]
    m2 = dp[o + 2] + dp[fld + 2]
    t0 = x0 - r[f, 0]
    t1 = x1 - r[f, 1]
    t2 = x2 - r[f, 2]
    h0, h1, h2 = th[f, 0], th[f, 1], th[f, 2]
    dx0 = dr[f, 0] + h1 * t2 - h2 * t1 + A[f, 0, 0] * m0 + A[f, 0, 1] * m1 + A[f, 0, 2] * m2
    dx1 = dr[f, 1] + h2 * t0 - h0 * t2 + A[f, 1, 0] * m0 + A[f, 1, 1] * m1 + A[f, 1, 2] * m2
    dx2 = dr[f, 2] + h0 * t1 - h1 * t0 + A[f, 2, 0] * m0 + A[f, 2, 1] * m1 + A[f, 2, 2] * m2
    B[s, 3, 0] = dx0
    B[s, 3, 1] = dx1
    B[s, 3, 2] = dx2
    dw0, dw1, dw2 = dZ[f, 3], dZ[f, 4], dZ[f, 5]
    v0 = dZ[f, 0]
    v1 = dZ[f, 1]
    v2 = dZ[f, 2]
    v0 += 1.0 * (dw1 * x2 - dw2 * x1)
    v1 += 1.0 * (dw2 * x0 - dw0 * x2)
    v2 += 1.0 * (dw0 * x1 - dw1 * x0)
    v0 += 1.0 * (w1 * dx2 - w2 * dx1)
    v1 += 1.0 * (w2 * dx0 - w0 * dx2)
    v2 += 1.0 * (w0 * dx1 - w1 * dx0)
    B[s, 4, 0] = v0
    B[s, 4, 1] = v1
    B[s, 4, 2] = v2
    if not acc:
        return
    wd0, wd1, wd2 = Zd[f, 3], Zd[f, 4], Zd[f, 5]
    dwd0, dwd1, dwd2 = dZd[f, 3], dZd[f, 4], dZd[f, 5]
    a0 = dZd[f, 0]
    a1 = dZd[f, 1]
    a2 = dZd[f, 2]
    a0 += 1.0 * (dwd1 * x2 - dwd2 * x1)
    a1 += 1.0 * (dwd2 * x0 - dwd0 * x2)
    a2 += 1.0 * (dwd0 * x1 - dwd1 * x0)
    a0 += 1.0 * (wd1 * dx2 - wd2 * dx1)
    a1 += 1.0 * (wd2 * dx0 - wd0 * dx2)
    a2 += 1.0 * (wd0 * dx1 - wd1 * dx0)
    t10 = w1 * x2 - w2 * x1
    t11 = w2 * x0 - w0 * x2
    t12 = w0 * x1 - w1 * x0
    a0 += 1.0 * (dw1 * t12 - dw2 * t11)
    a1 += 1.0 * (dw2 * t10 - dw0 * t12)
    a2 += 1.0 * (dw0 * t11 - dw1 * t10)
    t20 = dw1 * x2 - dw2 * x1
    t21 = dw2 * x0 - dw0 * x2
    t22 = dw0 * x1 - dw1 * x0
    t20 += 1.0 * (w1 * dx2 - w2 * dx1)
    t21 += 1.0 * (w2 * dx0 - w0 * dx2)
    t22 += 1.0 * (w0 * dx1 - w1 * dx0)
    a0 += 1.0 * (w1 * t22 - w2 * t21)
    a1 += 1.0 * (w2 * t20 - w0 * t22)
    a2 += 1.0 * (w0 * t21 - w1 * t20)
    B[s, 5, 0] = a0
    B[s, 5, 1] = a1
    B[s, 5, 2] = a2


@njit(cache=True, inline="always")
def vector_kinematics_tb(ma, A, Z, Zd, th, dZ, dZd, k, B, s, acc):
    """:func:`vector_kinematics_t` into rows ``B[s, 0:6]`` = e, ed, edd, de, ded, dedd
    (``acc`` False, a constant at the call site: rows edd and dedd are left unset and their
    operations are not done)."""
    b = ma.vc_body[k]
    if b < 0:
        for i in range(3):
            B[s, 0, i] = ma.vc_val[k, i]
            B[s, 1, i] = 0.0
            B[s, 2, i] = 0.0
            B[s, 3, i] = 0.0
            B[s, 4, i] = 0.0
            B[s, 5, i] = 0.0
        return
    f = ma.b_frame[b]
    c0, c1, c2 = ma.vc_val[k, 0], ma.vc_val[k, 1], ma.vc_val[k, 2]
    e0 = A[f, 0, 0] * c0 + A[f, 0, 1] * c1 + A[f, 0, 2] * c2
    e1 = A[f, 1, 0] * c0 + A[f, 1, 1] * c1 + A[f, 1, 2] * c2
    e2 = A[f, 2, 0] * c0 + A[f, 2, 1] * c1 + A[f, 2, 2] * c2
    w0, w1, w2 = Z[f, 3], Z[f, 4], Z[f, 5]
    q0, q1, q2 = Zd[f, 3], Zd[f, 4], Zd[f, 5]
    ed0 = w1 * e2 - w2 * e1
    ed1 = w2 * e0 - w0 * e2
    ed2 = w0 * e1 - w1 * e0
    h0, h1, h2 = th[f, 0], th[f, 1], th[f, 2]
    dw0, dw1, dw2 = dZ[f, 3], dZ[f, 4], dZ[f, 5]
    dwd0, dwd1, dwd2 = dZd[f, 3], dZd[f, 4], dZd[f, 5]
    de0 = h1 * e2 - h2 * e1
    de1 = h2 * e0 - h0 * e2
    de2 = h0 * e1 - h1 * e0
    ded0 = dw1 * e2 - dw2 * e1
    ded1 = dw2 * e0 - dw0 * e2
    ded2 = dw0 * e1 - dw1 * e0
    ded0 += 1.0 * (w1 * de2 - w2 * de1)
    ded1 += 1.0 * (w2 * de0 - w0 * de2)
    ded2 += 1.0 * (w0 * de1 - w1 * de0)
    B[s, 0, 0] = e0
    B[s, 0, 1] = e1
    B[s, 0, 2] = e2
    B[s, 1, 0] = ed0
    B[s, 1, 1] = ed1
    B[s, 1, 2] = ed2
    B[s, 3, 0] = de0
    B[s, 3, 1] = de1
    B[s, 3, 2] = de2
    B[s, 4, 0] = ded0
    B[s, 4, 1] = ded1
    B[s, 4, 2] = ded2
    if acc:
        edd0 = q1 * e2 - q2 * e1 + w1 * ed2 - w2 * ed1
        edd1 = q2 * e0 - q0 * e2 + w2 * ed0 - w0 * ed2
        edd2 = q0 * e1 - q1 * e0 + w0 * ed1 - w1 * ed0
        dd0 = dwd1 * e2 - dwd2 * e1
        dd1 = dwd2 * e0 - dwd0 * e2
        dd2 = dwd0 * e1 - dwd1 * e0
        dd0 += 1.0 * (q1 * de2 - q2 * de1)
        dd1 += 1.0 * (q2 * de0 - q0 * de2)
        dd2 += 1.0 * (q0 * de1 - q1 * de0)
        dd0 += 1.0 * (dw1 * ed2 - dw2 * ed1)
        dd1 += 1.0 * (dw2 * ed0 - dw0 * ed2)
        dd2 += 1.0 * (dw0 * ed1 - dw1 * ed0)
        dd0 += 1.0 * (w1 * ded2 - w2 * ded1)
        dd1 += 1.0 * (w2 * ded0 - w0 * ded2)
        dd2 += 1.0 * (w0 * ded1 - w1 * ded0)
        B[s, 2, 0] = edd0
        B[s, 2, 1] = edd1
        B[s, 2, 2] = edd2
        B[s, 5, 0] = dd0
        B[s, 5, 1] = dd1
        B[s, 5, 2] = dd2


@njit(cache=True, inline="always")
def constraints_t(ma, p, dp, t, z, zd, zdd, dz, dzd, dzdd, A, r, Z, Zd, th, dr, dZ, dZd,
                  level, out):
    """Tangent of :func:`workbench.kernels.tree.constraints` at the given level.

    The point and vector kinematics go to one buffer ``B[slot, row, :]`` (rows x, v, a,
    dx, dv, da or e, ed, edd, de, ded, dedd) instead of 3-vector views: each view and
    each model-array access is reference-counted, which dominated this kernel.

    Cam relation ``z_a - s(z_b; p)`` (``s^(j)`` the derivatives in the polar angle, ``ds^(j)``
    their tangents along the coefficient directions ``dp``,
    :func:`workbench.kernels.scalar.cam_profile_cs`; ``g^(j) = s^(j+1) dz_b + ds^(j)``):
    ``dPhi = dz_a - s' dz_b - ds``, ``dPhi_dot = dzd_a - s' dzd_b - g' zd_b``,
    ``dPhi_ddot = dzdd_a - s' dzdd_b - g' zdd_b - g'' zd_b^2 - 2 s'' zd_b dzd_b``."""
    c_type = ma.c_type
    c_i = ma.c_i
    nc = c_type.shape[0]
    B = _S3x6x3()
    for k in range(nc):
        typ = c_type[k]
        if typ == C_PTCOMP:
            if not K._same_points(c_type, c_i, k):
                point_kinematics_tb(ma, p, dp, A, r, Z, Zd, th, dr, dZ, dZd, c_i[k, 0], B, 0, True)
                point_kinematics_tb(ma, p, dp, A, r, Z, Zd, th, dr, dZ, dZd, c_i[k, 1], B, 1, True)
            j = c_i[k, 2]
            if level == 0:
                out[k] = B[0, 3, j] - B[1, 3, j]
            elif level == 1:
                out[k] = B[0, 4, j] - B[1, 4, j]
            else:
                out[k] = B[0, 5, j] - B[1, 5, j]
        elif typ == C_DOTVV:
            vector_kinematics_tb(ma, A, Z, Zd, th, dZ, dZd, c_i[k, 0], B, 0, True)
            vector_kinematics_tb(ma, A, Z, Zd, th, dZ, dZd, c_i[k, 1], B, 1, True)
            s = 0.0
            for i in range(3):
                e1 = B[0, 0, i]
                ed1 = B[0, 1, i]
                edd1 = B[0, 2, i]
                de1 = B[0, 3, i]
                ded1 = B[0, 4, i]
                dedd1 = B[0, 5, i]
                e2 = B[1, 0, i]
                ed2 = B[1, 1, i]
                edd2 = B[1, 2, i]
                de2 = B[1, 3, i]
                ded2 = B[1, 4, i]
                dedd2 = B[1, 5, i]
                if level == 0:
                    s += de1 * e2 + e1 * de2
                elif level == 1:
                    s += ded1 * e2 + ed1 * de2 + de1 * ed2 + e1 * ded2
                else:
                    s += (dedd1 * e2 + edd1 * de2
                          + 2.0 * (ded1 * ed2 + ed1 * ded2)
                          + de1 * edd2 + e1 * dedd2)
            out[k] = s
        elif typ == C_DOTVP:
            vector_kinematics_tb(ma, A, Z, Zd, th, dZ, dZd, c_i[k, 0], B, 2, True)
            point_kinematics_tb(ma, p, dp, A, r, Z, Zd, th, dr, dZ, dZd, c_i[k, 1], B, 0, True)
            point_kinematics_tb(ma, p, dp, A, r, Z, Zd, th, dr, dZ, dZd, c_i[k, 2], B, 1, True)
            s = 0.0
            for i in range(3):
                d = B[1, 0, i] - B[0, 0, i]
                dd = B[1, 1, i] - B[0, 1, i]
                ddd = B[1, 2, i] - B[0, 2, i]
                td = B[1, 3, i] - B[0, 3, i]
                tdd = B[1, 4, i] - B[0, 4, i]
                tddd = B[1, 5, i] - B[0, 5, i]
                e1 = B[2, 0, i]
                ed1 = B[2, 1, i]
                edd1 = B[2, 2, i]
                de1 = B[2, 3, i]
                ded1 = B[2, 4, i]
                dedd1 = B[2, 5, i]
                if level == 0:
                    s += de1 * d + e1 * td
                elif level == 1:
                    s += ded1 * d + ed1 * td + de1 * dd + e1 * tdd
                else:
                    s += (dedd1 * d + edd1 * td + 2.0 * (ded1 * dd + ed1 * tdd)
                          + de1 * ddd + e1 * tddd)
            out[k] = s
        elif typ == C_DIST:
            point_kinematics_tb(ma, p, dp, A, r, Z, Zd, th, dr, dZ, dZd, c_i[k, 0], B, 0, True)
            point_kinematics_tb(ma, p, dp, A, r, Z, Zd, th, dr, dZ, dZd, c_i[k, 1], B, 1, True)
            s = 0.0
            for i in range(3):
                d = B[1, 0, i] - B[0, 0, i]
                dd = B[1, 1, i] - B[0, 1, i]
                ddd = B[1, 2, i] - B[0, 2, i]
                td = B[1, 3, i] - B[0, 3, i]
                tdd = B[1, 4, i] - B[0, 4, i]
                tddd = B[1, 5, i] - B[0, 5, i]
                if level == 0:
                    s += 2.0 * d * td
                elif level == 1:
                    s += 2.0 * (td * dd + d * tdd)
                else:
                    s += 4.0 * dd * tdd + 2.0 * (td * ddd + d * tddd)
            if level == 0:
                s -= 2.0 * p[ma.c_fld[k]] * dp[ma.c_fld[k]]
            out[k] = s
        elif typ == C_DRIVE:
            # z_j - f(t; p): the tangent is dz_j - df (df along the field direction dp,
            # :func:`_kernels.time_function_t`) at each level
            j = c_i[k, 0]
            df, dfd, dfdd = K.time_function_t(ma, p, dp, c_i[k, 1], t)
            if level == 0:
                out[k] = dz[j] - df
            elif level == 1:
                out[k] = dzd[j] - dfd
            else:
                out[k] = dzdd[j] - dfdd
        elif typ == C_CAM:
            ja = c_i[k, 0]
            jb = c_i[k, 1]
            o = ma.c_fld[k]
            cu = np.cos(z[jb])
            su = np.sin(z[jb])
            _, s1, s2, s3 = cam_profile_cs(p, o, c_i[k, 3], cu, su)
            ds0, ds1, ds2, _ = cam_profile_cs(dp, o, c_i[k, 3], cu, su)
            if level == 0:
                out[k] = dz[ja] - s1 * dz[jb] - ds0
            elif level == 1:
                out[k] = dzd[ja] - s1 * dzd[jb] - (s2 * dz[jb] + ds1) * zd[jb]
            else:
                wb = zd[jb]
                out[k] = (dzdd[ja] - s1 * dzdd[jb] - (s2 * dz[jb] + ds1) * zdd[jb]
                          - (s3 * dz[jb] + ds2) * wb * wb - 2.0 * s2 * wb * dzd[jb])


@njit(cache=True)
def dof_values_t(ma, p, dp, A, r, Z, Zd, th, dr, dZ, dZd, dz, dzd, dzdd, dh, dhd, dhdd):
    """Tangent of :func:`workbench.kernels.tree.dof_values`.  When every DOF is a joint coordinate
    call :func:`dof_coords_t` instead: a kernel that can reach the point kinematics pays
    for their (inlined) reference-counted locals on every call, ~0.1 us, even when the
    branch is not taken."""
    dof_type = ma.dof_type
    dof_i = ma.dof_i
    nd = dof_type.shape[0]
    B = _S1x6x3()
    for k in range(nd):
        if dof_type[k] == DOF_COORD:
            c = dof_i[k, 0]
            dh[k] = dz[c]
            dhd[k] = dzd[c]
            dhdd[k] = dzdd[c]
        else:
            point_kinematics_tb(ma, p, dp, A, r, Z, Zd, th, dr, dZ, dZd, dof_i[k, 0], B, 0, True)
            j = dof_i[k, 1]
            dh[k] = B[0, 3, j]
            dhd[k] = B[0, 4, j]
            dhdd[k] = B[0, 5, j]


@njit(cache=True)
def dof_coords_t(ma, dz, dzd, dzdd, dh, dhd, dhdd):
    """:func:`dof_values_t` of a model whose DOF are all joint coordinates."""
    dof_i = ma.dof_i
    for k in range(dof_i.shape[0]):
        c = dof_i[k, 0]
        dh[k] = dz[c]
        dhd[k] = dzd[c]
        dhdd[k] = dzdd[c]


# ----------------------------------------------------------------------------------------
# applied forces
# ----------------------------------------------------------------------------------------


@njit(cache=True, inline="always")
def _add_point_force_t(dfb, dnb, b, x, F, dx, dF):
    if b < 0:
        return
    for i in range(3):
        dfb[b, i] += dF[i]
    _cxadd(dx, F, dnb[b], 1.0)
    _cxadd(x, dF, dnb[b], 1.0)


@njit(cache=True, inline="always")
def _add_point_force_ts(dfb, dnb, b, x0, x1, x2, F0, F1, F2, dx0, dx1, dx2, dF0, dF1, dF2):
    """:func:`_add_point_force_t` on scalars (the same operations, no row views)."""
    if b < 0:
        return
    dfb[b, 0] += dF0
    dfb[b, 1] += dF1
    dfb[b, 2] += dF2
    dnb[b, 0] += 1.0 * (dx1 * F2 - dx2 * F1)
    dnb[b, 1] += 1.0 * (dx2 * F0 - dx0 * F2)
    dnb[b, 2] += 1.0 * (dx0 * F1 - dx1 * F0)
    dnb[b, 0] += 1.0 * (x1 * dF2 - x2 * dF1)
    dnb[b, 1] += 1.0 * (x2 * dF0 - x0 * dF2)
    dnb[b, 2] += 1.0 * (x0 * dF1 - x1 * dF0)


@njit(cache=True, inline="always")
def _global_vector_t(ma, A, th, k, e, de):
    """Model vector ``k`` in global axes and its tangent ``de = th_f x e`` (``th``: the
    rotation tangents of the frames)."""
    K.vector_global(ma, A, k, e)
    b = ma.vc_body[k]
    if b < 0:
        for i in range(3):
            de[i] = 0.0
        return
    f = ma.b_frame[b]
    de[0] = th[f, 1] * e[2] - th[f, 2] * e[1]
    de[1] = th[f, 2] * e[0] - th[f, 0] * e[2]
    de[2] = th[f, 0] * e[1] - th[f, 1] * e[0]


@njit(cache=True)
def speed_control_t(ma, p, dp, t, A, r, Z, Zd, th, dr, dZ, dZd, s, kin, Bp, buf, dnb):
    """Tangent of speed controller ``s``'s wheel torques (:func:`workbench.kernels.tree.
    applied_forces`): ``dT`` of :func:`workbench.forces.speed_control.drive_torque_dir`
    with ``dv = dv_P . e + v_P . de``; each wheel adds
    ``(dshare T + share dT) a + share T da`` to its moment (minus to its carrier's).
    ``Bp``, ``buf``: work buffers (2 x 6 x 3, >= 4 x 3)."""
    point_kinematics_tb(ma, p, dp, A, r, Z, Zd, th, dr, dZ, dZd, ma.sc_pt[s], Bp, 0, True)
    e = buf[0]
    de = buf[1]
    _global_vector_t(ma, A, th, ma.sc_vc[s], e, de)
    vel = 0.0
    dvel = 0.0
    for i in range(3):
        vel += Bp[0, 1, i] * e[i]
        dvel += Bp[0, 4, i] * e[i] + Bp[0, 1, i] * de[i]
    vset = K.time_function(ma, p, ma.sc_tf[s], t)[0]
    dvset = K.time_function_t(ma, p, dp, ma.sc_tf[s], t)[0] if kin else 0.0
    T, dT = drive_torque_dir(p, dp, ma.sc_fld[s], vset, vel, dvset, dvel)
    a = buf[2]
    da = buf[3]
    for w in range(ma.sw_sc.shape[0]):
        if ma.sw_sc[w] != s:
            continue
        _global_vector_t(ma, A, th, ma.sw_vc[w], a, da)
        sh = p[ma.sw_fld[w]]
        c1 = dp[ma.sw_fld[w]] * T + sh * dT
        c2 = sh * T
        b = ma.sw_body[w]
        cb = ma.sw_carrier[w]
        for i in range(3):
            dn = c1 * a[i] + c2 * da[i]
            dnb[b, i] += dn
            if cb >= 0:
                dnb[cb, i] -= dn


@njit(cache=True, inline="always")
def _still(ma, mv, k):
    """Point ``k`` does not move along the direction: on a body whose frame
    :func:`moved_frames` leaves, or on the ground for a direction that moves no field."""
    b = ma.pt_body[k]
    if b < 0:
        return mv[mv.shape[0] - 1] != 1
    return mv[ma.b_frame[b]] == 0


@njit(cache=True, inline="always")
def applied_forces_t(ma, p, dp, t, z, zd, dz, dzd, A, r, Z, Zd, th, dr, dZ, dZd,
                     dfb, dnb, dQj, kin, bm, bg, bdm, bdg, TJ, tj_cached, mv):
    """Tangent of :func:`workbench.kernels.tree.applied_forces` (the loads, not the potential).

    ``bm, bg``: the bodies' masses and centres of mass at this state; ``bdm, bdg`` their
    tangents along this direction (:func:`body_inertias_t`).  ``kin`` False: the
    direction moves no position and no field (``dp = 0``, ``th = dr = 0``): the gravity
    loads' tangents vanish and are skipped.  ``TJ``, ``tj_cached``: the tire cache of
    :func:`tire_forces_t` (``tj_cached`` True only when ``dp`` moves no tire or road
    field).  ``mv``: :func:`moved_frames`; the gravity load of a body that does not move,
    and a spring or tire none of whose bodies moves, have zero tangents and are skipped
    (the other elements are evaluated for every direction)."""
    nbod = ma.b_frame.shape[0]
    dfb[:, :] = 0.0
    dnb[:, :] = 0.0
    dQj[:] = 0.0
    _b3 = _S20x3()  # one stack buffer for the 3-vectors
    F = _b3[2]
    dF = _b3[3]
    grav = ma.gravity
    gr0, gr1, gr2 = grav[0], grav[1], grav[2]
    b_frame = ma.b_frame
    for b in range(nbod if kin else 0):
        if mv[b_frame[b]] == 0:
            continue
        m = bm[b]
        dm = bdm[b]
        _add_point_force_ts(dfb, dnb, b, bg[b, 0], bg[b, 1], bg[b, 2],
                            m * gr0, m * gr1, m * gr2, bdg[b, 0], bdg[b, 1], bdg[b, 2],
                            dm * gr0, dm * gr1, dm * gr2)
    # the two points' kinematics in one buffer (point_kinematics_tb: no row views):
    # Bp[s] rows x, v, a, dx, dv, da of point s; _b3 rows 16-19: d, dd, td, tdd
    Bp = _S2x6x3()
    for s in range(ma.sp_pt.shape[0]):
        k1 = ma.sp_pt[s, 0]
        k2 = ma.sp_pt[s, 1]
        if _still(ma, mv, k1) and _still(ma, mv, k2):
            continue
        point_kinematics_tb(ma, p, dp, A, r, Z, Zd, th, dr, dZ, dZd, k1, Bp, 0, False)
        point_kinematics_tb(ma, p, dp, A, r, Z, Zd, th, dr, dZ, dZd, k2, Bp, 1, False)
        L = 0.0
        for i in range(3):
            _b3[16, i] = Bp[1, 0, i] - Bp[0, 0, i]
            _b3[17, i] = Bp[1, 1, i] - Bp[0, 1, i]
            _b3[18, i] = Bp[1, 3, i] - Bp[0, 3, i]
            _b3[19, i] = Bp[1, 4, i] - Bp[0, 4, i]
            L += _b3[16, i] * _b3[16, i]
        L = np.sqrt(L)
        Ld = 0.0
        dL = 0.0
        dLd = 0.0
        for i in range(3):
            Ld += _b3[16, i] * _b3[17, i]
            dL += _b3[16, i] * _b3[18, i]
            dLd += _b3[18, i] * _b3[17, i] + _b3[16, i] * _b3[19, i]
        Ld /= L
        dL /= L
        dLd = dLd / L - Ld * dL / L
        law, kx, cx = ma.sp_law[s], ma.sp_x[s, 0], ma.sp_x[s, 1]
        T, TL, TLd, _ = SL.tension(law, kx, cx, law[2], p, ma.sp_k[s], ma.sp_c[s], ma.sp_L0[s],
                                   L, Ld)
        dT = TL * dL + TLd * dLd + SL.tension_dp(law, kx, cx, law[2], p, dp, ma.sp_k[s],
                                                 ma.sp_c[s], ma.sp_L0[s], L, Ld)
        for i in range(3):
            _b3[2, i] = T * _b3[16, i] / L
            _b3[3, i] = (dT * _b3[16, i] + T * _b3[18, i]) / L - T * _b3[16, i] * dL / (L * L)
        _add_point_force_ts(dfb, dnb, ma.pt_body[k1], Bp[0, 0, 0], Bp[0, 0, 1], Bp[0, 0, 2],
                            _b3[2, 0], _b3[2, 1], _b3[2, 2], Bp[0, 3, 0], Bp[0, 3, 1],
                            Bp[0, 3, 2], _b3[3, 0], _b3[3, 1], _b3[3, 2])
        _add_point_force_ts(dfb, dnb, ma.pt_body[k2], Bp[1, 0, 0], Bp[1, 0, 1], Bp[1, 0, 2],
                            -_b3[2, 0], -_b3[2, 1], -_b3[2, 2], Bp[1, 3, 0], Bp[1, 3, 1],
                            Bp[1, 3, 2], -_b3[3, 0], -_b3[3, 1], -_b3[3, 2])
    for s in range(ma.js_coord.shape[0]):
        c_ = ma.js_coord[s]
        k = p[ma.js_k[s]]
        dzz = z[c_] - p[ma.js_z0[s]]
        ddz = dz[c_] - dp[ma.js_z0[s]]
        dQj[c_] += (-dp[ma.js_k[s]] * dzz - k * ddz - dp[ma.js_c[s]] * zd[c_]
                    - p[ma.js_c[s]] * dzd[c_])
    # applied loads F = f(t; p) d(p): dF = df d + f dd (df: the coefficients' direction,
    # :func:`_kernels.time_function_t`; dd = dp of the direction fields), zero when the
    # direction moves no field (``kin`` False); a force at the point x adds dx x F + x x dF
    # to the moment about the origin
    for s in range(ma.af_type.shape[0]):
        od = ma.af_dfld[s]
        f, fd, fdd = K.time_function(ma, p, ma.af_tf[s], t)
        df = 0.0
        if kin:
            df, dfd, dfdd = K.time_function_t(ma, p, dp, ma.af_tf[s], t)
        for i in range(3):
            F[i] = f * p[od + i]
            dF[i] = df * p[od + i] + f * dp[od + i] if kin else 0.0
        if ma.af_type[s] == AF_FORCE:
            k1 = ma.af_idx[s]
            x1 = _b3[4]
            dx1 = _b3[5]
            K.point_position(ma, p, A, r, k1, x1)
            point_position_t(ma, p, dp, A, r, th, dr, k1, x1, dx1)
            b = ma.pt_body[k1]
            if b >= 0:
                _cxadd(dx1, F, dnb[b], 1.0)
                if kin:
                    for i in range(3):
                        dfb[b, i] += dF[i]
                    _cxadd(x1, dF, dnb[b], 1.0)
        elif kin:
            b = ma.af_idx[s]
            for i in range(3):
                dnb[b, i] += dF[i]
    for s in range(ma.sc_pt.shape[0]):
        speed_control_t(ma, p, dp, t, A, r, Z, Zd, th, dr, dZ, dZd, s, kin, Bp, _b3, dnb)
    # path followers: Q_c = k (-g e - z_c) - c zd_c, e = y_P - f(x_P; p):
    # de = dy_P - f'(x_P) dx_P - df/dp (dx_P: point_position_t; df/dp: time_function_t at
    # the argument x_P), dQ_c = dk (-g e - z_c) + k (-dg e - g de - dz_c) - dc zd_c - c dzd_c
    for s in range(ma.pf_pt.shape[0]):
        k1 = ma.pf_pt[s]
        x1 = _b3[4]
        dx1 = _b3[5]
        K.point_position(ma, p, A, r, k1, x1)
        point_position_t(ma, p, dp, A, r, th, dr, k1, x1, dx1)
        fpath, fx, _ = K.time_function(ma, p, ma.pf_tf[s], x1[0])
        o = ma.pf_fld[s]
        c_ = ma.pf_coord[s]
        g = p[o]
        kk = p[o + 1]
        e_ = x1[1] - fpath
        de = dx1[1] - fx * dx1[0]
        dQ = -kk * (g * de + dz[c_]) - p[o + 2] * dzd[c_]
        if kin:
            de_p = K.time_function_t(ma, p, dp, ma.pf_tf[s], x1[0])[0]
            dQ += (dp[o + 1] * (-g * e_ - z[c_]) - kk * (dp[o] * e_ - g * de_p)
                   - dp[o + 2] * zd[c_])
        dQj[c_] += dQ
    if ma.ty_pt.shape[0] > 0:
        tire_forces_t(ma, p, dp, A, r, Z, Zd, th, dr, dZ, dZd, dfb, dnb, TJ, tj_cached, mv)
    if ma.rd_pt.shape[0] > 0:
        rod_forces_t(ma, p, dp, A, r, Z, Zd, th, dr, dZ, dZd, Bp, dfb, dnb)


@njit(cache=True)
def rod_forces_t(ma, p, dp, A, r, Z, Zd, th, dr, dZ, dZd, Bp, dfb, dnb):
    """Tangent of the exact rod loads (:func:`workbench.kernels.tree.rod_forces`):
    ``dF_j = dm (g/2 - a_j/3 - a_k/6) - m (da_j/3 + da_k/6)`` (and the mirror for ``k``),
    with the points' tangents ``dx, da`` (:func:`point_kinematics_tb`; ``dZd`` carries the
    acceleration direction ``dzdd``) and ``dm`` the direction of the mass field.  ``Bp``:
    a 2 x 6 x 3 work buffer."""
    grav = ma.gravity
    for s in range(ma.rd_pt.shape[0]):
        k1 = ma.rd_pt[s, 0]
        k2 = ma.rd_pt[s, 1]
        m = p[ma.rd_m[s]]
        dm = dp[ma.rd_m[s]]
        point_kinematics_tb(ma, p, dp, A, r, Z, Zd, th, dr, dZ, dZd, k1, Bp, 0, True)
        point_kinematics_tb(ma, p, dp, A, r, Z, Zd, th, dr, dZ, dZd, k2, Bp, 1, True)
        for e in range(2):
            w1 = 1.0 / 3.0 if e == 0 else 1.0 / 6.0
            w2 = 1.0 / 6.0 if e == 0 else 1.0 / 3.0
            g0 = 0.5 * grav[0] - w1 * Bp[0, 2, 0] - w2 * Bp[1, 2, 0]
            g1 = 0.5 * grav[1] - w1 * Bp[0, 2, 1] - w2 * Bp[1, 2, 1]
            g2 = 0.5 * grav[2] - w1 * Bp[0, 2, 2] - w2 * Bp[1, 2, 2]
            d0 = dm * g0 - m * (w1 * Bp[0, 5, 0] + w2 * Bp[1, 5, 0])
            d1 = dm * g1 - m * (w1 * Bp[0, 5, 1] + w2 * Bp[1, 5, 1])
            d2 = dm * g2 - m * (w1 * Bp[0, 5, 2] + w2 * Bp[1, 5, 2])
            k = k1 if e == 0 else k2
            _add_point_force_ts(dfb, dnb, ma.pt_body[k], Bp[e, 0, 0], Bp[e, 0, 1], Bp[e, 0, 2],
                                m * g0, m * g1, m * g2, Bp[e, 3, 0], Bp[e, 3, 1], Bp[e, 3, 2],
                                d0, d1, d2)


@njit(cache=True)
def tire_state_jacobians(ma, p, A, r, Z, Zd, TJ):
    """The cache of :func:`tire_forces_t` at one state: ``TJ[s, q, :, 0]`` the force ``F``
    (q = 0), its point ``P`` (1) and the moment ``M`` (2) of tire ``s``, ``TJ[s, q, :,
    1:13]`` their exact Jacobians with respect to ``X = [c, vc, a, w]`` (wheel centre, its
    velocity, global spin axis, the wheel's angular velocity;
    :func:`workbench.forces.tire_mf.element_wrench_state_jacobian`)."""
    nty = ma.ty_pt.shape[0]
    if nty == 0:
        return
    road = p[ma.rd_fld[0]:ma.rd_fld[0] + ma.rd_fld[1]]
    x = np.empty((3, 3))
    c, v, acc = x[0], x[1], x[2]
    e = np.empty(3)
    for s in range(nty):
        k1 = ma.ty_pt[s]
        f = ma.b_frame[ma.pt_body[k1]]
        K.point_kinematics(ma, p, A, r, Z, Zd, k1, c, v, acc)
        K.vector_global(ma, A, ma.ty_vc[s], e)
        o = ma.ty_par[s]
        law = ma.ty_law[s]
        TL.wrench_state_cache(law, c, v, e, Z[f, 3:6], p[o:o + TL.tire_npar(law)], road,
                              TJ[s])


@njit(cache=True)
def tire_forces_t(ma, p, dp, A, r, Z, Zd, th, dr, dZ, dZd, dfb, dnb, TJ, cached, mv):
    """Tangent of the tire-ground wrenches of :func:`workbench.kernels.tree.applied_forces` (added to
    ``dfb``, ``dnb``).

    Chain rule through the contact law: the tangents of the wheel-centre position and
    velocity (:func:`point_kinematics_t`), of the global spin axis (``de = th x e``,
    :func:`vector_kinematics_t`), of the wheel's angular velocity (``dZ[f, 3:6]``) and of
    the tire and road fields (``dp``) are pushed through
    :func:`workbench.forces.tire_mf.element_force_dir`; the force ``F`` acts at the moving
    contact point ``P``, so the moment tangent is ``dP x F + P x dF``, plus the tangent
    ``dM`` of the aligning moment of the Magic Formula law (a pure torque).

    ``cached`` (a direction that moves no tire or road field, ``dp`` zero there): the
    wrench and its Jacobians with respect to the state inputs ``X = [c, vc, a, w]`` are
    read from ``TJ`` (:func:`tire_state_jacobians` at this state) and the tangent is the
    product ``(dF, dP, dM) = J dX``: the same chain rule without evaluating the law again
    for every direction; a tire whose wheel does not move (``mv``, :func:`moved_frames`)
    then has a zero tangent and is skipped.
    """
    road = p[ma.rd_fld[0]:ma.rd_fld[0] + ma.rd_fld[1]]
    droad = dp[ma.rd_fld[0]:ma.rd_fld[0] + ma.rd_fld[1]]
    # centre and spin axis kinematics in one buffer (point/vector_kinematics_tb: no row
    # views, the same operations)
    Bk = _S2x6x3()
    c, vc, dc, dvc = Bk[0, 0], Bk[0, 1], Bk[0, 3], Bk[0, 4]
    e, de = Bk[1, 0], Bk[1, 3]
    _b3 = _S4x3()
    F, P, dF, dP = _b3[0], _b3[1], _b3[2], _b3[3]
    _m3 = _S2x3()
    M, dM = _m3[0], _m3[1]
    for s in range(ma.ty_pt.shape[0]):
        k1 = ma.ty_pt[s]
        b = ma.pt_body[k1]
        f = ma.b_frame[b]
        if cached and mv[f] == 0:
            continue
        point_kinematics_tb(ma, p, dp, A, r, Z, Zd, th, dr, dZ, dZd, k1, Bk, 0, False)
        vector_kinematics_tb(ma, A, Z, Zd, th, dZ, dZd, ma.ty_vc[s], Bk, 1, False)
        if cached:
            TL.wrench_state_product(TJ[s], dc, dvc, de, dZ[f, 3:6], F, P, M, dF, dP, dM)
        else:
            o = ma.ty_par[s]
            law = ma.ty_law[s]
            o1 = o + TL.tire_npar(law)
            TL.element_force_dir(law, c, vc, e, Z[f, 3:6], p[o:o1], road, dc, dvc, de,
                                 dZ[f, 3:6], dp[o:o1], droad, F, P, M, dF, dP, dM)
        _add_point_force_t(dfb, dnb, b, P, F, dP, dF)
        for i in range(3):
            dnb[b, i] += dM[i]


# ----------------------------------------------------------------------------------------
# inverse dynamics, SR-II (global origin)
# ----------------------------------------------------------------------------------------


@njit(cache=True)
def inverse_dynamics_origin_t(ma, bcol, Z, Zd, fb, nb_, db, dZ, dZd, dfb, dnb, dQj, dtau, bm,
                              bg, bJ, kin, bdm, bdg, bdJ, Fs, dFs):
    """Tangent of :func:`workbench.kernels.tree.inverse_dynamics_origin`.

    Body residual at the origin with ``Zd = [a; al]``, ``Z = [v; w]`` (notes §2.3):
    ``F = m (a - g x al) + m w x (w x g) - f``,
    ``N = m g x a + J_G al - m g x (g x al) + w x (J_G w - m g x (g x w)) - n_O``.
    ``bm, bg, bJ``: the bodies' masses, centres of mass and inertias at this state,
    ``bdm, bdg, bdJ`` their tangents (:func:`body_inertias_t`; not read when ``kin`` is
    False: a direction that moves no position and no field); ``Fs, dFs`` (nf x 6) are work
    arrays.
    """
    nf = ma.fr_parent.shape[0]
    Fs[:, :] = 0.0
    dFs[:, :] = 0.0
    _b3 = _S7x3()  # one stack buffer for the 3-vectors
    g = _b3[0]
    JG = _S3x3()
    dg = _b3[1]
    dJG = _S3x3()
    t1 = _b3[2]
    t2 = _b3[3]
    t3 = _b3[4]
    Jw = _b3[5]
    dJw = _b3[6]
    for f in range(nf):
        b = ma.fr_body[f]
        if b < 0:
            continue
        m = bm[b]
        dm = bdm[b] if kin else 0.0
        for i in range(3):
            g[i] = bg[b, i]
            dg[i] = bdg[b, i] if kin else 0.0
            for j in range(3):
                JG[i, j] = bJ[b, i, j]
                dJG[i, j] = bdJ[b, i, j] if kin else 0.0
        a = Zd[f, 0:3]
        al = Zd[f, 3:6]
        da = dZd[f, 0:3]
        dal = dZd[f, 3:6]
        w = Z[f, 3:6]
        dw = dZ[f, 3:6]
        F = Fs[f, 0:3]
        N = Fs[f, 3:6]
        dF = dFs[f, 0:3]
        dN = dFs[f, 3:6]
        # F = m (a - g x al) + m w x (w x g) - f
        _cx(g, al, t1)
        _cx(w, g, t2)
        _cx(w, t2, t3)
        for i in range(3):
            F[i] = m * (a[i] - t1[i] + t3[i]) - fb[b, i]
            dF[i] = dm * (a[i] - t1[i] + t3[i]) + m * da[i] - dfb[b, i]
        _cxadd(dg, al, dF, -m)
        _cxadd(g, dal, dF, -m)
        _centripetal_t(w, dw, g, dg, dF, m, t1, t2)
        # N = m g x a + J_G al - m g x (g x al) + w x Jbar w - n_O,  Jbar w = J_G w - m g x (g x w)
        for i in range(3):
            N[i] = -nb_[b, i]
            dN[i] = -dnb[b, i]
            for j in range(3):
                N[i] += JG[i, j] * al[j]
                dN[i] += dJG[i, j] * al[j] + JG[i, j] * dal[j]
        _cxadd(g, a, N, m)
        _cxadd(g, a, dN, dm)
        _cxadd(dg, a, dN, m)
        _cxadd(g, da, dN, m)
        # - m g x (g x al): value and tangent (centripetal form with w -> g, x -> al)
        _cx(g, al, t1)
        _cxadd(g, t1, N, -m)
        _cxadd(g, t1, dN, -dm)
        _centripetal_t(g, dg, al, dal, dN, -m, t1, t2)
        # Jbar w and its tangent
        for i in range(3):
            Jw[i] = 0.0
            dJw[i] = 0.0
            for j in range(3):
                Jw[i] += JG[i, j] * w[j]
                dJw[i] += dJG[i, j] * w[j] + JG[i, j] * dw[j]
        _cx(g, w, t1)
        _cxadd(g, t1, Jw, -m)
        _cxadd(g, t1, dJw, -dm)
        _centripetal_t(g, dg, w, dw, dJw, -m, t1, t2)
        _cxadd(w, Jw, N, 1.0)
        _cxadd(dw, Jw, dN, 1.0)
        _cxadd(w, dJw, dN, 1.0)
    for f in range(nf - 1, -1, -1):
        par = ma.fr_parent[f]
        c = ma.fr_coord[f]
        if c >= 0:
            s = 0.0
            for i in range(6):
                s += db[f, i] * Fs[f, i] + bcol[f, i] * dFs[f, i]
            dtau[c] = s - dQj[c]
        if par >= 0:
            for i in range(6):
                Fs[par, i] += Fs[f, i]
                dFs[par, i] += dFs[f, i]


# ----------------------------------------------------------------------------------------
# SR-I (reference point: centre of mass of each body, RTdyn0)
# ----------------------------------------------------------------------------------------


@njit(cache=True, inline="always")
def reference_points_t(ma, dr, dP, bdg):
    """Tangent of :func:`workbench.kernels.tree.reference_points` (``bdg``: the tangents of the bodies'
    centres of mass, :func:`body_inertias_t`)."""
    nf = ma.fr_parent.shape[0]
    for f in range(nf):
        b = ma.fr_body[f]
        if b >= 0:
            for i in range(3):
                dP[f, i] = bdg[b, i]
        else:
            for i in range(3):
                dP[f, i] = dr[f, i]


@njit(cache=True, inline="always")
def com_columns_t(ma, r, u, P, dr, du, dP, dbv, mv):
    """Tangent of :func:`workbench.kernels.tree.com_columns`: revolute ``[u x (P - r); u]``
    (``mv``: :func:`moved_frames`)."""
    fr_type = ma.fr_type
    nf = ma.fr_parent.shape[0]
    for f in range(nf):
        typ = fr_type[f]
        if mv[f] == 0:
            typ = -1
        if typ == REVOLUTE:
            # scalars instead of row views (each view is reference-counted); the same
            # operations in the same order as _cx and _cxadd
            d0 = P[f, 0] - r[f, 0]
            d1 = P[f, 1] - r[f, 1]
            d2 = P[f, 2] - r[f, 2]
            dd0 = dP[f, 0] - dr[f, 0]
            dd1 = dP[f, 1] - dr[f, 1]
            dd2 = dP[f, 2] - dr[f, 2]
            du0, du1, du2 = du[f, 0], du[f, 1], du[f, 2]
            u0, u1, u2 = u[f, 0], u[f, 1], u[f, 2]
            b0 = du1 * d2 - du2 * d1
            b1 = du2 * d0 - du0 * d2
            b2 = du0 * d1 - du1 * d0
            dbv[f, 0] = b0 + 1.0 * (u1 * dd2 - u2 * dd1)
            dbv[f, 1] = b1 + 1.0 * (u2 * dd0 - u0 * dd2)
            dbv[f, 2] = b2 + 1.0 * (u0 * dd1 - u1 * dd0)
            dbv[f, 3] = du0
            dbv[f, 4] = du1
            dbv[f, 5] = du2
        elif typ == PRISMATIC:
            for i in range(3):
                dbv[f, i] = du[f, i]
                dbv[f, 3 + i] = 0.0
        else:
            for i in range(6):
                dbv[f, i] = 0.0


@njit(cache=True, inline="always")
def _centripetal_ts(w0, w1, w2, dw0, dw1, dw2, x0, x1, x2, dx0, dx1, dx2):
    """The two terms ``dw x (w x x)`` and ``w x (dw x x + w x dx)`` of
    :func:`_centripetal_t` as scalars (the same operations)."""
    t10 = w1 * x2 - w2 * x1
    t11 = w2 * x0 - w0 * x2
    t12 = w0 * x1 - w1 * x0
    a0 = dw1 * t12 - dw2 * t11
    a1 = dw2 * t10 - dw0 * t12
    a2 = dw0 * t11 - dw1 * t10
    t20 = dw1 * x2 - dw2 * x1
    t21 = dw2 * x0 - dw0 * x2
    t22 = dw0 * x1 - dw1 * x0
    t20 += w1 * dx2 - w2 * dx1
    t21 += w2 * dx0 - w0 * dx2
    t22 += w0 * dx1 - w1 * dx0
    b0 = w1 * t22 - w2 * t21
    b1 = w2 * t20 - w0 * t22
    b2 = w0 * t21 - w1 * t20
    return a0, a1, a2, b0, b1, b2


@njit(cache=True, inline="always")
def com_kinematics_t(ma, zd, zdd, dzd, dzdd, r, u, P, bv, V, Vd, dr, du, dP, dbv, dV, dVd,
                     mv):
    """Tangent of :func:`workbench.kernels.tree.com_kinematics` (SR-I velocities and accelerations).

    Scalars instead of 3-vector row views (each view is reference-counted); the same
    operations in the same order as the cross-product helpers ``_cx``, ``_cxadd`` and
    ``_centripetal_t``.  ``mv``: :func:`moved_frames` (zero at the frames it leaves)."""
    fr_parent = ma.fr_parent
    fr_coord = ma.fr_coord
    fr_type = ma.fr_type
    nf = fr_parent.shape[0]
    for f in range(nf):
        if mv[f] == 0:
            for i in range(6):
                dV[f, i] = 0.0
                dVd[f, i] = 0.0
            continue
        par = fr_parent[f]
        c = fr_coord[f]
        q1 = zd[c] if c >= 0 else 0.0
        q2 = zdd[c] if c >= 0 else 0.0
        dq1 = dzd[c] if c >= 0 else 0.0
        dq2 = dzdd[c] if c >= 0 else 0.0
        for i in range(6):
            dV[f, i] = dbv[f, i] * q1 + bv[f, i] * dq1
            dVd[f, i] = dbv[f, i] * q2 + bv[f, i] * dq2
        if par >= 0:
            wp0, wp1, wp2 = V[par, 3], V[par, 4], V[par, 5]
            dwp0, dwp1, dwp2 = dV[par, 3], dV[par, 4], dV[par, 5]
            wdp0, wdp1, wdp2 = Vd[par, 3], Vd[par, 4], Vd[par, 5]
            dwdp0, dwdp1, dwdp2 = dVd[par, 3], dVd[par, 4], dVd[par, 5]
            pp0 = P[f, 0] - P[par, 0]
            pp1 = P[f, 1] - P[par, 1]
            pp2 = P[f, 2] - P[par, 2]
            tp0 = dP[f, 0] - dP[par, 0]
            tp1 = dP[f, 1] - dP[par, 1]
            tp2 = dP[f, 2] - dP[par, 2]
            pr0 = r[f, 0] - P[par, 0]
            pr1 = r[f, 1] - P[par, 1]
            pr2 = r[f, 2] - P[par, 2]
            tr0 = dr[f, 0] - dP[par, 0]
            tr1 = dr[f, 1] - dP[par, 1]
            tr2 = dr[f, 2] - dP[par, 2]
            for i in range(3):
                dV[f, i] += dV[par, i]
                dVd[f, i] += dVd[par, i]
            dV[f, 3] += dwp0
            dV[f, 4] += dwp1
            dV[f, 5] += dwp2
            dVd[f, 3] += dwdp0
            dVd[f, 4] += dwdp1
            dVd[f, 5] += dwdp2
            o0 = dV[f, 0]
            o1 = dV[f, 1]
            o2 = dV[f, 2]
            o0 += dwp1 * pp2 - dwp2 * pp1
            o1 += dwp2 * pp0 - dwp0 * pp2
            o2 += dwp0 * pp1 - dwp1 * pp0
            o0 += wp1 * tp2 - wp2 * tp1
            o1 += wp2 * tp0 - wp0 * tp2
            o2 += wp0 * tp1 - wp1 * tp0
            dV[f, 0] = o0
            dV[f, 1] = o1
            dV[f, 2] = o2
            o0 = dVd[f, 0]
            o1 = dVd[f, 1]
            o2 = dVd[f, 2]
            o0 += dwdp1 * pp2 - dwdp2 * pp1
            o1 += dwdp2 * pp0 - dwdp0 * pp2
            o2 += dwdp0 * pp1 - dwdp1 * pp0
            o0 += wdp1 * tp2 - wdp2 * tp1
            o1 += wdp2 * tp0 - wdp0 * tp2
            o2 += wdp0 * tp1 - wdp1 * tp0
        else:
            wp0, wp1, wp2 = 0.0, 0.0, 0.0
            dwp0, dwp1, dwp2 = 0.0, 0.0, 0.0
            pp0, pp1, pp2 = 0.0, 0.0, 0.0
            tp0, tp1, tp2 = 0.0, 0.0, 0.0
            pr0, pr1, pr2 = 0.0, 0.0, 0.0
            tr0, tr1, tr2 = 0.0, 0.0, 0.0
            o0 = dVd[f, 0]
            o1 = dVd[f, 1]
            o2 = dVd[f, 2]
        typ = fr_type[f]
        if typ == REVOLUTE:
            a0, a1, a2, b0, b1, b2 = _centripetal_ts(wp0, wp1, wp2, dwp0, dwp1, dwp2,
                                                     pr0, pr1, pr2, tr0, tr1, tr2)
            o0 += a0
            o1 += a1
            o2 += a2
            o0 += b0
            o1 += b1
            o2 += b2
            pr0 = P[f, 0] - r[f, 0]
            pr1 = P[f, 1] - r[f, 1]
            pr2 = P[f, 2] - r[f, 2]
            tr0 = dP[f, 0] - dr[f, 0]
            tr1 = dP[f, 1] - dr[f, 1]
            tr2 = dP[f, 2] - dr[f, 2]
            a0, a1, a2, b0, b1, b2 = _centripetal_ts(V[f, 3], V[f, 4], V[f, 5], dV[f, 3],
                                                     dV[f, 4], dV[f, 5], pr0, pr1, pr2,
                                                     tr0, tr1, tr2)
            o0 += a0
            o1 += a1
            o2 += a2
            o0 += b0
            o1 += b1
            o2 += b2
            u0, u1, u2 = u[f, 0], u[f, 1], u[f, 2]
            du0, du1, du2 = du[f, 0], du[f, 1], du[f, 2]
            wpu0 = wp1 * u2 - wp2 * u1
            wpu1 = wp2 * u0 - wp0 * u2
            wpu2 = wp0 * u1 - wp1 * u0
            dwpu0 = dwp1 * u2 - dwp2 * u1
            dwpu1 = dwp2 * u0 - dwp0 * u2
            dwpu2 = dwp0 * u1 - dwp1 * u0
            dwpu0 += wp1 * du2 - wp2 * du1
            dwpu1 += wp2 * du0 - wp0 * du2
            dwpu2 += wp0 * du1 - wp1 * du0
            # q1 (wpu x (P - r)) and q1 wpu
            t10 = wpu1 * pr2 - wpu2 * pr1
            t11 = wpu2 * pr0 - wpu0 * pr2
            t12 = wpu0 * pr1 - wpu1 * pr0
            t20 = dwpu1 * pr2 - dwpu2 * pr1
            t21 = dwpu2 * pr0 - dwpu0 * pr2
            t22 = dwpu0 * pr1 - dwpu1 * pr0
            t20 += wpu1 * tr2 - wpu2 * tr1
            t21 += wpu2 * tr0 - wpu0 * tr2
            t22 += wpu0 * tr1 - wpu1 * tr0
            o0 += dq1 * t10 + q1 * t20
            o1 += dq1 * t11 + q1 * t21
            o2 += dq1 * t12 + q1 * t22
            dVd[f, 3] += dq1 * wpu0 + q1 * dwpu0
            dVd[f, 4] += dq1 * wpu1 + q1 * dwpu1
            dVd[f, 5] += dq1 * wpu2 + q1 * dwpu2
        else:
            a0, a1, a2, b0, b1, b2 = _centripetal_ts(wp0, wp1, wp2, dwp0, dwp1, dwp2,
                                                     pp0, pp1, pp2, tp0, tp1, tp2)
            o0 += a0
            o1 += a1
            o2 += a2
            o0 += b0
            o1 += b1
            o2 += b2
            if typ == PRISMATIC:
                u0, u1, u2 = u[f, 0], u[f, 1], u[f, 2]
                du0, du1, du2 = du[f, 0], du[f, 1], du[f, 2]
                wpu0 = wp1 * u2 - wp2 * u1
                wpu1 = wp2 * u0 - wp0 * u2
                wpu2 = wp0 * u1 - wp1 * u0
                dwpu0 = dwp1 * u2 - dwp2 * u1
                dwpu1 = dwp2 * u0 - dwp0 * u2
                dwpu2 = dwp0 * u1 - dwp1 * u0
                dwpu0 += wp1 * du2 - wp2 * du1
                dwpu1 += wp2 * du0 - wp0 * du2
                dwpu2 += wp0 * du1 - wp1 * du0
                o0 += 2.0 * (dq1 * wpu0 + q1 * dwpu0)
                o1 += 2.0 * (dq1 * wpu1 + q1 * dwpu1)
                o2 += 2.0 * (dq1 * wpu2 + q1 * dwpu2)
        dVd[f, 0] = o0
        dVd[f, 1] = o1
        dVd[f, 2] = o2


@njit(cache=True)
def com_wrenches(ma, P, V, Vd, fb, nb_, bm, bg, bJ, Fs):
    """The subtree wrenches ``Fs`` (nf x 6) of :func:`workbench.kernels.tree.inverse_dynamics_com`
    at one state, accumulated to the frames' reference points: the primal values
    :func:`inverse_dynamics_com_t` reads, computed once per state instead of once per
    direction (the operations of that kernel's vector form, in its order: the same bits
    for every direction)."""
    nf = ma.fr_parent.shape[0]
    fr_body = ma.fr_body
    fr_parent = ma.fr_parent
    Fs[:, :] = 0.0
    for f in range(nf):
        b = fr_body[f]
        if b < 0:
            continue
        m = bm[b]
        for i in range(3):
            Fs[f, i] = m * Vd[f, i] - fb[b, i]
        j0 = 0.0
        j1 = 0.0
        j2 = 0.0
        for i in range(3):
            jw = 0.0
            Fs[f, 3 + i] = -nb_[b, i]
            for j in range(3):
                jw += bJ[b, i, j] * V[f, 3 + j]
                Fs[f, 3 + i] += bJ[b, i, j] * Vd[f, 3 + j]
            if i == 0:
                j0 = jw
            elif i == 1:
                j1 = jw
            else:
                j2 = jw
        w0, w1, w2 = V[f, 3], V[f, 4], V[f, 5]
        g0, g1, g2 = bg[b, 0], bg[b, 1], bg[b, 2]
        f0, f1, f2 = fb[b, 0], fb[b, 1], fb[b, 2]
        Fs[f, 3] += 1.0 * (w1 * j2 - w2 * j1)
        Fs[f, 4] += 1.0 * (w2 * j0 - w0 * j2)
        Fs[f, 5] += 1.0 * (w0 * j1 - w1 * j0)
        Fs[f, 3] += 1.0 * (g1 * f2 - g2 * f1)
        Fs[f, 4] += 1.0 * (g2 * f0 - g0 * f2)
        Fs[f, 5] += 1.0 * (g0 * f1 - g1 * f0)
    for f in range(nf - 1, -1, -1):
        par = fr_parent[f]
        if par >= 0:
            t0 = P[f, 0] - P[par, 0]
            t1 = P[f, 1] - P[par, 1]
            t2 = P[f, 2] - P[par, 2]
            F0, F1, F2 = Fs[f, 0], Fs[f, 1], Fs[f, 2]
            for i in range(6):
                Fs[par, i] += Fs[f, i]
            Fs[par, 3] += 1.0 * (t1 * F2 - t2 * F1)
            Fs[par, 4] += 1.0 * (t2 * F0 - t0 * F2)
            Fs[par, 5] += 1.0 * (t0 * F1 - t1 * F0)


@njit(cache=True, inline="always")
def inverse_dynamics_com_t(ma, P, bv, V, Vd, fb, nb_, dP, dbv, dV, dVd, dfb, dnb, dQj, dtau,
                           bm, bg, bJ, kin, Fs, dFs, bdm, bdg, bdJ, mv):
    """Tangent of :func:`workbench.kernels.tree.inverse_dynamics_com`: Newton-Euler at each centre of
    mass, ``F = m a_G - f``, ``N = J_G al + w x J_G w - (n_O - g x f)``, accumulated with the
    shift ``N_p += (P_c - P_p) x F_c``.

    ``bm, bg, bJ``: the bodies' masses, global centres of mass and centroidal inertias at
    this state (:func:`workbench.kernels.tree.body_inertia`, computed once per state), ``bdm, bdg,
    bdJ`` their tangents along this direction (:func:`body_inertias_t`); ``kin`` False
    for a direction that moves no position and no field (``dp = 0``, ``th = dr = 0``, so
    the inertia tangents vanish: ``bdm, bdg, bdJ`` are not read); ``Fs`` (nf x 6): the
    subtree wrenches of the state (:func:`com_wrenches`, read only); ``dFs`` (nf x 6): a
    work array.  Scalar indexing throughout (no row views: each view is an atomic
    reference-count pair), the operations of the vector form in the same order.  ``mv``:
    :func:`moved_frames`; at a body that does not move only the applied loads' tangents
    act, ``dF = -df``, ``dN = -dn + g x df`` (the terms it skips are exact zeros)."""
    nf = ma.fr_parent.shape[0]
    fr_body = ma.fr_body
    fr_parent = ma.fr_parent
    fr_coord = ma.fr_coord
    dFs[:, :] = 0.0
    wk = _S3x3()       # Jw, dJw, dg
    dJG = _S3x3()
    dJG[:] = 0.0
    for f in range(nf):
        b = fr_body[f]
        if b < 0:
            continue
        g0, g1, g2 = bg[b, 0], bg[b, 1], bg[b, 2]
        h0, h1, h2 = dfb[b, 0], dfb[b, 1], dfb[b, 2]
        if mv[f] == 0:
            # the loads' tangents only
            for i in range(3):
                dFs[f, i] = -dfb[b, i]
                dFs[f, 3 + i] = -dnb[b, i]
            dFs[f, 3] += 1.0 * (g1 * h2 - g2 * h1)
            dFs[f, 4] += 1.0 * (g2 * h0 - g0 * h2)
            dFs[f, 5] += 1.0 * (g0 * h1 - g1 * h0)
            continue
        m = bm[b]
        if kin:
            dm = bdm[b]
            for i in range(3):
                wk[2, i] = bdg[b, i]
                for j in range(3):
                    dJG[i, j] = bdJ[b, i, j]
        else:
            dm = 0.0
            for i in range(3):
                wk[2, i] = 0.0
        for i in range(3):
            dFs[f, i] = dm * Vd[f, i] + m * dVd[f, i] - dfb[b, i]
        for i in range(3):
            jw = 0.0
            djw = 0.0
            dFs[f, 3 + i] = -dnb[b, i]
            for j in range(3):
                jw += bJ[b, i, j] * V[f, 3 + j]
                djw += dJG[i, j] * V[f, 3 + j] + bJ[b, i, j] * dV[f, 3 + j]
                dFs[f, 3 + i] += dJG[i, j] * Vd[f, 3 + j] + bJ[b, i, j] * dVd[f, 3 + j]
            wk[0, i] = jw
            wk[1, i] = djw
        w0, w1, w2 = V[f, 3], V[f, 4], V[f, 5]
        dw0, dw1, dw2 = dV[f, 3], dV[f, 4], dV[f, 5]
        j0, j1, j2 = wk[0, 0], wk[0, 1], wk[0, 2]
        k0, k1, k2 = wk[1, 0], wk[1, 1], wk[1, 2]
        e0, e1, e2 = wk[2, 0], wk[2, 1], wk[2, 2]
        f0, f1, f2 = fb[b, 0], fb[b, 1], fb[b, 2]
        # dN += dw x Jw + w x dJw
        dFs[f, 3] += 1.0 * (dw1 * j2 - dw2 * j1)
        dFs[f, 4] += 1.0 * (dw2 * j0 - dw0 * j2)
        dFs[f, 5] += 1.0 * (dw0 * j1 - dw1 * j0)
        dFs[f, 3] += 1.0 * (w1 * k2 - w2 * k1)
        dFs[f, 4] += 1.0 * (w2 * k0 - w0 * k2)
        dFs[f, 5] += 1.0 * (w0 * k1 - w1 * k0)
        # dN += dg x f + g x df
        dFs[f, 3] += 1.0 * (e1 * f2 - e2 * f1)
        dFs[f, 4] += 1.0 * (e2 * f0 - e0 * f2)
        dFs[f, 5] += 1.0 * (e0 * f1 - e1 * f0)
        dFs[f, 3] += 1.0 * (g1 * h2 - g2 * h1)
        dFs[f, 4] += 1.0 * (g2 * h0 - g0 * h2)
        dFs[f, 5] += 1.0 * (g0 * h1 - g1 * h0)
    for f in range(nf - 1, -1, -1):
        par = fr_parent[f]
        c = fr_coord[f]
        if c >= 0:
            s = 0.0
            for i in range(6):
                s += dbv[f, i] * Fs[f, i] + bv[f, i] * dFs[f, i]
            dtau[c] = s - dQj[c]
        if par >= 0:
            t0 = P[f, 0] - P[par, 0]
            t1 = P[f, 1] - P[par, 1]
            t2 = P[f, 2] - P[par, 2]
            u0 = dP[f, 0] - dP[par, 0]
            u1 = dP[f, 1] - dP[par, 1]
            u2 = dP[f, 2] - dP[par, 2]
            F0, F1, F2 = Fs[f, 0], Fs[f, 1], Fs[f, 2]
            D0, D1, D2 = dFs[f, 0], dFs[f, 1], dFs[f, 2]
            for i in range(6):
                dFs[par, i] += dFs[f, i]
            # the tangent of N_par += (P_f - P_par) x F_f
            dFs[par, 3] += 1.0 * (u1 * F2 - u2 * F1)
            dFs[par, 4] += 1.0 * (u2 * F0 - u0 * F2)
            dFs[par, 5] += 1.0 * (u0 * F1 - u1 * F0)
            dFs[par, 3] += 1.0 * (t1 * D2 - t2 * D1)
            dFs[par, 4] += 1.0 * (t2 * D0 - t0 * D2)
            dFs[par, 5] += 1.0 * (t0 * D1 - t1 * D0)


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
    every = np.ones(nf + 1, dtype=np.int64)
    dh = np.zeros(d)
    dhd = np.zeros(d)
    dhdd = np.zeros(d)
    SZ = np.zeros((d, npar))
    SV = np.zeros((d, npar))
    for j in range(npar):
        dp = Gm[:, j].copy()
        frame_positions_t(ma, p, dp, z, zero_n, A, r, u, th, dr, du, every)
        joint_columns_t(ma, r, u, dr, du, db, every)
        frame_velocities_t(ma, zd, zero_n, bcol, db, dZ, every)
        dof_values_t(ma, p, dp, A, r, Z, Zd, th, dr, dZ, dZ, zero_n, zero_n, zero_n, dh, dhd,
                       dhdd)
        for k in range(d):
            if ma.dof_type[k] != DOF_COORD:
                SZ[k, j] = dh[k]
                SV[k, j] = dhd[k]
    return SZ, SV

