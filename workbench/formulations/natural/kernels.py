"""Numba kernels of the GLOBAL formulation in natural coordinates (issue 6), array-only.

Design (the data are built by :mod:`workbench.formulations.natural.build` from the SAME compiled
model as
the semi-recursive formulation; García de Jalón & Bayo natural coordinates):

* Coordinates ``q``: per body ``b`` its frame origin ``r_b`` and its frame unit vectors
  ``e_1 .. e_D`` (the columns of the body frame rotation ``A_b``), ``D = 2`` for planar
  models (``q_b`` in R^6), ``D = 3`` for spatial ones (``q_b`` in R^12).  A body point
  with local coordinates ``x`` is ``P = r_b + sum_k x_k e_k``: LINEAR in ``q`` (and in the
  point's parameter fields), so every constraint below is a dot product of two affine
  *operands* and hence quadratic in ``q`` (``Phi_qq`` constant).
* Constraints ``Phi(q, rho, t)``: rigid body ``e_k . e_l = delta_kl``; tree joints between
  the parent and child body frames (revolute: coincident joint point, spatial axis
  ``(A_c C^T a) . (A_p n_i) = 0``; prismatic: ``(r_c - r_p - A_p s) . (A_p n_i) = 0`` and
  locked orientation; cylindrical: the prismatic point-on-axis rows plus the revolute
  axis rows; universal: point plus ``(A_p a1) . (A_c C^T a2) = a1 . a2``; fixed; spherical:
  point only; floating: none); cut joints,
  distances (``|P2 - P1|^2 - L^2``) and the other primitive equations of the compiled model
  written in natural coordinates; drives ``h_j(q) - f(t)`` (rheonomic).
* Degrees of freedom: the SAME independent coordinates as the semi-recursive model,
  imposed by ``h(q) - z^i = 0`` (seed 001 eqs 12-13, non-constant ``B = h_q``): a revolute
  angle ``theta = atan2((A_c C^T n1) . (A_p n2), (A_c C^T n1) . (A_p n1))`` (continuous
  branch tracked; universal, spherical and floating angles likewise, the middle z-y-x
  angle ``asin(-(A_p e_z) . (A_c C^T e_x))``), a prismatic travel
  ``(A_p a) . (r_c - r_p - A_p s)``, a point component.
* Matrix-R projection: ``Theta_q = [Phi_q; B]``, ``[S R] = Theta_q^+`` (eq 16-17),
  ``qd = R zd^i + S b``, ``qdd = R zdd^i + S c`` (eqs 24-25), residual of the step
  ``r = R^T (M qdd - Q)`` (eq 28-29) with the CONSTANT block mass matrix
  ``M_b = Mloc (x) I_D``, ``Mloc = [[m, m g^T], [m g, m g g^T + J]]`` (``g`` the local centre
  of mass, ``J`` the centroidal second moment ``tr(I)/2 1 - I``; planar: ``Izz/2 I_2``).
* Forces by virtual power ``Q . w``: gravity ``m grav . P_g(w)``, point-to-point springs,
  point forces, torques (``omega = 1/2 sum_k e_k x e_k_dot``), joint springs through ``h_j``,
  tires (the law of :mod:`workbench.forces.tire` on the wheel centre, spin axis and angular
  velocity taken
  from ``q, qd``; force at the contact point ``P``: ``Q . w = F . (w_r + sum_k x_k w_ek)``,
  ``x_k = (P - r) . e_k``); force tangents (:func:`force_tangent`) and the tangent of
  ``Theta_q^T mu`` (:func:`theta_grad_t_grouped`) are vectors, one pass per direction.

Every scalar function ``f`` (constraint, DOF, joint coordinate) is evaluated with a *jet*:
its value, rate and acceleration along ``(q, qd, qdd)`` and their exact tangents along a
direction ``(dq, dqd, dqdd, drho)``.  These jets give the velocity/acceleration problems
and every derivative of the sensitivity analysis (seed 001 eqs 32-38, 53-57) exactly.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

from workbench.forces import speed_control as SC
from workbench.forces import spring_laws as SL
from workbench.forces import tire_mf as TL
from workbench.formulations.semirecursive import matrixr as MR
from workbench.kernels import layout as AR
from workbench.kernels import tree as K
from workbench.kernels.layout import AF_FORCE

SF_BIL, SF_ANGLE, SF_ASIN = 0, 1, 2
_S5x3 = AR.scratch(5, 3)
_S7x3 = AR.scratch(7, 3)
_S12x3 = AR.scratch(12, 3)
_S14x3 = AR.scratch(14, 3)
# measure kinds (same codes as workbench.formulations.semirecursive.step_jacobians)
MS_POS, MS_VEL, MS_ACC, MS_ANGVEL, MS_ANGVEL_BODY, MS_COORD, MS_RATE, MS_COORD_ACC = range(8)


# ----------------------------------------------------------------------------------------
# operands: affine vector expressions of q
# ----------------------------------------------------------------------------------------


@njit(cache=True)
def op_apply(ga, o, x, w, deriv, affine, out):
    """Operand ``o`` applied to ``x``: ``sum sign (org r_b(x) + sum_k w_k e_k(x))`` plus the
    ground (constant) terms when ``affine``; the local vector ``w = c + w[f1] + w[f2]``
    (``deriv``: only the field part read from ``w`` = a field direction ``dp``, no
    constant and no origin term)."""
    D = ga.D
    nqb = ga.nqb
    for i in range(D):
        out[i] = 0.0
    for t in range(ga.op_ptr[o], ga.op_ptr[o + 1]):
        b = ga.tm_body[t]
        sg = ga.tm_sign[t]
        f1 = ga.tm_f1[t]
        f2 = ga.tm_f2[t]
        w0 = 0.0
        w1 = 0.0
        w2 = 0.0
        if not deriv:
            w0 = ga.tm_c[t, 0]
            w1 = ga.tm_c[t, 1]
            w2 = ga.tm_c[t, 2]
        if f1 >= 0:
            w0 += w[f1]
            w1 += w[f1 + 1]
            w2 += w[f1 + 2]
        if f2 >= 0:
            w0 += w[f2]
            w1 += w[f2 + 1]
            w2 += w[f2 + 2]
        if b < 0:
            if affine:
                out[0] += sg * w0
                out[1] += sg * w1
                if D == 3:
                    out[2] += sg * w2
            continue
        s0 = b * nqb
        og = 0.0 if deriv else ga.tm_org[t]
        for i in range(D):
            v = og * x[s0 + i] + w0 * x[s0 + D + i] + w1 * x[s0 + 2 * D + i]
            if D == 3:
                v += w2 * x[s0 + 3 * D + i]
            out[i] += sg * v


@njit(cache=True)
def op_grad_w(ga, w, o, y, scale, row, deriv):
    """``row += scale * d(op_o(q) . y)/dq`` with the local vectors read from ``w``
    (``deriv``: only the field part of ``w = dp``, no constant and no origin term: the
    tangent of the gradient along a field direction)."""
    D = ga.D
    nqb = ga.nqb
    for t in range(ga.op_ptr[o], ga.op_ptr[o + 1]):
        b = ga.tm_body[t]
        if b < 0:
            continue
        sg = scale * ga.tm_sign[t]
        f1 = ga.tm_f1[t]
        f2 = ga.tm_f2[t]
        s0 = b * nqb
        for k in range(D):
            wk = 0.0 if deriv else ga.tm_c[t, k]
            if f1 >= 0:
                wk += w[f1 + k]
            if f2 >= 0:
                wk += w[f2 + k]
            if wk != 0.0:
                for i in range(D):
                    row[s0 + (1 + k) * D + i] += sg * wk * y[i]
        og = 0.0 if deriv else ga.tm_org[t]
        if og != 0.0:
            for i in range(D):
                row[s0 + i] += sg * og * y[i]


@njit(cache=True)
def op_grad(ga, p, o, y, scale, row):
    """``row += scale * d(op_o(q) . y)/dq``."""
    op_grad_w(ga, p, o, y, scale, row, False)


@njit(cache=True)
def op_jet(ga, p, o, q, qd, qdd, dq, dqd, dqdd, dp, tang, J, tmp):
    """``J[0:3]`` = operand value, rate, acceleration; ``J[3:6]`` their tangents."""
    op_apply(ga, o, q, p, False, True, J[0])
    op_apply(ga, o, qd, p, False, False, J[1])
    op_apply(ga, o, qdd, p, False, False, J[2])
    if not tang:
        return
    op_apply(ga, o, dq, p, False, False, J[3])
    op_apply(ga, o, q, dp, True, True, tmp)
    for i in range(ga.D):
        J[3, i] += tmp[i]
    op_apply(ga, o, dqd, p, False, False, J[4])
    op_apply(ga, o, qd, dp, True, False, tmp)
    for i in range(ga.D):
        J[4, i] += tmp[i]
    op_apply(ga, o, dqdd, p, False, False, J[5])
    op_apply(ga, o, qdd, dp, True, False, tmp)
    for i in range(ga.D):
        J[5, i] += tmp[i]


@njit(cache=True)
def _dot(a, b, D):
    s = 0.0
    for i in range(D):
        s += a[i] * b[i]
    return s


@njit(cache=True)
def bil_jet(ga, p, oa, ob, q, qd, qdd, dq, dqd, dqdd, dp, tang, JA, JB, tmp, out):
    """Jet of ``f = A . B``: ``out = [f, fd, fdd, df, dfd, dfdd]``."""
    D = ga.D
    op_jet(ga, p, oa, q, qd, qdd, dq, dqd, dqdd, dp, tang, JA, tmp)
    op_jet(ga, p, ob, q, qd, qdd, dq, dqd, dqdd, dp, tang, JB, tmp)
    a0, a1, a2 = JA[0], JA[1], JA[2]
    b0, b1, b2 = JB[0], JB[1], JB[2]
    out[0] = _dot(a0, b0, D)
    out[1] = _dot(a1, b0, D) + _dot(a0, b1, D)
    out[2] = _dot(a2, b0, D) + 2.0 * _dot(a1, b1, D) + _dot(a0, b2, D)
    if tang:
        c0, c1, c2 = JA[3], JA[4], JA[5]
        d0, d1, d2 = JB[3], JB[4], JB[5]
        out[3] = _dot(c0, b0, D) + _dot(a0, d0, D)
        out[4] = _dot(c1, b0, D) + _dot(a1, d0, D) + _dot(c0, b1, D) + _dot(a0, d1, D)
        out[5] = (_dot(c2, b0, D) + _dot(a2, d0, D) + 2.0 * (_dot(c1, b1, D) + _dot(a1, d1, D))
                  + _dot(c0, b2, D) + _dot(a0, d2, D))
    else:
        out[3] = 0.0
        out[4] = 0.0
        out[5] = 0.0


@njit(cache=True)
def _wrap(x):
    return x - 2.0 * np.pi * np.floor((x + np.pi) / (2.0 * np.pi))


# the per-kind compositions of a scalar function from its bilinears ``x = A . B`` (and, for
# an angle, ``y = C . E``), written once for the operand interpreter (:func:`sf_jet`,
# :func:`theta_values`, :func:`theta_va`, ...) and the row programs (:func:`prog_rows`,
# :func:`prog_va_rows`, :func:`prog_jet`, ...): the same arithmetic in the same order.  They
# take scalars (an array or model argument of an inlined function costs its reference
# counts at every call); the drive helpers are called under ``if tf >= 0`` only.


@njit(cache=True, inline="always")
def _sf_value(kind, x, y, c, fk, pf, ref):
    """Value of a scalar function of kind ``kind`` without its drive term (:func:`_drive`):
    ``x - c - pf^2`` (``c = sf_K[s]``, ``pf = p[fk]``, that term when ``fk >= 0``),
    ``asin(x)``, or ``atan2(y, x)`` on the branch of ``ref = aref[s]``."""
    if kind == SF_BIL:
        v = x - c
        if fk >= 0:
            v -= pf * pf
    elif kind == SF_ASIN:
        v = np.arcsin(x)
    else:
        v = ref + _wrap(np.arctan2(y, x) - ref)
    return v


@njit(cache=True, inline="always")
def _sf_rates(kind, x, xd, xdd, y, yd, ydd):
    """Rate and acceleration ``(vd, vdd)`` of a scalar function of kind ``kind`` from
    those of its bilinears (``y, yd, ydd``: angles only), without its drive term."""
    if kind == SF_BIL:
        return xd, xdd
    if kind == SF_ASIN:
        g = 1.0 / np.sqrt(1.0 - x * x)
        return g * xd, g * xdd + g * g * g * x * xd * xd
    r2 = x * x + y * y
    Nn = x * yd - y * xd
    P = x * xd + y * yd
    U = x * ydd - y * xdd
    return Nn / r2, U / r2 - 2.0 * Nn * P / (r2 * r2)


@njit(cache=True, inline="always")
def _grad_scales(kind, x, y, scale):
    """Factors ``(c0, c1)`` of ``scale * df/dq = c0 grad(A . B) + c1 grad(C . E)`` (``x``:
    asin and angles, ``y``: angles only; ``c1`` of angles only)."""
    if kind == SF_BIL:
        return scale, 0.0
    if kind == SF_ASIN:
        return scale / np.sqrt(1.0 - x * x), 0.0
    r2 = x * x + y * y
    return -scale * y / r2, scale * x / r2


@njit(cache=True, inline="always")
def _drive(ma, p, tf, t, v, vd, vdd):
    """``(v, vd, vdd)`` of a drive row ``h(q) - f(t; p)`` (time function ``tf >= 0``): minus
    ``f(t), f'(t), f''(t)``."""
    f, fd, fdd = K.time_function(ma, p, tf, t)
    return v - f, vd - fd, vdd - fdd


@njit(cache=True, inline="always")
def _undrive(ma, p, tf, t, v, vd, vdd):
    """Back from a drive row to its joint coordinate ``h(q)`` (time function ``tf >= 0``):
    plus ``f(t), f'(t), f''(t)``."""
    f, fd, fdd = K.time_function(ma, p, tf, t)
    return v + f, vd + fd, vdd + fdd


@njit(cache=True, inline="always")
def _redrive(ma, p, tf, t, v):
    """``(v - f) + f`` (time function ``tf >= 0``): the branch reference of a driven angle,
    rounded as :func:`sf_jet` subtracts the drive's ``f(t)`` and :func:`_undrive` adds it
    back."""
    f, fd, fdd = K.time_function(ma, p, tf, t)
    return (v - f) + f


@njit(cache=True)
def sf_jet(ga, ma, p, s, t, q, qd, qdd, dq, dqd, dqdd, dp, tang, aref, sc, out):
    """Jet of scalar function ``s`` (constraint, DOF or joint coordinate)."""
    JA, JB, tmp, ox, oy = sc[0], sc[1], sc[2, 0], sc[3, 0], sc[3, 1]
    o = ga.sf_op[s]
    kind = ga.sf_kind[s]
    if kind == SF_BIL:
        bil_jet(ga, p, o[0], o[1], q, qd, qdd, dq, dqd, dqdd, dp, tang, JA, JB, tmp, out)
        fk = ga.sf_fK[s]
        out[0] = _sf_value(kind, out[0], 0.0, ga.sf_K[s], fk, p[fk] if fk >= 0 else 0.0, 0.0)
        if fk >= 0 and tang:
            out[3] -= 2.0 * p[fk] * dp[fk]
    elif kind == SF_ASIN:
        # f = asin(u), u = A . B (an element of a relative rotation matrix)
        bil_jet(ga, p, o[0], o[1], q, qd, qdd, dq, dqd, dqdd, dp, tang, JA, JB, tmp, ox)
        u, ud, udd, du, dud, dudd = ox[0], ox[1], ox[2], ox[3], ox[4], ox[5]
        out[0] = _sf_value(kind, u, 0.0, 0.0, -1, 0.0, 0.0)
        out[1], out[2] = _sf_rates(kind, u, ud, udd, 0.0, 0.0, 0.0)
        if tang:
            g = 1.0 / np.sqrt(1.0 - u * u)
            g3 = g * g * g
            dg = g3 * u * du
            out[3] = g * du
            out[4] = dg * ud + g * dud
            out[5] = (dg * udd + g * dudd + 3.0 * g * g * dg * u * ud * ud + g3 * du * ud * ud
                      + 2.0 * g3 * u * ud * dud)
        else:
            out[3] = 0.0
            out[4] = 0.0
            out[5] = 0.0
    else:
        bil_jet(ga, p, o[0], o[1], q, qd, qdd, dq, dqd, dqdd, dp, tang, JA, JB, tmp, ox)
        bil_jet(ga, p, o[2], o[3], q, qd, qdd, dq, dqd, dqdd, dp, tang, JA, JB, tmp, oy)
        x, xd, xdd, dx, dxd, dxdd = ox[0], ox[1], ox[2], ox[3], ox[4], ox[5]
        y, yd, ydd, dy, dyd, dydd = oy[0], oy[1], oy[2], oy[3], oy[4], oy[5]
        out[0] = _sf_value(kind, x, y, 0.0, -1, 0.0, aref[s])
        out[1], out[2] = _sf_rates(kind, x, xd, xdd, y, yd, ydd)
        if tang:
            r2 = x * x + y * y
            N = x * yd - y * xd
            P = x * xd + y * yd
            U = x * ydd - y * xdd
            dr2 = 2.0 * (x * dx + y * dy)
            dN = dx * yd + x * dyd - dy * xd - y * dxd
            dP = dx * xd + x * dxd + dy * yd + y * dyd
            dU = dx * ydd + x * dydd - dy * xdd - y * dxdd
            out[3] = (x * dy - y * dx) / r2
            out[4] = dN / r2 - N * dr2 / (r2 * r2)
            out[5] = (dU / r2 - U * dr2 / (r2 * r2) - 2.0 * (dN * P + N * dP) / (r2 * r2)
                      + 4.0 * N * P * dr2 / (r2 * r2 * r2))
        else:
            out[3] = 0.0
            out[4] = 0.0
            out[5] = 0.0
    tf = ga.sf_tf[s]
    if tf >= 0:
        # a drive: h(q) - f(t; p), with the coefficients' tangent along dp
        out[0], out[1], out[2] = _drive(ma, p, tf, t, out[0], out[1], out[2])
        if tang:
            df, dfd, dfdd = K.time_function_t(ma, p, dp, tf, t)
            out[3] -= df
            out[4] -= dfd
            out[5] -= dfdd


@njit(cache=True)
def sf_grad(ga, p, s, q, aref, sc, scale, row):
    """``row += scale * df/dq`` for scalar function ``s``."""
    D = ga.D
    JA = sc[0]
    o = ga.sf_op[s]
    kind = ga.sf_kind[s]
    op_apply(ga, o[0], q, p, False, True, JA[0])
    op_apply(ga, o[1], q, p, False, True, JA[1])
    x = 0.0
    y = 0.0
    if kind != SF_BIL:
        x = _dot(JA[0], JA[1], D)
    if kind == SF_ANGLE:
        op_apply(ga, o[2], q, p, False, True, JA[2])
        op_apply(ga, o[3], q, p, False, True, JA[3])
        y = _dot(JA[2], JA[3], D)
    c0, c1 = _grad_scales(kind, x, y, scale)
    op_grad(ga, p, o[0], JA[1], c0, row)
    op_grad(ga, p, o[1], JA[0], c0, row)
    if kind == SF_ANGLE:
        op_grad(ga, p, o[2], JA[3], c1, row)
        op_grad(ga, p, o[3], JA[2], c1, row)


@njit(cache=True)
def _bil_parts(ga, p, oa, ob, q, dq, dp, V):
    """Operands ``A = V[0]``, ``B = V[1]`` and their tangents ``V[2], V[3]`` along
    ``(dq, dp)``; returns ``(A . B, d(A . B))``."""
    D = ga.D
    op_apply(ga, oa, q, p, False, True, V[0])
    op_apply(ga, ob, q, p, False, True, V[1])
    op_apply(ga, oa, dq, p, False, False, V[2])
    op_apply(ga, oa, q, dp, True, True, V[4])
    op_apply(ga, ob, dq, p, False, False, V[3])
    op_apply(ga, ob, q, dp, True, True, V[5])
    for i in range(D):
        V[2, i] += V[4, i]
        V[3, i] += V[5, i]
    return _dot(V[0], V[1], D), _dot(V[2], V[1], D) + _dot(V[0], V[3], D)


@njit(cache=True)
def _bil_grad_add(ga, p, dp, oa, ob, V, c1, c2, row):
    """``row += c1 grad(A . B) + c2 d(grad(A . B))`` (parts from :func:`_bil_parts`)."""
    if c1 != 0.0:
        op_grad(ga, p, oa, V[1], c1, row)
        op_grad(ga, p, ob, V[0], c1, row)
    if c2 != 0.0:
        op_grad(ga, p, oa, V[3], c2, row)
        op_grad_w(ga, dp, oa, V[1], c2, row, True)
        op_grad(ga, p, ob, V[2], c2, row)
        op_grad_w(ga, dp, ob, V[0], c2, row, True)


@njit(cache=True)
def sf_grad_t(ga, p, s, q, dq, dp, V, scale, row):
    """``row += scale * d(df/dq)`` along ``(dq, dp)``: the tangent of the gradient of scalar
    function ``s`` (so that ``d(Theta_q) w . mu`` costs one pass per direction instead of
    one jet per ``w``).  ``V``: scratch (12, 3)."""
    o = ga.sf_op[s]
    kind = ga.sf_kind[s]
    if kind == SF_BIL:
        _bil_parts(ga, p, o[0], o[1], q, dq, dp, V)
        _bil_grad_add(ga, p, dp, o[0], o[1], V, 0.0, scale, row)
    elif kind == SF_ASIN:
        u, du = _bil_parts(ga, p, o[0], o[1], q, dq, dp, V)
        g = 1.0 / np.sqrt(1.0 - u * u)
        # d(g grad u) = g^3 u du grad u + g d(grad u)
        _bil_grad_add(ga, p, dp, o[0], o[1], V, scale * g * g * g * u * du, scale * g, row)
    else:
        x, dx = _bil_parts(ga, p, o[0], o[1], q, dq, dp, V[0:6])
        y, dy = _bil_parts(ga, p, o[2], o[3], q, dq, dp, V[6:12])
        r2 = x * x + y * y
        dr2 = 2.0 * (x * dx + y * dy)
        # grad f = (x grad y - y grad x) / r2
        _bil_grad_add(ga, p, dp, o[2], o[3], V[6:12],
                      scale * (dx / r2 - x * dr2 / (r2 * r2)), scale * x / r2, row)
        _bil_grad_add(ga, p, dp, o[0], o[1], V[0:6],
                      -scale * (dy / r2 - y * dr2 / (r2 * r2)), -scale * y / r2, row)


@njit(cache=True)
def _op_grad_acc(ga, tw, o, Gacc, row):
    """``row += d(op_o(q) . g_o)/dq`` with ``g_o = Gacc[o]`` (:func:`op_grad` with the term
    weights ``tw`` of :func:`row_program`, by scalar indexing)."""
    D = ga.D
    nqb = ga.nqb
    for t in range(ga.op_ptr[o], ga.op_ptr[o + 1]):
        b = ga.tm_body[t]
        if b < 0:
            continue
        sg = ga.tm_sign[t]
        s0 = b * nqb
        for k in range(D):
            wk = tw[t, 1 + k]
            if wk != 0.0:
                for i in range(D):
                    row[s0 + (1 + k) * D + i] += sg * wk * Gacc[o, i]
        og = tw[t, 0]
        if og != 0.0:
            for i in range(D):
                row[s0 + i] += sg * og * Gacc[o, i]


@njit(cache=True, inline="always")
def _grad_pair(ga, dp, has_p, oa, ob, OB, OD, c1, c2, Gacc, row):
    """What :func:`theta_grad_t_grouped` gathers per operand for a bilinear ``A . B``
    (``A = OB[oa, 0]``, its tangent ``OD[oa, 0]``, and so for ``B``):
    ``Gacc[oa] += c1 B + c2 dB``, ``Gacc[ob] += c1 A + c2 dA``; the field parts of the
    gradient (only along a parameter direction, ``has_p``) straight into ``row``."""
    D = ga.D
    for i in range(D):
        Gacc[oa, i] += c1 * OB[ob, 0, i] + c2 * OD[ob, 0, i]
        Gacc[ob, i] += c1 * OB[oa, 0, i] + c2 * OD[oa, 0, i]
    if has_p and c2 != 0.0:
        op_grad_w(ga, dp, oa, OB[ob, 0], c2, row, True)
        op_grad_w(ga, dp, ob, OB[oa, 0], c2, row, True)


@njit(cache=True)
def theta_grad_t_grouped(ga, tw, dp, has_p, OB, OD, mu, Gacc, out):
    """``out = d(Theta_q^T mu)`` along ``(dq, dp)`` with ``mu`` fixed, from the cached
    operand values ``OB[:, 0]`` (:func:`operand_base`) and their level-0 tangents
    ``OD[:, 0]`` along the same direction (:func:`operand_dir` with ``affine_dp``), with
    the term weights ``tw`` of :func:`row_program`.  Every row's gradient tangent is
    ``sum_o (d op_o / dq)^T g_o`` over its operands, with vectors ``g_o`` made of the other
    operand, its tangent and the row's coefficients (those of :func:`sf_grad_t`); the
    ``g_o`` of all rows are summed per operand (``Gacc``, nop x 3) and each operand's
    gradient is applied once (:func:`_op_grad_acc`), instead of two to four operand
    gradients per row (:func:`sf_grad_t` row by row, the form before 2026-11-27: the same
    derivative, summed in another order)."""
    D = ga.D
    m = ga.phi_sf.shape[0]
    out[:] = 0.0
    Gacc[:] = 0.0
    for k in range(m + ga.dof_sf.shape[0]):
        w = mu[k]
        if w == 0.0:
            continue
        s = ga.phi_sf[k] if k < m else ga.dof_sf[k - m]
        o0 = ga.sf_op[s, 0]
        o1 = ga.sf_op[s, 1]
        kind = ga.sf_kind[s]
        if kind == SF_BIL:
            _grad_pair(ga, dp, has_p, o0, o1, OB, OD, 0.0, w, Gacc, out)
        elif kind == SF_ASIN:
            u = _dd(OB, o0, 0, OB, o1, 0, D)
            du = _dd(OD, o0, 0, OB, o1, 0, D) + _dd(OB, o0, 0, OD, o1, 0, D)
            g = 1.0 / np.sqrt(1.0 - u * u)
            _grad_pair(ga, dp, has_p, o0, o1, OB, OD, w * g * g * g * u * du, w * g, Gacc,
                       out)
        else:
            o2 = ga.sf_op[s, 2]
            o3 = ga.sf_op[s, 3]
            x = _dd(OB, o0, 0, OB, o1, 0, D)
            dx = _dd(OD, o0, 0, OB, o1, 0, D) + _dd(OB, o0, 0, OD, o1, 0, D)
            y = _dd(OB, o2, 0, OB, o3, 0, D)
            dy = _dd(OD, o2, 0, OB, o3, 0, D) + _dd(OB, o2, 0, OD, o3, 0, D)
            r2 = x * x + y * y
            dr2 = 2.0 * (x * dx + y * dy)
            _grad_pair(ga, dp, has_p, o2, o3, OB, OD, w * (dx / r2 - x * dr2 / (r2 * r2)),
                       w * x / r2, Gacc, out)
            _grad_pair(ga, dp, has_p, o0, o1, OB, OD, -w * (dy / r2 - y * dr2 / (r2 * r2)),
                       -w * y / r2, Gacc, out)
    for o in range(Gacc.shape[0]):
        if Gacc[o, 0] != 0.0 or Gacc[o, 1] != 0.0 or Gacc[o, 2] != 0.0:
            _op_grad_acc(ga, tw, o, Gacc, out)


@njit(cache=True)
def scratch(ga):
    return np.zeros((4, 6, 6))


# ----------------------------------------------------------------------------------------
# Theta = [Phi; h - z^i] and its Jacobian
# ----------------------------------------------------------------------------------------


@njit(cache=True)
def theta_jets(ga, ma, p, t, q, qd, qdd, dq, dqd, dqdd, dp, tang, aref, sc, out):
    """Jets of the rows of ``Theta`` (constraints, then DOF functions ``h``): ``out (m+d, 6)``."""
    m = ga.phi_sf.shape[0]
    for k in range(m):
        sf_jet(ga, ma, p, ga.phi_sf[k], t, q, qd, qdd, dq, dqd, dqdd, dp, tang, aref, sc,
               out[k])
    for k in range(ga.dof_sf.shape[0]):
        sf_jet(ga, ma, p, ga.dof_sf[k], t, q, qd, qdd, dq, dqd, dqdd, dp, tang, aref, sc,
               out[m + k])


@njit(cache=True)
def theta_values(ga, ma, p, t, q, aref, sc, out):
    """Values only (``out[:, 0]``) of the rows of ``Theta`` for the position problem: the
    ``f`` entry of :func:`sf_jet` without the rates, accelerations and tangents."""
    D = ga.D
    m = ga.phi_sf.shape[0]
    d = ga.dof_sf.shape[0]
    A, B, C, E = sc[0, 0], sc[0, 1], sc[0, 2], sc[0, 3]
    for k in range(m + d):
        s = ga.phi_sf[k] if k < m else ga.dof_sf[k - m]
        o = ga.sf_op[s]
        kind = ga.sf_kind[s]
        op_apply(ga, o[0], q, p, False, True, A)
        op_apply(ga, o[1], q, p, False, True, B)
        x = _dot(A, B, D)
        y = 0.0
        if kind == SF_ANGLE:
            op_apply(ga, o[2], q, p, False, True, C)
            op_apply(ga, o[3], q, p, False, True, E)
            y = _dot(C, E, D)
        fk = ga.sf_fK[s]
        v = _sf_value(kind, x, y, ga.sf_K[s], fk, p[fk] if fk >= 0 else 0.0, aref[s])
        if ga.sf_tf[s] >= 0:
            v = _drive(ma, p, ga.sf_tf[s], t, v, 0.0, 0.0)[0]
        out[k, 0] = v


@njit(cache=True)
def _bil_rates(ga, p, oa, ob, q, qd, A0, A1, B0, B1):
    """``A . B``, its rate along ``qd`` and its acceleration with ``qdd = 0``."""
    D = ga.D
    op_apply(ga, oa, q, p, False, True, A0)
    op_apply(ga, oa, qd, p, False, False, A1)
    op_apply(ga, ob, q, p, False, True, B0)
    op_apply(ga, ob, qd, p, False, False, B1)
    return (_dot(A0, B0, D), _dot(A1, B0, D) + _dot(A0, B1, D), 2.0 * _dot(A1, B1, D))


@njit(cache=True)
def theta_va(ga, ma, p, t, q, qd, sc, out):
    """Rates and accelerations with ``qdd = 0`` of the rows of ``Theta`` along ``qd``
    (``out[:, 1]``, ``out[:, 2]``; the ``fd`` and ``fdd`` entries of :func:`sf_jet` with
    ``qdd = 0``, no tangents): the right-hand sides of the velocity (eq 19) and
    acceleration (eq 21) problems."""
    m = ga.phi_sf.shape[0]
    d = ga.dof_sf.shape[0]
    A0, A1, B0, B1 = sc[0, 0], sc[0, 1], sc[0, 2], sc[0, 3]
    C0, C1, E0, E1 = sc[1, 0], sc[1, 1], sc[1, 2], sc[1, 3]
    for k in range(m + d):
        s = ga.phi_sf[k] if k < m else ga.dof_sf[k - m]
        o = ga.sf_op[s]
        kind = ga.sf_kind[s]
        x, xd, xdd = _bil_rates(ga, p, o[0], o[1], q, qd, A0, A1, B0, B1)
        y = yd = ydd = 0.0
        if kind == SF_ANGLE:
            y, yd, ydd = _bil_rates(ga, p, o[2], o[3], q, qd, C0, C1, E0, E1)
        vd, vdd = _sf_rates(kind, x, xd, xdd, y, yd, ydd)
        if ga.sf_tf[s] >= 0:
            v, vd, vdd = _drive(ma, p, ga.sf_tf[s], t, 0.0, vd, vdd)
        out[k, 1] = vd
        out[k, 2] = vdd


@njit(cache=True)
def theta_va_rest(ga, ma, p, t, out):
    """:func:`theta_va` along ``qd = 0``: every bilinear rate and acceleration vanishes,
    only the drives' ``-f'(t)``, ``-f''(t)`` remain (``out[:, 1]``, ``out[:, 2]``): the
    right-hand side of the velocity problem without one pass over the operands."""
    m = ga.phi_sf.shape[0]
    d = ga.dof_sf.shape[0]
    for k in range(m + d):
        s = ga.phi_sf[k] if k < m else ga.dof_sf[k - m]
        vd = 0.0
        vdd = 0.0
        if ga.sf_tf[s] >= 0:
            v, vd, vdd = _drive(ma, p, ga.sf_tf[s], t, 0.0, vd, vdd)
        out[k, 1] = vd
        out[k, 2] = vdd


@njit(cache=True)
def operand_base(ga, p, q, qd, qdd, OB):
    """``OB[o] = [value, rate, acceleration]`` of every operand ``o`` at ``(q, qd, qdd)``:
    the base part of :func:`op_jet`, computed once per state for the tangents of
    :func:`theta_tangents`."""
    for o in range(ga.op_ptr.shape[0] - 1):
        op_apply(ga, o, q, p, False, True, OB[o, 0])
        op_apply(ga, o, qd, p, False, False, OB[o, 1])
        op_apply(ga, o, qdd, p, False, False, OB[o, 2])


@njit(cache=True)
def operand_dir(ga, p, x, base, dp, has_p, affine_dp, OD, lv, tmp):
    """``OD[o, lv]`` = the level-``lv`` operand tangent of :func:`op_jet`:
    ``op(x)`` plus, for a parameter direction, the field part ``op(base; dp)``
    (``affine_dp``: with the ground terms, as for the value level)."""
    D = ga.D
    for o in range(ga.op_ptr.shape[0] - 1):
        out = OD[o, lv]
        op_apply(ga, o, x, p, False, False, out)
        if has_p:
            op_apply(ga, o, base, dp, True, affine_dp, tmp)
            for i in range(D):
                out[i] += tmp[i]


@njit(cache=True, inline="always")
def _dd(X, a, la, Y, b, lb, D):
    """``X[a, la] . Y[b, lb]`` over ``D`` components (the sum of :func:`_dot`, in its
    order), by scalar indexing: no array views per product."""
    s = 0.0
    for i in range(D):
        s += X[a, la, i] * Y[b, lb, i]
    return s


@njit(cache=True)
def _bil_t(OB, OD, oa, ob, D, lv):
    """Tangent at level ``lv`` (0 value, 1 rate, 2 acceleration) of ``A . B`` from the
    cached operand values ``OB`` and tangents ``OD`` (the formulas of :func:`bil_jet`)."""
    if lv == 0:
        return _dd(OD, oa, 0, OB, ob, 0, D) + _dd(OB, oa, 0, OD, ob, 0, D)
    if lv == 1:
        return (_dd(OD, oa, 1, OB, ob, 0, D) + _dd(OB, oa, 1, OD, ob, 0, D)
                + _dd(OD, oa, 0, OB, ob, 1, D) + _dd(OB, oa, 0, OD, ob, 1, D))
    return (_dd(OD, oa, 2, OB, ob, 0, D) + _dd(OB, oa, 2, OD, ob, 0, D)
            + 2.0 * (_dd(OD, oa, 1, OB, ob, 1, D) + _dd(OB, oa, 1, OD, ob, 1, D))
            + _dd(OD, oa, 0, OB, ob, 2, D) + _dd(OB, oa, 0, OD, ob, 2, D))


@njit(cache=True)
def _bil_base(OB, oa, ob, D):
    return (_dd(OB, oa, 0, OB, ob, 0, D),
            _dd(OB, oa, 1, OB, ob, 0, D) + _dd(OB, oa, 0, OB, ob, 1, D),
            _dd(OB, oa, 2, OB, ob, 0, D) + 2.0 * _dd(OB, oa, 1, OB, ob, 1, D)
            + _dd(OB, oa, 0, OB, ob, 2, D))


@njit(cache=True)
def theta_tangents(ga, p, dp, has_p, OB, OD, lv, out):
    """Tangent entries of the rows of ``Theta`` at level ``lv`` (``out[k]`` = entry
    ``3 + lv`` of :func:`sf_jet`: ``df``, ``dfd`` or ``dfdd``) from the cached operand
    values and tangents (:func:`operand_base`, :func:`operand_dir`); the same formulas as
    :func:`sf_jet`, without re-evaluating the base jets for every direction (scalar
    indexing, no array views per row)."""
    D = ga.D
    m = ga.phi_sf.shape[0]
    d = ga.dof_sf.shape[0]
    for k in range(m + d):
        s = ga.phi_sf[k] if k < m else ga.dof_sf[k - m]
        o0 = ga.sf_op[s, 0]
        o1 = ga.sf_op[s, 1]
        kind = ga.sf_kind[s]
        if kind == SF_BIL:
            v = _bil_t(OB, OD, o0, o1, D, lv)
            fk = ga.sf_fK[s]
            if lv == 0 and has_p and fk >= 0:
                v -= 2.0 * p[fk] * dp[fk]
        elif kind == SF_ASIN:
            u, ud, udd = _bil_base(OB, o0, o1, D)
            du = _bil_t(OB, OD, o0, o1, D, 0)
            g = 1.0 / np.sqrt(1.0 - u * u)
            g3 = g * g * g
            dg = g3 * u * du
            if lv == 0:
                v = g * du
            elif lv == 1:
                v = dg * ud + g * _bil_t(OB, OD, o0, o1, D, 1)
            else:
                dud = _bil_t(OB, OD, o0, o1, D, 1)
                dudd = _bil_t(OB, OD, o0, o1, D, 2)
                v = (dg * udd + g * dudd + 3.0 * g * g * dg * u * ud * ud + g3 * du * ud * ud
                     + 2.0 * g3 * u * ud * dud)
        else:
            o2 = ga.sf_op[s, 2]
            o3 = ga.sf_op[s, 3]
            x, xd, xdd = _bil_base(OB, o0, o1, D)
            y, yd, ydd = _bil_base(OB, o2, o3, D)
            dx = _bil_t(OB, OD, o0, o1, D, 0)
            dy = _bil_t(OB, OD, o2, o3, D, 0)
            r2 = x * x + y * y
            if lv == 0:
                v = (x * dy - y * dx) / r2
            else:
                dxd = _bil_t(OB, OD, o0, o1, D, 1)
                dyd = _bil_t(OB, OD, o2, o3, D, 1)
                dr2 = 2.0 * (x * dx + y * dy)
                Nn = x * yd - y * xd
                dN = dx * yd + x * dyd - dy * xd - y * dxd
                if lv == 1:
                    v = dN / r2 - Nn * dr2 / (r2 * r2)
                else:
                    dxdd = _bil_t(OB, OD, o0, o1, D, 2)
                    dydd = _bil_t(OB, OD, o2, o3, D, 2)
                    P = x * xd + y * yd
                    U = x * ydd - y * xdd
                    dP = dx * xd + x * dxd + dy * yd + y * dyd
                    dU = dx * ydd + x * dydd - dy * xdd - y * dxdd
                    v = (dU / r2 - U * dr2 / (r2 * r2) - 2.0 * (dN * P + Nn * dP) / (r2 * r2)
                         + 4.0 * Nn * P * dr2 / (r2 * r2 * r2))
        out[k] = v


@njit(cache=True)
def drive_tangents(ga, ma, p, dp, t, lv, out):
    """``out[k] -= df`` (level ``lv`` 0: value, 1: rate, 2: acceleration) for every row of
    ``Theta`` that is a drive ``h(q) - f(t; p)``: the field part of the drive rows' tangent
    along ``dp`` (the coefficients of ``f``, :func:`_kernels.time_function_t`), which
    :func:`theta_tangents` (the operands' part) leaves out; completes the tangent entries
    of :func:`sf_jet` for a parameter direction."""
    m = ga.phi_sf.shape[0]
    d = ga.dof_sf.shape[0]
    for k in range(m + d):
        s = ga.phi_sf[k] if k < m else ga.dof_sf[k - m]
        tf = ga.sf_tf[s]
        if tf >= 0:
            df, dfd, dfdd = K.time_function_t(ma, p, dp, tf, t)
            out[k] -= df if lv == 0 else (dfd if lv == 1 else dfdd)


@njit(cache=True)
def theta_jacobian(ga, p, q, aref, sc, Th):
    m = ga.phi_sf.shape[0]
    Th[:, :] = 0.0
    for k in range(m):
        sf_grad(ga, p, ga.phi_sf[k], q, aref, sc, 1.0, Th[k])
    for k in range(ga.dof_sf.shape[0]):
        sf_grad(ga, p, ga.dof_sf[k], q, aref, sc, 1.0, Th[m + k])


@njit(cache=True)
def update_aref(ga, ma, p, t, q, aref, sc):
    """Move the branch reference of every angle function to its current value (the value
    entry of :func:`sf_jet`, computed alone: the same operations on the same operands)."""
    D = ga.D
    A, B, C, E = sc[0, 0], sc[0, 1], sc[0, 2], sc[0, 3]
    for s in range(ga.sf_kind.shape[0]):
        if ga.sf_kind[s] == SF_ANGLE:
            o = ga.sf_op[s]
            op_apply(ga, o[0], q, p, False, True, A)
            op_apply(ga, o[1], q, p, False, True, B)
            op_apply(ga, o[2], q, p, False, True, C)
            op_apply(ga, o[3], q, p, False, True, E)
            x = _dot(A, B, D)
            y = _dot(C, E, D)
            v = _sf_value(SF_ANGLE, x, y, 0.0, -1, 0.0, aref[s])
            if ga.sf_tf[s] >= 0:
                v = _redrive(ma, p, ga.sf_tf[s], t, v)
            aref[s] = v


#: Per-run work arrays of the natural-coordinate kernels: ``Th`` = Theta_q = [Phi_q; B],
#: its sparse Householder QR (:func:`sqr_factor`: ``V``, ``beta``, ``Rm``, ``W``, ``hi``,
#: ``rend``, ``cstart``), the constraint jets ``jets`` and the scratch ``sc`` of
#: :func:`scratch`.
NaturalWorkspace = namedtuple("NaturalWorkspace", ["Th", "V", "beta", "Rm", "jets", "sc", "W",
                                                   "hi", "rend", "cstart", "flags", "Wc", "Vc",
                                                   "Rc", "gpos", "kmap", "moff", "ys", "xs",
                                                   "res", "dq", "F"])

#: ``ws.flags`` entries: [0] 1 when ``Rm`` may hold non-zeros outside the symbolic pattern
#: (after the generic loop); [1] number of factorisations by the symbolic loop; [2] by the
#: generic loop (counters for tests and profiling); [3] 1 when the factorisation in ``ws``
#: is the symbolic one (row and column orders ``sq_rperm``, ``sq_cperm``), 0 the generic,
#: 2 the static-pivot LU of :func:`prog_factor` (``F``; orders ``lu_rowp``, ``lu_colp``);
#: [4] number of LU factorisations.
#:
#: The symbolic factorisation keeps its numbers compact (:func:`_symbolic_maps`): ``Wc``
#: the working columns, column ``j`` over the rows ``sq_zrow[sq_zptr[j]:sq_zptr[j + 1]]``
#: that can be non-zero in it at some stage; ``Vc`` the reflectors over their supports
#: (``sq_vptr`` order); ``Rc`` the rows of ``R`` over their patterns (``sq_ptr`` order,
#: diagonal first); ``gpos`` the position in ``Wc`` of each gathered entry of
#: ``Theta_q``; ``kmap[moff[c] + i]`` the position in ``Wc`` of the ``i``-th support row of
#: reflector ``k`` in the column ``sq_cols[c]`` it changes (``c`` in
#: ``sq_ptr[k]:sq_ptr[k + 1]``).  The dense ``V`` and ``Rm`` (and ``W``) serve the generic
#: loop; after a symbolic factorisation only the diagonal of ``Rm`` is set.  ``ys`` (m + d),
#: ``xs`` (nq): scratch of the solves; ``res`` (m + d), ``dq`` (nq): scratch of
#: :func:`solve_position_p`.  ``F``: the values of the static-pivot LU
#: (:func:`workbench.formulations.natural.build.symbolic_lu`: ``U`` by rows, then ``L`` by
#: columns), empty for a model without that analysis.
FL_DIRTY, FL_SYMBOLIC, FL_GENERIC, FL_MODE, FL_LU = 0, 1, 2, 3, 4
#: the values of ``ws.flags[FL_MODE]``
MODE_GENERIC, MODE_QR, MODE_LU = 0, 1, 2
#: threshold of the static-pivot LU (:func:`_lu_numeric`): a pivot must be at least this
#: fraction of the largest entry below it in its column (threshold partial pivoting's
#: criterion, which bounds the growth of each elimination step by ``1 + 1 / LU_PIVOT``;
#: 0.01 is the default of HSL's MA48), else that factorisation is the sparse QR.  The
#: components of a spinning wheel's unit vectors pass through zero, so no fixed order
#: keeps every pivot large: along the buggy DLC 4 % of the factorisations fall back at
#: 0.01 (20 % at 0.1)
LU_PIVOT = 0.01


@njit(cache=True)
def make_ws(ga):
    """Per-run workspace :data:`NaturalWorkspace`."""
    N = ga.nq
    md = ga.phi_sf.shape[0] + ga.dof_sf.shape[0]
    gpos, kmap, moff = _symbolic_maps(ga, md)
    nw = ga.sq_zptr[N] if gpos.shape[0] > 0 else 0
    nv = ga.sq_vptr[N] if gpos.shape[0] > 0 else 0
    nr = ga.sq_ptr[N] if gpos.shape[0] > 0 else 0
    nf = 0
    if gpos.shape[0] > 0 and has_lu(ga) and ga.lu_gdst.shape[0] == gpos.shape[0]:
        nf = ga.lu_uptr[N] + ga.lu_lptr[N]
    return NaturalWorkspace(np.zeros((md, N)), np.zeros((N, md)), np.zeros(N), np.zeros((N, N)),
                            np.zeros((md, 6)), scratch(ga), np.zeros((N, md)),
                            np.zeros(N, dtype=np.int64), np.zeros(N, dtype=np.int64),
                            np.zeros(N, dtype=np.int64), np.zeros(5, dtype=np.int64),
                            np.zeros(nw), np.zeros(nv), np.zeros(nr), gpos, kmap, moff,
                            np.zeros(md), np.zeros(N), np.zeros(md), np.zeros(N), np.zeros(nf))


@njit(cache=True)
def has_lu(ga):
    """True when the model has the static-pivot LU analysis
    (:func:`workbench.formulations.natural.build.symbolic_lu`; square ``Theta_q``)."""
    return ga.nq > 0 and ga.lu_rowp.shape[0] == ga.nq


@njit(cache=True)
def _symbolic_maps(ga, md):
    """``(gpos, kmap, moff)`` of the compact symbolic factorisation (see
    :data:`NaturalWorkspace`); empty arrays for a model without the symbolic analysis."""
    N = ga.nq
    if ga.sq_cperm.shape[0] != N or ga.sq_mask.shape[1] != md or N == 0:
        return (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64),
                np.zeros(0, dtype=np.int64))
    zptr, zrow, vptr, vrows = ga.sq_zptr, ga.sq_zrow, ga.sq_vptr, ga.sq_vrows
    ptr, cols, gptr, grow = ga.sq_ptr, ga.sq_cols, ga.sq_gptr, ga.sq_grow
    where = np.full(md, -1, dtype=np.int64)
    gpos = np.zeros(gptr[N], dtype=np.int64)
    for j in range(N):
        for c in range(zptr[j], zptr[j + 1]):
            where[zrow[c]] = c
        for c in range(gptr[j], gptr[j + 1]):
            gpos[c] = where[grow[c]]
        for c in range(zptr[j], zptr[j + 1]):
            where[zrow[c]] = -1
    moff = np.zeros(ptr[N] + 1, dtype=np.int64)
    for k in range(N):
        nk = vptr[k + 1] - vptr[k]
        for c in range(ptr[k], ptr[k + 1]):
            moff[c + 1] = moff[c] + nk
    kmap = np.zeros(moff[ptr[N]], dtype=np.int64)
    # per column j, the pairs (k, c) with cols[c] == j
    for k in range(N):
        for c in range(ptr[k], ptr[k + 1]):
            j = cols[c]
            for e in range(zptr[j], zptr[j + 1]):
                where[zrow[e]] = e
            for i in range(vptr[k], vptr[k + 1]):
                kmap[moff[c] + i - vptr[k]] = where[vrows[i]]
            for e in range(zptr[j], zptr[j + 1]):
                where[zrow[e]] = -1
    return gpos, kmap, moff


# ----------------------------------------------------------------------------------------
# sparse Householder QR of Theta_q (rows and columns permuted once for a small profile)
# ----------------------------------------------------------------------------------------


@njit(cache=True)
def sqr_factor(ga, Th, ws, rtol):
    """Householder QR of ``Theta_q``: the numeric phase of a sparse QR whose symbolic
    analysis was done once per model (:func:`workbench.formulations.natural.build.symbolic_qr`:
    a fill-reducing column order ``sq_cperm``, the row order ``sq_rperm`` that puts the pivot
    row of column ``k`` at position ``k``, the rows of each reflector and the columns it
    changes).  Reflector ``k`` acts on the rows of its symbolic support only (the rows
    structurally non-zero in column ``k`` at that stage; row-merge sparse QR) and only on
    the columns of its list, so the cost is ``sum_k |support_k| |columns_k|`` (buggy: about
    6e3 multiply-adds instead of 9.5e4 for the profile loop of :func:`sqr_factor_generic`).
    Only the pattern's entries are gathered, into the compact working columns ``ws.Wc``
    (whose other positions, the fill, are zeroed; :data:`NaturalWorkspace`); the non-zeros
    of the whole matrix are counted against those gathered, so an entry outside the pattern
    (a configuration or design where a structurally absent term appears), or a model
    without the analysis, sends the factorisation to :func:`sqr_factor_generic`
    (``ws.flags[FL_MODE]`` says which one the solves read).
    Returns the ORIGINAL index of the first column whose diagonal entry is below ``rtol``
    times the largest column norm, or -1."""
    Wc, gpos = ws.Wc, ws.gpos
    mr, n = Th.shape
    if ga.sq_cperm.shape[0] != n or ga.sq_mask.shape[1] != mr or gpos.shape[0] == 0:
        return sqr_factor_generic(ga, Th, ws, rtol)
    # every non-zero of Theta_q must lie in the symbolic pattern: count them (one
    # contiguous pass) against those gathered from the pattern
    nnz = 0
    Tf = Th.ravel()
    for x in Tf:
        if x != 0.0:
            nnz += 1
    gptr, gsrc, zptr = ga.sq_gptr, ga.sq_gsrc, ga.sq_zptr
    scale = 0.0
    ngot = 0
    for j in range(n):
        for c in range(zptr[j], zptr[j + 1]):
            Wc[c] = 0.0
        s = 0.0
        for c in range(gptr[j], gptr[j + 1]):
            x = Tf[gsrc[c]]
            Wc[gpos[c]] = x
            s += x * x
            if x != 0.0:
                ngot += 1
        scale = max(scale, np.sqrt(s))
    if ngot != nnz:
        return sqr_factor_generic(ga, Th, ws, rtol)
    return _sqr_numeric(ga, ws, scale, rtol)


@njit(cache=True)
def _sqr_numeric(ga, ws, scale, rtol):
    """The numeric loop of :func:`sqr_factor` on the gathered compact working columns
    ``ws.Wc`` (:data:`NaturalWorkspace`; ``scale`` the largest column norm of
    ``Theta_q``): reflector ``k`` from the support rows of column ``k`` into ``ws.Vc``,
    applied to each column of its list through ``ws.kmap`` (the arithmetic of the dense
    loop before, in the same order), then the rows of ``R`` into ``ws.Rc`` and its diagonal
    into ``ws.Rm``.  Returns the ORIGINAL index of the first column whose diagonal is below
    ``rtol scale``, or -1."""
    Wc, Vc, Rc, beta, Rm, hi = ws.Wc, ws.Vc, ws.Rc, ws.beta, ws.Rm, ws.hi
    kmap, moff = ws.kmap, ws.moff
    fl = ws.flags
    n = Rm.shape[0]
    ptr, vptr, vrows = ga.sq_ptr, ga.sq_vptr, ga.sq_vrows
    cp = ga.sq_cperm
    if scale == 0.0:
        scale = 1.0
    fl[FL_SYMBOLIC] += 1
    fl[FL_MODE] = 1
    bad = -1
    for k in range(n):
        v0, v1 = vptr[k], vptr[k + 1]
        nk = v1 - v0
        mk = moff[ptr[k]]             # column k itself is the first of its list
        nrm = 0.0
        for c in range(nk):
            x = Wc[kmap[mk + c]]
            nrm += x * x
        nrm = np.sqrt(nrm)
        alpha = -nrm if Wc[kmap[mk]] >= 0.0 else nrm
        for c in range(nk):
            Vc[v0 + c] = Wc[kmap[mk + c]]
        Vc[v0] -= alpha
        vn = 0.0
        for c in range(v0, v1):
            vn += Vc[c] * Vc[c]
        beta[k] = 2.0 / vn if vn > 0.0 else 0.0
        bk = beta[k]
        hi[k] = vrows[v1 - 1]
        # the column updates, written out for supports of 1 to 4 rows (the same sums in
        # the same order: s = 0 + a0 w0 + a1 w1 + ...)
        if nk == 1:
            a0 = Vc[v0]
            for cc in range(ptr[k], ptr[k + 1]):
                i0 = kmap[moff[cc]]
                s = (a0 * Wc[i0]) * bk
                if s != 0.0:
                    Wc[i0] -= s * a0
        elif nk == 2:
            a0 = Vc[v0]
            a1 = Vc[v0 + 1]
            for cc in range(ptr[k], ptr[k + 1]):
                mc = moff[cc]
                i0 = kmap[mc]
                i1 = kmap[mc + 1]
                s = (a0 * Wc[i0] + a1 * Wc[i1]) * bk
                if s != 0.0:
                    Wc[i0] -= s * a0
                    Wc[i1] -= s * a1
        elif nk == 3:
            a0 = Vc[v0]
            a1 = Vc[v0 + 1]
            a2 = Vc[v0 + 2]
            for cc in range(ptr[k], ptr[k + 1]):
                mc = moff[cc]
                i0 = kmap[mc]
                i1 = kmap[mc + 1]
                i2 = kmap[mc + 2]
                s = (a0 * Wc[i0] + a1 * Wc[i1] + a2 * Wc[i2]) * bk
                if s != 0.0:
                    Wc[i0] -= s * a0
                    Wc[i1] -= s * a1
                    Wc[i2] -= s * a2
        elif nk == 4:
            a0 = Vc[v0]
            a1 = Vc[v0 + 1]
            a2 = Vc[v0 + 2]
            a3 = Vc[v0 + 3]
            for cc in range(ptr[k], ptr[k + 1]):
                mc = moff[cc]
                i0 = kmap[mc]
                i1 = kmap[mc + 1]
                i2 = kmap[mc + 2]
                i3 = kmap[mc + 3]
                s = (a0 * Wc[i0] + a1 * Wc[i1] + a2 * Wc[i2] + a3 * Wc[i3]) * bk
                if s != 0.0:
                    Wc[i0] -= s * a0
                    Wc[i1] -= s * a1
                    Wc[i2] -= s * a2
                    Wc[i3] -= s * a3
        else:
            for cc in range(ptr[k], ptr[k + 1]):
                mc = moff[cc]
                s = 0.0
                for c in range(nk):
                    s += Vc[v0 + c] * Wc[kmap[mc + c]]
                s *= bk
                if s != 0.0:
                    for c in range(nk):
                        Wc[kmap[mc + c]] -= s * Vc[v0 + c]
        if abs(Wc[kmap[mk]]) <= rtol * scale and bad < 0:
            bad = k
    # row i of R: entry (i, cols[c]) is the first support row (i) of reflector i in that
    # column
    for i in range(n):
        for c in range(ptr[i], ptr[i + 1]):
            Rc[c] = Wc[kmap[moff[c]]]
        Rm[i, i] = Rc[ptr[i]]
    return cp[bad] if bad >= 0 else -1


@njit(cache=True)
def _perms(ga, ws):
    """Row and column orders of the factorisation in ``ws``."""
    if ws.flags[FL_MODE] == 1:
        return ga.sq_rperm, ga.sq_cperm
    return ga.rperm, ga.cperm


@njit(cache=True, inline="always")
def _apply_sym(Vc, beta, vptr, vrows, k, y):
    """``y = H_k y`` for reflector ``k`` of the symbolic factorisation (support
    ``vrows[vptr[k]:vptr[k + 1]]``, values ``Vc[vptr[k]:vptr[k + 1]]``); False when its
    product with ``y`` is exactly zero (``y`` unchanged)."""
    v0, v1 = vptr[k], vptr[k + 1]
    s = 0.0
    for c in range(v0, v1):
        s += Vc[c] * y[vrows[c]]
    s *= beta[k]
    if s == 0.0:
        return False
    for c in range(v0, v1):
        i = vrows[c]
        y[i] -= s * Vc[c]
    return True


@njit(cache=True, inline="always")
def _apply_gen(V, beta, hi, k, y):
    """``y = H_k y`` for reflector ``k`` of the generic factorisation (support
    ``k..hi[k]``); False when its product with ``y`` is exactly zero."""
    vk = V[k]
    hk = hi[k]
    s = 0.0
    for i in range(k, hk + 1):
        s += vk[i] * y[i]
    s *= beta[k]
    if s == 0.0:
        return False
    for i in range(k, hk + 1):
        y[i] -= s * vk[i]
    return True


@njit(cache=True)
def _apply_qt(ga, ws, y):
    """``y = Q^T y`` (reflectors 0, 1, ..., n-1) of the factorisation in ``ws``."""
    V, beta = ws.V, ws.beta
    n = ws.Rm.shape[0]
    if ws.flags[FL_MODE] == 1:
        vptr, vrows = ga.sq_vptr, ga.sq_vrows
        for k in range(n):
            _apply_sym(ws.Vc, beta, vptr, vrows, k, y)
    else:
        hi = ws.hi
        for k in range(n):
            _apply_gen(V, beta, hi, k, y)


@njit(cache=True)
def _apply_q(ga, ws, y):
    """``y = Q y`` (reflectors n-1, ..., 0) of the factorisation in ``ws``."""
    V, beta = ws.V, ws.beta
    n = ws.Rm.shape[0]
    if ws.flags[FL_MODE] == 1:
        vptr, vrows = ga.sq_vptr, ga.sq_vrows
        for k in range(n - 1, -1, -1):
            _apply_sym(ws.Vc, beta, vptr, vrows, k, y)
    else:
        hi = ws.hi
        for k in range(n - 1, -1, -1):
            _apply_gen(V, beta, hi, k, y)


@njit(cache=True)
def _back(ga, ws, y, xp):
    """``xp = R^-1 y[:n]`` (back substitution) with the ``R`` of the factorisation in ``ws``:
    the symbolic row patterns, or the row ends ``rend`` of the generic loop."""
    Rm = ws.Rm
    n = Rm.shape[0]
    if ws.flags[FL_MODE] == 1:
        ptr, cols, Rc = ga.sq_ptr, ga.sq_cols, ws.Rc
        for i in range(n - 1, -1, -1):
            s = y[i]
            for c in range(ptr[i] + 1, ptr[i + 1]):
                s -= Rc[c] * xp[cols[c]]
            xp[i] = s / Rc[ptr[i]]
        return
    rend = ws.rend
    for i in range(n - 1, -1, -1):
        s = y[i]
        for j in range(i + 1, rend[i] + 1):
            s -= Rm[i, j] * xp[j]
        xp[i] = s / Rm[i, i]


@njit(cache=True)
def sqr_factor_generic(ga, Th, ws, rtol):
    """The generic (profile) path of :func:`sqr_factor`, without a symbolic analysis: the
    factorisation of the global formulation before issue 29, still used by the coordinate
    partitioning (whose rows change with each selection) and whenever ``Theta_q`` has an
    entry outside the symbolic pattern.  Householder QR of the permuted
    ``Theta_q[rperm][:, cperm]`` (``ga.rperm``,
    ``ga.cperm``: a fill-reducing column order and rows sorted by their leading column,
    chosen once by :func:`workbench.formulations.natural.build.build_global`), skipping exact
    zeros.

    Same arithmetic as :func:`workbench.kernels.linalg.qr_factor` on the permuted matrix: the
    reflector of
    column ``k`` has support ``[k, hi[k]]`` (the last row where that column is non-zero
    at that stage) and only those rows of the later columns are read or written, so the
    cost is ``sum_k (n - k) (hi[k] - k)`` instead of ``n^3 / 3``; the permutations only
    change the order of the Householder steps (the least-squares solution is the same up
    to rounding).  Theta_q has ~5 non-zeros per row in natural coordinates.  Returns the
    ORIGINAL index of the first column whose diagonal entry is below ``rtol`` times the
    largest column norm, or -1.
    """
    V, beta, Rm, W, hi, rend, cstart = ws.V, ws.beta, ws.Rm, ws.W, ws.hi, ws.rend, ws.cstart
    fl = ws.flags
    fl[FL_DIRTY] = 1
    fl[FL_GENERIC] += 1
    fl[FL_MODE] = 0
    mr, n = Th.shape
    rp, cp = ga.rperm, ga.cperm
    scale = 0.0
    for j in range(n):
        cj = cp[j]
        wj = W[j]
        s = 0.0
        for i in range(mr):
            x = Th[rp[i], cj]
            wj[i] = x
            s += x * x
        scale = max(scale, np.sqrt(s))
    if scale == 0.0:
        scale = 1.0
    bad = -1
    for k in range(n):
        wk = W[k]
        vk = V[k]
        hk = k
        for i in range(mr - 1, k, -1):
            if wk[i] != 0.0:
                hk = i
                break
        hi[k] = hk
        nrm = 0.0
        for i in range(k, hk + 1):
            nrm += wk[i] * wk[i]
        nrm = np.sqrt(nrm)
        alpha = -nrm if wk[k] >= 0.0 else nrm
        vk[:] = 0.0
        for i in range(k, hk + 1):
            vk[i] = wk[i]
        vk[k] -= alpha
        vn = 0.0
        for i in range(k, hk + 1):
            vn += vk[i] * vk[i]
        beta[k] = 2.0 / vn if vn > 0.0 else 0.0
        bk = beta[k]
        for j in range(k, n):
            wj = W[j]
            s = 0.0
            for i in range(k, hk + 1):
                s += vk[i] * wj[i]
            s *= bk
            if s != 0.0:
                for i in range(k, hk + 1):
                    wj[i] -= s * vk[i]
        if abs(wk[k]) <= rtol * scale and bad < 0:
            bad = k
    for i in range(n):
        rend[i] = i
        for j in range(n):
            x = W[j, i] if j >= i else 0.0
            Rm[i, j] = x
            if x != 0.0:
                rend[i] = j
    for j in range(n):
        cstart[j] = j
        for i in range(j):
            if Rm[i, j] != 0.0:
                cstart[j] = i
                break
    return cp[bad] if bad >= 0 else -1


@njit(cache=True)
def sqr_solve(ga, ws, b, x):
    """Least-squares solution of ``Theta_q x = b`` from :func:`sqr_factor` (or the LU of
    :func:`prog_factor`: the solution)."""
    if ws.flags[FL_MODE] == MODE_LU:
        _lu_solve(ga, ws, b, x)
        return
    Rm = ws.Rm
    mr = ws.V.shape[1]
    n = Rm.shape[0]
    rp, cp = _perms(ga, ws)
    y = ws.ys
    for i in range(mr):
        y[i] = b[rp[i]]
    _apply_qt(ga, ws, y)
    xp = ws.xs
    _back(ga, ws, y, xp)
    for j in range(n):
        x[cp[j]] = xp[j]


@njit(cache=True)
def sqr_solve_units(ga, ws, r0, X):
    """``X[:, j]`` = the least-squares solution of ``Theta_q x = e_{r0 + j}`` for every
    column ``j`` of ``X`` (the projection ``R`` of eq 16: the unit right-hand sides of the
    degree-of-freedom rows), from :func:`sqr_factor`: the arithmetic of :func:`sqr_solve`
    column by column, skipping the reflectors that start after the last row that can be
    non-zero yet or end before the first (their product with the right-hand side is
    exactly zero, and :func:`sqr_solve` skips it too).  After a symbolic factorisation all
    the columns are solved together (:func:`_units_block`; after the LU of
    :func:`prog_factor`, :func:`_lu_units`)."""
    if ws.flags[FL_MODE] == MODE_LU:
        _lu_units(ga, ws, r0, X)
        return
    Rm, hi, V, beta = ws.Rm, ws.hi, ws.V, ws.beta
    mr = V.shape[1]
    n = Rm.shape[0]
    rp, cp = _perms(ga, ws)
    sym = ws.flags[FL_MODE] == 1
    vptr, vrows = ga.sq_vptr, ga.sq_vrows
    if sym:
        _units_block(ga, ws, r0, X)
        return
    y = np.empty(mr)
    xp = np.empty(n)
    for j in range(X.shape[1]):
        target = r0 + j
        pos = 0
        for i in range(mr):
            y[i] = 0.0
            if rp[i] == target:
                pos = i
        y[pos] = 1.0
        lo = pos
        up = pos
        for k in range(n):
            if k > up:
                break
            if hi[k] < lo:
                continue
            if sym:
                hit = _apply_sym(ws.Vc, beta, vptr, vrows, k, y)
            else:
                hit = _apply_gen(V, beta, hi, k, y)
            if hit:
                lo = min(lo, k)
                up = max(up, hi[k])
        _back(ga, ws, y, xp)
        for c in range(n):
            X[cp[c], j] = xp[c]


@njit(cache=True)
def _block_back(ptr, cols, vals, Y, X, sv):
    """Back substitution with an upper triangular factor stored by rows (row ``i``:
    ``vals[ptr[i]]`` its diagonal, then the entries of columns ``cols[ptr[i] + 1:ptr[i +
    1]]``) for the ``d`` right-hand sides ``Y[:n]`` together: ``X[i] = (Y[i] - sum_c
    vals[c] X[cols[c]]) / diagonal``, the sums over ``c`` in ascending order with ``d``
    independent chains (``sv``: scratch of length ``d``).  ``X`` may be ``Y`` (in place).
    Serves the QR's ``R`` (:func:`_units_block`) and the LU's ``U`` (:func:`_lu_units`)."""
    d = sv.shape[0]
    for i in range(ptr.shape[0] - 2, -1, -1):
        for j in range(d):
            sv[j] = Y[i, j]
        for c in range(ptr[i] + 1, ptr[i + 1]):
            rc = vals[c]
            xr = X[cols[c]]
            for j in range(d):
                sv[j] -= rc * xr[j]
        dg = vals[ptr[i]]
        for j in range(d):
            X[i, j] = sv[j] / dg


@njit(cache=True)
def _units_block(ga, ws, r0, X):
    """:func:`sqr_solve_units` after a symbolic factorisation, the ``d`` right-hand sides
    carried together: every reflector applied to the ``d`` columns at once, then one back
    substitution with ``d`` independent sums per row of ``R`` (independent chains instead of
    ``d`` serial passes).  Each column gets the arithmetic of :func:`sqr_solve` in the same
    order (a reflector whose product with a column is exactly zero leaves it unchanged, as
    the skipped ones do), so the same bits."""
    Vc, Rc, beta = ws.Vc, ws.Rc, ws.beta
    mr = ws.V.shape[1]
    n = ws.Rm.shape[0]
    d = X.shape[1]
    rp, cp = ga.sq_rperm, ga.sq_cperm
    vptr, vrows, ptr, cols = ga.sq_vptr, ga.sq_vrows, ga.sq_ptr, ga.sq_cols
    Y = np.zeros((mr, d))
    for i in range(mr):
        j = rp[i] - r0
        if j >= 0 and j < d:
            Y[i, j] = 1.0
    sv = np.empty(d)
    for k in range(n):
        bk = beta[k]
        sv[:] = 0.0
        for c in range(vptr[k], vptr[k + 1]):
            vc = Vc[c]
            yr = Y[vrows[c]]
            for j in range(d):
                sv[j] += vc * yr[j]
        for j in range(d):
            sv[j] *= bk
        # a column whose product with the reflector is exactly zero is left unchanged (the
        # subtraction of 0 * vc; no branch, so the d columns go together)
        for c in range(vptr[k], vptr[k + 1]):
            vc = Vc[c]
            yr = Y[vrows[c]]
            for j in range(d):
                yr[j] -= sv[j] * vc
    Xp = np.empty((n, d))
    _block_back(ptr, cols, Rc, Y, Xp, sv)
    for c in range(n):
        for j in range(d):
            X[cp[c], j] = Xp[c, j]


@njit(cache=True)
def sqr_solve_transpose(ga, ws, c, mu):
    """Minimum-norm solution of ``Theta_q^T mu = c`` (``mu = (Theta_q^+)^T c``) from
    :func:`sqr_factor` (permuted form of :func:`workbench.kernels.linalg.qr_solve_transpose`;
    after the LU of :func:`prog_factor`, the solution by :func:`_lu_solve_transpose`)."""
    if ws.flags[FL_MODE] == MODE_LU:
        _lu_solve_transpose(ga, ws, c, mu)
        return
    Rm, cstart = ws.Rm, ws.cstart
    mr = ws.V.shape[1]
    n = Rm.shape[0]
    rp, cp = _perms(ga, ws)
    y = ws.ys
    y[:] = 0.0
    if ws.flags[FL_MODE] == 1:
        # column-oriented forward substitution on the row patterns of R
        ptr, cols, Rc = ga.sq_ptr, ga.sq_cols, ws.Rc
        for i in range(n):
            y[i] = c[cp[i]]
        for i in range(n):
            yi = y[i] / Rc[ptr[i]]
            y[i] = yi
            for cc in range(ptr[i] + 1, ptr[i + 1]):
                y[cols[cc]] -= Rc[cc] * yi
    else:
        for i in range(n):
            s = c[cp[i]]
            for j in range(cstart[i], i):
                s -= Rm[j, i] * y[j]
            y[i] = s / Rm[i, i]
    _apply_q(ga, ws, y)
    for i in range(mr):
        mu[rp[i]] = y[i]


# ----------------------------------------------------------------------------------------
# static-pivot sparse LU of a square Theta_q (the simulation's factorisation, issue 29 item 3)
# ----------------------------------------------------------------------------------------


@njit(cache=True)
def _lu_numeric(ga, ws, scale, rtol):
    """Numeric phase of the static-pivot LU of ``Theta_q`` (analysis:
    :func:`workbench.formulations.natural.build.symbolic_lu`), in place on the matrix that
    :func:`prog_jacobian_lu` wrote into ``ws.F`` (fill-in positions zero): right-looking
    elimination in the fixed pivot order,
    pivot ``k`` updating the entries ``lu_upd`` of its rows of ``L`` and columns of ``U``
    (``sum_k |L_k| |U_k|`` multiply-adds: 1.6e3 on the buggy against 6.4e3 for the QR).
    Every pivot is checked before it is used: at least ``LU_PIVOT`` times the largest entry
    below it in its column and above ``rtol scale`` (``scale`` the largest column norm).
    Returns False at the first pivot that fails (``ws.F`` then holds no factorisation;
    the caller factorises by the QR, which also names a singular column)."""
    F = ws.F
    uptr, lptr, pptr, upd = ga.lu_uptr, ga.lu_lptr, ga.lu_pptr, ga.lu_upd
    n = ga.nq
    nU = uptr[n]
    tiny = rtol * (scale if scale > 0.0 else 1.0)
    for k in range(n):
        piv = F[uptr[k]]
        l0 = nU + lptr[k]
        l1 = nU + lptr[k + 1]
        cmax = 0.0
        for c in range(l0, l1):
            cmax = max(cmax, abs(F[c]))
        ap = abs(piv)
        if not (ap > tiny and ap >= LU_PIVOT * cmax):
            return False
        inv = 1.0 / piv
        u0 = uptr[k] + 1
        nu = uptr[k + 1] - u0
        e = pptr[k]
        for c in range(l0, l1):
            lv = F[c] * inv
            F[c] = lv
            if lv != 0.0:
                for b in range(nu):
                    F[upd[e + b]] -= lv * F[u0 + b]
            e += nu
    return True


@njit(cache=True, inline="always")
def _lu_factors(ga, ws):
    """The LU in ``ws.F`` and its layout: ``(F, uptr, ucol, lptr, lrow, rowp, colp, n, nU)``
    (:func:`workbench.formulations.natural.build.symbolic_lu`; ``nU`` the number of
    entries of ``U``, after which ``F`` holds ``L``)."""
    n = ga.nq
    return (ws.F, ga.lu_uptr, ga.lu_ucol, ga.lu_lptr, ga.lu_lrow, ga.lu_rowp, ga.lu_colp, n,
            ga.lu_uptr[n])


@njit(cache=True)
def _lu_solve(ga, ws, b, x):
    """``x = Theta_q^-1 b`` from the LU in ``ws.F``: the rows in pivot order, ``L y = b``
    (unit lower, by columns), ``U x = y`` (by rows), the columns back in their order."""
    F, uptr, ucol, lptr, lrow, rowp, colp, n, nU = _lu_factors(ga, ws)
    y = ws.xs
    for i in range(n):
        y[i] = b[rowp[i]]
    for k in range(n):
        yk = y[k]
        if yk != 0.0:
            for c in range(lptr[k], lptr[k + 1]):
                y[lrow[c]] -= F[nU + c] * yk
    for k in range(n - 1, -1, -1):
        s = y[k]
        for c in range(uptr[k] + 1, uptr[k + 1]):
            s -= F[c] * y[ucol[c]]
        y[k] = s / F[uptr[k]]
    for j in range(n):
        x[colp[j]] = y[j]


@njit(cache=True)
def _lu_solve_transpose(ga, ws, c, mu):
    """``mu = Theta_q^-T c`` from the LU in ``ws.F``: ``U^T z = c`` (forward, by the rows of
    ``U``), ``L^T mu = z`` (backward, by the columns of ``L``)."""
    F, uptr, ucol, lptr, lrow, rowp, colp, n, nU = _lu_factors(ga, ws)
    y = ws.xs
    for j in range(n):
        y[j] = c[colp[j]]
    for k in range(n):
        zk = y[k] / F[uptr[k]]
        y[k] = zk
        if zk != 0.0:
            for e in range(uptr[k] + 1, uptr[k + 1]):
                y[ucol[e]] -= F[e] * zk
    for k in range(n - 1, -1, -1):
        s = y[k]
        for e in range(lptr[k], lptr[k + 1]):
            s -= F[nU + e] * y[lrow[e]]
        y[k] = s
    for i in range(n):
        mu[rowp[i]] = y[i]


@njit(cache=True)
def _lu_units(ga, ws, r0, X):
    """:func:`sqr_solve_units` from the LU in ``ws.F``: the ``d`` unit right-hand sides
    carried together (``d`` independent sums per entry of the factors)."""
    F, uptr, ucol, lptr, lrow, rowp, colp, n, nU = _lu_factors(ga, ws)
    d = X.shape[1]
    Y = np.zeros((n, d))
    for i in range(n):
        j = rowp[i] - r0
        if j >= 0 and j < d:
            Y[i, j] = 1.0
    for k in range(n):
        yk = Y[k]
        for c in range(lptr[k], lptr[k + 1]):
            f = F[nU + c]
            yr = Y[lrow[c]]
            for j in range(d):
                yr[j] -= f * yk[j]
    _block_back(uptr, ucol, F, Y, Y, np.empty(d))
    for c in range(n):
        for j in range(d):
            X[colp[c], j] = Y[c, j]


@njit(cache=True)
def solve_position(ga, ma, p, t, zi, q, aref, ws, tol, maxit, reuse):
    """Newton-Raphson on ``Theta(q) = [Phi; h(q) - z^i] = 0`` (seed 001 eq 13) in natural
    coordinates; the QR factorisation of ``Theta_q`` at the solution is left in ``ws``
    (reused while the residual contracts 10x per iteration).  Returns (status, it, err, bad)."""
    Th, J, sc = ws.Th, ws.jets, ws.sc
    N = q.shape[0]
    m = ga.phi_sf.shape[0]
    d = ga.dof_sf.shape[0]
    res = np.zeros(m + d)
    dq = np.zeros(N)
    err_prev = np.inf
    err = 0.0
    for it in range(maxit + 1):
        theta_values(ga, ma, p, t, q, aref, sc, J)
        err = 0.0
        for k in range(m + d):
            res[k] = J[k, 0]
            if k >= m:
                res[k] -= zi[k - m]
            err = max(err, abs(res[k]))
        if not np.isfinite(err):
            return MR.ST_NONFINITE, it, err, -1
        if err <= tol:
            update_aref(ga, ma, p, t, q, aref, sc)
            return MR.OK, it, err, -1
        if it == maxit:
            break
        if not (reuse and err <= 0.1 * err_prev):
            theta_jacobian(ga, p, q, aref, sc, Th)
            bad = sqr_factor(ga, Th, ws, 1e-12)
            if bad >= 0:
                return MR.ST_SINGULAR, it, err, bad
        err_prev = err
        for k in range(m + d):
            res[k] = -res[k]
        sqr_solve(ga, ws, res, dq)
        for k in range(N):
            q[k] += dq[k]
    return MR.ST_POSITION, maxit, err, -1


@njit(cache=True)
def solve_va(ga, ma, p, t, zdi, q, qd, qddb, Rphi, aref, ws):
    """Velocity problem (eq 19), particular accelerations (eq 21 with zdd^i = 0) and R
    (eq 16) at the converged position ``q``: :func:`solve_va_step` with ``a = 0`` and
    ``R``.  Returns (status, bad)."""
    m = ga.phi_sf.shape[0]
    d = ga.dof_sf.shape[0]
    return solve_va_step(ga, ma, p, t, zdi, np.zeros(d), q, qd, qddb, Rphi, aref, ws, True,
                         np.zeros(m + d), ws.jets)


@njit(cache=True)
def solve_va_step(ga, ma, p, t, zdi, a, q, qd, qdd, Rphi, aref, ws, with_R, rhs, J,
                  refactor=True):
    """The velocity and acceleration problems of one Newton iterate of the trapezoidal
    loop at the converged position ``q``: ``Theta_q qd = [-Phi_t-terms; zd^i]`` (eq 19)
    and ``Theta_q qdd = [-c; zdd^i = a]`` (eq 21 with the iterate's ``a``: one solve
    instead of ``qdd_b + R a``), and ``R`` (eq 16, ``d`` more solves) only when
    ``with_R`` (the iteration matrix); the loop projects with one transpose solve
    instead (``R^T tau`` = the degree-of-freedom rows of ``Theta_q^+T tau``).  Same
    systems as :func:`solve_va`, so the same solution up to rounding.  ``rhs`` (m + d) and
    ``J`` (m + d, 6) are scratch.  Without ``refactor`` the factorisation in ``ws`` (of
    ``Theta_q`` at this same ``q``, left by the previous call) is used as it is.  Returns
    (status, bad)."""
    Th, sc = ws.Th, ws.sc
    m = ga.phi_sf.shape[0]
    d = ga.dof_sf.shape[0]
    if refactor:
        theta_jacobian(ga, p, q, aref, sc, Th)
        bad = sqr_factor(ga, Th, ws, 1e-12)
        if bad >= 0:
            return MR.ST_SINGULAR, bad
    theta_va_rest(ga, ma, p, t, J)
    for k in range(m):
        rhs[k] = -J[k, 1]
    for k in range(d):
        rhs[m + k] = zdi[k]
    sqr_solve(ga, ws, rhs, qd)
    theta_va(ga, ma, p, t, q, qd, sc, J)
    for k in range(m + d):
        rhs[k] = -J[k, 2]
    for k in range(d):
        rhs[m + k] += a[k]
    sqr_solve(ga, ws, rhs, qdd)
    if with_R:
        sqr_solve_units(ga, ws, m, Rphi)
    return MR.OK, -1


# ----------------------------------------------------------------------------------------
# mass matrix and forces
# ----------------------------------------------------------------------------------------


@njit(cache=True)
def _mloc(ga, ma, p, w, b, deriv, Ml, mp):
    """Local mass matrix ``Mloc`` of body ``b`` (or its field derivative along ``w = dp``)."""
    D = ga.D
    m = p[ma.b_mass[b]]
    o = ma.b_org[b]
    c = ma.b_com[b]
    g = np.zeros(3)
    dg = np.zeros(3)
    for k in range(3):
        g[k] = p[o + k] + p[c + k]
        if deriv:
            dg[k] = w[o + k] + w[c + k]
    ki = ma.b_inr[b]
    src = w if deriv else p
    I = np.zeros((3, 3))
    I[0, 0] = src[ki]
    I[1, 1] = src[ki + 1]
    I[2, 2] = src[ki + 2]
    I[0, 1] = I[1, 0] = src[ki + 3]
    I[0, 2] = I[2, 0] = src[ki + 4]
    I[1, 2] = I[2, 1] = src[ki + 5]
    Jc = np.zeros((3, 3))
    if D == 2:
        Jc[0, 0] = 0.5 * I[2, 2]
        Jc[1, 1] = 0.5 * I[2, 2]
    else:
        tr = 0.5 * (I[0, 0] + I[1, 1] + I[2, 2])
        for i in range(3):
            for j in range(3):
                Jc[i, j] = (tr if i == j else 0.0) - I[i, j]
    if not deriv:
        Ml[0, 0] = m
        for k in range(D):
            Ml[0, 1 + k] = m * g[k]
            Ml[1 + k, 0] = m * g[k]
            for l in range(D):
                Ml[1 + k, 1 + l] = m * g[k] * g[l] + Jc[k, l]
    else:
        dm = w[ma.b_mass[b]]
        Ml[0, 0] = dm
        for k in range(D):
            Ml[0, 1 + k] = dm * g[k] + m * dg[k]
            Ml[1 + k, 0] = Ml[0, 1 + k]
            for l in range(D):
                Ml[1 + k, 1 + l] = (dm * g[k] * g[l] + m * (dg[k] * g[l] + g[k] * dg[l])
                                    + Jc[k, l])
    return m


@njit(cache=True)
def mass_matrix(ga, ma, p, w, deriv, M):
    """Constant mass matrix ``M = blockdiag(Mloc_b (x) I_D)`` (or ``dM`` along ``w = dp``)."""
    D = ga.D
    nqb = ga.nqb
    M[:, :] = 0.0
    Ml = np.zeros((D + 1, D + 1))
    for b in range(ga.nb):
        _mloc(ga, ma, p, w, b, deriv, Ml, 0)
        s0 = b * nqb
        for a in range(D + 1):
            for c in range(D + 1):
                for i in range(D):
                    M[s0 + a * D + i, s0 + c * D + i] = Ml[a, c]


@njit(cache=True)
def mass_apply(ga, M, x, out):
    """``out = M x`` for the block-diagonal mass matrix ``M`` of :func:`mass_matrix` (its
    ``D + 1`` non-zeros per row)."""
    D = ga.D
    nqb = ga.nqb
    for b in range(ga.nb):
        s0 = b * nqb
        for a in range(D + 1):
            for i in range(D):
                r = s0 + a * D + i
                s = 0.0
                for c in range(D + 1):
                    col = s0 + c * D + i
                    s += M[r, col] * x[col]
                out[r] = s


@njit(cache=True)
def mass_dir_apply(ga, ma, p, dp, x, out):
    """``out += dM x``: the tangent of the mass matrix along the field direction ``dp``
    (:func:`mass_matrix` with ``deriv``) applied to ``x``, body block by body block."""
    D = ga.D
    nqb = ga.nqb
    Ml = np.zeros((D + 1, D + 1))
    for b in range(ga.nb):
        _mloc(ga, ma, p, dp, b, True, Ml, 0)
        s0 = b * nqb
        for a in range(D + 1):
            for i in range(D):
                s = 0.0
                for c in range(D + 1):
                    s += Ml[a, c] * x[s0 + c * D + i]
                out[s0 + a * D + i] += s


@njit(cache=True)
def projected_mass(ga, M, Rphi, out):
    """``out = Rphi^T M Rphi`` for the block-diagonal mass matrix of :func:`mass_matrix`
    (``M_b = Mloc_b (x) I_D``: row ``s0 + a D + i`` of body ``b`` has its non-zeros in the
    columns ``s0 + c D + i``, ``c = 0..D``): ``M Rphi`` from those ``D + 1`` entries per row,
    in the column order of :func:`workbench.kernels.linalg.projected_matrix` (whose other
    terms are exact zeros), then the same ``Rphi^T (M Rphi)``.  The zero entries of
    ``Mloc`` (a body whose centre of mass is its origin and whose frame is principal has
    ``D + 1`` non-zeros of ``(D + 1)^2``) add exact zeros and are skipped: the same sums."""
    N, d = Rphi.shape
    D = ga.D
    nqb = ga.nqb
    MRp = np.zeros((N, d))
    for b in range(ga.nb):
        s0 = b * nqb
        for a in range(D + 1):
            for i in range(D):
                r = s0 + a * D + i
                for c in range(D + 1):
                    col = s0 + c * D + i
                    mrc = M[r, col]
                    if mrc == 0.0:
                        continue
                    for j in range(d):
                        MRp[r, j] += mrc * Rphi[col, j]
    # out[i, j] = sum_k Rphi[k, i] MRp[k, j], k ascending as before, the d sums of a row
    # of out carried together (independent chains instead of one serial sum); the zero
    # entries of Rphi (59 % on the buggy) add exact zeros and are skipped
    acc = np.empty(d)
    for i in range(d):
        acc[:] = 0.0
        for k in range(N):
            rki = Rphi[k, i]
            if rki == 0.0:
                continue
            for j in range(d):
                acc[j] += rki * MRp[k, j]
        for j in range(d):
            out[i, j] = acc[j]


@njit(cache=True)
def angvel_bil(ga, b, c, body, x, y):
    """Component ``c`` of the angular velocity of body ``b`` as a bilinear form of the
    natural coordinates ``x = q`` and their rates ``y = qd`` (exact on orthonormal frames,
    ``e_dot_k = omega x e_k``): global ``omega = 1/2 sum_k e_k x e_dot_k``; body components
    ``omega . e_x = e_z . e_dot_y`` (cyclic).  Planar: ``omega_z = (e_x x e_dot_x)_z``."""
    D = ga.D
    s0 = b * ga.nqb
    if D == 2:
        if c != 2:
            return 0.0
        return x[s0 + 2] * y[s0 + 3] - x[s0 + 3] * y[s0 + 2]
    if body:
        k = (c + 2) % 3
        l = (c + 1) % 3
        s = 0.0
        for i in range(3):
            s += x[s0 + 3 * (1 + k) + i] * y[s0 + 3 * (1 + l) + i]
        return s
    i1 = (c + 1) % 3
    i2 = (c + 2) % 3
    s = 0.0
    for k in range(3):
        e = s0 + 3 * (1 + k)
        s += x[e + i1] * y[e + i2] - x[e + i2] * y[e + i1]
    return 0.5 * s


@njit(cache=True)
def body_vector(ga, b, v, x, out):
    """``out = sum_k v_k e_k(x)`` (a body-fixed vector with local components ``v``)."""
    s0 = b * ga.nqb
    D = ga.D
    for i in range(D):
        out[i] = 0.0
        for k in range(D):
            out[i] += v[k] * x[s0 + (1 + k) * D + i]


@njit(cache=True)
def tire_inputs(ga, ma, p, s, q, qd, c, vc, e, w):
    """Inputs of the tire law of contact ``s`` (:func:`workbench.forces.tire.tire_force`) from the
    natural coordinates: wheel centre ``c`` and its velocity ``vc``, global spin axis ``e``,
    wheel angular velocity ``w`` (global).  Returns the wheel body."""
    k1 = ma.ty_pt[s]
    b = ma.pt_body[k1]
    op_apply(ga, ga.pt_op[k1], q, p, False, True, c)
    op_apply(ga, ga.pt_op[k1], qd, p, False, False, vc)
    body_vector(ga, ma.vc_body[ma.ty_vc[s]], ma.vc_val[ma.ty_vc[s]], q, e)
    for i in range(3):
        w[i] = angvel_bil(ga, b, i, False, q, qd)
    return b


@njit(cache=True)
def tire_inputs_t(ga, ma, p, s, q, qd, dq, dqd, dp, dc, dvc, de, dw, tmp):
    """Tangents of :func:`tire_inputs` along ``(dq, dqd, dp)``."""
    k1 = ma.ty_pt[s]
    b = ma.pt_body[k1]
    o = ga.pt_op[k1]
    op_apply(ga, o, dq, p, False, False, dc)
    op_apply(ga, o, q, dp, True, True, tmp)
    for i in range(3):
        dc[i] += tmp[i]
    op_apply(ga, o, dqd, p, False, False, dvc)
    op_apply(ga, o, qd, dp, True, False, tmp)
    for i in range(3):
        dvc[i] += tmp[i]
    body_vector(ga, ma.vc_body[ma.ty_vc[s]], ma.vc_val[ma.ty_vc[s]], dq, de)
    for i in range(3):
        dw[i] = angvel_bil(ga, b, i, False, dq, qd) + angvel_bil(ga, b, i, False, q, dqd)


@njit(cache=True)
def point_force_power(ga, b, q, P, F, w):
    """Virtual power ``F . v_P(w)`` of a force ``F`` at the world point ``P`` fixed to body
    ``b``: ``v_P = w_r + sum_k x_k w_ek`` with ``x_k = (P - r_b) . e_k``."""
    s0 = b * ga.nqb
    D = ga.D
    W = 0.0
    for i in range(D):
        W += F[i] * w[s0 + i]
    for k in range(D):
        xk = 0.0
        for i in range(D):
            xk += (P[i] - q[s0 + i]) * q[s0 + (1 + k) * D + i]
        for i in range(D):
            W += xk * F[i] * w[s0 + (1 + k) * D + i]
    return W


@njit(cache=True)
def point_force_add(ga, b, q, P, F, Q):
    """``Q += d(F . v_P(w))/dw`` (the generalised force of :func:`point_force_power`)."""
    s0 = b * ga.nqb
    D = ga.D
    for i in range(D):
        Q[s0 + i] += F[i]
    for k in range(D):
        xk = 0.0
        for i in range(D):
            xk += (P[i] - q[s0 + i]) * q[s0 + (1 + k) * D + i]
        for i in range(D):
            Q[s0 + (1 + k) * D + i] += xk * F[i]


@njit(cache=True)
def torque_add(ga, b, q, M, Q):
    """``Q += d(M . omega(w))/dw`` for a torque ``M`` on body ``b`` (spatial): with
    ``omega = 1/2 sum_k e_k x e_k_dot``, ``Q_ek += 1/2 M x e_k`` (``e_k`` read from ``q``;
    bilinear in ``q`` and ``M``, so its tangent is two calls)."""
    s0 = b * ga.nqb
    D = ga.D
    for k in range(D):
        e0 = s0 + (1 + k) * D
        Q[e0] += 0.5 * (M[1] * q[e0 + 2] - M[2] * q[e0 + 1])
        Q[e0 + 1] += 0.5 * (M[2] * q[e0] - M[0] * q[e0 + 2])
        Q[e0 + 2] += 0.5 * (M[0] * q[e0 + 1] - M[1] * q[e0])


@njit(cache=True)
def speed_control_forces(ga, ma, p, t, q, qd, Q):
    """``Q +=`` the wheel torques of the speed controllers (spatial models):
    ``T = T_max tanh(K (v_set(t) - v_P . e) / T_max)`` (:func:`workbench.kernels.tree.
    applied_forces`), ``share T a`` on each driven wheel through :func:`torque_add`, minus
    on its carrier; ``v_P`` from the point operand, ``e``, ``a`` body vectors of ``q``."""
    v = np.zeros((3, 3))
    vp, e, a = v[0], v[1], v[2]
    for s in range(ma.sc_pt.shape[0]):
        k = ma.sc_pt[s]
        op_apply(ga, ga.pt_op[k], qd, p, False, False, vp)
        kv = ma.sc_vc[s]
        body_vector(ga, ma.vc_body[kv], ma.vc_val[kv], q, e)
        vel = vp[0] * e[0] + vp[1] * e[1] + vp[2] * e[2]
        T = SC.drive_torque(p, ma.sc_fld[s], K.time_function(ma, p, ma.sc_tf[s], t)[0], vel)
        for w in range(ma.sw_sc.shape[0]):
            if ma.sw_sc[w] != s:
                continue
            kw = ma.sw_vc[w]
            body_vector(ga, ma.vc_body[kw], ma.vc_val[kw], q, a)
            sh = p[ma.sw_fld[w]] * T
            for i in range(3):
                a[i] *= sh
            torque_add(ga, ma.sw_body[w], q, a, Q)
            if ma.sw_carrier[w] >= 0:
                for i in range(3):
                    a[i] = -a[i]
                torque_add(ga, ma.sw_carrier[w], q, a, Q)


@njit(cache=True)
def speed_control_forces_t(ga, ma, p, t, q, qd, dq, dqd, dp, dQ):
    """``dQ +=`` the tangent of :func:`speed_control_forces` along ``(dq, dqd, dp)``
    (the law's tangent as in :func:`workbench.kernels.tangents.speed_control_t`; the torque
    ``M = share T a`` enters :func:`torque_add` bilinearly: ``(dM, q) + (M, dq)``)."""
    v = np.zeros((8, 3))
    vp, dvp, e, de, a, da, M, tmp = v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]
    for s in range(ma.sc_pt.shape[0]):
        k = ma.sc_pt[s]
        o = ga.pt_op[k]
        op_apply(ga, o, qd, p, False, False, vp)
        op_apply(ga, o, dqd, p, False, False, dvp)
        op_apply(ga, o, qd, dp, True, False, tmp)
        for i in range(3):
            dvp[i] += tmp[i]
        kv = ma.sc_vc[s]
        body_vector(ga, ma.vc_body[kv], ma.vc_val[kv], q, e)
        body_vector(ga, ma.vc_body[kv], ma.vc_val[kv], dq, de)
        vel = 0.0
        dvel = 0.0
        for i in range(3):
            vel += vp[i] * e[i]
            dvel += dvp[i] * e[i] + vp[i] * de[i]
        vset = K.time_function(ma, p, ma.sc_tf[s], t)[0]
        dvset = K.time_function_t(ma, p, dp, ma.sc_tf[s], t)[0]
        T, dT = SC.drive_torque_dir(p, dp, ma.sc_fld[s], vset, vel, dvset, dvel)
        for w in range(ma.sw_sc.shape[0]):
            if ma.sw_sc[w] != s:
                continue
            kw = ma.sw_vc[w]
            body_vector(ga, ma.vc_body[kw], ma.vc_val[kw], q, a)
            body_vector(ga, ma.vc_body[kw], ma.vc_val[kw], dq, da)
            sh = p[ma.sw_fld[w]]
            c1 = dp[ma.sw_fld[w]] * T + sh * dT
            for side in range(2):
                b = ma.sw_body[w] if side == 0 else ma.sw_carrier[w]
                if b < 0:
                    continue
                sg = 1.0 if side == 0 else -1.0
                for i in range(3):
                    M[i] = sg * (c1 * a[i] + sh * T * da[i])
                torque_add(ga, b, q, M, dQ)
                for i in range(3):
                    M[i] = sg * sh * T * a[i]
                torque_add(ga, b, dq, M, dQ)


@njit(cache=True)
def tire_state_jacobians(ga, ma, p, q, qd, TJ):
    """The cache of :func:`tire_forces_t` at ``(q, qd)``: ``TJ[s, k, :, 0]`` the force
    ``F`` (k = 0), its point ``P`` (1) and the moment ``M`` (2) of tire ``s``, ``TJ[s, k, :,
    1:13]`` their exact Jacobians with respect to the law's inputs ``X = [c, vc, e, w]``
    (:func:`tire_inputs`; :func:`workbench.forces.tire_mf.element_wrench_state_jacobian`,
    the semi-recursive side's cache :func:`workbench.kernels.tangents.tire_state_jacobians`)."""
    nty = ma.ty_pt.shape[0]
    if nty == 0:
        return
    road = p[ma.rd_fld[0]:ma.rd_fld[0] + ma.rd_fld[1]]
    x = np.empty((4, 3))
    c, vc, e, om = x[0], x[1], x[2], x[3]
    for s in range(nty):
        tire_inputs(ga, ma, p, s, q, qd, c, vc, e, om)
        o = ma.ty_par[s]
        law = ma.ty_law[s]
        TL.wrench_state_cache(law, c, vc, e, om, p[o:o + TL.tire_npar(law)], road, TJ[s])


@njit(cache=True)
def tire_forces_t(ga, ma, p, q, qd, dq, dqd, dp, dQ, TJ, cached):
    """``dQ +=`` tangent of the tires' generalised forces along ``(dq, dqd, dp)``: the input
    tangents pushed through :func:`workbench.forces.tire_mf.element_force_dir`, then the chain
    rule of :func:`point_force_add` (``Q_r = F``, ``Q_ek = x_k F``, ``x_k = (P - r) . e_k``)
    and of :func:`torque_add` for the aligning moment of the Magic Formula law.

    ``cached`` (a direction that moves no tire or road field): the wrench and its Jacobians
    are read from ``TJ`` (:func:`tire_state_jacobians` at this ``(q, qd)``) and the law's
    tangent is the product ``(dF, dP, dM) = J dX``."""
    if ma.ty_pt.shape[0] == 0:
        return
    D = ga.D
    nqb = ga.nqb
    r0 = ma.rd_fld[0]
    r1 = r0 + ma.rd_fld[1]
    road = p[r0:r1]
    droad = dp[r0:r1]
    v = np.zeros((15, 3))
    c, vc, e, om, dc, dvc, de, dom, F, P, dF, dP, tmp = (v[0], v[1], v[2], v[3], v[4], v[5],
                                                        v[6], v[7], v[8], v[9], v[10],
                                                        v[11], v[12])
    M, dM = v[13], v[14]
    for s in range(ma.ty_pt.shape[0]):
        law = ma.ty_law[s]
        if cached:
            b = ma.pt_body[ma.ty_pt[s]]
            tire_inputs_t(ga, ma, p, s, q, qd, dq, dqd, dp, dc, dvc, de, dom, tmp)
            TL.wrench_state_product(TJ[s], dc, dvc, de, dom, F, P, M, dF, dP, dM)
        else:
            b = tire_inputs(ga, ma, p, s, q, qd, c, vc, e, om)
            tire_inputs_t(ga, ma, p, s, q, qd, dq, dqd, dp, dc, dvc, de, dom, tmp)
            o = ma.ty_par[s]
            o1 = o + TL.tire_npar(law)
            TL.element_force_dir(law, c, vc, e, om, p[o:o1], road, dc, dvc, de, dom,
                                 dp[o:o1], droad, F, P, M, dF, dP, dM)
        point_force_add(ga, b, q, P, dF, dQ)
        if law == TL.LAW_MF:
            # aligning moment: Q_ek = 1/2 M x e_k, tangent 1/2 (dM x e_k + M x de_k)
            torque_add(ga, b, q, dM, dQ)
            torque_add(ga, b, dq, M, dQ)
        # d x_k = (dP - dr) . e_k + (P - r) . de_k
        s0 = b * nqb
        for k in range(D):
            dxk = 0.0
            for i in range(D):
                e0 = s0 + (1 + k) * D + i
                dxk += (dP[i] - dq[s0 + i]) * q[e0] + (P[i] - q[s0 + i]) * dq[e0]
            for i in range(D):
                dQ[s0 + (1 + k) * D + i] += dxk * F[i]


@njit(cache=True)
def generalized_forces(ga, ma, p, t, q, qd, aref, sc, Q):
    """``Q(q, qd, t)`` and the potential energy (gravity, springs, joint springs)."""
    D = ga.D
    nqb = ga.nqb
    N = q.shape[0]
    Q[:] = 0.0
    V = 0.0
    grav = ma.gravity
    for b in range(ga.nb):
        m = p[ma.b_mass[b]]
        o = ma.b_org[b]
        c = ma.b_com[b]
        s0 = b * nqb
        for i in range(D):
            Q[s0 + i] += m * grav[i]
            x = q[s0 + i]
            for k in range(D):
                gk = p[o + k] + p[c + k]
                Q[s0 + (1 + k) * D + i] += m * gk * grav[i]
                x += gk * q[s0 + (1 + k) * D + i]
            V -= m * grav[i] * x
    # the small temporaries on the stack (no allocation per call)
    S = _S5x3()
    S[:, :] = 0.0
    x1, x2, v1, v2, F = S[0], S[1], S[2], S[3], S[4]
    for s in range(ma.sp_pt.shape[0]):
        o1 = ga.pt_op[ma.sp_pt[s, 0]]
        o2 = ga.pt_op[ma.sp_pt[s, 1]]
        op_apply(ga, o1, q, p, False, True, x1)
        op_apply(ga, o2, q, p, False, True, x2)
        op_apply(ga, o1, qd, p, False, False, v1)
        op_apply(ga, o2, qd, p, False, False, v2)
        L = 0.0
        Ld = 0.0
        for i in range(D):
            L += (x2[i] - x1[i]) ** 2
            Ld += (x2[i] - x1[i]) * (v2[i] - v1[i])
        L = np.sqrt(L)
        if L == 0.0:
            Q[:] = np.nan
            return np.nan
        Ld /= L
        T, _, _, U = SL.tension(ma.sp_law[s], ma.sp_x[s, 0], ma.sp_x[s, 1], ma.sp_law[s, 2], p,
                                ma.sp_k[s], ma.sp_c[s], ma.sp_L0[s], L, Ld)
        V += U
        for i in range(D):
            F[i] = T * (x2[i] - x1[i]) / L
        op_grad(ga, p, o1, F, 1.0, Q)
        op_grad(ga, p, o2, F, -1.0, Q)
    nj = ma.js_coord.shape[0]
    jet = np.zeros(6 if nj > 0 else 0)
    z = np.zeros(N if nj > 0 else 0)
    for s in range(nj):
        sf = ga.jc_sf[ma.js_coord[s]]
        sf_jet(ga, ma, p, sf, t, q, qd, z, z, z, z, p, False, aref, sc, jet)
        k = p[ma.js_k[s]]
        dz = jet[0] - p[ma.js_z0[s]]
        fs = -k * dz - p[ma.js_c[s]] * jet[1]
        V += 0.5 * k * dz * dz
        sf_grad(ga, p, sf, q, aref, sc, fs, Q)
    for s in range(ma.af_type.shape[0]):
        # f(t) d with the direction d = p[af_dfld : af_dfld + 3]
        f, fd, fdd = K.time_function(ma, p, ma.af_tf[s], t)
        od = ma.af_dfld[s]
        d0, d1, d2 = p[od], p[od + 1], p[od + 2]
        if ma.af_type[s] == AF_FORCE:
            F[0] = f * d0
            F[1] = f * d1
            F[2] = f * d2
            op_grad(ga, p, ga.pt_op[ma.af_idx[s]], F, 1.0, Q)
        else:
            s0 = ma.af_idx[s] * nqb
            for k in range(D):
                e0 = s0 + (1 + k) * D
                if D == 2:
                    Q[e0] += -0.5 * f * d2 * q[e0 + 1]
                    Q[e0 + 1] += 0.5 * f * d2 * q[e0]
                else:
                    Q[e0] += 0.5 * f * (d1 * q[e0 + 2] - d2 * q[e0 + 1])
                    Q[e0 + 1] += 0.5 * f * (d2 * q[e0] - d0 * q[e0 + 2])
                    Q[e0 + 2] += 0.5 * f * (d0 * q[e0 + 1] - d1 * q[e0])
    if ma.ty_pt.shape[0] > 0:
        road = p[ma.rd_fld[0]:ma.rd_fld[0] + ma.rd_fld[1]]
        v = _S7x3()
        v[:, :] = 0.0
        for s in range(ma.ty_pt.shape[0]):
            b = tire_inputs(ga, ma, p, s, q, qd, v[0], v[1], v[2], v[3])
            o = ma.ty_par[s]
            law = ma.ty_law[s]
            TL.element_force(law, v[0], v[1], v[2], v[3], p[o:o + TL.tire_npar(law)], road,
                             v[4], v[5], v[6])
            point_force_add(ga, b, q, v[5], v[4], Q)
            if law == TL.LAW_MF:
                torque_add(ga, b, q, v[6], Q)
    if ma.sc_pt.shape[0] > 0:
        speed_control_forces(ga, ma, p, t, q, qd, Q)
    return V


@njit(cache=True)
def force_tangent(ga, ma, p, t, q, qd, dq, dqd, dp, aref, sc, dQ):
    """``dQ`` = tangent of the generalised forces ``Q(q, qd, rho)`` of
    :func:`generalized_forces` along ``(dq, dqd, dp)`` (so ``d(Q . w) = dQ . w`` for a
    fixed ``w``: one pass per direction serves every projection)."""
    D = ga.D
    nqb = ga.nqb
    dQ[:] = 0.0
    grav = ma.gravity
    for b in range(ga.nb):
        m = p[ma.b_mass[b]]
        dm = dp[ma.b_mass[b]]
        o = ma.b_org[b]
        c = ma.b_com[b]
        s0 = b * nqb
        for i in range(D):
            dQ[s0 + i] += dm * grav[i]
            for k in range(D):
                dQ[s0 + (1 + k) * D + i] += (dm * (p[o + k] + p[c + k])
                                             + m * (dp[o + k] + dp[c + k])) * grav[i]
    v = np.zeros((21, 3))
    x1, x2, v1, v2, tmp, dx, dv, F, dF = v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8]
    V = v[9:21]
    for s in range(ma.sp_pt.shape[0]):
        o1 = ga.pt_op[ma.sp_pt[s, 0]]
        o2 = ga.pt_op[ma.sp_pt[s, 1]]
        op_apply(ga, o1, q, p, False, True, x1)
        op_apply(ga, o2, q, p, False, True, x2)
        op_apply(ga, o1, qd, p, False, False, v1)
        op_apply(ga, o2, qd, p, False, False, v2)
        for i in range(D):
            x2[i] -= x1[i]
            v2[i] -= v1[i]
        # tangents of x = x2 - x1, v = v2 - v1
        op_apply(ga, o2, dq, p, False, False, dx)
        op_apply(ga, o1, dq, p, False, False, tmp)
        for i in range(D):
            dx[i] -= tmp[i]
        op_apply(ga, o2, q, dp, True, True, tmp)
        for i in range(D):
            dx[i] += tmp[i]
        op_apply(ga, o1, q, dp, True, True, tmp)
        for i in range(D):
            dx[i] -= tmp[i]
        op_apply(ga, o2, dqd, p, False, False, dv)
        op_apply(ga, o1, dqd, p, False, False, tmp)
        for i in range(D):
            dv[i] -= tmp[i]
        op_apply(ga, o2, qd, dp, True, False, tmp)
        for i in range(D):
            dv[i] += tmp[i]
        op_apply(ga, o1, qd, dp, True, False, tmp)
        for i in range(D):
            dv[i] -= tmp[i]
        L = np.sqrt(_dot(x2, x2, D))
        Ld = _dot(x2, v2, D) / L
        dL = _dot(x2, dx, D) / L
        dLd = (_dot(dx, v2, D) + _dot(x2, dv, D)) / L - Ld * dL / L
        law, kx, cx = ma.sp_law[s], ma.sp_x[s, 0], ma.sp_x[s, 1]
        T, TL, TLd, _ = SL.tension(law, kx, cx, law[2], p, ma.sp_k[s], ma.sp_c[s], ma.sp_L0[s],
                                   L, Ld)
        dT = TL * dL + TLd * dLd + SL.tension_dp(law, kx, cx, law[2], p, dp, ma.sp_k[s],
                                                 ma.sp_c[s], ma.sp_L0[s], L, Ld)
        for i in range(D):
            F[i] = T * x2[i] / L
            dF[i] = dT * x2[i] / L + T * dx[i] / L - T * x2[i] * dL / (L * L)
        # Q = op_grad(o1, F) - op_grad(o2, F)
        op_grad(ga, p, o1, dF, 1.0, dQ)
        op_grad(ga, p, o2, dF, -1.0, dQ)
        op_grad_w(ga, dp, o1, F, 1.0, dQ, True)
        op_grad_w(ga, dp, o2, F, -1.0, dQ, True)
    _force_tangent_rest(ga, ma, p, t, q, qd, dq, dqd, dp, aref, sc, dQ, V, F, dF,
                        np.empty((0, 3, 3, 13)), False)


@njit(cache=True)
def _force_tangent_rest(ga, ma, p, t, q, qd, dq, dqd, dp, aref, sc, dQ, V, F, dF, TJ,
                        tj_cached):
    """``dQ +=`` the tangents of the joint springs, applied forces and torques, tires and
    speed controls along ``(dq, dqd, dp)``: the part of :func:`force_tangent` after the
    gravity and the point-to-point springs (``V`` (12, 3), ``F``, ``dF`` (3): scratch;
    ``TJ``, ``tj_cached``: the tire cache of :func:`tire_forces_t`)."""
    _joint_spring_applied_t(ga, ma, p, t, q, qd, dq, dqd, dp, aref, sc, dQ, V, F, dF)
    tire_forces_t(ga, ma, p, q, qd, dq, dqd, dp, dQ, TJ, tj_cached)
    if ma.sc_pt.shape[0] > 0:
        speed_control_forces_t(ga, ma, p, t, q, qd, dq, dqd, dp, dQ)


@njit(cache=True)
def _joint_spring_applied_t(ga, ma, p, t, q, qd, dq, dqd, dp, aref, sc, dQ, V, F, dF):
    """``dQ +=`` the tangents of the joint springs and of the applied forces and torques
    along ``(dq, dqd, dp)`` (the first part of :func:`_force_tangent_rest`)."""
    D = ga.D
    nqb = ga.nqb
    z = np.zeros(q.shape[0] if ma.js_coord.shape[0] > 0 else 0)
    jet = np.zeros(6)
    for s in range(ma.js_coord.shape[0]):
        sf = ga.jc_sf[ma.js_coord[s]]
        sf_jet(ga, ma, p, sf, t, q, qd, z, dq, dqd, z, dp, True, aref, sc, jet)
        k = p[ma.js_k[s]]
        cc = p[ma.js_c[s]]
        dz = jet[0] - p[ma.js_z0[s]]
        fs = -k * dz - cc * jet[1]
        dfs = (-dp[ma.js_k[s]] * dz - k * (jet[3] - dp[ma.js_z0[s]]) - dp[ma.js_c[s]] * jet[1]
               - cc * jet[4])
        # Q = fs grad h
        sf_grad(ga, p, sf, q, aref, sc, dfs, dQ)
        sf_grad_t(ga, p, sf, q, dq, dp, V, fs, dQ)
    for s in range(ma.af_type.shape[0]):
        # F = f(t; p) d(p): dF = df d + f dd (df: the coefficients' direction,
        # :func:`_kernels.time_function_t`; dd: dp of the direction fields)
        f, fd, fdd = K.time_function(ma, p, ma.af_tf[s], t)
        df, dfd, dfdd = K.time_function_t(ma, p, dp, ma.af_tf[s], t)
        od = ma.af_dfld[s]
        d = p[od:od + 3]
        for i in range(3):
            dF[i] = df * p[od + i] + f * dp[od + i]
        if ma.af_type[s] == AF_FORCE:
            for i in range(3):
                F[i] = f * d[i]
            # Q = P_q^T F: the point operand's field tangent with F, and dF
            op_grad_w(ga, dp, ga.pt_op[ma.af_idx[s]], F, 1.0, dQ, True)
            op_grad(ga, p, ga.pt_op[ma.af_idx[s]], dF, 1.0, dQ)
        else:
            # Q_ek = 1/2 (f d) x e_k (virtual power of the torque): tangent along dq with
            # f d, plus the same with dF along q
            s0 = ma.af_idx[s] * nqb
            for k in range(D):
                e0 = s0 + (1 + k) * D
                if D == 2:
                    dQ[e0] += -0.5 * f * d[2] * dq[e0 + 1] - 0.5 * dF[2] * q[e0 + 1]
                    dQ[e0 + 1] += 0.5 * f * d[2] * dq[e0] + 0.5 * dF[2] * q[e0]
                else:
                    dQ[e0] += (0.5 * f * (d[1] * dq[e0 + 2] - d[2] * dq[e0 + 1])
                               + 0.5 * (dF[1] * q[e0 + 2] - dF[2] * q[e0 + 1]))
                    dQ[e0 + 1] += (0.5 * f * (d[2] * dq[e0] - d[0] * dq[e0 + 2])
                                   + 0.5 * (dF[2] * q[e0] - dF[0] * q[e0 + 2]))
                    dQ[e0 + 2] += (0.5 * f * (d[0] * dq[e0 + 1] - d[1] * dq[e0])
                                   + 0.5 * (dF[0] * q[e0 + 1] - dF[1] * q[e0]))


@njit(cache=True)
def force_tangent_q(ga, ma, pr, p, t, q, qd, dq, dqd, zp, aref, sc, dQ, TJ):
    """:func:`force_tangent` along a state direction ``(dq, dqd)`` (no field direction:
    ``zp`` is a zero vector of the fields' length), at the ``(q, qd)`` whose operand values
    and rates ``pr.OV``, ``pr.OR`` the row program holds (:func:`solve_position_p`,
    :func:`solve_va_step_p`): the gravity (constant in ``q``) adds nothing, the springs'
    point positions and velocities are read from ``pr`` instead of being applied again,
    and the terms along the field direction (exact zeros) are left out, and the tires'
    tangents are products with their Jacobians ``TJ`` (:func:`tire_state_jacobians` at this
    state); the other arithmetic is that of :func:`force_tangent`, in the same order.  For
    the iteration matrix of the loop (one call per column of ``R``)."""
    D = ga.D
    dQ[:] = 0.0
    OV, OR = pr.OV, pr.OR
    v = _S12x3()
    v[:, :] = 0.0
    x2, v2, tmp, dx, dv, F, dF = v[0], v[1], v[2], v[3], v[4], v[5], v[6]
    for s in range(ma.sp_pt.shape[0]):
        o1 = ga.pt_op[ma.sp_pt[s, 0]]
        o2 = ga.pt_op[ma.sp_pt[s, 1]]
        for i in range(D):
            x2[i] = OV[o2, i] - OV[o1, i]
            v2[i] = OR[o2, i] - OR[o1, i]
        op_apply(ga, o2, dq, p, False, False, dx)
        op_apply(ga, o1, dq, p, False, False, tmp)
        for i in range(D):
            dx[i] -= tmp[i]
        op_apply(ga, o2, dqd, p, False, False, dv)
        op_apply(ga, o1, dqd, p, False, False, tmp)
        for i in range(D):
            dv[i] -= tmp[i]
        L = np.sqrt(_dot(x2, x2, D))
        Ld = _dot(x2, v2, D) / L
        dL = _dot(x2, dx, D) / L
        dLd = (_dot(dx, v2, D) + _dot(x2, dv, D)) / L - Ld * dL / L
        law, kx, cx = ma.sp_law[s], ma.sp_x[s, 0], ma.sp_x[s, 1]
        T, TL, TLd, _ = SL.tension(law, kx, cx, law[2], p, ma.sp_k[s], ma.sp_c[s], ma.sp_L0[s],
                                   L, Ld)
        dT = TL * dL + TLd * dLd
        for i in range(D):
            F[i] = T * x2[i] / L
            dF[i] = dT * x2[i] / L + T * dx[i] / L - T * x2[i] * dL / (L * L)
        op_grad(ga, p, o1, dF, 1.0, dQ)
        op_grad(ga, p, o2, dF, -1.0, dQ)
    W = np.zeros((12, 3))
    _force_tangent_rest(ga, ma, p, t, q, qd, dq, dqd, zp, aref, sc, dQ, W, F, dF, TJ, True)


@njit(cache=True)
def op_apply_cols(ga, tw, o, X, sg0, out):
    """``out[i, j] += sg0 *`` the part of operand ``o`` linear in ``q`` applied to column
    ``j`` of ``X`` (N x d): ``sum sign (org r_b(X_j) + sum_k w_k e_k(X_j))`` with the terms'
    weights ``tw`` of the row program (:func:`_term_weights`), no ground terms (what
    :func:`op_apply` gives for ``affine = False``, for every column at once)."""
    D = ga.D
    nqb = ga.nqb
    d = X.shape[1]
    for t in range(ga.op_ptr[o], ga.op_ptr[o + 1]):
        b = ga.tm_body[t]
        if b < 0:
            continue
        sg = sg0 * ga.tm_sign[t]
        s0 = b * nqb
        og = tw[t, 0]
        w0 = tw[t, 1]
        w1 = tw[t, 2]
        w2 = tw[t, 3]
        for i in range(D):
            for j in range(d):
                v = og * X[s0 + i, j] + w0 * X[s0 + D + i, j] + w1 * X[s0 + 2 * D + i, j]
                if D == 3:
                    v += w2 * X[s0 + 3 * D + i, j]
                out[i, j] += sg * v


@njit(cache=True)
def force_block_ok(ga, ma):
    """Whether :func:`force_tangents_projected` serves the model: the tires (spatial
    elements) only in three dimensions."""
    return ma.ty_pt.shape[0] == 0 or ga.D == 3


@njit(cache=True)
def _springs_projected(ga, ma, pr, p, R, cz, cv, S, bw):
    """``S[i, j] +=`` ``R_i^T dQ_j`` of the point-to-point springs, ``dQ_j`` their force
    tangent along ``(cz R_j, cv R_j)`` at the state whose operand values and rates ``pr``
    holds (:func:`force_tangent_q`'s springs, all columns from one evaluation of each
    spring).  With ``u = x / L`` and ``E_j`` the relative displacement of the two points
    along ``R_j``: ``dF_j = u (g . E_j) + cz T / L (E_j - u (u . E_j))``,
    ``g = cz (T_L u + T_Ld (v - Ld u) / L) + cv T_Ld u``, and ``R_i^T dQ_j = -E_i . dF_j``.
    ``bw``: scratch (>= 5 rows of length d)."""
    D = ga.D
    d = R.shape[1]
    OV, OR = pr.OV, pr.OR
    E = bw[0:3]
    av = bw[3]
    bv = bw[4]
    for s in range(ma.sp_pt.shape[0]):
        o1 = ga.pt_op[ma.sp_pt[s, 0]]
        o2 = ga.pt_op[ma.sp_pt[s, 1]]
        E[:, :] = 0.0
        op_apply_cols(ga, pr.tw, o2, R, 1.0, E)
        op_apply_cols(ga, pr.tw, o1, R, -1.0, E)
        x0 = OV[o2, 0] - OV[o1, 0]
        x1 = OV[o2, 1] - OV[o1, 1]
        v0 = OR[o2, 0] - OR[o1, 0]
        v1 = OR[o2, 1] - OR[o1, 1]
        x2 = 0.0
        v2 = 0.0
        if D == 3:
            x2 = OV[o2, 2] - OV[o1, 2]
            v2 = OR[o2, 2] - OR[o1, 2]
        L = np.sqrt(x0 * x0 + x1 * x1 + x2 * x2)
        Ld = (x0 * v0 + x1 * v1 + x2 * v2) / L
        law, kx, cx = ma.sp_law[s], ma.sp_x[s, 0], ma.sp_x[s, 1]
        T, TL, TLd, _ = SL.tension(law, kx, cx, law[2], p, ma.sp_k[s], ma.sp_c[s], ma.sp_L0[s],
                                   L, Ld)
        u0 = x0 / L
        u1 = x1 / L
        u2 = x2 / L
        g0 = cz * (TL * u0 + TLd * (v0 - Ld * u0) / L) + cv * TLd * u0
        g1 = cz * (TL * u1 + TLd * (v1 - Ld * u1) / L) + cv * TLd * u1
        g2 = cz * (TL * u2 + TLd * (v2 - Ld * u2) / L) + cv * TLd * u2
        c = cz * T / L
        for j in range(d):
            av[j] = u0 * E[0, j] + u1 * E[1, j]
            bv[j] = g0 * E[0, j] + g1 * E[1, j]
            if D == 3:
                av[j] += u2 * E[2, j]
                bv[j] += g2 * E[2, j]
        for i in range(d):
            for j in range(d):
                ee = 0.0
                for k in range(D):
                    ee += E[k, i] * E[k, j]
                S[i, j] -= av[i] * bv[j] + c * (ee - av[i] * av[j])


@njit(cache=True)
def _tires_projected(ga, ma, pr, p, q, qd, R, cz, cv, TJ, S, bw):
    """``S[i, j] +=`` ``R_i^T dQ_j`` of the tires (three dimensions), ``dQ_j`` the tangent of
    :func:`tire_forces_t` (cached: the products with ``TJ``) along ``(cz R_j, cv R_j)``:
    the law's inputs along every column at once (they are linear in the direction), then
    per column the product with the wrench Jacobians and the chain rule of
    :func:`point_force_add`, :func:`torque_add` (Magic Formula moment) and ``x_k``, on the
    wheel body's 12 coordinates, projected on ``R``.  ``bw``: scratch (>= 13 rows of
    length max(d, 12))."""
    nqb = ga.nqb
    d = R.shape[1]
    C = bw[0:3]
    Ev = bw[3:6]
    W = bw[6:9]
    dX = bw[9]
    dQb = bw[10]
    wr = bw[11]
    dPr = bw[12]
    for s in range(ma.ty_pt.shape[0]):
        k1 = ma.ty_pt[s]
        b = ma.pt_body[k1]
        s0 = b * nqb
        law = ma.ty_law[s]
        J = TJ[s]
        # c, vc along R_j: op(R_j); e: the body vector of R_j; w: angvel(R_j, qd) cz +
        # angvel(q, R_j) cv
        C[:, :] = 0.0
        op_apply_cols(ga, pr.tw, ga.pt_op[k1], R, 1.0, C)
        kv = ma.ty_vc[s]
        sv = ma.vc_body[kv] * nqb
        vv = ma.vc_val[kv]
        for i in range(3):
            for j in range(d):
                Ev[i, j] = 0.0
                for k in range(3):
                    Ev[i, j] += vv[k] * R[sv + (1 + k) * 3 + i, j]
        for i in range(3):
            i1 = (i + 1) % 3
            i2 = (i + 2) % 3
            for j in range(d):
                acc = 0.0
                for k in range(3):
                    e = s0 + 3 * (1 + k)
                    acc += cz * (R[e + i1, j] * qd[e + i2] - R[e + i2, j] * qd[e + i1])
                    acc += cv * (q[e + i1] * R[e + i2, j] - q[e + i2] * R[e + i1, j])
                W[i, j] = 0.5 * acc
        # x_k = (P - r) . e_k of the force's point
        for k in range(3):
            xk = 0.0
            for i in range(3):
                xk += (J[1, i, 0] - q[s0 + i]) * q[s0 + (1 + k) * 3 + i]
            wr[k] = xk
        for j in range(d):
            for i in range(3):
                dX[i] = cz * C[i, j]
                dX[3 + i] = cv * C[i, j]
                dX[6 + i] = cz * Ev[i, j]
                dX[9 + i] = W[i, j]
            for i in range(12):
                dQb[i] = 0.0
            # dF (point force, Q_r = F, Q_ek = x_k F)
            for i in range(3):
                dF = 0.0
                for l in range(12):
                    dF += J[0, i, 1 + l] * dX[l]
                dQb[i] += dF
                for k in range(3):
                    dQb[(1 + k) * 3 + i] += wr[k] * dF
            # d x_k = (dP - dr) . e_k + (P - r) . de_k
            for i in range(3):
                dP = 0.0
                for l in range(12):
                    dP += J[1, i, 1 + l] * dX[l]
                dPr[i] = dP - cz * R[s0 + i, j]
            for k in range(3):
                dxk = 0.0
                for i in range(3):
                    e0 = s0 + (1 + k) * 3 + i
                    dxk += dPr[i] * q[e0] + (J[1, i, 0] - q[s0 + i]) * cz * R[e0, j]
                for i in range(3):
                    dQb[(1 + k) * 3 + i] += dxk * J[0, i, 0]
            if law == TL.LAW_MF:
                # Q_ek = 1/2 M x e_k: 1/2 (dM x e_k + M x de_k)
                dM0 = 0.0
                dM1 = 0.0
                dM2 = 0.0
                for l in range(12):
                    dM0 += J[2, 0, 1 + l] * dX[l]
                    dM1 += J[2, 1, 1 + l] * dX[l]
                    dM2 += J[2, 2, 1 + l] * dX[l]
                M0 = J[2, 0, 0]
                M1 = J[2, 1, 0]
                M2 = J[2, 2, 0]
                for k in range(3):
                    e0 = s0 + (1 + k) * 3
                    f0 = cz * R[e0, j]
                    f1 = cz * R[e0 + 1, j]
                    f2 = cz * R[e0 + 2, j]
                    l0 = (1 + k) * 3
                    dQb[l0] += (0.5 * (dM1 * q[e0 + 2] - dM2 * q[e0 + 1])
                                + 0.5 * (M1 * f2 - M2 * f1))
                    dQb[l0 + 1] += (0.5 * (dM2 * q[e0] - dM0 * q[e0 + 2])
                                    + 0.5 * (M2 * f0 - M0 * f2))
                    dQb[l0 + 2] += (0.5 * (dM0 * q[e0 + 1] - dM1 * q[e0])
                                    + 0.5 * (M0 * f1 - M1 * f0))
            for i in range(d):
                acc = 0.0
                for l in range(12):
                    acc += R[s0 + l, i] * dQb[l]
                S[i, j] += acc


@njit(cache=True)
def force_tangents_projected(ga, ma, pr, p, t, q, qd, R, cz, cv, zp, aref, sc, TJ, dq, dqd,
                             dQ, S, bw):
    """``S[i, j] = R_i^T dQ_j`` for every pair of columns of ``R`` (N x d), ``dQ_j`` the
    force tangent of :func:`force_tangent_q` along ``(cz R_j, cv R_j)`` (``TJ``: the
    tires' cache :func:`tire_state_jacobians` at this state): the force block of the
    loop's iteration matrix.  The springs and tires are evaluated once for all columns
    (:func:`_springs_projected`, :func:`_tires_projected`); the joint springs, applied
    forces and speed controls, when the model has any, by one tangent per column.  The
    same derivative as the per-column :func:`force_tangent_q`, to rounding.  Requires
    :func:`force_block_ok`.  ``dq``, ``dqd``, ``dQ`` (N): scratch; ``bw``: scratch (13 x
    max(d, 12))."""
    N = q.shape[0]
    d = R.shape[1]
    S[:, :] = 0.0
    _springs_projected(ga, ma, pr, p, R, cz, cv, S, bw)
    _tires_projected(ga, ma, pr, p, q, qd, R, cz, cv, TJ, S, bw)
    if ma.js_coord.shape[0] + ma.af_type.shape[0] + ma.sc_pt.shape[0] == 0:
        return
    v = _S14x3()
    V, F, dF = v[0:12], v[12], v[13]
    for j in range(d):
        for k in range(N):
            dq[k] = cz * R[k, j]
            dqd[k] = cv * R[k, j]
        dQ[:] = 0.0
        _joint_spring_applied_t(ga, ma, p, t, q, qd, dq, dqd, zp, aref, sc, dQ, V, F, dF)
        if ma.sc_pt.shape[0] > 0:
            speed_control_forces_t(ga, ma, p, t, q, qd, dq, dqd, zp, dQ)
        for k in range(N):
            dk = dQ[k]
            if dk == 0.0:
                continue
            for i in range(d):
                S[i, j] += R[k, i] * dk


@njit(cache=True)
def zero_length_spring(ga, ma, p, q):
    x1 = np.zeros(3)
    x2 = np.zeros(3)
    for s in range(ma.sp_pt.shape[0]):
        op_apply(ga, ga.pt_op[ma.sp_pt[s, 0]], q, p, False, True, x1)
        op_apply(ga, ga.pt_op[ma.sp_pt[s, 1]], q, p, False, True, x2)
        if _dot(x2 - x1, x2 - x1, ga.D) == 0.0:
            return s
    return -1


# ----------------------------------------------------------------------------------------
# relative coordinates from the natural coordinates (output) and the integrator
# ----------------------------------------------------------------------------------------


@njit(cache=True)
def relative_coordinates(ga, ma, p, t, q, qd, qdd, aref, sc, z, zd, zdd):
    """``z, zd, zdd`` of every relative coordinate that has a joint-coordinate function
    (revolute/prismatic joints); NaN for the others (multi-axis joints)."""
    jet = np.zeros(6)
    zero = np.zeros(q.shape[0])
    for c in range(z.shape[0]):
        s = ga.jc_sf[c]
        if s < 0:
            z[c] = np.nan
            zd[c] = np.nan
            zdd[c] = np.nan
            continue
        sf_jet(ga, ma, p, s, t, q, qd, qdd, zero, zero, zero, p, False, aref, sc, jet)
        if ga.sf_tf[s] >= 0:
            jet[0], jet[1], jet[2] = _undrive(ma, p, ga.sf_tf[s], t, jet[0], jet[1], jet[2])
        z[c] = jet[0]
        zd[c] = jet[1]
        zdd[c] = jet[2]


@njit(cache=True)
def record_row(ga, ma, p, ws, k, t, q, qd, qdd, zi, zdi, a, iters, Vpot, conservative, M, aref,
            T_out, Q_out, Z_out, ZD_out, ZDD_out, ZI_out, ZDI_out, ZDDI_out, VIOL_out,
            VVIOL_out, IT_out, E_out, AREF_out):
    J, sc = ws.jets, ws.sc
    T_out[k] = t
    AREF_out[k] = aref
    Q_out[k] = q
    ZI_out[k] = zi
    ZDI_out[k] = zdi
    ZDDI_out[k] = a
    relative_coordinates(ga, ma, p, t, q, qd, qdd, aref, sc, Z_out[k], ZD_out[k], ZDD_out[k])
    zero = np.zeros(q.shape[0])
    theta_jets(ga, ma, p, t, q, qd, qdd, zero, zero, zero, p, False, aref, sc, J)
    m = ga.phi_sf.shape[0]
    v0 = 0.0
    v1 = 0.0
    for i in range(m):
        v0 = max(v0, abs(J[i, 0]))
        v1 = max(v1, abs(J[i, 1]))
    VIOL_out[k] = v0
    VVIOL_out[k] = v1
    IT_out[k] = iters
    if conservative:
        E_out[k] = 0.5 * (qd @ (M @ qd)) + Vpot


# ----------------------------------------------------------------------------------------
# row programs: the interpreter's per-row work specialised once per run (issue 29)
# ----------------------------------------------------------------------------------------

#: Per-run "row program" of the rows of ``Theta``, made by :func:`row_program` from the
#: model and the parameters of a run (``p`` is fixed along a run):
#:
#: * ``tw (nterms, 4)``: per operand term its origin weight and its local vector
#:   ``c + p[f1] + p[f2]`` (what :func:`op_apply` rebuilds from ``p`` at every call);
#: * ``rs (m + d)``: the scalar function of each row of ``Theta``;
#: * the Jacobian ``Theta_q`` as a list of instructions, one per (row, operand term, slot):
#:   ``Wc[dst[i]] += (scale[row, bl] * c) * OV[src, i]`` for ``i < D``, in the order in which
#:   :func:`sf_grad` accumulates them (so every entry gets the same sums in the same order:
#:   the same bits), with ``dst`` the entry's position in the compact working columns
#:   ``ws.Wc`` of the symbolic sparse QR (:func:`sqr_factor`), -1 for a product with a zero
#:   component of a constant operand (an exact zero at every ``q``): ``ins_src``,
#:   ``ins_bl``, ``ins_row``, ``ins_c``, ``ins_dst (nins, D)``;
#: * ``OV``, ``OR``, ``OA`` (nops, 3): the operand values at the current ``q``, their rates
#:   along ``qd`` and accelerations along ``qdd`` (scratch, filled by :func:`prog_values`,
#:   :func:`prog_va` and :func:`record_row_p`); ``RS (m + d, 2)``
#:   the row scales of the Jacobian (1 for a bilinear row, ``1 / sqrt(1 - u^2)`` for an
#:   ``asin``, ``-y / r2`` and ``x / r2`` for an angle);
#: * ``ok[0]``: 1 when every instruction lands in the symbolic pattern (the program path is
#:   used), 0 when not or when the model has no symbolic analysis (the interpreter path,
#:   :func:`theta_jacobian` and :func:`sqr_factor`, is used instead);
#: * ``ts (nterms, 4)``: ``tw`` with each term's sign folded in (:func:`_signed_weights`),
#:   read by :func:`prog_operands`;
#: * ``ins_dstF (nins, D)``: each instruction's position in the static-pivot LU's array
#:   ``ws.F`` instead of ``ws.Wc`` (:func:`prog_jacobian_lu`; the LU's gather
#:   ``lu_gdst`` composed with ``dst``), ``(0, D)`` for a model without the LU analysis.
RowProgram = namedtuple("RowProgram", ["tw", "rs", "ins_src", "ins_bl", "ins_row", "ins_c",
                                       "ins_dst", "OV", "OR", "OA", "RS", "ok", "ts", "ins_dstF"])


@njit(cache=True)
def _term_weights(ga, p):
    """``tw[t] = [org, w0, w1, w2]``: the origin weight and the local vector
    ``c + p[f1] + p[f2]`` of every operand term, summed in the order of :func:`op_apply`."""
    nt = ga.tm_body.shape[0]
    tw = np.zeros((nt, 4))
    for t in range(nt):
        f1 = ga.tm_f1[t]
        f2 = ga.tm_f2[t]
        tw[t, 0] = ga.tm_org[t]
        for k in range(3):
            w = ga.tm_c[t, k]
            if f1 >= 0:
                w += p[f1 + k]
            if f2 >= 0:
                w += p[f2 + k]
            tw[t, 1 + k] = w
    return tw


@njit(cache=True)
def _signed_weights(ga, tw):
    """``ts[t] = tm_sign[t] tw[t]``: the term weights with each term's sign (+-1) folded
    in, for :func:`prog_operands`.  A sign change is exact and commutes with rounding,
    so ``sum_k (s w_k) x_k = s (sum_k w_k x_k)`` bit for bit."""
    nt = tw.shape[0]
    ts = np.empty((nt, 4))
    for t in range(nt):
        sg = ga.tm_sign[t]
        for k in range(4):
            ts[t, k] = sg * tw[t, k]
    return ts


@njit(cache=True)
def row_program(ga, p, ws):
    """The :data:`RowProgram` of the rows of ``Theta`` for the parameters ``p`` and the
    workspace ``ws`` of :func:`make_ws` (its compact map ``ws.gpos``).  The instructions
    follow :func:`sf_grad` (operand by operand in the order ``o0 (times B), o1 (times A),
    o2, o3``; per term its ``D`` frame-vector slots, then its origin; terms without a body
    or with a zero weight skipped, as :func:`op_grad_w` skips them) and land at the
    positions of ``ws.Wc`` that the gather of :func:`sqr_factor` fills; ``ok[0] = 0`` when
    one lands outside the symbolic pattern or the model has none."""
    D = ga.D
    nqb = ga.nqb
    N = ga.nq
    m = ga.phi_sf.shape[0]
    d = ga.dof_sf.shape[0]
    nops = ga.op_ptr.shape[0] - 1
    tw = _term_weights(ga, p)
    rs = np.zeros(m + d, dtype=np.int64)
    for k in range(m + d):
        rs[k] = ga.phi_sf[k] if k < m else ga.dof_sf[k - m]
    ok = np.ones(1, dtype=np.int64)
    if ws.gpos.shape[0] == 0:
        ok[0] = 0
    # position in the compact working columns ws.Wc of each entry of Theta_q (flat
    # row-major index), -1 outside the symbolic pattern
    pos = np.full((m + d) * N, -1, dtype=np.int64)
    if ok[0] == 1:
        for c in range(ws.gpos.shape[0]):
            pos[ga.sq_gsrc[c]] = ws.gpos[c]
    # with the LU analysis: the position of each entry in the LU's array ws.F (the gather
    # of _lu_numeric, c -> lu_gdst[c]), for prog_jacobian_lu
    lu = ok[0] == 1 and ws.F.shape[0] > 0 and ga.lu_gdst.shape[0] == ws.gpos.shape[0]
    posF = np.full((m + d) * N if lu else 0, -1, dtype=np.int64)
    if lu:
        for c in range(ws.gpos.shape[0]):
            posF[ga.sq_gsrc[c]] = ga.lu_gdst[c]
    # the operands without a body term are constants: a zero component of one gives
    # Jacobian entries that are exact zeros at every q (e.g. the second component of a
    # ground axis (1, 0, 0)); those instructions are dropped (dst = -1), wherever they land
    const = np.ones(nops, dtype=np.bool_)
    for o in range(nops):
        for t in range(ga.op_ptr[o], ga.op_ptr[o + 1]):
            if ga.tm_body[t] >= 0:
                const[o] = False
    ts = _signed_weights(ga, tw)
    CV = np.zeros((nops, 3))
    prog_operands(ga, ts, np.zeros(N), True, CV)
    # count, then fill
    nins = 0
    for k in range(m + d):
        s = rs[k]
        nbl = 1 if ga.sf_kind[s] != SF_ANGLE else 2
        for u in range(2 * nbl):
            o = ga.sf_op[s, u]
            for t in range(ga.op_ptr[o], ga.op_ptr[o + 1]):
                if ga.tm_body[t] < 0:
                    continue
                for kk in range(D):
                    if tw[t, 1 + kk] != 0.0:
                        nins += 1
                if tw[t, 0] != 0.0:
                    nins += 1
    ins_src = np.zeros(nins, dtype=np.int64)
    ins_bl = np.zeros(nins, dtype=np.int64)
    ins_row = np.zeros(nins, dtype=np.int64)
    ins_c = np.zeros(nins)
    ins_dst = np.zeros((nins, D), dtype=np.int64)
    ins_dstF = np.zeros((nins if lu else 0, D), dtype=np.int64)
    n = 0
    for k in range(m + d):
        s = rs[k]
        nbl = 1 if ga.sf_kind[s] != SF_ANGLE else 2
        for u in range(2 * nbl):
            o = ga.sf_op[s, u]
            src = ga.sf_op[s, u ^ 1]       # o0 is multiplied by B = op o1, o1 by A, ...
            for t in range(ga.op_ptr[o], ga.op_ptr[o + 1]):
                b = ga.tm_body[t]
                if b < 0:
                    continue
                s0 = b * nqb
                for slot in range(D + 1):
                    # slots 1..D (the frame vectors) first, then the origin (slot 0)
                    sl = slot + 1 if slot < D else 0
                    w = tw[t, sl]
                    if w == 0.0:
                        continue
                    ins_src[n] = src
                    ins_bl[n] = u // 2
                    ins_row[n] = k
                    ins_c[n] = ts[t, sl]           # the term's sign times w
                    for i in range(D):
                        col = s0 + sl * D + i
                        ds = pos[k * N + col]
                        if const[src] and CV[src, i] == 0.0:
                            ds = -1
                        elif ds < 0:
                            ok[0] = 0
                        ins_dst[n, i] = ds
                        if lu:
                            ins_dstF[n, i] = -1 if ds < 0 else posF[k * N + col]
                    n += 1
    return RowProgram(tw, rs, ins_src, ins_bl, ins_row, ins_c, ins_dst, np.zeros((nops, 3)),
                      np.zeros((nops, 3)), np.zeros((nops, 3)), np.zeros((m + d, 2)), ok, ts,
                      ins_dstF)


@njit(cache=True)
def prog_operands(ga, ts, x, affine, out):
    """``out[o, :D]`` = every operand applied to ``x`` (:func:`op_apply` with the signed
    term weights ``ts`` of :func:`row_program`: the same numbers, see
    :func:`_signed_weights`; each term's products summed in the order of
    :func:`op_apply`), with the ground terms when ``affine`` (values at ``q``), without
    them for rates along ``qd``.  One loop per dimension (the ``D`` test outside the
    loops)."""
    nqb = ga.nqb
    nops = ga.op_ptr.shape[0] - 1
    if ga.D == 3:
        for o in range(nops):
            v0 = 0.0
            v1 = 0.0
            v2 = 0.0
            for t in range(ga.op_ptr[o], ga.op_ptr[o + 1]):
                b = ga.tm_body[t]
                w0 = ts[t, 1]
                w1 = ts[t, 2]
                w2 = ts[t, 3]
                if b < 0:
                    if affine:
                        v0 += w0
                        v1 += w1
                        v2 += w2
                    continue
                s0 = b * nqb
                og = ts[t, 0]
                v0 += og * x[s0] + w0 * x[s0 + 3] + w1 * x[s0 + 6] + w2 * x[s0 + 9]
                v1 += og * x[s0 + 1] + w0 * x[s0 + 4] + w1 * x[s0 + 7] + w2 * x[s0 + 10]
                v2 += og * x[s0 + 2] + w0 * x[s0 + 5] + w1 * x[s0 + 8] + w2 * x[s0 + 11]
            out[o, 0] = v0
            out[o, 1] = v1
            out[o, 2] = v2
    else:
        for o in range(nops):
            v0 = 0.0
            v1 = 0.0
            for t in range(ga.op_ptr[o], ga.op_ptr[o + 1]):
                b = ga.tm_body[t]
                w0 = ts[t, 1]
                w1 = ts[t, 2]
                if b < 0:
                    if affine:
                        v0 += w0
                        v1 += w1
                    continue
                s0 = b * nqb
                og = ts[t, 0]
                v0 += og * x[s0] + w0 * x[s0 + 2] + w1 * x[s0 + 4]
                v1 += og * x[s0 + 1] + w0 * x[s0 + 3] + w1 * x[s0 + 5]
            out[o, 0] = v0
            out[o, 1] = v1
            out[o, 2] = 0.0


@njit(cache=True, inline="always")
def _odot(OA, a, OB, b, D):
    """``OA[a] . OB[b]`` over the first ``D`` components (the order of :func:`_dot`)."""
    s = 0.0
    for i in range(D):
        s += OA[a, i] * OB[b, i]
    return s


@njit(cache=True)
def prog_values(ga, ma, pr, p, t, q, aref, out):
    """:func:`theta_values` by the row program: the operand values at ``q`` into ``pr.OV``
    (kept for :func:`prog_factor`, :func:`prog_va` and :func:`prog_update_aref` at the same
    ``q``), then the value of every row of ``Theta`` into ``out[:, 0]`` (same arithmetic)."""
    prog_operands(ga, pr.ts, q, True, pr.OV)
    prog_rows(ga, ma, pr, p, t, aref, out)


@njit(cache=True)
def prog_rows(ga, ma, pr, p, t, aref, out):
    """The row values of :func:`prog_values` (``out[:, 0]``) from the operand values
    already in ``pr.OV``."""
    D = ga.D
    OV = pr.OV
    rs = pr.rs
    for k in range(rs.shape[0]):
        s = rs[k]
        o0 = ga.sf_op[s, 0]
        o1 = ga.sf_op[s, 1]
        kind = ga.sf_kind[s]
        x = _odot(OV, o0, OV, o1, D)
        y = 0.0
        if kind == SF_ANGLE:
            y = _odot(OV, ga.sf_op[s, 2], OV, ga.sf_op[s, 3], D)
        fk = ga.sf_fK[s]
        v = _sf_value(kind, x, y, ga.sf_K[s], fk, p[fk] if fk >= 0 else 0.0, aref[s])
        if ga.sf_tf[s] >= 0:
            v = _drive(ma, p, ga.sf_tf[s], t, v, 0.0, 0.0)[0]
        out[k, 0] = v


@njit(cache=True)
def prog_update_aref(ga, ma, pr, p, t, aref):
    """:func:`update_aref` from the operand values ``pr.OV`` at ``q`` (:func:`prog_values`)."""
    D = ga.D
    OV = pr.OV
    for s in range(ga.sf_kind.shape[0]):
        if ga.sf_kind[s] == SF_ANGLE:
            x = _odot(OV, ga.sf_op[s, 0], OV, ga.sf_op[s, 1], D)
            y = _odot(OV, ga.sf_op[s, 2], OV, ga.sf_op[s, 3], D)
            v = _sf_value(SF_ANGLE, x, y, 0.0, -1, 0.0, aref[s])
            if ga.sf_tf[s] >= 0:
                v = _redrive(ma, p, ga.sf_tf[s], t, v)
            aref[s] = v


@njit(cache=True)
def _prog_row_scales(ga, pr):
    """The row scales of :func:`sf_grad` at the ``q`` of ``pr.OV`` into ``pr.RS``."""
    D = ga.D
    OV, RS, rs = pr.OV, pr.RS, pr.rs
    for k in range(rs.shape[0]):
        s = rs[k]
        kind = ga.sf_kind[s]
        x = 0.0
        y = 0.0
        if kind != SF_BIL:
            x = _odot(OV, ga.sf_op[s, 0], OV, ga.sf_op[s, 1], D)
        if kind == SF_ANGLE:
            y = _odot(OV, ga.sf_op[s, 2], OV, ga.sf_op[s, 3], D)
        RS[k, 0], RS[k, 1] = _grad_scales(kind, x, y, 1.0)


@njit(cache=True, inline="always")
def _prog_jacobian_into(ga, pr, dst, W, gpos, n):
    """The row scales (:func:`_prog_row_scales`), ``W`` zeroed, the instructions of
    :func:`row_program` in order, each into its position ``dst`` of ``W``; returns the
    largest column norm of the matrix gathered in ``W`` (entry ``c`` of column ``j`` at
    ``W[gpos[c]]``, ``c`` in ``sq_gptr[j] .. sq_gptr[j + 1]``), as :func:`sqr_factor`
    computes it."""
    _prog_row_scales(ga, pr)
    W[:] = 0.0
    D = ga.D
    OV, RS = pr.OV, pr.RS
    src, bl, row, cc = pr.ins_src, pr.ins_bl, pr.ins_row, pr.ins_c
    for e in range(src.shape[0]):
        g = RS[row[e], bl[e]] * cc[e]
        o = src[e]
        for i in range(D):
            ds = dst[e, i]
            if ds >= 0:
                W[ds] += g * OV[o, i]
    gptr = ga.sq_gptr
    scale = 0.0
    for j in range(n):
        s = 0.0
        for c in range(gptr[j], gptr[j + 1]):
            x = W[gpos[c]]
            s += x * x
        scale = max(scale, np.sqrt(s))
    return scale


@njit(cache=True)
def prog_jacobian(ga, pr, ws):
    """``Theta_q`` at the ``q`` of ``pr.OV`` written straight into the working columns
    ``ws.Wc`` of the symbolic QR (the gather of :func:`sqr_factor` without the dense
    ``Theta_q``): the row scales of :func:`sf_grad` into ``pr.RS``, ``ws.Wc`` (every
    position the factorisation can fill) zeroed, then the instructions of
    :func:`row_program` in order.  Returns the largest column norm (as :func:`sqr_factor`
    computes it)."""
    return _prog_jacobian_into(ga, pr, pr.ins_dst, ws.Wc, ws.gpos, ws.Rm.shape[0])


@njit(cache=True)
def prog_jacobian_lu(ga, pr, ws):
    """:func:`prog_jacobian` into the LU's array ``ws.F`` instead of the QR's working
    columns (``pr.ins_dstF``: each instruction's position there; the entries the LU fills
    in stay zero): the same sums in the same order, so ``ws.F`` holds what the gather of
    ``ws.Wc`` into it gave, without the QR's working columns (2161 entries on the buggy,
    against the 863 of ``Theta_q``) being zeroed and read.  Returns the largest column
    norm (the same number)."""
    return _prog_jacobian_into(ga, pr, pr.ins_dstF, ws.F, ga.lu_gdst, ws.Rm.shape[0])


@njit(cache=True)
def prog_factor(ga, pr, ws, rtol):
    """:func:`sqr_factor` of ``Theta_q`` at the ``q`` of ``pr.OV`` (the program path;
    ``pr.ok[0]`` must be 1).  A model with the static-pivot LU analysis (square
    ``Theta_q``) is factorised by the LU (:func:`prog_jacobian_lu`, :func:`_lu_numeric`,
    ``ws.flags[FL_MODE] = MODE_LU``; the solves then read it), and by the QR
    (:func:`prog_jacobian`, :func:`_sqr_numeric`) when a pivot fails its check or there is
    no LU analysis."""
    if pr.ins_dstF.shape[0] == pr.ins_dst.shape[0] and ws.F.shape[0] > 0:
        scale = prog_jacobian_lu(ga, pr, ws)
        if _lu_numeric(ga, ws, scale, rtol):
            ws.flags[FL_MODE] = MODE_LU
            ws.flags[FL_LU] += 1
            return -1
    scale = prog_jacobian(ga, pr, ws)
    return _sqr_numeric(ga, ws, scale, rtol)


@njit(cache=True)
def prog_va(ga, ma, pr, p, t, qd, out):
    """:func:`theta_va` by the row program: the operand rates along ``qd`` into ``pr.OR``,
    with the operand values ``pr.OV`` at ``q`` (:func:`prog_values`); same arithmetic."""
    prog_operands(ga, pr.ts, qd, False, pr.OR)
    prog_va_rows(ga, ma, pr, p, t, out)


@njit(cache=True)
def prog_va_rows(ga, ma, pr, p, t, out):
    """The row rates and accelerations of :func:`prog_va` from the operand values and
    rates already in ``pr.OV``, ``pr.OR``."""
    D = ga.D
    OV, OR = pr.OV, pr.OR
    rs = pr.rs
    for k in range(rs.shape[0]):
        s = rs[k]
        o0 = ga.sf_op[s, 0]
        o1 = ga.sf_op[s, 1]
        kind = ga.sf_kind[s]
        x = _odot(OV, o0, OV, o1, D)
        xd = _odot(OR, o0, OV, o1, D) + _odot(OV, o0, OR, o1, D)
        xdd = 2.0 * _odot(OR, o0, OR, o1, D)
        y = yd = ydd = 0.0
        if kind == SF_ANGLE:
            o2 = ga.sf_op[s, 2]
            o3 = ga.sf_op[s, 3]
            y = _odot(OV, o2, OV, o3, D)
            yd = _odot(OR, o2, OV, o3, D) + _odot(OV, o2, OR, o3, D)
            ydd = 2.0 * _odot(OR, o2, OR, o3, D)
        vd, vdd = _sf_rates(kind, x, xd, xdd, y, yd, ydd)
        if ga.sf_tf[s] >= 0:
            v, vd, vdd = _drive(ma, p, ga.sf_tf[s], t, 0.0, vd, vdd)
        out[k, 1] = vd
        out[k, 2] = vdd


@njit(cache=True)
def solve_position_p(ga, ma, pr, p, t, zi, q, aref, ws, tol, maxit, reuse, fresh):
    """:func:`solve_position` by the row program (:func:`prog_values`, :func:`prog_factor`,
    :func:`prog_update_aref`; ``pr.ok[0]`` must be 1): the same Newton-Raphson iteration and
    the same arithmetic.  ``fresh``: ``pr.OV`` already holds the operand values at ``q``
    (left by the previous call, ``q`` unchanged since), so the first residual evaluates the
    rows alone (:func:`prog_rows`; the same values).  On return ``pr.OV`` holds the operand
    values at the final ``q``."""
    J = ws.jets
    N = q.shape[0]
    m = ga.phi_sf.shape[0]
    d = ga.dof_sf.shape[0]
    res = ws.res
    dq = ws.dq
    err_prev = np.inf
    err = 0.0
    for it in range(maxit + 1):
        if it == 0 and fresh:
            prog_rows(ga, ma, pr, p, t, aref, J)
        else:
            prog_values(ga, ma, pr, p, t, q, aref, J)
        err = 0.0
        for k in range(m + d):
            res[k] = J[k, 0]
            if k >= m:
                res[k] -= zi[k - m]
            err = max(err, abs(res[k]))
        if not np.isfinite(err):
            return MR.ST_NONFINITE, it, err, -1
        if err <= tol:
            prog_update_aref(ga, ma, pr, p, t, aref)
            return MR.OK, it, err, -1
        if it == maxit:
            break
        if not (reuse and err <= 0.1 * err_prev):
            bad = prog_factor(ga, pr, ws, 1e-12)
            if bad >= 0:
                return MR.ST_SINGULAR, it, err, bad
        err_prev = err
        for k in range(m + d):
            res[k] = -res[k]
        sqr_solve(ga, ws, res, dq)
        for k in range(N):
            q[k] += dq[k]
    return MR.ST_POSITION, maxit, err, -1


@njit(cache=True)
def solve_va_step_p(ga, ma, pr, p, t, zdi, a, q, qd, qdd, Rphi, ws, with_R, rhs, J,
                    refactor=True):
    """:func:`solve_va_step` by the row program at the converged position ``q`` whose
    operand values ``pr.OV`` :func:`solve_position_p` left (``pr.ok[0]`` must be 1): the
    Jacobian straight into the QR's working columns (:func:`prog_factor`) and the
    accelerations' right-hand side from :func:`prog_va`; the same systems and the same
    arithmetic (``refactor`` as there).  Returns (status, bad)."""
    m = ga.phi_sf.shape[0]
    d = ga.dof_sf.shape[0]
    if refactor:
        bad = prog_factor(ga, pr, ws, 1e-12)
        if bad >= 0:
            return MR.ST_SINGULAR, bad
    theta_va_rest(ga, ma, p, t, J)
    for k in range(m):
        rhs[k] = -J[k, 1]
    for k in range(d):
        rhs[m + k] = zdi[k]
    sqr_solve(ga, ws, rhs, qd)
    prog_va(ga, ma, pr, p, t, qd, J)
    for k in range(m + d):
        rhs[k] = -J[k, 2]
    for k in range(d):
        rhs[m + k] += a[k]
    sqr_solve(ga, ws, rhs, qdd)
    if with_R:
        sqr_solve_units(ga, ws, m, Rphi)
    return MR.OK, -1


@njit(cache=True)
def predict_frames(ga, cq, cqd, cqdd, h, q):
    """The position predictor of a step of length ``h`` from the node ``cq, cqd, cqdd`` in
    natural coordinates: every body's origin by the Taylor polynomial
    ``r_n + h rd_n + h^2/2 rdd_n`` and its frame vectors by the rotation
    ``exp([theta]) u_n`` with ``theta = h omega_n + h^2/2 alpha_n``, the angular velocity
    and acceleration read off the node's frame rates (:func:`angvel_bil`: ``omega = 1/2
    sum_k u_k x ud_k``, ``alpha = 1/2 sum_k u_k x udd_k``; in a planar model the in-plane
    angle, averaged over both frame vectors).  The frame
    vectors stay orthonormal, so a wheel that turns about 1 rad per step starts on its
    rigid-body constraints (the Taylor polynomial leaves them off by ``O(theta^3)``), and
    the position problem's Newton iteration starts close.  The caller adds the move along
    ``R`` (:func:`workbench.integrators.trapezoidal.shift_position`, as
    :func:`~workbench.integrators.trapezoidal.predict_position` does for the semi-recursive
    loop).  ``q`` may be ``cq`` (each body read before it is written)."""
    D = ga.D
    nqb = ga.nqb
    h2 = 0.5 * h * h
    for b in range(ga.nb):
        s0 = b * nqb
        for i in range(D):
            q[s0 + i] = cq[s0 + i] + h * cqd[s0 + i] + h2 * cqdd[s0 + i]
        if D == 3:
            # theta = h omega + h^2/2 alpha, omega and alpha the bilinear form of
            # angvel_bil with the frame vectors' rates and accelerations
            t0 = h * angvel_bil(ga, b, 0, False, cq, cqd)
            t0 += h2 * angvel_bil(ga, b, 0, False, cq, cqdd)
            t1 = h * angvel_bil(ga, b, 1, False, cq, cqd)
            t1 += h2 * angvel_bil(ga, b, 1, False, cq, cqdd)
            t2 = h * angvel_bil(ga, b, 2, False, cq, cqd)
            t2 += h2 * angvel_bil(ga, b, 2, False, cq, cqdd)
            ang2 = t0 * t0 + t1 * t1 + t2 * t2
            if ang2 < 1e-8:
                c1 = 1.0 - ang2 / 6.0
                c2 = 0.5 - ang2 / 24.0
            else:
                ang = np.sqrt(ang2)
                c1 = np.sin(ang) / ang
                c2 = (1.0 - np.cos(ang)) / ang2
            for k in range(3):
                o = s0 + 3 + 3 * k
                u0, u1, u2 = cq[o], cq[o + 1], cq[o + 2]
                x0 = t1 * u2 - t2 * u1
                x1 = t2 * u0 - t0 * u2
                x2 = t0 * u1 - t1 * u0
                y0 = t1 * x2 - t2 * x1
                y1 = t2 * x0 - t0 * x2
                y2 = t0 * x1 - t1 * x0
                q[o] = u0 + c1 * x0 + c2 * y0
                q[o + 1] = u1 + c1 * x1 + c2 * y1
                q[o + 2] = u2 + c1 * x2 + c2 * y2
        else:
            wx = 0.0
            ex = 0.0
            for k in range(2):
                o = s0 + 2 + 2 * k
                wx += cq[o] * cqd[o + 1] - cq[o + 1] * cqd[o]
                ex += cq[o] * cqdd[o + 1] - cq[o + 1] * cqdd[o]
            th = 0.5 * (h * wx + h2 * ex)
            cs = np.cos(th)
            sn = np.sin(th)
            for k in range(2):
                o = s0 + 2 + 2 * k
                u0, u1 = cq[o], cq[o + 1]
                q[o] = cs * u0 - sn * u1
                q[o + 1] = sn * u0 + cs * u1


@njit(cache=True)
def prog_jet(ga, ma, pr, p, s, t, aref, out):
    """The value, rate and acceleration entries (``out[0:3]``) of the jet of scalar function
    ``s`` (:func:`sf_jet` without tangents) from the operand values, rates and
    accelerations ``pr.OV``, ``pr.OR``, ``pr.OA``; same arithmetic."""
    D = ga.D
    OV, OR, OA = pr.OV, pr.OR, pr.OA
    kind = ga.sf_kind[s]
    o0 = ga.sf_op[s, 0]
    o1 = ga.sf_op[s, 1]
    u = _odot(OV, o0, OV, o1, D)
    ud = _odot(OR, o0, OV, o1, D) + _odot(OV, o0, OR, o1, D)
    udd = (_odot(OA, o0, OV, o1, D) + 2.0 * _odot(OR, o0, OR, o1, D)
           + _odot(OV, o0, OA, o1, D))
    y = yd = ydd = 0.0
    if kind == SF_ANGLE:
        o2 = ga.sf_op[s, 2]
        o3 = ga.sf_op[s, 3]
        y = _odot(OV, o2, OV, o3, D)
        yd = _odot(OR, o2, OV, o3, D) + _odot(OV, o2, OR, o3, D)
        ydd = (_odot(OA, o2, OV, o3, D) + 2.0 * _odot(OR, o2, OR, o3, D)
               + _odot(OV, o2, OA, o3, D))
    fk = ga.sf_fK[s]
    v = _sf_value(kind, u, y, ga.sf_K[s], fk, p[fk] if fk >= 0 else 0.0, aref[s])
    vd, vdd = _sf_rates(kind, u, ud, udd, y, yd, ydd)
    if ga.sf_tf[s] >= 0:
        v, vd, vdd = _drive(ma, p, ga.sf_tf[s], t, v, vd, vdd)
    out[0] = v
    out[1] = vd
    out[2] = vdd


@njit(cache=True)
def record_row_p(ga, ma, pr, p, ws, k, t, q, qd, qdd, zi, zdi, a, iters, Vpot, conservative,
                 M, aref, T_out, Q_out, Z_out, ZD_out, ZDD_out, ZI_out, ZDI_out, ZDDI_out,
                 VIOL_out, VVIOL_out, IT_out, E_out, AREF_out):
    """:func:`record_row` by the row program, at the converged ``q`` whose operand values
    ``pr.OV`` the last :func:`solve_position_p` left and whose operand rates ``pr.OR`` the
    last :func:`solve_va_step_p` left: the relative coordinates from
    :func:`prog_jet`, the constraint violations from :func:`prog_rows` and :func:`prog_va_rows`
    (the same values as :func:`theta_jets`), the kinetic energy with the block mass
    product :func:`mass_apply` (the dense ``M @ qd`` before: the same sums, their order
    may differ by BLAS)."""
    J = ws.jets
    T_out[k] = t
    AREF_out[k] = aref
    Q_out[k] = q
    ZI_out[k] = zi
    ZDI_out[k] = zdi
    ZDDI_out[k] = a
    # pr.OR holds the operand rates along qd since the last solve_va_step_p
    prog_va_rows(ga, ma, pr, p, t, J)
    prog_operands(ga, pr.ts, qdd, False, pr.OA)
    jet = np.zeros(3)
    z, zd, zdd = Z_out[k], ZD_out[k], ZDD_out[k]
    for c in range(z.shape[0]):
        s = ga.jc_sf[c]
        if s < 0:
            z[c] = np.nan
            zd[c] = np.nan
            zdd[c] = np.nan
            continue
        prog_jet(ga, ma, pr, p, s, t, aref, jet)
        if ga.sf_tf[s] >= 0:
            jet[0], jet[1], jet[2] = _undrive(ma, p, ga.sf_tf[s], t, jet[0], jet[1], jet[2])
        z[c] = jet[0]
        zd[c] = jet[1]
        zdd[c] = jet[2]
    prog_rows(ga, ma, pr, p, t, aref, J)
    m = ga.phi_sf.shape[0]
    v0 = 0.0
    v1 = 0.0
    for i in range(m):
        v0 = max(v0, abs(J[i, 0]))
        v1 = max(v1, abs(J[i, 1]))
    VIOL_out[k] = v0
    VVIOL_out[k] = v1
    IT_out[k] = iters
    if conservative:
        Mqd = np.empty(q.shape[0])
        mass_apply(ga, M, qd, Mqd)
        E_out[k] = 0.5 * (qd @ Mqd) + Vpot


@njit(cache=True)
def zero_length_spring_p(ga, ma, pr):
    """:func:`zero_length_spring` from the operand values ``pr.OV`` at ``q`` (the points of
    the springs are operands ``ga.pt_op``): the index of the first point-to-point spring
    whose two points coincide, or -1; the same test without temporaries."""
    D = ga.D
    OV = pr.OV
    for s in range(ma.sp_pt.shape[0]):
        o1 = ga.pt_op[ma.sp_pt[s, 0]]
        o2 = ga.pt_op[ma.sp_pt[s, 1]]
        L2 = 0.0
        for i in range(D):
            x = OV[o2, i] - OV[o1, i]
            L2 += x * x
        if L2 == 0.0:
            return s
    return -1
