"""Numba kernels of the semi-recursive formulation (private, array-only).

Conventions (see ``shared/notes/seeds-000-002.md`` §0 and seed 001 §2):

* Frames are the nodes of the kinematic tree.  Every 1-DOF primitive joint (revolute,
  prismatic) or fixed connection creates one frame; multi-DOF joints are chains of
  massless auxiliary frames.  Parents precede children in the arrays.
* ``A[f]`` is the rotation of frame ``f`` (local -> global), ``r[f]`` its origin, which lies
  on the joint axis for a revolute joint.  ``u[f]`` is the global joint axis.
* SR-II / RTdyn1 (reference point = global origin): the Cartesian velocity of frame ``f`` is
  ``Z_f = [sdot; omega]`` where ``sdot`` is the velocity of the material point of the frame
  that is instantaneously at the global origin.  Accelerations use the *material*
  convention throughout (``Zd_f`` is the material acceleration of that point).
* SR-I / RTdyn0 (reference point = centre of mass): velocities are referred to the centre
  of mass of the body attached to the frame (or the frame origin for massless frames).

All routines work on flat arrays, take a :class:`~workbench.kernels.layout.ModelArrays` tuple
``ma`` and the field vector ``p`` (usually ``ma.p``), and never call back into Python.
"""

from __future__ import annotations

import numpy as np
from numba import njit, types

from workbench.forces import spring_laws as SL
from workbench.forces.speed_control import drive_torque
from workbench.forces.tire_mf import element_force, tire_npar
from workbench.kernels import layout as AR
from workbench.kernels.layout import (AF_FORCE, C_CAM, C_DIST, C_DOTVP, C_DOTVV, C_DRIVE, C_PTCOMP,
                                      DOF_COORD, PRISMATIC, REVOLUTE, TF_CONST, TF_POLY, TF_SINE,
                                      TF_SMOOTHSTEP, TF_STEPS)
from workbench.kernels.scalar import cam_profile, cam_profile_cs, smoothstep

# stack temporaries of constant shape (no allocation in the hot kernels)
_S1x3x3 = AR.scratch(1, 3, 3)
_S3 = AR.scratch(3)
_S3x3 = AR.scratch(3, 3)
_S3x3x3 = AR.scratch(3, 3, 3)
_S4x3 = AR.scratch(4, 3)
_S5x3 = AR.scratch(5, 3)
_S6 = AR.scratch(6)
_S6x6 = AR.scratch(6, 6)
_S10x3 = AR.scratch(10, 3)
# bounded buffers of the model-sized temporaries (AR.take1/take2: a heap array beyond
# them): 3 x n point Jacobians (n <= 64), n indices, nf x 6 forces and nf x 6 x 6
# composite inertias (nf <= 64); each call of a scratch helper is a buffer of its own
_S192 = AR.scratch(192)
_I64 = AR.scratch(64, dtype=types.int64)
_F384 = AR.scratch(384)
_M2304 = AR.scratch(2304)

# ----------------------------------------------------------------------------------------
# small vector helpers
# ----------------------------------------------------------------------------------------


@njit(cache=True, inline="always")
def _cross(a, b, out):
    out[0] = a[1] * b[2] - a[2] * b[1]
    out[1] = a[2] * b[0] - a[0] * b[2]
    out[2] = a[0] * b[1] - a[1] * b[0]


@njit(cache=True)
def time_function(ma, p, k, t):
    """Value, first and second time derivative of time function ``k`` at ``t``.

    The coefficients are the fields ``c_i = p[tf_fld[k] + i]``, ``i < tf_n[k]`` (bindable to
    parameters; order of :meth:`workbench.model.elements.TimeFunction.fields`):
    constant ``f = c_0``; polynomial ``f = sum_i c_i t^i``; sine (amplitude ``A``, ``omega``,
    phase ``phi``, offset ``f_0``, ``t_s``) ``f = f_0 + A sin(omega max(t - t_s, 0) + phi)``;
    smoothstep ``(t_0, t_1, y_0, y_1)`` the quintic :func:`smoothstep`; steps (initial
    ``y_0``, then ``(t_0, t_1, dy)`` per step) ``f = y_0 + sum smoothstep(t_0, t_1, 0, dy)``.
    """
    kind = ma.tf_kind[k]
    o = ma.tf_fld[k]
    nc = ma.tf_n[k]
    if kind == TF_CONST:
        return p[o], 0.0, 0.0
    if kind == TF_POLY:
        f = 0.0
        fd = 0.0
        fdd = 0.0
        for i in range(nc - 1, -1, -1):
            fdd = fdd * t + 2.0 * fd
            fd = fd * t + f
            f = f * t + p[o + i]
        return f, fd, fdd
    if kind == TF_SINE:
        # amplitude, omega, phase, offset, t_start
        A = p[o]
        w = p[o + 1]
        if t < p[o + 4]:
            return p[o + 3] + A * np.sin(p[o + 2]), 0.0, 0.0
        arg = w * (t - p[o + 4]) + p[o + 2]
        return (p[o + 3] + A * np.sin(arg), A * w * np.cos(arg),
                -A * w * w * np.sin(arg))
    if kind == TF_SMOOTHSTEP:
        return smoothstep(p[o], p[o + 1], p[o + 2], p[o + 3], t)
    if kind == TF_STEPS:
        # the initial value, then (t0, t1, dy) triples
        nst = (nc - 1) // 3
        f = p[o]
        fd = 0.0
        fdd = 0.0
        for i in range(nst):
            j = o + 1 + 3 * i
            a, ad, add = smoothstep(p[j], p[j + 1], 0.0, p[j + 2], t)
            f += a
            fd += ad
            fdd += add
        return f, fd, fdd
    return 0.0, 0.0, 0.0


@njit(cache=True, inline="always")
def _smoothstep_t(t0, t1, y0, y1, dt0, dt1, dy0, dy1, t):
    """Tangent of :func:`smoothstep` ``(f, fd, fdd)`` along ``(dt0, dt1, dy0, dy1)`` (its
    parameters; ``t`` fixed).  With ``T = t1 - t0``, ``s = (t - t0)/T``, ``D = y1 - y0``
    and ``h(s) = s^3 (10 - 15 s + 6 s^2)``: ``f = y0 + D h``, ``fd = D h'/T``,
    ``fdd = D h''/T^2``, ``ds = ((s - 1) dt0 - s dt1)/T``, ``dT = dt1 - dt0``, so
    ``df = dy0 + dD h + D h' ds``, ``dfd = (dD h' + D h'' ds)/T - D h' dT/T^2``,
    ``dfdd = (dD h'' + D h''' ds)/T^2 - 2 D h'' dT/T^3``; constant ``y0`` (``y1``) before
    ``t0`` (after ``t1``)."""
    if t <= t0:
        return dy0, 0.0, 0.0
    if t >= t1:
        return dy1, 0.0, 0.0
    T = t1 - t0
    s = (t - t0) / T
    D = y1 - y0
    dD = dy1 - dy0
    dT = dt1 - dt0
    ds = ((s - 1.0) * dt0 - s * dt1) / T
    h = s * s * s * (10.0 - 15.0 * s + 6.0 * s * s)
    h1 = 30.0 * s * s * (1.0 - s) * (1.0 - s)
    h2 = 60.0 * s * (1.0 - s) * (1.0 - 2.0 * s)
    h3 = 60.0 * (1.0 - 6.0 * s + 6.0 * s * s)
    df = dy0 + dD * h + D * h1 * ds
    dfd = (dD * h1 + D * h2 * ds) / T - D * h1 * dT / (T * T)
    dfdd = (dD * h2 + D * h3 * ds) / (T * T) - 2.0 * D * h2 * dT / (T * T * T)
    return df, dfd, dfdd


@njit(cache=True)
def time_function_t(ma, p, dp, k, t):
    """Tangent ``(df, dfd, dfdd)`` of :func:`time_function` ``k`` at ``t`` along the
    field direction ``dp`` (its coefficients' directions ``dc_i = dp[tf_fld[k] + i]``;
    exact partial derivatives, ``t`` fixed): constant ``df = dc_0``; polynomial
    ``df = sum_i dc_i t^i`` (and its time derivatives); sine with ``arg = omega (t - t_s)
    + phi``, ``darg = domega (t - t_s) - omega dt_s + dphi``: ``df = df_0 + dA sin(arg) +
    A cos(arg) darg``, ``dfd = (dA omega + A domega) cos(arg) - A omega sin(arg) darg``,
    ``dfdd = -(dA omega^2 + 2 A omega domega) sin(arg) - A omega^2 cos(arg) darg`` (before
    ``t_s``: ``df = df_0 + dA sin(phi) + A cos(phi) dphi``); smoothstep and steps:
    :func:`_smoothstep_t`."""
    kind = ma.tf_kind[k]
    o = ma.tf_fld[k]
    nc = ma.tf_n[k]
    if kind == TF_CONST:
        return dp[o], 0.0, 0.0
    if kind == TF_POLY:
        f = 0.0
        fd = 0.0
        fdd = 0.0
        for i in range(nc - 1, -1, -1):
            fdd = fdd * t + 2.0 * fd
            fd = fd * t + f
            f = f * t + dp[o + i]
        return f, fd, fdd
    if kind == TF_SINE:
        A = p[o]
        w = p[o + 1]
        dA = dp[o]
        dw = dp[o + 1]
        if t < p[o + 4]:
            return dp[o + 3] + dA * np.sin(p[o + 2]) + A * np.cos(p[o + 2]) * dp[o + 2], 0.0, 0.0
        arg = w * (t - p[o + 4]) + p[o + 2]
        darg = dw * (t - p[o + 4]) - w * dp[o + 4] + dp[o + 2]
        sa = np.sin(arg)
        ca = np.cos(arg)
        return (dp[o + 3] + dA * sa + A * ca * darg,
                (dA * w + A * dw) * ca - A * w * sa * darg,
                -(dA * w * w + 2.0 * A * w * dw) * sa - A * w * w * ca * darg)
    if kind == TF_SMOOTHSTEP:
        return _smoothstep_t(p[o], p[o + 1], p[o + 2], p[o + 3], dp[o], dp[o + 1], dp[o + 2],
                             dp[o + 3], t)
    if kind == TF_STEPS:
        nst = (nc - 1) // 3
        f = dp[o]
        fd = 0.0
        fdd = 0.0
        for i in range(nst):
            j = o + 1 + 3 * i
            a, ad, add = _smoothstep_t(p[j], p[j + 1], 0.0, p[j + 2], dp[j], dp[j + 1], 0.0,
                                       dp[j + 2], t)
            f += a
            fd += ad
            fdd += add
        return f, fd, fdd
    return 0.0, 0.0, 0.0


# ----------------------------------------------------------------------------------------
# position kinematics
# ----------------------------------------------------------------------------------------


@njit(cache=True)
def frame_positions(ma, p, z, A, r, u, dz=None, moved=None):
    """Forward position recursion (seed 002 §2.2, position level).

    Revolute: ``A_f = A_p Rot(a, z) C``, ``r_f = r_p + A_p s``;
    prismatic: ``A_f = A_p C``, ``r_f = r_p + A_p (s + a z)``; fixed: ``A_f = A_p C``.
    ``s`` (the joint location in the parent frame) is read from the field vector.

    With ``dz`` (n) and ``moved`` (nf work flags): an update after ``z`` moved by ``dz``
    from the coordinates ``A, r, u`` hold.  Only the frames whose own coordinate has
    ``dz != 0`` or whose parent was recomputed are recomputed: the others' inputs are
    unchanged, so every frame gets the bits the full recursion gives.
    """
    # the model arrays are read once (each StructRef member access is reference-counted)
    # and the parent rotation is held in scalars
    fr_parent = ma.fr_parent
    fr_off = ma.fr_off
    fr_axis = ma.fr_axis
    fr_type = ma.fr_type
    fr_coord = ma.fr_coord
    fr_C = ma.fr_C
    nf = fr_parent.shape[0]
    for f in range(nf):
        par = fr_parent[f]
        if dz is not None:
            c = fr_coord[f]
            mv = (c >= 0 and dz[c] != 0.0) or (par >= 0 and moved[par])
            moved[f] = mv
            if not mv:
                continue
        o = fr_off[f]
        s0 = p[o]
        s1 = p[o + 1]
        s2 = p[o + 2]
        a0 = fr_axis[f, 0]
        a1 = fr_axis[f, 1]
        a2 = fr_axis[f, 2]
        typ = fr_type[f]
        q = 0.0
        c = fr_coord[f]
        if c >= 0:
            q = z[c]
        if typ == PRISMATIC:
            s0 += a0 * q
            s1 += a1 * q
            s2 += a2 * q
        if par < 0:
            P00, P01, P02 = 1.0, 0.0, 0.0
            P10, P11, P12 = 0.0, 1.0, 0.0
            P20, P21, P22 = 0.0, 0.0, 1.0
            r[f, 0] = 0.0
            r[f, 1] = 0.0
            r[f, 2] = 0.0
        else:
            P00, P01, P02 = A[par, 0, 0], A[par, 0, 1], A[par, 0, 2]
            P10, P11, P12 = A[par, 1, 0], A[par, 1, 1], A[par, 1, 2]
            P20, P21, P22 = A[par, 2, 0], A[par, 2, 1], A[par, 2, 2]
            r[f, 0] = r[par, 0]
            r[f, 1] = r[par, 1]
            r[f, 2] = r[par, 2]
        r[f, 0] += P00 * s0 + P01 * s1 + P02 * s2
        r[f, 1] += P10 * s0 + P11 * s1 + P12 * s2
        r[f, 2] += P20 * s0 + P21 * s1 + P22 * s2
        u[f, 0] = P00 * a0 + P01 * a1 + P02 * a2
        u[f, 1] = P10 * a0 + P11 * a1 + P12 * a2
        u[f, 2] = P20 * a0 + P21 * a1 + P22 * a2
        if typ == REVOLUTE:
            cq = np.cos(q)
            sq = np.sin(q)
            vq = 1.0 - cq
            R00 = cq + a0 * a0 * vq
            R01 = a0 * a1 * vq - a2 * sq
            R02 = a0 * a2 * vq + a1 * sq
            R10 = a1 * a0 * vq + a2 * sq
            R11 = cq + a1 * a1 * vq
            R12 = a1 * a2 * vq - a0 * sq
            R20 = a2 * a0 * vq - a1 * sq
            R21 = a2 * a1 * vq + a0 * sq
            R22 = cq + a2 * a2 * vq
            for j in range(3):
                C0 = fr_C[f, 0, j]
                C1 = fr_C[f, 1, j]
                C2 = fr_C[f, 2, j]
                c0 = R00 * C0 + R01 * C1 + R02 * C2
                c1 = R10 * C0 + R11 * C1 + R12 * C2
                c2 = R20 * C0 + R21 * C1 + R22 * C2
                A[f, 0, j] = P00 * c0 + P01 * c1 + P02 * c2
                A[f, 1, j] = P10 * c0 + P11 * c1 + P12 * c2
                A[f, 2, j] = P20 * c0 + P21 * c1 + P22 * c2
        else:
            for j in range(3):
                C0 = fr_C[f, 0, j]
                C1 = fr_C[f, 1, j]
                C2 = fr_C[f, 2, j]
                A[f, 0, j] = P00 * C0 + P01 * C1 + P02 * C2
                A[f, 1, j] = P10 * C0 + P11 * C1 + P12 * C2
                A[f, 2, j] = P20 * C0 + P21 * C1 + P22 * C2


@njit(cache=True)
def _body_point(ma, p, A, r, b, fld, out):
    """Global position of the point of body ``b`` whose body-frame coordinates are the
    three fields at ``fld`` (the body origin offset ``b_org`` is added)."""
    o = ma.b_org[b]
    x0 = p[o] + p[fld]
    x1 = p[o + 1] + p[fld + 1]
    x2 = p[o + 2] + p[fld + 2]
    f = ma.b_frame[b]
    for i in range(3):
        out[i] = r[f, i] + A[f, i, 0] * x0 + A[f, i, 1] * x1 + A[f, i, 2] * x2


@njit(cache=True)
def point_position(ma, p, A, r, k, out):
    """Global position of model point ``k``."""
    b = ma.pt_body[k]
    fld = ma.pt_fld[k]
    if b < 0:
        for i in range(3):
            out[i] = p[fld + i]
        return
    _body_point(ma, p, A, r, b, fld, out)


@njit(cache=True)
def vector_global(ma, A, k, out):
    b = ma.vc_body[k]
    v = ma.vc_val[k]
    if b < 0:
        for i in range(3):
            out[i] = v[i]
        return
    f = ma.b_frame[b]
    for i in range(3):
        out[i] = A[f, i, 0] * v[0] + A[f, i, 1] * v[1] + A[f, i, 2] * v[2]


@njit(cache=True)
def body_com(ma, p, A, r, b, g):
    """Mass and global centre of mass ``g`` of body ``b``."""
    _body_point(ma, p, A, r, b, ma.b_com[b], g)
    return p[ma.b_mass[b]]


@njit(cache=True)
def body_inertia(ma, p, A, r, b, g, JG):
    """Mass, global centre of mass ``g`` and global centroidal inertia ``JG`` of body ``b``."""
    m = body_com(ma, p, A, r, b, g)
    f = ma.b_frame[b]
    k = ma.b_inr[b]
    J00, J11, J22 = p[k], p[k + 1], p[k + 2]
    J01, J02, J12 = p[k + 3], p[k + 4], p[k + 5]
    for i in range(3):
        # row i of A Jl
        a0 = A[f, i, 0] * J00 + A[f, i, 1] * J01 + A[f, i, 2] * J02
        a1 = A[f, i, 0] * J01 + A[f, i, 1] * J11 + A[f, i, 2] * J12
        a2 = A[f, i, 0] * J02 + A[f, i, 1] * J12 + A[f, i, 2] * J22
        for j in range(3):
            JG[i, j] = a0 * A[f, j, 0] + a1 * A[f, j, 1] + a2 * A[f, j, 2]
    return m


# ----------------------------------------------------------------------------------------
# SR-II (global-origin reference) velocity and acceleration recursions
# ----------------------------------------------------------------------------------------


@njit(cache=True)
def joint_columns(ma, r, u, bcol):
    """Joint twist columns ``b_f`` (seed 002 §2.2): revolute ``[r x u; u]``, prismatic ``[u; 0]``."""
    nf = ma.fr_parent.shape[0]
    for f in range(nf):
        typ = ma.fr_type[f]
        if typ == REVOLUTE:
            bcol[f, 0] = r[f, 1] * u[f, 2] - r[f, 2] * u[f, 1]
            bcol[f, 1] = r[f, 2] * u[f, 0] - r[f, 0] * u[f, 2]
            bcol[f, 2] = r[f, 0] * u[f, 1] - r[f, 1] * u[f, 0]
            bcol[f, 3] = u[f, 0]
            bcol[f, 4] = u[f, 1]
            bcol[f, 5] = u[f, 2]
        elif typ == PRISMATIC:
            for i in range(3):
                bcol[f, i] = u[f, i]
                bcol[f, 3 + i] = 0.0
        else:
            for i in range(6):
                bcol[f, i] = 0.0


@njit(cache=True)
def frame_velocities(ma, zd, bcol, Z):
    """``Z_f = Z_parent + b_f zdot_f`` (seed 002 eq. 3)."""
    nf = ma.fr_parent.shape[0]
    for f in range(nf):
        par = ma.fr_parent[f]
        c = ma.fr_coord[f]
        q = zd[c] if c >= 0 else 0.0
        for i in range(6):
            Z[f, i] = (Z[par, i] if par >= 0 else 0.0) + bcol[f, i] * q


@njit(cache=True)
def frame_kinematics(ma, p, z, zd, zdd, A, r, u, bcol, Z, Zd):
    """Positions, joint columns, velocities and accelerations of every frame at a full
    state ``(z, zd, zdd)`` (no constraint problem solved)."""
    frame_positions(ma, p, z, A, r, u)
    joint_columns(ma, r, u, bcol)
    frame_velocities(ma, zd, bcol, Z)
    frame_accelerations(ma, zd, zdd, r, u, bcol, Z, Zd)


@njit(cache=True)
def frame_accelerations(ma, zd, zdd, r, u, bcol, Z, Zd):
    """``Zd_f = Zd_parent + b_f zddot_f + d_f`` with the material-convention ``d_f``
    (seed 002 eq. 4; ``d`` rebuilt in the notes §2.2).

    Revolute: ``d = [zd r x (w_p x u) + (W_p W_p - W_f W_f) r ; zd (w_p x u)]``;
    prismatic: ``d = [2 zd (w_p x u); 0]``.
    """
    # scalars instead of 3-vector row views (each view is reference-counted); the same
    # operations in the same order as _cross
    fr_parent = ma.fr_parent
    fr_coord = ma.fr_coord
    fr_type = ma.fr_type
    nf = fr_parent.shape[0]
    for f in range(nf):
        par = fr_parent[f]
        c = fr_coord[f]
        q1 = zd[c] if c >= 0 else 0.0
        q2 = zdd[c] if c >= 0 else 0.0
        for i in range(6):
            Zd[f, i] = (Zd[par, i] if par >= 0 else 0.0) + bcol[f, i] * q2
        if c < 0:
            continue
        if par >= 0:
            p0, p1, p2 = Z[par, 3], Z[par, 4], Z[par, 5]
        else:
            p0, p1, p2 = 0.0, 0.0, 0.0
        u0, u1, u2 = u[f, 0], u[f, 1], u[f, 2]
        wpu0 = p1 * u2 - p2 * u1
        wpu1 = p2 * u0 - p0 * u2
        wpu2 = p0 * u1 - p1 * u0
        typ = fr_type[f]
        if typ == REVOLUTE:
            r0, r1, r2 = r[f, 0], r[f, 1], r[f, 2]
            w0, w1, w2 = Z[f, 3], Z[f, 4], Z[f, 5]
            t0 = r1 * wpu2 - r2 * wpu1
            t1 = r2 * wpu0 - r0 * wpu2
            t2 = r0 * wpu1 - r1 * wpu0
            o0 = Zd[f, 0] + q1 * t0
            o1 = Zd[f, 1] + q1 * t1
            o2 = Zd[f, 2] + q1 * t2
            Zd[f, 3] += q1 * wpu0
            Zd[f, 4] += q1 * wpu1
            Zd[f, 5] += q1 * wpu2
            # (Wp Wp - Wf Wf) r
            t0 = p1 * r2 - p2 * r1
            t1 = p2 * r0 - p0 * r2
            t2 = p0 * r1 - p1 * r0
            o0 += p1 * t2 - p2 * t1
            o1 += p2 * t0 - p0 * t2
            o2 += p0 * t1 - p1 * t0
            t0 = w1 * r2 - w2 * r1
            t1 = w2 * r0 - w0 * r2
            t2 = w0 * r1 - w1 * r0
            o0 -= w1 * t2 - w2 * t1
            o1 -= w2 * t0 - w0 * t2
            o2 -= w0 * t1 - w1 * t0
            Zd[f, 0] = o0
            Zd[f, 1] = o1
            Zd[f, 2] = o2
        elif typ == PRISMATIC:
            Zd[f, 0] += 2.0 * q1 * wpu0
            Zd[f, 1] += 2.0 * q1 * wpu1
            Zd[f, 2] += 2.0 * q1 * wpu2


@njit(cache=True)
def point_kinematics(ma, p, A, r, Z, Zd, k, x, v, a):
    """Position, velocity and material acceleration of model point ``k`` (SR-II)."""
    point_position(ma, p, A, r, k, x)
    b = ma.pt_body[k]
    if b < 0:
        for i in range(3):
            v[i] = 0.0
            a[i] = 0.0
        return
    f = ma.b_frame[b]
    w0, w1, w2 = Z[f, 3], Z[f, 4], Z[f, 5]
    c0 = w1 * x[2] - w2 * x[1]
    c1 = w2 * x[0] - w0 * x[2]
    c2 = w0 * x[1] - w1 * x[0]
    v[0] = Z[f, 0] + c0
    v[1] = Z[f, 1] + c1
    v[2] = Z[f, 2] + c2
    q0, q1, q2 = Zd[f, 3], Zd[f, 4], Zd[f, 5]
    a[0] = Zd[f, 0] + q1 * x[2] - q2 * x[1] + w1 * c2 - w2 * c1
    a[1] = Zd[f, 1] + q2 * x[0] - q0 * x[2] + w2 * c0 - w0 * c2
    a[2] = Zd[f, 2] + q0 * x[1] - q1 * x[0] + w0 * c1 - w1 * c0


@njit(cache=True)
def vector_kinematics(ma, A, Z, Zd, k, e, ed, edd):
    vector_global(ma, A, k, e)
    b = ma.vc_body[k]
    if b < 0:
        for i in range(3):
            ed[i] = 0.0
            edd[i] = 0.0
        return
    f = ma.b_frame[b]
    w0, w1, w2 = Z[f, 3], Z[f, 4], Z[f, 5]
    q0, q1, q2 = Zd[f, 3], Zd[f, 4], Zd[f, 5]
    ed[0] = w1 * e[2] - w2 * e[1]
    ed[1] = w2 * e[0] - w0 * e[2]
    ed[2] = w0 * e[1] - w1 * e[0]
    edd[0] = q1 * e[2] - q2 * e[1] + w1 * ed[2] - w2 * ed[1]
    edd[1] = q2 * e[0] - q0 * e[2] + w2 * ed[0] - w0 * ed[2]
    edd[2] = q0 * e[1] - q1 * e[0] + w0 * ed[1] - w1 * ed[0]


@njit(cache=True)
def point_jacobian(ma, p, A, r, bcol, k, J):
    """3 x n Jacobian of model point ``k`` with respect to the joint coordinates:
    column ``j`` is ``[I, -x~] b_j`` for every joint on the path to the point."""
    J[:, :] = 0.0
    b = ma.pt_body[k]
    if b < 0:
        return
    x = _S3()
    point_position(ma, p, A, r, k, x)
    f = ma.b_frame[b]
    while f >= 0:
        c = ma.fr_coord[f]
        if c >= 0:
            J[0, c] += bcol[f, 0] + bcol[f, 4] * x[2] - bcol[f, 5] * x[1]
            J[1, c] += bcol[f, 1] + bcol[f, 5] * x[0] - bcol[f, 3] * x[2]
            J[2, c] += bcol[f, 2] + bcol[f, 3] * x[1] - bcol[f, 4] * x[0]
        f = ma.fr_parent[f]


@njit(cache=True)
def omega_jacobian(ma, bcol, b, J):
    """3 x n Jacobian of the angular velocity of body ``b``: column ``j`` is the rotation
    part of ``b_j`` for every joint on the path to the body."""
    J[:, :] = 0.0
    if b < 0:
        return
    f = ma.b_frame[b]
    while f >= 0:
        c = ma.fr_coord[f]
        if c >= 0:
            J[0, c] += bcol[f, 3]
            J[1, c] += bcol[f, 4]
            J[2, c] += bcol[f, 5]
        f = ma.fr_parent[f]


@njit(cache=True)
def vector_jacobian(ma, A, bcol, k, J):
    J[:, :] = 0.0
    b = ma.vc_body[k]
    if b < 0:
        return
    e = _S3()
    vector_global(ma, A, k, e)
    f = ma.b_frame[b]
    while f >= 0:
        c = ma.fr_coord[f]
        if c >= 0:
            J[0, c] += bcol[f, 4] * e[2] - bcol[f, 5] * e[1]
            J[1, c] += bcol[f, 5] * e[0] - bcol[f, 3] * e[2]
            J[2, c] += bcol[f, 3] * e[1] - bcol[f, 4] * e[0]
        f = ma.fr_parent[f]


# ----------------------------------------------------------------------------------------
# constraints
# ----------------------------------------------------------------------------------------


@njit(cache=True)
def point_kinematics_b(ma, p, A, r, Z, Zd, k, B, s):
    """:func:`point_kinematics` into rows ``B[s, 0:3]`` = x, v, a (same operations, no
    row views: each view is reference-counted)."""
    b = ma.pt_body[k]
    fld = ma.pt_fld[k]
    if b < 0:
        for i in range(3):
            B[s, 0, i] = p[fld + i]
            B[s, 1, i] = 0.0
            B[s, 2, i] = 0.0
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
    q0, q1, q2 = Zd[f, 3], Zd[f, 4], Zd[f, 5]
    B[s, 2, 0] = Zd[f, 0] + q1 * x2 - q2 * x1 + w1 * c2 - w2 * c1
    B[s, 2, 1] = Zd[f, 1] + q2 * x0 - q0 * x2 + w2 * c0 - w0 * c2
    B[s, 2, 2] = Zd[f, 2] + q0 * x1 - q1 * x0 + w0 * c1 - w1 * c0


@njit(cache=True)
def vector_kinematics_b(ma, A, Z, Zd, k, B, s):
    """:func:`vector_kinematics` into rows ``B[s, 0:3]`` = e, ed, edd."""
    b = ma.vc_body[k]
    if b < 0:
        for i in range(3):
            B[s, 0, i] = ma.vc_val[k, i]
            B[s, 1, i] = 0.0
            B[s, 2, i] = 0.0
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
    B[s, 0, 0] = e0
    B[s, 0, 1] = e1
    B[s, 0, 2] = e2
    B[s, 1, 0] = ed0
    B[s, 1, 1] = ed1
    B[s, 1, 2] = ed2
    B[s, 2, 0] = q1 * e2 - q2 * e1 + w1 * ed2 - w2 * ed1
    B[s, 2, 1] = q2 * e0 - q0 * e2 + w2 * ed0 - w0 * ed2
    B[s, 2, 2] = q0 * e1 - q1 * e0 + w0 * ed1 - w1 * ed0


@njit(cache=True)
def joint_angle_cs(ma, A, f):
    """``(cos q, sin q)`` of the coordinate ``q`` of the revolute frame ``f`` from the frame
    rotations: ``A_f = A_p Rot(a, q) C`` (:func:`frame_positions`), so for a unit ``e``
    normal to the axis ``a`` (parent components) ``x = A_p^T A_f C^T e = cos q e + sin q
    (a x e)``: ``cos q = e . x``, ``sin q = (a x e) . x`` (exact to rounding; the angle
    modulo 2 pi).  For the kernels that have the frame rotations but not ``z``."""
    a0, a1, a2 = ma.fr_axis[f, 0], ma.fr_axis[f, 1], ma.fr_axis[f, 2]
    # e = a x (x or y axis, whichever is further from a), normalised; w = a x e
    if abs(a0) < 0.9:
        e0, e1, e2 = 0.0, a2, -a1
    else:
        e0, e1, e2 = -a2, 0.0, a0
    nrm = np.sqrt(e0 * e0 + e1 * e1 + e2 * e2)
    e0 /= nrm
    e1 /= nrm
    e2 /= nrm
    w0 = a1 * e2 - a2 * e1
    w1 = a2 * e0 - a0 * e2
    w2 = a0 * e1 - a1 * e0
    C = ma.fr_C[f]
    v0 = C[0, 0] * e0 + C[1, 0] * e1 + C[2, 0] * e2
    v1 = C[0, 1] * e0 + C[1, 1] * e1 + C[2, 1] * e2
    v2 = C[0, 2] * e0 + C[1, 2] * e1 + C[2, 2] * e2
    y0 = A[f, 0, 0] * v0 + A[f, 0, 1] * v1 + A[f, 0, 2] * v2
    y1 = A[f, 1, 0] * v0 + A[f, 1, 1] * v1 + A[f, 1, 2] * v2
    y2 = A[f, 2, 0] * v0 + A[f, 2, 1] * v1 + A[f, 2, 2] * v2
    par = ma.fr_parent[f]
    if par >= 0:
        x0 = A[par, 0, 0] * y0 + A[par, 1, 0] * y1 + A[par, 2, 0] * y2
        x1 = A[par, 0, 1] * y0 + A[par, 1, 1] * y1 + A[par, 2, 1] * y2
        x2 = A[par, 0, 2] * y0 + A[par, 1, 2] * y1 + A[par, 2, 2] * y2
    else:
        x0, x1, x2 = y0, y1, y2
    return e0 * x0 + e1 * x1 + e2 * x2, w0 * x0 + w1 * x1 + w2 * x2


@njit(cache=True, inline="always")
def _same_points(c_type, c_i, k):
    """Row ``k`` is a point-coincidence component of the same two points as row ``k - 1``
    (the rows of one spherical/revolute cut joint): the point kinematics computed for row
    ``k - 1`` are reused as they are."""
    return (k > 0 and c_type[k - 1] == C_PTCOMP and c_i[k - 1, 0] == c_i[k, 0]
            and c_i[k - 1, 1] == c_i[k, 1])


@njit(cache=True)
def constraints(ma, p, t, z, zd, zdd, A, r, Z, Zd, level, out):
    """Closure constraints at position (level 0), velocity (1) or acceleration (2) level.

    Level 1 returns ``Phi_z zdot + Phi_t``; level 2 returns ``Phi_z zddot + dPhi_z/dt zdot +
    Phi_tt`` evaluated with the accelerations in ``Zd`` (so with ``zddot = 0`` it is
    ``-c`` of seed 001 eq. 21).  Point and vector kinematics go to one buffer
    ``B[slot, row, :]`` (rows x, v, a or e, ed, edd), not to 3-vector views.

    Cam relation (``C_CAM``, radial coordinate ``a``, polar coordinate ``b``, profile ``s``
    of :func:`workbench.kernels.scalar.cam_profile`): ``Phi = z_a - s(z_b)``,
    ``Phi_dot = zd_a - s'(z_b) zd_b`` (``Phi_t = 0``), ``Phi_ddot = zdd_a - s'(z_b) zdd_b -
    s''(z_b) zd_b^2``.
    """
    c_type = ma.c_type
    c_i = ma.c_i
    nc = c_type.shape[0]
    B = _S3x3x3()
    for k in range(nc):
        typ = c_type[k]
        if typ == C_PTCOMP:
            if not _same_points(c_type, c_i, k):
                point_kinematics_b(ma, p, A, r, Z, Zd, c_i[k, 0], B, 0)
                point_kinematics_b(ma, p, A, r, Z, Zd, c_i[k, 1], B, 1)
            j = c_i[k, 2]
            if level == 0:
                out[k] = B[0, 0, j] - B[1, 0, j]
            elif level == 1:
                out[k] = B[0, 1, j] - B[1, 1, j]
            else:
                out[k] = B[0, 2, j] - B[1, 2, j]
        elif typ == C_DOTVV:
            vector_kinematics_b(ma, A, Z, Zd, c_i[k, 0], B, 0)
            vector_kinematics_b(ma, A, Z, Zd, c_i[k, 1], B, 1)
            s = 0.0
            for i in range(3):
                if level == 0:
                    s += B[0, 0, i] * B[1, 0, i]
                elif level == 1:
                    s += B[0, 1, i] * B[1, 0, i] + B[0, 0, i] * B[1, 1, i]
                else:
                    s += (B[0, 2, i] * B[1, 0, i] + 2.0 * B[0, 1, i] * B[1, 1, i]
                          + B[0, 0, i] * B[1, 2, i])
            out[k] = s
        elif typ == C_DOTVP:
            vector_kinematics_b(ma, A, Z, Zd, c_i[k, 0], B, 2)
            point_kinematics_b(ma, p, A, r, Z, Zd, c_i[k, 1], B, 0)
            point_kinematics_b(ma, p, A, r, Z, Zd, c_i[k, 2], B, 1)
            s = 0.0
            for i in range(3):
                d = B[1, 0, i] - B[0, 0, i]
                dd = B[1, 1, i] - B[0, 1, i]
                ddd = B[1, 2, i] - B[0, 2, i]
                if level == 0:
                    s += B[2, 0, i] * d
                elif level == 1:
                    s += B[2, 1, i] * d + B[2, 0, i] * dd
                else:
                    s += B[2, 2, i] * d + 2.0 * B[2, 1, i] * dd + B[2, 0, i] * ddd
            out[k] = s
        elif typ == C_DIST:
            point_kinematics_b(ma, p, A, r, Z, Zd, c_i[k, 0], B, 0)
            point_kinematics_b(ma, p, A, r, Z, Zd, c_i[k, 1], B, 1)
            L = p[ma.c_fld[k]]
            s = 0.0
            for i in range(3):
                d = B[1, 0, i] - B[0, 0, i]
                dd = B[1, 1, i] - B[0, 1, i]
                ddd = B[1, 2, i] - B[0, 2, i]
                if level == 0:
                    s += d * d
                elif level == 1:
                    s += 2.0 * d * dd
                else:
                    s += 2.0 * dd * dd + 2.0 * d * ddd
            if level == 0:
                s -= L * L
            out[k] = s
        elif typ == C_DRIVE:
            f, fd, fdd = time_function(ma, p, c_i[k, 1], t)
            j = c_i[k, 0]
            if level == 0:
                out[k] = z[j] - f
            elif level == 1:
                out[k] = zd[j] - fd
            else:
                out[k] = zdd[j] - fdd
        elif typ == C_CAM:
            ja = c_i[k, 0]
            jb = c_i[k, 1]
            s0, s1, s2, _ = cam_profile(p, ma.c_fld[k], c_i[k, 3], z[jb])
            if level == 0:
                out[k] = z[ja] - s0
            elif level == 1:
                out[k] = zd[ja] - s1 * zd[jb]
            else:
                out[k] = zdd[ja] - s1 * zdd[jb] - s2 * zd[jb] * zd[jb]


@njit(cache=True)
def constraint_jacobian(ma, p, A, r, bcol, n, Jc):
    """``Phi_z`` (m x n), built from point and vector Jacobians by the chain rule.  A cam
    relation ``z_a - s(z_b)`` has ``+1`` in column ``a`` and ``-s'(z_b)`` in column ``b``,
    with ``cos z_b``, ``sin z_b`` read from the frame rotations (:func:`joint_angle_cs`:
    the profile is 2 pi-periodic, so the angle modulo 2 pi is all it needs; no ``z``
    argument)."""
    nc = ma.c_type.shape[0]
    Jc[:, :] = 0.0
    J1 = AR.take2(_S192(), 3, n)
    J2 = AR.take2(_S192(), 3, n)
    Je = AR.take2(_S192(), 3, n)
    _b3 = _S4x3()  # one stack buffer for the 3-vectors
    x1 = _b3[0]
    x2 = _b3[1]
    e1 = _b3[2]
    e2 = _b3[3]
    for k in range(nc):
        typ = ma.c_type[k]
        ci = ma.c_i[k]
        if typ == C_PTCOMP:
            if not _same_points(ma.c_type, ma.c_i, k):
                point_jacobian(ma, p, A, r, bcol, ci[0], J1)
                point_jacobian(ma, p, A, r, bcol, ci[1], J2)
            j = ci[2]
            for c in range(n):
                Jc[k, c] = J1[j, c] - J2[j, c]
        elif typ == C_DOTVV:
            vector_global(ma, A, ci[0], e1)
            vector_global(ma, A, ci[1], e2)
            vector_jacobian(ma, A, bcol, ci[0], J1)
            vector_jacobian(ma, A, bcol, ci[1], J2)
            for c in range(n):
                Jc[k, c] = (J1[0, c] * e2[0] + J1[1, c] * e2[1] + J1[2, c] * e2[2]
                            + J2[0, c] * e1[0] + J2[1, c] * e1[1] + J2[2, c] * e1[2])
        elif typ == C_DOTVP:
            vector_global(ma, A, ci[0], e1)
            vector_jacobian(ma, A, bcol, ci[0], Je)
            point_position(ma, p, A, r, ci[1], x1)
            point_position(ma, p, A, r, ci[2], x2)
            point_jacobian(ma, p, A, r, bcol, ci[1], J1)
            point_jacobian(ma, p, A, r, bcol, ci[2], J2)
            for c in range(n):
                s = 0.0
                for i in range(3):
                    s += Je[i, c] * (x2[i] - x1[i]) + e1[i] * (J2[i, c] - J1[i, c])
                Jc[k, c] = s
        elif typ == C_DIST:
            point_position(ma, p, A, r, ci[0], x1)
            point_position(ma, p, A, r, ci[1], x2)
            point_jacobian(ma, p, A, r, bcol, ci[0], J1)
            point_jacobian(ma, p, A, r, bcol, ci[1], J2)
            for c in range(n):
                s = 0.0
                for i in range(3):
                    s += 2.0 * (x2[i] - x1[i]) * (J2[i, c] - J1[i, c])
                Jc[k, c] = s
        elif typ == C_DRIVE:
            Jc[k, ci[0]] = 1.0
        elif typ == C_CAM:
            cu, su = joint_angle_cs(ma, A, ci[2])
            _, s1, _, _ = cam_profile_cs(p, ma.c_fld[k], ci[3], cu, su)
            Jc[k, ci[0]] += 1.0
            Jc[k, ci[1]] -= s1


@njit(cache=True)
def dof_values(ma, p, A, r, Z, Zd, z, zd, zdd, out_h, out_hd, out_hdd):
    """Values of the degrees of freedom ``h(z)``, their rates and accelerations (seed 001 eq. 12)."""
    dof_type = ma.dof_type
    dof_i = ma.dof_i
    nd = dof_type.shape[0]
    B = _S1x3x3()
    for k in range(nd):
        if dof_type[k] == DOF_COORD:
            c = dof_i[k, 0]
            out_h[k] = z[c]
            out_hd[k] = zd[c]
            out_hdd[k] = zdd[c]
        else:
            point_kinematics_b(ma, p, A, r, Z, Zd, dof_i[k, 0], B, 0)
            j = dof_i[k, 1]
            out_h[k] = B[0, 0, j]
            out_hd[k] = B[0, 1, j]
            out_hdd[k] = B[0, 2, j]


@njit(cache=True)
def dof_jacobian(ma, p, A, r, bcol, n, Bm):
    """``B = h_z`` (d x n): unit rows for relative-coordinate DOF, point-Jacobian rows otherwise."""
    nd = ma.dof_type.shape[0]
    Bm[:, :] = 0.0
    J = AR.take2(_S192(), 3, n)
    for k in range(nd):
        if ma.dof_type[k] == DOF_COORD:
            Bm[k, ma.dof_i[k, 0]] = 1.0
        else:
            point_jacobian(ma, p, A, r, bcol, ma.dof_i[k, 0], J)
            for c in range(n):
                Bm[k, c] = J[ma.dof_i[k, 1], c]


# ----------------------------------------------------------------------------------------
# applied forces
# ----------------------------------------------------------------------------------------


@njit(cache=True)
def _add_point_force(ma, fb, nb_, b, x, F):
    if b < 0:
        return
    for i in range(3):
        fb[b, i] += F[i]
    nb_[b, 0] += x[1] * F[2] - x[2] * F[1]
    nb_[b, 1] += x[2] * F[0] - x[0] * F[2]
    nb_[b, 2] += x[0] * F[1] - x[1] * F[0]


@njit(cache=True)
def zero_length_spring(ma, p, A, r):
    """Index of the first point-to-point spring whose two end points coincide (length
    exactly zero), or -1.  The force ``T (x2 - x1) / L`` of :func:`applied_forces` (and its
    tangent in the integrator) is undefined there, so callers check this first and report
    the spring by name instead of dividing by zero."""
    x1 = _S3()
    x2 = _S3()
    for s in range(ma.sp_pt.shape[0]):
        point_position(ma, p, A, r, ma.sp_pt[s, 0], x1)
        point_position(ma, p, A, r, ma.sp_pt[s, 1], x2)
        L2 = 0.0
        for i in range(3):
            L2 += (x2[i] - x1[i]) ** 2
        if np.sqrt(L2) == 0.0:
            return s
    return -1


@njit(cache=True)
def applied_forces(ma, p, t, z, zd, A, r, Z, Zd, fb, nb_, Qj):
    """The loads of every element (:func:`element_forces`) and of the rods, exact
    (:func:`rod_forces`: their inertia at the frame accelerations ``Zd``).  Returns the
    potential energy of gravity and springs."""
    V = element_forces(ma, p, t, z, zd, A, r, Z, Zd, fb, nb_, Qj)
    if ma.rd_pt.shape[0] > 0:
        V += rod_forces(ma, p, A, r, Z, Zd, Zd, ROD_EXACT, fb, nb_)
    return V


@njit(cache=True)
def element_forces(ma, p, t, z, zd, A, r, Z, Zd, fb, nb_, Qj):
    """External loads (all but the rods'): per body the resultant force ``fb`` and moment about the global
    origin ``nb_``; joint spring-dampers as generalised forces ``Qj``; tire-ground
    contact forces (:func:`workbench.forces.tire_mf.element_force`: the force at the contact
    point of the wheel body and, for the Magic Formula law, the aligning moment; needs the
    frame velocities ``Z``).

    Returns the potential energy of gravity and springs (used for energy checks; tires
    make a model non-conservative and add nothing).
    """
    nbod = ma.b_frame.shape[0]
    fb[:, :] = 0.0
    nb_[:, :] = 0.0
    Qj[:] = 0.0
    V = 0.0
    _b3 = _S10x3()  # one stack buffer for the 3-vectors
    g = _b3[0]
    F = _b3[1]
    grav = ma.gravity
    for b in range(nbod):
        m = body_com(ma, p, A, r, b, g)
        for i in range(3):
            F[i] = m * grav[i]
        _add_point_force(ma, fb, nb_, b, g, F)
        V -= m * (grav[0] * g[0] + grav[1] * g[1] + grav[2] * g[2])
    x1 = _b3[2]
    v1 = _b3[3]
    a1 = _b3[4]
    x2 = _b3[5]
    v2 = _b3[6]
    a2 = _b3[7]
    Fv = _b3[8]
    for s in range(ma.sp_pt.shape[0]):
        k1 = ma.sp_pt[s, 0]
        k2 = ma.sp_pt[s, 1]
        point_kinematics(ma, p, A, r, Z, Zd, k1, x1, v1, a1)
        point_kinematics(ma, p, A, r, Z, Zd, k2, x2, v2, a2)
        L = 0.0
        for i in range(3):
            L += (x2[i] - x1[i]) ** 2
        L = np.sqrt(L)
        if L == 0.0:
            # the direction of a zero-length spring is undefined: poison the state so that
            # the integrator reports a non-finite state (typed error) instead of dividing
            fb[:, :] = np.nan
            V = np.nan
            continue
        Ld = 0.0
        for i in range(3):
            Ld += (x2[i] - x1[i]) * (v2[i] - v1[i])
        Ld /= L
        T, _, _, U = SL.tension(ma.sp_law[s], ma.sp_x[s, 0], ma.sp_x[s, 1], ma.sp_law[s, 2], p,
                                ma.sp_k[s], ma.sp_c[s], ma.sp_L0[s], L, Ld)
        V += U
        for i in range(3):
            Fv[i] = T * (x2[i] - x1[i]) / L
        _add_point_force(ma, fb, nb_, ma.pt_body[k1], x1, Fv)
        for i in range(3):
            Fv[i] = -Fv[i]
        _add_point_force(ma, fb, nb_, ma.pt_body[k2], x2, Fv)
    for s in range(ma.js_coord.shape[0]):
        c_ = ma.js_coord[s]
        k = p[ma.js_k[s]]
        dz = z[c_] - p[ma.js_z0[s]]
        Qj[c_] += -k * dz - p[ma.js_c[s]] * zd[c_]
        V += 0.5 * k * dz * dz
    for s in range(ma.af_type.shape[0]):
        # f(t) d, the direction d = p[af_dfld : af_dfld + 3]
        f, fd, fdd = time_function(ma, p, ma.af_tf[s], t)
        od = ma.af_dfld[s]
        if ma.af_type[s] == AF_FORCE:
            k1 = ma.af_idx[s]
            point_position(ma, p, A, r, k1, x1)
            for i in range(3):
                Fv[i] = f * p[od + i]
            _add_point_force(ma, fb, nb_, ma.pt_body[k1], x1, Fv)
        else:
            b = ma.af_idx[s]
            for i in range(3):
                nb_[b, i] += f * p[od + i]
    for s in range(ma.sc_pt.shape[0]):
        # speed control: T = T_max tanh(K (v_set(t) - v) / T_max), v = v_P . e (heading)
        point_kinematics(ma, p, A, r, Z, Zd, ma.sc_pt[s], x1, v1, a1)
        vector_global(ma, A, ma.sc_vc[s], Fv)
        vel = v1[0] * Fv[0] + v1[1] * Fv[1] + v1[2] * Fv[2]
        T = drive_torque(p, ma.sc_fld[s], time_function(ma, p, ma.sc_tf[s], t)[0], vel)
        for w in range(ma.sw_sc.shape[0]):
            if ma.sw_sc[w] != s:
                continue
            # share * T about the wheel's axis on the wheel, the reaction on its carrier
            vector_global(ma, A, ma.sw_vc[w], x2)
            sh = p[ma.sw_fld[w]] * T
            b = ma.sw_body[w]
            cb = ma.sw_carrier[w]
            for i in range(3):
                nb_[b, i] += sh * x2[i]
                if cb >= 0:
                    nb_[cb, i] -= sh * x2[i]
    for s in range(ma.pf_pt.shape[0]):
        # path follower: lateral error e = y_P - f(x_P) of the preview point from the path
        # y = f(x), commanded coordinate -gain e, servo Q_c += k (-gain e - z_c) - c zd_c
        point_position(ma, p, A, r, ma.pf_pt[s], x1)
        fpath = time_function(ma, p, ma.pf_tf[s], x1[0])[0]
        o = ma.pf_fld[s]
        c_ = ma.pf_coord[s]
        Qj[c_] += p[o + 1] * (-p[o] * (x1[1] - fpath) - z[c_]) - p[o + 2] * zd[c_]
    if ma.ty_pt.shape[0] > 0:
        road = p[ma.rd_fld[0]:ma.rd_fld[0] + ma.rd_fld[1]]
        e = _b3[9]
        Mv = _S3()
        for s in range(ma.ty_pt.shape[0]):
            k1 = ma.ty_pt[s]
            b = ma.pt_body[k1]
            point_kinematics(ma, p, A, r, Z, Zd, k1, x1, v1, a1)
            vector_global(ma, A, ma.ty_vc[s], e)
            o = ma.ty_par[s]
            law = ma.ty_law[s]
            element_force(law, x1, v1, e, Z[ma.b_frame[b], 3:6], p[o:o + tire_npar(law)], road,
                          Fv, x2, Mv)
            _add_point_force(ma, fb, nb_, b, x2, Fv)
            for i in range(3):
                nb_[b, i] += Mv[i]
    return V


# ----------------------------------------------------------------------------------------
# rod elements (seed 002)
# ----------------------------------------------------------------------------------------

#: how the rods' acceleration-dependent inertia forces are evaluated (model option
#: ``rod_mode``, :data:`workbench.model.elements.ROD_MODES`)
ROD_EXACT, ROD_EXTRAPOLATED, ROD_PARTITIONED = 0, 1, 2


@njit(cache=True)
def rod_forces(ma, p, A, r, Z, Zd, Zdh, mode, fb, nb_):
    """Loads of the rod elements on their two bodies (seed 002 eqs 18-19), added to
    ``fb``/``nb_``; returns the potential energy of the rods' weight.

    A rod is a uniform slender bar of mass ``m`` between the points ``x_j`` (body ``j``)
    and ``x_k`` (body ``k``); with its spin neglected its natural-coordinate mass matrix is
    the constant ``m [[I/3, I/6], [I/6, I/3]]``, so its generalised loads on the two end
    points are, exactly,

        F_j = m (g/2 - a_j/3 - a_k/6),    F_k = m (g/2 - a_j/6 - a_k/3)

    with ``a`` the material accelerations of the points, ``a = [I, -x~] Zd_b + w x (w x
    x)`` (:func:`point_kinematics`): the SDIF ``-Mbar_jj Zd_j - Mbar_jk Zd_k`` and the
    VDIF of eq 18 written at the points (eq 19's ``[I; x~]`` maps a point force to the
    body's force and moment about the origin, :func:`_add_point_force`).

    ``mode`` (:data:`ROD_EXACT`, ...): which frame accelerations give ``a``.  Exact
    (eq 24): both from ``Zd``, the accelerations of the state (in the residual ``tau =
    M zdd - Q`` the SDIF is then part of ``M``, :func:`rod_mass_matrix`).
    Extrapolated (eqs 25-32): both from ``Zdh``, the frame accelerations of the
    extrapolated relative accelerations with the current kinematics (so the rod's
    velocity terms are inside them).  Partitioned (eqs 47-51): each end's own block
    exact (``Zd``), the coupling block extrapolated (``Zdh``)."""
    V = 0.0
    _b = _S10x3()
    x1, v1, a1, x2, v2, a2, h1, h2, F = (_b[0], _b[1], _b[2], _b[3], _b[4], _b[5], _b[6],
                                         _b[7], _b[8])
    grav = ma.gravity
    for s in range(ma.rd_pt.shape[0]):
        k1 = ma.rd_pt[s, 0]
        k2 = ma.rd_pt[s, 1]
        m = p[ma.rd_m[s]]
        point_kinematics(ma, p, A, r, Z, Zd, k1, x1, v1, a1)
        point_kinematics(ma, p, A, r, Z, Zd, k2, x2, v2, a2)
        if mode != ROD_EXACT:
            point_kinematics(ma, p, A, r, Z, Zdh, k1, x1, v1, h1)
            point_kinematics(ma, p, A, r, Z, Zdh, k2, x2, v2, h2)
        for i in range(3):
            if mode == ROD_EXACT:
                F[i] = m * (0.5 * grav[i] - a1[i] / 3.0 - a2[i] / 6.0)
            elif mode == ROD_EXTRAPOLATED:
                F[i] = m * (0.5 * grav[i] - h1[i] / 3.0 - h2[i] / 6.0)
            else:
                F[i] = m * (0.5 * grav[i] - a1[i] / 3.0 - h2[i] / 6.0)
        _add_point_force(ma, fb, nb_, ma.pt_body[k1], x1, F)
        for i in range(3):
            if mode == ROD_EXACT:
                F[i] = m * (0.5 * grav[i] - a1[i] / 6.0 - a2[i] / 3.0)
            elif mode == ROD_EXTRAPOLATED:
                F[i] = m * (0.5 * grav[i] - h1[i] / 6.0 - h2[i] / 3.0)
            else:
                F[i] = m * (0.5 * grav[i] - h1[i] / 6.0 - a2[i] / 3.0)
        _add_point_force(ma, fb, nb_, ma.pt_body[k2], x2, F)
        for i in range(3):
            V -= 0.5 * m * grav[i] * (x1[i] + x2[i])
    return V


@njit(cache=True)
def rod_mass_matrix(ma, p, A, r, bcol, n, M, mode):
    """``M += sum_rods J^T m [[I/3, I/6], [I/6, I/3]] J`` with ``J = [J_j; J_k]`` the
    Jacobians of the two end points (:func:`point_jacobian`): the rods' share of the mass
    matrix ``R_d^T T^T Mbar_rods T R_d`` of seed 002 eq 24, whose coupling blocks ``J_j^T
    m/6 J_k`` join the branches of the two bodies (the fill-in of the seed's Fig. 4).
    ``mode``: :data:`ROD_EXACT` adds all of it, :data:`ROD_PARTITIONED` only the
    body-diagonal ``m/3`` blocks (eq 51), :data:`ROD_EXTRAPOLATED` nothing (eq 29).  Only
    the columns on the two root paths are visited."""
    nr = ma.rd_pt.shape[0]
    if nr == 0 or mode == ROD_EXTRAPOLATED:
        return
    J1 = AR.take2(_S192(), 3, n)
    J2 = AR.take2(_S192(), 3, n)
    cols = AR.take1(_I64(), n)
    for s in range(nr):
        m = p[ma.rd_m[s]]
        point_jacobian(ma, p, A, r, bcol, ma.rd_pt[s, 0], J1)
        point_jacobian(ma, p, A, r, bcol, ma.rd_pt[s, 1], J2)
        nc = 0
        for c in range(n):
            if (J1[0, c] != 0.0 or J1[1, c] != 0.0 or J1[2, c] != 0.0 or J2[0, c] != 0.0
                    or J2[1, c] != 0.0 or J2[2, c] != 0.0):
                cols[nc] = c
                nc += 1
        c3 = m / 3.0
        c6 = m / 6.0 if mode == ROD_EXACT else 0.0
        for ia in range(nc):
            a = cols[ia]
            for ib in range(nc):
                b = cols[ib]
                s11 = J1[0, a] * J1[0, b] + J1[1, a] * J1[1, b] + J1[2, a] * J1[2, b]
                s22 = J2[0, a] * J2[0, b] + J2[1, a] * J2[1, b] + J2[2, a] * J2[2, b]
                s12 = J1[0, a] * J2[0, b] + J1[1, a] * J2[1, b] + J1[2, a] * J2[2, b]
                s21 = J2[0, a] * J1[0, b] + J2[1, a] * J1[1, b] + J2[2, a] * J1[2, b]
                M[a, b] += c3 * (s11 + s22) + c6 * (s12 + s21)


@njit(cache=True)
def rod_kinetic_energy(ma, p, A, r, Z):
    """Kinetic energy of the rods, ``m/6 (v_j.v_j + v_j.v_k + v_k.v_k)`` each."""
    T = 0.0
    _b = _S10x3()
    x1, v1, a1, x2, v2, a2 = _b[0], _b[1], _b[2], _b[3], _b[4], _b[5]
    for s in range(ma.rd_pt.shape[0]):
        # the accelerations are not used: Z stands in for the frame accelerations
        point_kinematics(ma, p, A, r, Z, Z, ma.rd_pt[s, 0], x1, v1, a1)
        point_kinematics(ma, p, A, r, Z, Z, ma.rd_pt[s, 1], x2, v2, a2)
        q = 0.0
        for i in range(3):
            q += v1[i] * v1[i] + v1[i] * v2[i] + v2[i] * v2[i]
        T += p[ma.rd_m[s]] / 6.0 * q
    return T


# ----------------------------------------------------------------------------------------
# inverse dynamics and mass matrix, SR-II (reference point: global origin, RTdyn1)
# ----------------------------------------------------------------------------------------


@njit(cache=True)
def body_origin_inertia(m, g, JG, Mb):
    """6x6 Cartesian inertia of a body referred to the global origin (notes §2.3):
    ``[[m I, -m g~], [m g~, J_G - m g~ g~]]``."""
    Mb[:, :] = 0.0
    for i in range(3):
        Mb[i, i] = m
    gt = _S3x3()
    gt[0, 0] = 0.0
    gt[1, 1] = 0.0
    gt[2, 2] = 0.0
    gt[0, 1] = -g[2]
    gt[0, 2] = g[1]
    gt[1, 0] = g[2]
    gt[1, 2] = -g[0]
    gt[2, 0] = -g[1]
    gt[2, 1] = g[0]
    for i in range(3):
        for j in range(3):
            Mb[i, 3 + j] = -m * gt[i, j]
            Mb[3 + i, j] = m * gt[i, j]
    for i in range(3):
        for j in range(3):
            gg = gt[i, 0] * gt[0, j] + gt[i, 1] * gt[1, j] + gt[i, 2] * gt[2, j]
            Mb[3 + i, 3 + j] = JG[i, j] - m * gg


@njit(cache=True)
def inverse_dynamics_origin(ma, p, A, r, bcol, Z, Zd, fb, nb_, Qj, tau):
    """Generalised residual ``tau = M(z) zdd - Q(z, zd)`` by the SR-II recursion.

    Body residual (notes §2.3): ``F_b = Mbar_b Zd_f + [m W W g; W Jbar w] - [f; n_O]``;
    backward accumulation ``F^S_f = F_f + sum_children F^S_c``; ``tau_f = b_f . F^S_f``.
    """
    nf = ma.fr_parent.shape[0]
    flat = AR.take1(_F384(), nf * 6)
    flat[:] = 0.0
    Fs = flat.reshape((nf, 6))
    _b3 = _S3x3()  # one stack buffer for the 3-vectors
    g = _b3[0]
    JG = _S3x3()
    Mb = _S6x6()
    t1 = _b3[1]
    t2 = _b3[2]
    for f in range(nf):
        b = ma.fr_body[f]
        if b < 0:
            continue
        m = body_inertia(ma, p, A, r, b, g, JG)
        body_origin_inertia(m, g, JG, Mb)
        for i in range(6):
            s = 0.0
            for j in range(6):
                s += Mb[i, j] * Zd[f, j]
            Fs[f, i] = s
        w = Z[f, 3:6]
        _cross(w, g, t1)
        _cross(w, t1, t2)
        for i in range(3):
            Fs[f, i] += m * t2[i] - fb[b, i]
        for i in range(3):
            t2[i] = Mb[3 + i, 3] * w[0] + Mb[3 + i, 4] * w[1] + Mb[3 + i, 5] * w[2]
        _cross(w, t2, t1)
        for i in range(3):
            Fs[f, 3 + i] += t1[i] - nb_[b, i]
    for f in range(nf - 1, -1, -1):
        par = ma.fr_parent[f]
        c = ma.fr_coord[f]
        if c >= 0:
            s = 0.0
            for i in range(6):
                s += bcol[f, i] * Fs[f, i]
            tau[c] = s - Qj[c]
        if par >= 0:
            for i in range(6):
                Fs[par, i] += Fs[f, i]


@njit(cache=True)
def mass_matrix_origin(ma, p, A, r, bcol, n, M):
    """Mass matrix ``M^d = R_d^T T^T Mbar T R_d`` by composite inertias (notes §2.4):
    ``M_jk = b_j^T M^S_k b_k`` for ``j`` an ancestor of (or equal to) ``k``."""
    nf = ma.fr_parent.shape[0]
    flat = AR.take1(_M2304(), nf * 36)
    flat[:] = 0.0
    Mc = flat.reshape((nf, 6, 6))
    g = _S3()
    JG = _S3x3()
    Mb = _S6x6()
    for f in range(nf):
        b = ma.fr_body[f]
        if b >= 0:
            m = body_inertia(ma, p, A, r, b, g, JG)
            body_origin_inertia(m, g, JG, Mb)
            Mc[f] += Mb
    for f in range(nf - 1, -1, -1):
        par = ma.fr_parent[f]
        if par >= 0:
            Mc[par] += Mc[f]
    M[:, :] = 0.0
    w = _S6()
    for f in range(nf):
        ck = ma.fr_coord[f]
        if ck < 0:
            continue
        for i in range(6):
            s = 0.0
            for j in range(6):
                s += Mc[f, i, j] * bcol[f, j]
            w[i] = s
        a = f
        while a >= 0:
            cj = ma.fr_coord[a]
            if cj >= 0:
                s = 0.0
                for i in range(6):
                    s += bcol[a, i] * w[i]
                M[cj, ck] = s
                M[ck, cj] = s
            a = ma.fr_parent[a]


# ----------------------------------------------------------------------------------------
# SR-I (reference point: centre of mass of each body, RTdyn0)
# ----------------------------------------------------------------------------------------


@njit(cache=True)
def reference_points(ma, p, A, r, P):
    """Reference point of every frame: the centre of mass of its body, else its origin."""
    nf = ma.fr_parent.shape[0]
    g = _S3()
    for f in range(nf):
        b = ma.fr_body[f]
        if b >= 0:
            body_com(ma, p, A, r, b, g)
            for i in range(3):
                P[f, i] = g[i]
        else:
            for i in range(3):
                P[f, i] = r[f, i]


@njit(cache=True)
def com_columns(ma, r, u, P, bv):
    """Joint columns referred to the frame's reference point (seed 001 eq. 1a, ``b^v``):
    revolute ``[u x (P_f - r_f); u]``, prismatic ``[u; 0]``."""
    nf = ma.fr_parent.shape[0]
    d = _S3()
    t = _S3()
    for f in range(nf):
        typ = ma.fr_type[f]
        if typ == REVOLUTE:
            for i in range(3):
                d[i] = P[f, i] - r[f, i]
            _cross(u[f], d, t)
            for i in range(3):
                bv[f, i] = t[i]
                bv[f, 3 + i] = u[f, i]
        elif typ == PRISMATIC:
            for i in range(3):
                bv[f, i] = u[f, i]
                bv[f, 3 + i] = 0.0
        else:
            for i in range(6):
                bv[f, i] = 0.0


@njit(cache=True)
def com_kinematics(ma, zd, zdd, r, u, P, bv, V, Vd):
    """SR-I velocity/acceleration recursion (seed 001 eqs. 1a-1e) at reference points:
    ``V_f = B_f V_p + b^v_f zd``, ``Vd_f = B_f Vd_p + b^v_f zdd + d^v_f``."""
    nf = ma.fr_parent.shape[0]
    _b3 = _S5x3()  # one stack buffer for the 3-vectors
    dPP = _b3[0]
    t1 = _b3[1]
    t2 = _b3[2]
    wpu = _b3[3]
    dPr = _b3[4]
    zero3 = _S3()
    zero3[:] = 0.0
    for f in range(nf):
        par = ma.fr_parent[f]
        c = ma.fr_coord[f]
        q1 = zd[c] if c >= 0 else 0.0
        q2 = zdd[c] if c >= 0 else 0.0
        for i in range(6):
            V[f, i] = bv[f, i] * q1
            Vd[f, i] = bv[f, i] * q2
        if par >= 0:
            wp = V[par, 3:6]
            wdp = Vd[par, 3:6]
            for i in range(3):
                dPP[i] = P[f, i] - P[par, i]
                dPr[i] = r[f, i] - P[par, i]
            # B V_p : velocity of the parent at P_f
            _cross(wp, dPP, t1)
            for i in range(3):
                V[f, i] += V[par, i] + t1[i]
                V[f, 3 + i] += wp[i]
            # B Vd_p : acceleration of the parent's material point at P_f
            _cross(wdp, dPP, t1)
            for i in range(3):
                Vd[f, i] += Vd[par, i] + t1[i]
                Vd[f, 3 + i] += wdp[i]
        else:
            wp = zero3
            for i in range(3):
                dPP[i] = 0.0
                dPr[i] = 0.0
        typ = ma.fr_type[f]
        if typ == REVOLUTE:
            # parent centripetal at r_f, child centripetal from r_f to P_f, d(u) term
            _cross(wp, dPr, t1)
            _cross(wp, t1, t2)
            for i in range(3):
                Vd[f, i] += t2[i]
            wf = V[f, 3:6]
            for i in range(3):
                dPr[i] = P[f, i] - r[f, i]
            _cross(wf, dPr, t1)
            _cross(wf, t1, t2)
            for i in range(3):
                Vd[f, i] += t2[i]
            _cross(wp, u[f], wpu)
            _cross(wpu, dPr, t1)
            for i in range(3):
                Vd[f, i] += q1 * t1[i]
                Vd[f, 3 + i] += q1 * wpu[i]
        else:
            _cross(wp, dPP, t1)
            _cross(wp, t1, t2)
            for i in range(3):
                Vd[f, i] += t2[i]
            if typ == PRISMATIC:
                _cross(wp, u[f], wpu)
                for i in range(3):
                    Vd[f, i] += 2.0 * q1 * wpu[i]


@njit(cache=True)
def inverse_dynamics_com(ma, p, A, r, P, bv, V, Vd, fb, nb_, Qj, tau):
    """Generalised residual ``tau = M zdd - Q`` by the SR-I recursion: Newton-Euler at each
    centre of mass, backward accumulation with the shift ``n_p += (P_c - P_p) x f_c``
    (scalars instead of 3-vector row views, the same operations in the same order)."""
    fr_parent = ma.fr_parent
    fr_body = ma.fr_body
    fr_coord = ma.fr_coord
    nf = fr_parent.shape[0]
    flat = AR.take1(_F384(), nf * 6)
    flat[:] = 0.0
    Fs = flat.reshape((nf, 6))
    g = _S3()
    JG = _S3x3()
    for f in range(nf):
        b = fr_body[f]
        if b < 0:
            continue
        m = body_inertia(ma, p, A, r, b, g, JG)
        w0, w1, w2 = V[f, 3], V[f, 4], V[f, 5]
        wd0, wd1, wd2 = Vd[f, 3], Vd[f, 4], Vd[f, 5]
        j0 = JG[0, 0] * w0 + JG[0, 1] * w1 + JG[0, 2] * w2
        j1 = JG[1, 0] * w0 + JG[1, 1] * w1 + JG[1, 2] * w2
        j2 = JG[2, 0] * w0 + JG[2, 1] * w1 + JG[2, 2] * w2
        k0 = JG[0, 0] * wd0 + JG[0, 1] * wd1 + JG[0, 2] * wd2
        k1 = JG[1, 0] * wd0 + JG[1, 1] * wd1 + JG[1, 2] * wd2
        k2 = JG[2, 0] * wd0 + JG[2, 1] * wd1 + JG[2, 2] * wd2
        # w x J w
        t0 = w1 * j2 - w2 * j1
        t1 = w2 * j0 - w0 * j2
        t2 = w0 * j1 - w1 * j0
        # external moment about the centre of mass: n_G = n_O - g x f
        f0, f1, f2 = fb[b, 0], fb[b, 1], fb[b, 2]
        Fs[f, 0] = m * Vd[f, 0] - f0
        Fs[f, 1] = m * Vd[f, 1] - f1
        Fs[f, 2] = m * Vd[f, 2] - f2
        c0 = g[1] * f2 - g[2] * f1
        c1 = g[2] * f0 - g[0] * f2
        c2 = g[0] * f1 - g[1] * f0
        Fs[f, 3] = k0 + t0 - (nb_[b, 0] - c0)
        Fs[f, 4] = k1 + t1 - (nb_[b, 1] - c1)
        Fs[f, 5] = k2 + t2 - (nb_[b, 2] - c2)
    for f in range(nf - 1, -1, -1):
        par = fr_parent[f]
        c = fr_coord[f]
        if c >= 0:
            s = 0.0
            for i in range(6):
                s += bv[f, i] * Fs[f, i]
            tau[c] = s - Qj[c]
        if par >= 0:
            d0 = P[f, 0] - P[par, 0]
            d1 = P[f, 1] - P[par, 1]
            d2 = P[f, 2] - P[par, 2]
            F0, F1, F2 = Fs[f, 0], Fs[f, 1], Fs[f, 2]
            Fs[par, 0] += F0
            Fs[par, 1] += F1
            Fs[par, 2] += F2
            Fs[par, 3] += Fs[f, 3] + d1 * F2 - d2 * F1
            Fs[par, 4] += Fs[f, 4] + d2 * F0 - d0 * F2
            Fs[par, 5] += Fs[f, 5] + d0 * F1 - d1 * F0


@njit(cache=True)
def _shift_inertia(I6, d, out):
    """Spatial inertia about point P shifted to point P - d (``d = P_c - P_p``):
    ``X^T I X`` with ``X = [[I, D], [0, I]]``, ``D = -d~`` (explicit loops: the block
    structure of ``X`` spares the dense 6x6 products)."""
    D00, D01, D02 = 0.0, d[2], -d[1]
    D10, D11, D12 = -d[2], 0.0, d[0]
    D20, D21, D22 = d[1], -d[0], 0.0
    # Y = I6 X: columns 0-2 unchanged, columns 3-5 += I6[:, 0:3] D
    for i in range(6):
        a0 = I6[i, 0]
        a1 = I6[i, 1]
        a2 = I6[i, 2]
        out[i, 0] = a0
        out[i, 1] = a1
        out[i, 2] = a2
        out[i, 3] = I6[i, 3] + (a0 * D00 + a1 * D10 + a2 * D20)
        out[i, 4] = I6[i, 4] + (a0 * D01 + a1 * D11 + a2 * D21)
        out[i, 5] = I6[i, 5] + (a0 * D02 + a1 * D12 + a2 * D22)
    # out = X^T Y: rows 0-2 unchanged, rows 3-5 += D^T Y[0:3]
    for j in range(6):
        y0 = out[0, j]
        y1 = out[1, j]
        y2 = out[2, j]
        out[3, j] += D00 * y0 + D10 * y1 + D20 * y2
        out[4, j] += D01 * y0 + D11 * y1 + D21 * y2
        out[5, j] += D02 * y0 + D12 * y1 + D22 * y2


@njit(cache=True)
def mass_matrix_com(ma, p, A, r, P, bv, n, M):
    """Mass matrix by SR-I composite inertias referred to each frame's reference point."""
    nf = ma.fr_parent.shape[0]
    flat = AR.take1(_M2304(), nf * 36)
    flat[:] = 0.0
    Mc = flat.reshape((nf, 6, 6))
    g = _S3()
    JG = _S3x3()
    tmp = _S6x6()
    d = _S3()
    for f in range(nf):
        b = ma.fr_body[f]
        if b >= 0:
            m = body_inertia(ma, p, A, r, b, g, JG)
            for i in range(3):
                Mc[f, i, i] += m
                for j in range(3):
                    Mc[f, 3 + i, 3 + j] += JG[i, j]
    for f in range(nf - 1, -1, -1):
        par = ma.fr_parent[f]
        if par >= 0:
            for i in range(3):
                d[i] = P[f, i] - P[par, i]
            _shift_inertia(Mc[f], d, tmp)
            for i in range(6):
                for j in range(6):
                    Mc[par, i, j] += tmp[i, j]
    M[:, :] = 0.0
    w = _S6()
    for f in range(nf):
        ck = ma.fr_coord[f]
        if ck < 0:
            continue
        for i in range(6):
            s = 0.0
            for j in range(6):
                s += Mc[f, i, j] * bv[f, j]
            w[i] = s
        a = f
        while a >= 0:
            cj = ma.fr_coord[a]
            if cj >= 0:
                s = 0.0
                for i in range(6):
                    s += bv[a, i] * w[i]
                M[cj, ck] = s
                M[ck, cj] = s
            par = ma.fr_parent[a]
            if par >= 0:
                # refer the force w from P_a to P_par
                for i in range(3):
                    d[i] = P[a, i] - P[par, i]
                w[3] += d[1] * w[2] - d[2] * w[1]
                w[4] += d[2] * w[0] - d[0] * w[2]
                w[5] += d[0] * w[1] - d[1] * w[0]
            a = par


@njit(cache=True)
def kinetic_energy(ma, p, A, r, Z):
    nbod = ma.b_frame.shape[0]
    g = _S3()
    JG = _S3x3()
    vg = _S3()
    T = 0.0
    for b in range(nbod):
        m = body_inertia(ma, p, A, r, b, g, JG)
        f = ma.b_frame[b]
        w = Z[f, 3:6]
        _cross(w, g, vg)
        s = 0.0
        for i in range(3):
            v = Z[f, i] + vg[i]
            s += m * v * v
        for i in range(3):
            s += w[i] * (JG[i, 0] * w[0] + JG[i, 1] * w[1] + JG[i, 2] * w[2])
        T += 0.5 * s
    if ma.rd_pt.shape[0] > 0:
        T += rod_kinetic_energy(ma, p, A, r, Z)
    return T
