"""Reverse-mode (vector-Jacobian) kernels of the semi-recursive formulation: the first
pieces of issue 29's route for item 1.

The adjoint sweep needs, at every step, ``K^T mu``, ``C^T mu``, ``Mbar^T mu`` and
``P^T mu`` for the few adjoint vectors ``mu`` of the objectives (seed 001 eqs 64-69).  The
forward tangents of :mod:`workbench.kernels.tangents` give them column by column, ``2d``
state directions per step; the kernels here give them in one backward pass whose cost
does not grow with ``d`` or with the number of parameters.

The quantity differentiated is the virtual power ``v^T tau(z, zd, zdd; p)`` of a fixed
generalised velocity ``v`` (``tau = M zdd - Q``; seed 001 eq 29 written as virtual power,
formulation independent, as in
:func:`workbench.formulations.semirecursive.step_jacobians.virtual_power_lanes`): body
``b``, ``m (a_g - g_vec) . v_g + (J_G alpha + omega x J_G omega) . omega_v`` with the
virtual twist ``(v_O, omega_v)`` of the body's frame (:func:`workbench.kernels.tree.frame_velocities`
of ``v``), ``v_g = v_O + omega_v x g``; joint spring-damper ``-Q_c v_c``.  Its gradient
with respect to ``z``, ``zd``, ``zdd`` and the fields ``p`` is ``(dtau/dz)^T v``, ... at
``v`` fixed.

Conventions: each ``_r`` kernel is the transpose of the forward tangent of the kernel of
the same name (:mod:`workbench.kernels.tangents`); cotangents carry a ``b`` ("bar")
suffix: ``thb[f]`` pairs with the rotation-vector tangent ``th[f]`` (``dA_f = [th_f]x
A_f``), ``rb``, ``ub`` with ``dr``, ``du``, ``bcolb``, ``Zb``, ``Zdb``, ``Zvb`` with the
joint columns, frame velocities, material accelerations and virtual twists (SR-II), and
``zb``, ``zdb``, ``zddb``, ``pb`` with ``dz``, ``dzd``, ``dzdd``, ``dp``.  The kernels
*add* into the cotangents of their inputs.

Scope: trees loaded by gravity, joint spring-dampers and linear point spring-dampers
(:func:`virtual_power_supported`); closure rows of point coincidence and distance
(:func:`constraints_r`, :func:`closures_supported`: with them, the ``dR^Phi`` term of
closed loops).  Not written yet: other spring laws, tires, applied loads, speed control,
path followers, rods, the other closure kinds.  The adjoint by reverse products
(:mod:`workbench.formulations.semirecursive.step_vjp`) calls them; the tests check them
against central differences of ``tau`` and against the step Jacobians.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from workbench.forces import spring_laws as SL
from workbench.kernels import layout as AR
from workbench.kernels import tree as K
from workbench.kernels.layout import C_DIST, C_PTCOMP, PRISMATIC, REVOLUTE
from workbench.kernels.measures import (MS_ACC, MS_ANGVEL, MS_ANGVEL_BODY, MS_COORD, MS_COORD_ACC,
                                        MS_POS, MS_RATE, MS_VEL)

# stack temporaries of constant shape (no allocation in the loops over the bodies)
_S3x3x3 = AR.scratch(3, 3, 3)
_S4x3x3 = AR.scratch(4, 3, 3)
_S3 = AR.scratch(3)


@njit(cache=True)
def virtual_power_supported(ma):
    """True when :func:`virtual_power_gradient_r` covers every load of the model: gravity,
    the bodies' inertia, joint spring-dampers and point spring-dampers of linear laws (no
    other spring or damper law, tires, applied loads, speed controls, path followers or
    rods)."""
    for s in range(ma.sp_pt.shape[0]):
        if ma.sp_law[s, 0] != SL.LAW_K_LINEAR or ma.sp_law[s, 1] != SL.LAW_C_LINEAR:
            return False
    return (ma.ty_pt.shape[0] == 0 and ma.af_type.shape[0] == 0 and ma.sc_pt.shape[0] == 0
            and ma.pf_pt.shape[0] == 0 and ma.rd_pt.shape[0] == 0)


@njit(cache=True)
def frame_positions_r(ma, A, r, u, thb, rb, ub, zb, pb):
    """Transpose of :func:`workbench.kernels.tangents.frame_positions_t` (every frame
    moved): from ``thb, rb, ub`` (consumed: the parents' entries receive their children's)
    adds ``zb`` and ``pb`` (the joint locations ``s`` and nothing else: ``A, r, u`` read
    no other field).

    Forward, per frame: ``dr_f = dr_p + th_p x (r_f - r_p) + A_p ds``, ``du_f = th_p x
    u_f``, ``th_f = th_p + u_f dq`` (revolute), ``ds = dp_s + a dq`` (prismatic);
    backward: ``thb_p += thb_f + (r_f - r_p) x rb_f + u_f x ub_f``, ``rb_p += rb_f``,
    ``pb_s += A_p^T rb_f``, ``zb_c += u_f . thb_f`` (revolute) or ``a . A_p^T rb_f``
    (prismatic)."""
    fr_parent = ma.fr_parent
    fr_off = ma.fr_off
    fr_axis = ma.fr_axis
    fr_type = ma.fr_type
    fr_coord = ma.fr_coord
    nf = fr_parent.shape[0]
    for f in range(nf - 1, -1, -1):
        par = fr_parent[f]
        typ = fr_type[f]
        c = fr_coord[f]
        dqb = 0.0
        if typ == REVOLUTE:
            dqb += u[f, 0] * thb[f, 0] + u[f, 1] * thb[f, 1] + u[f, 2] * thb[f, 2]
        y0, y1, y2 = rb[f, 0], rb[f, 1], rb[f, 2]
        if par >= 0:
            t0 = r[f, 0] - r[par, 0]
            t1 = r[f, 1] - r[par, 1]
            t2 = r[f, 2] - r[par, 2]
            u0, u1, u2 = u[f, 0], u[f, 1], u[f, 2]
            e0, e1, e2 = ub[f, 0], ub[f, 1], ub[f, 2]
            thb[par, 0] += thb[f, 0] + (t1 * y2 - t2 * y1) + (u1 * e2 - u2 * e1)
            thb[par, 1] += thb[f, 1] + (t2 * y0 - t0 * y2) + (u2 * e0 - u0 * e2)
            thb[par, 2] += thb[f, 2] + (t0 * y1 - t1 * y0) + (u0 * e1 - u1 * e0)
            rb[par, 0] += y0
            rb[par, 1] += y1
            rb[par, 2] += y2
            s0 = A[par, 0, 0] * y0 + A[par, 1, 0] * y1 + A[par, 2, 0] * y2
            s1 = A[par, 0, 1] * y0 + A[par, 1, 1] * y1 + A[par, 2, 1] * y2
            s2 = A[par, 0, 2] * y0 + A[par, 1, 2] * y1 + A[par, 2, 2] * y2
        else:
            s0, s1, s2 = y0, y1, y2
        if typ == PRISMATIC:
            dqb += fr_axis[f, 0] * s0 + fr_axis[f, 1] * s1 + fr_axis[f, 2] * s2
        o = fr_off[f]
        pb[o] += s0
        pb[o + 1] += s1
        pb[o + 2] += s2
        if c >= 0:
            zb[c] += dqb


@njit(cache=True)
def frame_kinematics_r(ma, zd, zdd, v, r, u, bcol, Z, Zb, Zdb, Zvb, rb, ub, zdb, zddb):
    """Transpose of the tangents of the SR-II velocity and acceleration recursions
    (:func:`workbench.kernels.tree.frame_velocities` of ``zd`` and of the virtual velocity
    ``v``, :func:`workbench.kernels.tree.frame_accelerations`,
    :func:`workbench.kernels.tree.joint_columns`): from the cotangents ``Zb, Zdb, Zvb``
    of the frame velocities, accelerations and virtual twists (consumed: the parents'
    entries receive their children's) adds ``rb, ub`` (frame origins and joint axes),
    ``zdb`` and ``zddb``.

    Forward, per frame with coordinate ``q``: ``Z_f = Z_p + b_f qd``, ``Zv_f = Zv_p + b_f
    v_q``, ``Zd_f = Zd_p + b_f qdd + d_f`` with revolute ``d_f = [qd r x (w_p x u) + w_p x
    (w_p x r) - w_f x (w_f x r); qd (w_p x u)]``, prismatic ``d_f = [2 qd (w_p x u); 0]``,
    ``b_f = [r x u; u]`` (revolute) or ``[u; 0]`` (prismatic)."""
    fr_parent = ma.fr_parent
    fr_coord = ma.fr_coord
    fr_type = ma.fr_type
    nf = fr_parent.shape[0]
    for f in range(nf - 1, -1, -1):
        par = fr_parent[f]
        c = fr_coord[f]
        typ = fr_type[f]
        q1 = zd[c] if c >= 0 else 0.0
        q2 = zdd[c] if c >= 0 else 0.0
        vc = v[c] if c >= 0 else 0.0
        q1b = 0.0
        q2b = 0.0
        # ---- accelerations: Zd_f = Zd_p + b_f q2 + d_f (the cotangent of every term is Zdb_f)
        y0, y1, y2 = Zdb[f, 0], Zdb[f, 1], Zdb[f, 2]
        y3, y4, y5 = Zdb[f, 3], Zdb[f, 4], Zdb[f, 5]
        if c >= 0 and (typ == REVOLUTE or typ == PRISMATIC):
            if par >= 0:
                p0, p1, p2 = Z[par, 3], Z[par, 4], Z[par, 5]
            else:
                p0, p1, p2 = 0.0, 0.0, 0.0
            u0, u1, u2 = u[f, 0], u[f, 1], u[f, 2]
            wpu0 = p1 * u2 - p2 * u1
            wpu1 = p2 * u0 - p0 * u2
            wpu2 = p0 * u1 - p1 * u0
            if typ == REVOLUTE:
                r0, r1, r2 = r[f, 0], r[f, 1], r[f, 2]
                w0, w1, w2 = Z[f, 3], Z[f, 4], Z[f, 5]
                # d[3:6] = q1 wpu
                q1b += wpu0 * y3 + wpu1 * y4 + wpu2 * y5
                ab0 = q1 * y3
                ab1 = q1 * y4
                ab2 = q1 * y5
                # q1 (r x wpu): rb += q1 wpu x y, wpub += q1 y x r
                x0 = r1 * wpu2 - r2 * wpu1
                x1 = r2 * wpu0 - r0 * wpu2
                x2 = r0 * wpu1 - r1 * wpu0
                q1b += x0 * y0 + x1 * y1 + x2 * y2
                rb[f, 0] += q1 * (wpu1 * y2 - wpu2 * y1)
                rb[f, 1] += q1 * (wpu2 * y0 - wpu0 * y2)
                rb[f, 2] += q1 * (wpu0 * y1 - wpu1 * y0)
                ab0 += q1 * (y1 * r2 - y2 * r1)
                ab1 += q1 * (y2 * r0 - y0 * r2)
                ab2 += q1 * (y0 * r1 - y1 * r0)
                # w_p x (w_p x r) = w_p (w_p . r) - r (w_p . w_p): gradients at y
                pr = p0 * r0 + p1 * r1 + p2 * r2
                py = p0 * y0 + p1 * y1 + p2 * y2
                ry = r0 * y0 + r1 * y1 + r2 * y2
                pp = p0 * p0 + p1 * p1 + p2 * p2
                wpb0 = y0 * pr + r0 * py - 2.0 * p0 * ry
                wpb1 = y1 * pr + r1 * py - 2.0 * p1 * ry
                wpb2 = y2 * pr + r2 * py - 2.0 * p2 * ry
                rb[f, 0] += p0 * py - y0 * pp
                rb[f, 1] += p1 * py - y1 * pp
                rb[f, 2] += p2 * py - y2 * pp
                # - w_f x (w_f x r)
                wr = w0 * r0 + w1 * r1 + w2 * r2
                wy = w0 * y0 + w1 * y1 + w2 * y2
                ww = w0 * w0 + w1 * w1 + w2 * w2
                Zb[f, 3] -= y0 * wr + r0 * wy - 2.0 * w0 * ry
                Zb[f, 4] -= y1 * wr + r1 * wy - 2.0 * w1 * ry
                Zb[f, 5] -= y2 * wr + r2 * wy - 2.0 * w2 * ry
                rb[f, 0] -= w0 * wy - y0 * ww
                rb[f, 1] -= w1 * wy - y1 * ww
                rb[f, 2] -= w2 * wy - y2 * ww
            else:
                # d[0:3] = 2 q1 wpu
                q1b += 2.0 * (wpu0 * y0 + wpu1 * y1 + wpu2 * y2)
                ab0 = 2.0 * q1 * y0
                ab1 = 2.0 * q1 * y1
                ab2 = 2.0 * q1 * y2
                wpb0, wpb1, wpb2 = 0.0, 0.0, 0.0
            # wpu = w_p x u: wpb += u x ab, ub += ab x w_p
            wpb0 += u1 * ab2 - u2 * ab1
            wpb1 += u2 * ab0 - u0 * ab2
            wpb2 += u0 * ab1 - u1 * ab0
            ub[f, 0] += ab1 * p2 - ab2 * p1
            ub[f, 1] += ab2 * p0 - ab0 * p2
            ub[f, 2] += ab0 * p1 - ab1 * p0
            if par >= 0:
                Zb[par, 3] += wpb0
                Zb[par, 4] += wpb1
                Zb[par, 5] += wpb2
        # b_f q2 and the parent's acceleration
        bb0 = q2 * y0
        bb1 = q2 * y1
        bb2 = q2 * y2
        bb3 = q2 * y3
        bb4 = q2 * y4
        bb5 = q2 * y5
        q2b += (bcol[f, 0] * y0 + bcol[f, 1] * y1 + bcol[f, 2] * y2 + bcol[f, 3] * y3
                + bcol[f, 4] * y4 + bcol[f, 5] * y5)
        if par >= 0:
            for i in range(6):
                Zdb[par, i] += Zdb[f, i]
        # ---- velocities and virtual twists (Zb_f complete: the acceleration terms above
        # added theirs): Z_f = Z_p + b_f q1, Zv_f = Zv_p + b_f v_c
        x0, x1, x2 = Zb[f, 0], Zb[f, 1], Zb[f, 2]
        x3, x4, x5 = Zb[f, 3], Zb[f, 4], Zb[f, 5]
        q1b += (bcol[f, 0] * x0 + bcol[f, 1] * x1 + bcol[f, 2] * x2 + bcol[f, 3] * x3
                + bcol[f, 4] * x4 + bcol[f, 5] * x5)
        bb0 += q1 * x0 + vc * Zvb[f, 0]
        bb1 += q1 * x1 + vc * Zvb[f, 1]
        bb2 += q1 * x2 + vc * Zvb[f, 2]
        bb3 += q1 * x3 + vc * Zvb[f, 3]
        bb4 += q1 * x4 + vc * Zvb[f, 4]
        bb5 += q1 * x5 + vc * Zvb[f, 5]
        if par >= 0:
            for i in range(6):
                Zb[par, i] += Zb[f, i]
                Zvb[par, i] += Zvb[f, i]
        # ---- joint columns: revolute b = [r x u; u], prismatic [u; 0]
        if typ == REVOLUTE:
            r0, r1, r2 = r[f, 0], r[f, 1], r[f, 2]
            u0, u1, u2 = u[f, 0], u[f, 1], u[f, 2]
            rb[f, 0] += u1 * bb2 - u2 * bb1
            rb[f, 1] += u2 * bb0 - u0 * bb2
            rb[f, 2] += u0 * bb1 - u1 * bb0
            ub[f, 0] += bb1 * r2 - bb2 * r1 + bb3
            ub[f, 1] += bb2 * r0 - bb0 * r2 + bb4
            ub[f, 2] += bb0 * r1 - bb1 * r0 + bb5
        elif typ == PRISMATIC:
            ub[f, 0] += bb0
            ub[f, 1] += bb1
            ub[f, 2] += bb2
        if c >= 0:
            zdb[c] += q1b
            zddb[c] += q2b


@njit(cache=True, inline="always")
def body_point_r(A, f, o, fld, d0, d1, d2, xb0, xb1, xb2, thb, rb, pb, fields):
    """Transpose of the tangent of a body point ``x = r_f + A_f l`` (``l`` = the body's
    origin offset at ``o`` plus the point's fields at ``fld``, ``d = A_f l``): from the
    cotangent ``xb`` adds ``rb_f += xb``, ``thb_f += d x xb`` and (``fields``) ``A_f^T xb``
    to both field triples."""
    rb[f, 0] += xb0
    rb[f, 1] += xb1
    rb[f, 2] += xb2
    thb[f, 0] += d1 * xb2 - d2 * xb1
    thb[f, 1] += d2 * xb0 - d0 * xb2
    thb[f, 2] += d0 * xb1 - d1 * xb0
    if fields:
        for j in range(3):
            s = A[f, 0, j] * xb0 + A[f, 1, j] * xb1 + A[f, 2, j] * xb2
            pb[o + j] += s
            pb[fld + j] += s


@njit(cache=True)
def body_virtual_power_r(ma, p, A, r, Z, Zd, Zv, thb, rb, Zb, Zdb, Zvb, pb, fields=True):
    """Gradient of the bodies' share of the virtual power, ``sum_b m (a_g - g_vec) . v_g
    + (J_G alpha + omega x J_G omega) . omega_v``, with respect to each body frame's
    rotation (``thb``), origin (``rb``), velocity, acceleration and virtual twist (``Zb``,
    ``Zdb``, ``Zvb``) and the bodies' fields (mass, centre of mass, inertia, frame offset:
    ``pb``), added.  ``a_g = a_O + alpha x g + omega x (omega x g)``, ``v_g = v_O + omega_v
    x g``, ``g = r_f + A_f l``, ``J_G = A_f J_l A_f^T``.  ``fields`` False: ``pb`` is not
    touched (a pass that needs the state products only)."""
    grav = ma.gravity
    gr0, gr1, gr2 = grav[0], grav[1], grav[2]
    mats = _S3x3x3()
    JG, Jb, X = mats[0], mats[1], mats[2]
    gv = _S3()
    for b in range(ma.b_frame.shape[0]):
        f = ma.b_frame[b]
        o = ma.b_org[b]
        fc = ma.b_com[b]
        k = ma.b_inr[b]
        # g = r_f + A l and J_G = A J_l A^T
        m = K.body_inertia(ma, p, A, r, b, gv, JG)
        g0, g1, g2 = gv[0], gv[1], gv[2]
        d0 = g0 - r[f, 0]
        d1 = g1 - r[f, 1]
        d2 = g2 - r[f, 2]
        w0, w1, w2 = Z[f, 3], Z[f, 4], Z[f, 5]
        al0, al1, al2 = Zd[f, 3], Zd[f, 4], Zd[f, 5]
        sv0, sv1, sv2 = Zv[f, 0], Zv[f, 1], Zv[f, 2]
        wv0, wv1, wv2 = Zv[f, 3], Zv[f, 4], Zv[f, 5]
        # a_g - g_vec = c
        wg = w0 * g0 + w1 * g1 + w2 * g2
        ww = w0 * w0 + w1 * w1 + w2 * w2
        c0 = Zd[f, 0] + (al1 * g2 - al2 * g1) + w0 * wg - g0 * ww - gr0
        c1 = Zd[f, 1] + (al2 * g0 - al0 * g2) + w1 * wg - g1 * ww - gr1
        c2 = Zd[f, 2] + (al0 * g1 - al1 * g0) + w2 * wg - g2 * ww - gr2
        # v_g
        vg0 = sv0 + (wv1 * g2 - wv2 * g1)
        vg1 = sv1 + (wv2 * g0 - wv0 * g2)
        vg2 = sv2 + (wv0 * g1 - wv1 * g0)
        mv0, mv1, mv2 = m * vg0, m * vg1, m * vg2
        # J w, J alpha, J omega_v
        jw0 = JG[0, 0] * w0 + JG[0, 1] * w1 + JG[0, 2] * w2
        jw1 = JG[1, 0] * w0 + JG[1, 1] * w1 + JG[1, 2] * w2
        jw2 = JG[2, 0] * w0 + JG[2, 1] * w1 + JG[2, 2] * w2
        ja0 = JG[0, 0] * al0 + JG[0, 1] * al1 + JG[0, 2] * al2
        ja1 = JG[1, 0] * al0 + JG[1, 1] * al1 + JG[1, 2] * al2
        ja2 = JG[2, 0] * al0 + JG[2, 1] * al1 + JG[2, 2] * al2
        jv0 = JG[0, 0] * wv0 + JG[0, 1] * wv1 + JG[0, 2] * wv2
        jv1 = JG[1, 0] * wv0 + JG[1, 1] * wv1 + JG[1, 2] * wv2
        jv2 = JG[2, 0] * wv0 + JG[2, 1] * wv1 + JG[2, 2] * wv2
        # d/d a_O = m v_g; d/d alpha = m g x v_g + J omega_v
        Zdb[f, 0] += mv0
        Zdb[f, 1] += mv1
        Zdb[f, 2] += mv2
        Zdb[f, 3] += (g1 * mv2 - g2 * mv1) + jv0
        Zdb[f, 4] += (g2 * mv0 - g0 * mv2) + jv1
        Zdb[f, 5] += (g0 * mv1 - g1 * mv0) + jv2
        # d/d omega: m v_g . (w (w.g) - g (w.w)) and omega_v . (w x J w)
        wm = w0 * mv0 + w1 * mv1 + w2 * mv2
        gm = g0 * mv0 + g1 * mv1 + g2 * mv2
        # w x J w . omega_v: grad = J w x omega_v + J (omega_v x w)
        x0 = wv1 * w2 - wv2 * w1
        x1 = wv2 * w0 - wv0 * w2
        x2 = wv0 * w1 - wv1 * w0
        Zb[f, 3] += (mv0 * wg + g0 * wm - 2.0 * w0 * gm + (jw1 * wv2 - jw2 * wv1)
                     + JG[0, 0] * x0 + JG[0, 1] * x1 + JG[0, 2] * x2)
        Zb[f, 4] += (mv1 * wg + g1 * wm - 2.0 * w1 * gm + (jw2 * wv0 - jw0 * wv2)
                     + JG[1, 0] * x0 + JG[1, 1] * x1 + JG[1, 2] * x2)
        Zb[f, 5] += (mv2 * wg + g2 * wm - 2.0 * w2 * gm + (jw0 * wv1 - jw1 * wv0)
                     + JG[2, 0] * x0 + JG[2, 1] * x1 + JG[2, 2] * x2)
        # d/d v_O = m c; d/d omega_v = m g x c + J alpha + w x J w
        Zvb[f, 0] += m * c0
        Zvb[f, 1] += m * c1
        Zvb[f, 2] += m * c2
        Zvb[f, 3] += m * (g1 * c2 - g2 * c1) + ja0 + (w1 * jw2 - w2 * jw1)
        Zvb[f, 4] += m * (g2 * c0 - g0 * c2) + ja1 + (w2 * jw0 - w0 * jw2)
        Zvb[f, 5] += m * (g0 * c1 - g1 * c0) + ja2 + (w0 * jw1 - w1 * jw0)
        # d/d g = m v_g x alpha + w (m v_g . w) - m v_g (w . w) + m c x omega_v
        gb0 = (mv1 * al2 - mv2 * al1) + w0 * wm - mv0 * ww + m * (c1 * wv2 - c2 * wv1)
        gb1 = (mv2 * al0 - mv0 * al2) + w1 * wm - mv1 * ww + m * (c2 * wv0 - c0 * wv2)
        gb2 = (mv0 * al1 - mv1 * al0) + w2 * wm - mv2 * ww + m * (c0 * wv1 - c1 * wv0)
        if fields:
            # d/d m
            pb[ma.b_mass[b]] += c0 * vg0 + c1 * vg1 + c2 * vg2
        # g = r_f + A_f l: the offset and centre-of-mass fields
        body_point_r(A, f, o, fc, d0, d1, d2, gb0, gb1, gb2, thb, rb, pb, fields)
        # d/d J_G = omega_v alpha^T + (omega_v x w) w^T (as a general matrix Jb)
        for i in range(3):
            wvi = wv0 if i == 0 else (wv1 if i == 1 else wv2)
            xi = x0 if i == 0 else (x1 if i == 1 else x2)
            Jb[i, 0] = wvi * al0 + xi * w0
            Jb[i, 1] = wvi * al1 + xi * w1
            Jb[i, 2] = wvi * al2 + xi * w2
        # rotation: dJ_G = [th]x J_G - J_G [th]x, so thb += vee(X), X = J_G Jb^T - Jb^T J_G
        for i in range(3):
            for j in range(3):
                s = 0.0
                for q in range(3):
                    s += JG[i, q] * Jb[j, q] - Jb[q, i] * JG[q, j]
                X[i, j] = s
        thb[f, 0] += X[1, 2] - X[2, 1]
        thb[f, 1] += X[2, 0] - X[0, 2]
        thb[f, 2] += X[0, 1] - X[1, 0]
        if not fields:
            continue
        # the inertia fields: J_l = A^T J_G A, Jlb = A^T Jb A
        # (X reused for Jb A, then the entries of A^T Jb A)
        for i in range(3):
            for j in range(3):
                X[i, j] = Jb[i, 0] * A[f, 0, j] + Jb[i, 1] * A[f, 1, j] + Jb[i, 2] * A[f, 2, j]
        for i in range(3):
            for j in range(3):
                Jb[i, j] = A[f, 0, i] * X[0, j] + A[f, 1, i] * X[1, j] + A[f, 2, i] * X[2, j]
        pb[k] += Jb[0, 0]
        pb[k + 1] += Jb[1, 1]
        pb[k + 2] += Jb[2, 2]
        pb[k + 3] += Jb[0, 1] + Jb[1, 0]
        pb[k + 4] += Jb[0, 2] + Jb[2, 0]
        pb[k + 5] += Jb[1, 2] + Jb[2, 1]


@njit(cache=True)
def joint_springs_r(ma, p, z, zd, v, zb, zdb, pb):
    """Gradient of the joint spring-dampers' share of the virtual power, ``-Q_c v_c = (k
    (z_c - z0) + c zd_c) v_c``, added to ``zb``, ``zdb`` and ``pb``."""
    for s in range(ma.js_coord.shape[0]):
        c = ma.js_coord[s]
        fk = ma.js_k[s]
        fcd = ma.js_c[s]
        fz = ma.js_z0[s]
        vc = v[c]
        zb[c] += p[fk] * vc
        zdb[c] += p[fcd] * vc
        pb[fk] += (z[c] - p[fz]) * vc
        pb[fcd] += zd[c] * vc
        pb[fz] -= p[fk] * vc


@njit(cache=True)
def point_kinematics_r(ma, p, A, r, T, Td, i, xb0, xb1, xb2, vb0, vb1, vb2, ab0, ab1, ab2,
                       thb, rb, Tb, Tdb, pb, fields):
    """Transpose of the tangent of :func:`workbench.kernels.tree.point_kinematics` of model
    point ``i`` with the frame twists ``T`` and accelerations ``Td`` (the frame velocities
    ``Z`` or the virtual twists ``Zv``): adds the cotangents ``xb, vb, ab`` of its position,
    velocity and material acceleration to ``thb, rb, Tb, Tdb`` and (``fields``) ``pb``.

    ``x = r_f + A_f l``, ``v = v_O + w x x``, ``a = a_O + alpha x x + w (w . x) - x (w . w)``;
    a ground point has ``v = a = 0`` and its position fields."""
    b = ma.pt_body[i]
    fld = ma.pt_fld[i]
    if b < 0:
        if fields:
            pb[fld] += xb0
            pb[fld + 1] += xb1
            pb[fld + 2] += xb2
        return
    f = ma.b_frame[b]
    o = ma.b_org[b]
    l0 = p[o] + p[fld]
    l1 = p[o + 1] + p[fld + 1]
    l2 = p[o + 2] + p[fld + 2]
    d0 = A[f, 0, 0] * l0 + A[f, 0, 1] * l1 + A[f, 0, 2] * l2
    d1 = A[f, 1, 0] * l0 + A[f, 1, 1] * l1 + A[f, 1, 2] * l2
    d2 = A[f, 2, 0] * l0 + A[f, 2, 1] * l1 + A[f, 2, 2] * l2
    x0 = r[f, 0] + d0
    x1 = r[f, 1] + d1
    x2 = r[f, 2] + d2
    w0, w1, w2 = T[f, 3], T[f, 4], T[f, 5]
    if vb0 != 0.0 or vb1 != 0.0 or vb2 != 0.0:
        # v = v_O + w x x: Tb += [vb; x x vb], xb += vb x w
        Tb[f, 0] += vb0
        Tb[f, 1] += vb1
        Tb[f, 2] += vb2
        Tb[f, 3] += x1 * vb2 - x2 * vb1
        Tb[f, 4] += x2 * vb0 - x0 * vb2
        Tb[f, 5] += x0 * vb1 - x1 * vb0
        xb0 += vb1 * w2 - vb2 * w1
        xb1 += vb2 * w0 - vb0 * w2
        xb2 += vb0 * w1 - vb1 * w0
    if ab0 != 0.0 or ab1 != 0.0 or ab2 != 0.0:
        # a = a_O + alpha x x + w (w . x) - x (w . w)
        a0, a1, a2 = Td[f, 3], Td[f, 4], Td[f, 5]
        Tdb[f, 0] += ab0
        Tdb[f, 1] += ab1
        Tdb[f, 2] += ab2
        Tdb[f, 3] += x1 * ab2 - x2 * ab1
        Tdb[f, 4] += x2 * ab0 - x0 * ab2
        Tdb[f, 5] += x0 * ab1 - x1 * ab0
        wx = w0 * x0 + w1 * x1 + w2 * x2
        wc = w0 * ab0 + w1 * ab1 + w2 * ab2
        xc = x0 * ab0 + x1 * ab1 + x2 * ab2
        ww = w0 * w0 + w1 * w1 + w2 * w2
        Tb[f, 3] += ab0 * wx + x0 * wc - 2.0 * w0 * xc
        Tb[f, 4] += ab1 * wx + x1 * wc - 2.0 * w1 * xc
        Tb[f, 5] += ab2 * wx + x2 * wc - 2.0 * w2 * xc
        xb0 += (ab1 * a2 - ab2 * a1) + w0 * wc - ab0 * ww
        xb1 += (ab2 * a0 - ab0 * a2) + w1 * wc - ab1 * ww
        xb2 += (ab0 * a1 - ab1 * a0) + w2 * wc - ab2 * ww
    body_point_r(A, f, o, fld, d0, d1, d2, xb0, xb1, xb2, thb, rb, pb, fields)


@njit(cache=True)
def constraints_r(ma, p, A, r, T, Td, lam, level, thb, rb, Tb, Tdb, pb, fields):
    """Transpose of the tangent of :func:`workbench.kernels.tree.constraints` at ``level``
    (0 positions, 1 velocities, 2 accelerations) with the frame twists ``T`` and
    accelerations ``Td``: adds the gradient of ``sum_k lam[k] c_k`` with respect to the
    frames (``thb, rb, Tb, Tdb``) and (``fields``) the fields to the cotangents.  Level 1
    with the virtual twists ``Zv`` of a fixed ``v`` is ``lam^T Theta(z) v``, the term of
    ``dR^Phi`` (eq 57).

    Point coincidence (``x_1 - x_2``, ``v_1 - v_2``, ``a_1 - a_2`` by component) and
    distance rows (``d . d - L^2``, ``2 d . dd``, ``2 dd . dd + 2 d . ddd`` with ``d = x_2 -
    x_1``); the other kinds are not covered (:func:`closures_supported`)."""
    c_type = ma.c_type
    c_i = ma.c_i
    m = c_type.shape[0]
    B = _S3x3x3()
    k = 0
    while k < m:
        typ = c_type[k]
        if typ == C_PTCOMP:
            # the rows k .. ke-1 of one cut joint: components of the same two points
            ke = k + 1
            while ke < m and K._same_points(c_type, c_i, ke):
                ke += 1
            y0, y1, y2 = 0.0, 0.0, 0.0
            for kk in range(k, ke):
                j = c_i[kk, 2]
                if j == 0:
                    y0 += lam[kk]
                elif j == 1:
                    y1 += lam[kk]
                else:
                    y2 += lam[kk]
            for side in range(2):
                sg = 1.0 if side == 0 else -1.0
                e0, e1, e2 = sg * y0, sg * y1, sg * y2
                i = c_i[k, side]
                if level == 0:
                    point_kinematics_r(ma, p, A, r, T, Td, i, e0, e1, e2, 0.0, 0.0, 0.0, 0.0,
                                       0.0, 0.0, thb, rb, Tb, Tdb, pb, fields)
                elif level == 1:
                    point_kinematics_r(ma, p, A, r, T, Td, i, 0.0, 0.0, 0.0, e0, e1, e2, 0.0,
                                       0.0, 0.0, thb, rb, Tb, Tdb, pb, fields)
                else:
                    point_kinematics_r(ma, p, A, r, T, Td, i, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, e0,
                                       e1, e2, thb, rb, Tb, Tdb, pb, fields)
            k = ke
            continue
        if typ == C_DIST:
            K.point_kinematics_b(ma, p, A, r, T, Td, c_i[k, 0], B, 0)
            K.point_kinematics_b(ma, p, A, r, T, Td, c_i[k, 1], B, 1)
            lk = lam[k]
            # rows of B[2]: the cotangents of d, dd, ddd
            for j in range(3):
                dj = B[1, 0, j] - B[0, 0, j]
                ddj = B[1, 1, j] - B[0, 1, j]
                dddj = B[1, 2, j] - B[0, 2, j]
                if level == 0:
                    B[2, 0, j] = 2.0 * lk * dj
                    B[2, 1, j] = 0.0
                    B[2, 2, j] = 0.0
                elif level == 1:
                    B[2, 0, j] = 2.0 * lk * ddj
                    B[2, 1, j] = 2.0 * lk * dj
                    B[2, 2, j] = 0.0
                else:
                    B[2, 0, j] = 2.0 * lk * dddj
                    B[2, 1, j] = 4.0 * lk * ddj
                    B[2, 2, j] = 2.0 * lk * dj
            if level == 0 and fields:
                L = p[ma.c_fld[k]]
                pb[ma.c_fld[k]] -= 2.0 * lk * L
            for side in range(2):
                sg = -1.0 if side == 0 else 1.0
                point_kinematics_r(ma, p, A, r, T, Td, c_i[k, side], sg * B[2, 0, 0],
                                   sg * B[2, 0, 1], sg * B[2, 0, 2], sg * B[2, 1, 0],
                                   sg * B[2, 1, 1], sg * B[2, 1, 2], sg * B[2, 2, 0],
                                   sg * B[2, 2, 1], sg * B[2, 2, 2], thb, rb, Tb, Tdb, pb,
                                   fields)
        k += 1


@njit(cache=True)
def closures_supported(ma):
    """True when :func:`constraints_r` covers every closure row (point coincidence and
    distance rows only)."""
    for k in range(ma.c_type.shape[0]):
        if ma.c_type[k] != C_PTCOMP and ma.c_type[k] != C_DIST:
            return False
    return True


@njit(cache=True)
def point_springs_r(ma, p, A, r, Z, Zd, Zv, thb, rb, Zb, Zdb, Zvb, pb, fields):
    """Gradient of the point spring-dampers' share of the virtual power, ``T(L, Ldot) Lv``
    (``L = |d|``, ``d = x_2 - x_1``, ``e = d / L``, ``Ldot = e . (v_2 - v_1)``, ``Lv = e .
    (vv_2 - vv_1)`` with the points' virtual velocities ``vv`` from the virtual twists
    ``Zv``: the force ``T e`` on point 1 and ``-T e`` on point 2 of
    :func:`workbench.kernels.tree.element_forces`), added.  Linear laws only
    (:func:`virtual_power_supported`): ``T = k (L - L0) + c Ldot``."""
    B = _S4x3x3()
    for s in range(ma.sp_pt.shape[0]):
        k1 = ma.sp_pt[s, 0]
        k2 = ma.sp_pt[s, 1]
        K.point_kinematics_b(ma, p, A, r, Z, Zd, k1, B, 0)
        K.point_kinematics_b(ma, p, A, r, Z, Zd, k2, B, 1)
        K.point_kinematics_b(ma, p, A, r, Zv, Zd, k1, B, 2)
        K.point_kinematics_b(ma, p, A, r, Zv, Zd, k2, B, 3)
        L = 0.0
        for j in range(3):
            L += (B[1, 0, j] - B[0, 0, j]) ** 2
        L = np.sqrt(L)
        Ld = 0.0
        Lv = 0.0
        for j in range(3):
            ej = (B[1, 0, j] - B[0, 0, j]) / L
            Ld += ej * (B[1, 1, j] - B[0, 1, j])
            Lv += ej * (B[3, 1, j] - B[2, 1, j])
        fk = ma.sp_k[s]
        fc = ma.sp_c[s]
        fL = ma.sp_L0[s]
        T, TL, TLd, _ = SL.tension(ma.sp_law[s], ma.sp_x[s, 0], ma.sp_x[s, 1], ma.sp_law[s, 2],
                                   p, fk, fc, fL, L, Ld)
        Lb = Lv * TL
        Ldb = Lv * TLd
        if fields:
            pb[fk] += Lv * (L - p[fL])
            pb[fL] -= Lv * p[fk]
            pb[fc] += Lv * Ld
        # cotangents of d (B[0, 0]), dd (B[0, 1]) and of the virtual dd (B[0, 2])
        for j in range(3):
            ej = (B[1, 0, j] - B[0, 0, j]) / L
            ddj = B[1, 1, j] - B[0, 1, j]
            dvj = B[3, 1, j] - B[2, 1, j]
            B[0, 0, j] = Lb * ej + Ldb * (ddj - Ld * ej) / L + T * (dvj - Lv * ej) / L
            B[0, 1, j] = Ldb * ej
            B[0, 2, j] = T * ej
        for side in range(2):
            i = k1 if side == 0 else k2
            sg = -1.0 if side == 0 else 1.0
            point_kinematics_r(ma, p, A, r, Z, Zd, i, sg * B[0, 0, 0], sg * B[0, 0, 1],
                               sg * B[0, 0, 2], sg * B[0, 1, 0], sg * B[0, 1, 1],
                               sg * B[0, 1, 2], 0.0, 0.0, 0.0, thb, rb, Zb, Zdb, pb, fields)
            point_kinematics_r(ma, p, A, r, Zv, Zd, i, 0.0, 0.0, 0.0, sg * B[0, 2, 0],
                               sg * B[0, 2, 1], sg * B[0, 2, 2], 0.0, 0.0, 0.0, thb, rb, Zvb,
                               Zdb, pb, fields)


@njit(cache=True)
def virtual_power_pass(ma, p, z, zd, zdd, v, A, r, u, bcol, Z, Zd, Zv, thb, rb, ub, Zb, Zdb,
                       Zvb, zb, zdb, zddb, pb, kap, fields=True):
    """One backward pass of ``v^T tau(z, zd, zdd; p)`` at fixed ``v``, the frame kinematics
    of the state given (``A, r, u, bcol, Z, Zd``): sets ``zb = (dtau/dz)^T v``, ``zdb =
    (dtau/dzd)^T v``, ``zddb = M v`` and (``fields``) ``pb = (dtau/dp)^T v``; without
    ``fields`` the bodies' field terms are skipped and ``pb`` is left incomplete.  ``Zv``
    receives the virtual twists; the frame cotangents (``thb`` ... ``Zvb``) are work
    arrays (open trees, :func:`virtual_power_supported`)."""
    thb[:, :] = 0.0
    rb[:, :] = 0.0
    ub[:, :] = 0.0
    Zb[:, :] = 0.0
    Zdb[:, :] = 0.0
    Zvb[:, :] = 0.0
    zb[:] = 0.0
    zdb[:] = 0.0
    zddb[:] = 0.0
    if fields:
        pb[:] = 0.0
    K.frame_velocities(ma, v, bcol, Zv)
    body_virtual_power_r(ma, p, A, r, Z, Zd, Zv, thb, rb, Zb, Zdb, Zvb, pb, fields)
    point_springs_r(ma, p, A, r, Z, Zd, Zv, thb, rb, Zb, Zdb, Zvb, pb, fields)
    joint_springs_r(ma, p, z, zd, v, zb, zdb, pb)
    if kap.shape[0] > 0:
        # a closed loop's dR^Phi term (eq 57): the weights kap = -Theta_z^-T tau (their
        # constraint part) on Theta(z) v
        constraints_r(ma, p, A, r, Zv, Zd, kap, 1, thb, rb, Zvb, Zdb, pb, fields)
    frame_kinematics_r(ma, zd, zdd, v, r, u, bcol, Z, Zb, Zdb, Zvb, rb, ub, zdb, zddb)
    frame_positions_r(ma, A, r, u, thb, rb, ub, zb, pb)


@njit(cache=True)
def virtual_power_gradient_r(ma, p, z, zd, zdd, v, zb, zdb, zddb, pb):
    """:func:`virtual_power_pass` at a state given by its coordinates alone (the frame
    kinematics and the work arrays are made here): ``zb, zdb, zddb, pb`` (set) =
    ``(dtau/dz)^T v``, ``(dtau/dzd)^T v``, ``M v`` and ``(dtau/dp)^T v``."""
    nf = ma.fr_parent.shape[0]
    A = np.zeros((nf, 3, 3))
    f3 = np.zeros((5, nf, 3))        # r, u, thb, rb, ub
    f6 = np.zeros((7, nf, 6))        # bcol, Z, Zd, Zv, Zb, Zdb, Zvb
    K.frame_kinematics(ma, p, z, zd, zdd, A, f3[0], f3[1], f6[0], f6[1], f6[2])
    virtual_power_pass(ma, p, z, zd, zdd, v, A, f3[0], f3[1], f6[0], f6[1], f6[2], f6[3],
                       f3[2], f3[3], f3[4], f6[4], f6[5], f6[6], zb, zdb, zddb, pb,
                       np.zeros(0))


@njit(cache=True)
def measures_r(ma, p, A, r, Z, Zd, ms_type, ms_a, ms_c, cm, thb, rb, Zb, Zdb, zb, zdb, zddb,
               pb):
    """Transpose of :func:`workbench.kernels.measures.measures_t`: the gradient of
    ``sum_k cm[k] m_k`` (point positions, velocities and material accelerations, angular
    velocities in global or body axes, coordinates and their rates) with respect to the
    frames' rotations, origins, velocities and accelerations (``thb, rb, Zb, Zdb``), the
    coordinates (``zb, zdb, zddb``) and the fields (``pb``), added.  Reaction measures
    are not functions of the kinematics: they are not handled here.

    Point ``x = r_f + A_f l``, ``v = v_O + w x x``, ``a = a_O + alpha x x + w x (w x x)``."""
    for k in range(ms_type.shape[0]):
        typ = ms_type[k]
        i = ms_a[k]
        c = ms_c[k]
        y = cm[k]
        if y == 0.0:
            continue
        if typ == MS_POS or typ == MS_VEL or typ == MS_ACC:
            # the cotangent of the measured component at its level (x, v or a)
            c0 = y if c == 0 else 0.0
            c1 = y if c == 1 else 0.0
            c2 = y if c == 2 else 0.0
            if typ == MS_POS:
                point_kinematics_r(ma, p, A, r, Z, Zd, i, c0, c1, c2, 0.0, 0.0, 0.0, 0.0, 0.0,
                                   0.0, thb, rb, Zb, Zdb, pb, True)
            elif typ == MS_VEL:
                point_kinematics_r(ma, p, A, r, Z, Zd, i, 0.0, 0.0, 0.0, c0, c1, c2, 0.0, 0.0,
                                   0.0, thb, rb, Zb, Zdb, pb, True)
            else:
                point_kinematics_r(ma, p, A, r, Z, Zd, i, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, c0, c1,
                                   c2, thb, rb, Zb, Zdb, pb, True)
        elif typ == MS_ANGVEL:
            Zb[ma.b_frame[i], 3 + c] += y
        elif typ == MS_ANGVEL_BODY:
            # e . w with e = A[:, c], de = th x e: thb += y e x w
            f = ma.b_frame[i]
            e0, e1, e2 = A[f, 0, c], A[f, 1, c], A[f, 2, c]
            w0, w1, w2 = Z[f, 3], Z[f, 4], Z[f, 5]
            Zb[f, 3] += y * e0
            Zb[f, 4] += y * e1
            Zb[f, 5] += y * e2
            thb[f, 0] += y * (e1 * w2 - e2 * w1)
            thb[f, 1] += y * (e2 * w0 - e0 * w2)
            thb[f, 2] += y * (e0 * w1 - e1 * w0)
        elif typ == MS_COORD:
            zb[i] += y
        elif typ == MS_RATE:
            zdb[i] += y
        elif typ == MS_COORD_ACC:
            zddb[i] += y
