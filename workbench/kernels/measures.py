"""Objective measures at one state and their tangents (numba, array-only): point
positions, velocities and accelerations, angular velocities (global or body frame),
coordinates and their rates, each selected by a measure kind ``MS_*``.  Shared by every
formulation's step Jacobians and by :mod:`workbench.objectives`."""

from __future__ import annotations

from numba import njit

from workbench.kernels import layout as AR
from workbench.kernels import tangents as T
from workbench.kernels import tree as K

# stack temporaries of constant shape (no allocation in the hot kernels)
_S1x6x3 = AR.scratch(1, 6, 3)
_S3 = AR.scratch(3)

# measure kinds; MS_REACTION (the multiplier of one closure equation, seed 000 eq 61) is not
# a function of the kinematics alone: the formulation's step Jacobians and
# :func:`workbench.formulations.semirecursive.step_jacobians.reactions_stored` fill it, the
# kernels of this module leave it at zero
(MS_POS, MS_VEL, MS_ACC, MS_ANGVEL, MS_ANGVEL_BODY, MS_COORD, MS_RATE, MS_COORD_ACC,
 MS_REACTION) = range(9)


@njit(cache=True)
def measures(ma, p, A, r, Z, Zd, z, zd, zdd, ms_type, ms_a, ms_c, out):
    """Values of the objective measures at a state (kinematics in ``A, r, Z, Zd``)."""
    x = _S3()
    v = _S3()
    a = _S3()
    last = -1               # the point whose kinematics x, v, a hold
    for k in range(ms_type.shape[0]):
        typ = ms_type[k]
        i = ms_a[k]
        c = ms_c[k]
        if typ <= MS_ACC:
            if i != last:
                K.point_kinematics(ma, p, A, r, Z, Zd, i, x, v, a)
                last = i
            out[k] = x[c] if typ == MS_POS else (v[c] if typ == MS_VEL else a[c])
        elif typ == MS_ANGVEL:
            out[k] = Z[ma.b_frame[i], 3 + c]
        elif typ == MS_ANGVEL_BODY:
            f = ma.b_frame[i]
            out[k] = A[f, 0, c] * Z[f, 3] + A[f, 1, c] * Z[f, 4] + A[f, 2, c] * Z[f, 5]
        elif typ == MS_COORD:
            out[k] = z[i]
        elif typ == MS_RATE:
            out[k] = zd[i]
        elif typ == MS_COORD_ACC:
            out[k] = zdd[i]
        else:
            out[k] = 0.0


@njit(cache=True, inline="always")
def measures_t(ma, p, dp, A, r, Z, Zd, th, dr, dZ, dZd, dz, dzd, dzdd, ms_type, ms_a, ms_c,
               out, vdir, outA):
    """Tangents of :func:`measures`.  ``vdir`` (a velocity direction ``dzd``, nothing else
    moves): ``outA`` also receives the tangents of the acceleration measures in the
    acceleration direction ``dzdd = dzd`` (the same linear map: a point's velocity is
    ``J zd`` and its acceleration ``J zdd + Jd zd``, so ``da/dzdd = dv/dzd``; other
    measures do not depend on the accelerations: 0)."""
    B = _S1x6x3()
    nm = ms_type.shape[0]
    # the point whose tangents B holds (consecutive measures of one point share them);
    # a point whose measures are all positions needs only its position tangent
    last = -1
    posonly = False
    for k in range(nm):
        typ = ms_type[k]
        i = ms_a[k]
        c = ms_c[k]
        if typ <= MS_ACC:
            if i != last:
                posonly = True
                kk = k
                while kk < nm and ms_type[kk] <= MS_ACC and ms_a[kk] == i:
                    if ms_type[kk] != MS_POS:
                        posonly = False
                    kk += 1
                if posonly:
                    point_pos_t(ma, p, dp, A, r, th, dr, i, B, 0)      # B[0, 1] = dx
                else:
                    T.point_kinematics_tb(ma, p, dp, A, r, Z, Zd, th, dr, dZ, dZd, i, B, 0, True)
                last = i
            if posonly:
                out[k] = B[0, 1, c]
            else:
                out[k] = B[0, 3, c] if typ == MS_POS else (B[0, 4, c] if typ == MS_VEL
                                                           else B[0, 5, c])
            if vdir:
                outA[k] = B[0, 4, c] if typ == MS_ACC else 0.0
        elif typ == MS_ANGVEL:
            out[k] = dZ[ma.b_frame[i], 3 + c]
        elif typ == MS_ANGVEL_BODY:
            f = ma.b_frame[i]
            w0, w1, w2 = th[f, 0], th[f, 1], th[f, 2]
            # column c of A and of dA = [w]x A
            e0 = A[f, 0, c]
            e1 = A[f, 1, c]
            e2 = A[f, 2, c]
            s = ((w1 * e2 - w2 * e1) * Z[f, 3] + (w2 * e0 - w0 * e2) * Z[f, 4]
                 + (w0 * e1 - w1 * e0) * Z[f, 5]
                 + e0 * dZ[f, 3] + e1 * dZ[f, 4] + e2 * dZ[f, 5])
            out[k] = s
        elif typ == MS_COORD:
            out[k] = dz[i]
        elif typ == MS_RATE:
            out[k] = dzd[i]
        elif typ == MS_COORD_ACC:
            out[k] = dzdd[i]
        else:
            out[k] = 0.0
        if vdir and typ > MS_ACC:
            outA[k] = dzd[i] if typ == MS_COORD_ACC else 0.0


@njit(cache=True)
def point_pos_t(ma, p, dp, A, r, th, dr, k, X, s):
    """Rows ``X[s, 0] = x``, ``X[s, 1] = dx`` of point ``k`` (the operations of
    :func:`workbench.kernels.tangents.point_kinematics_tb`); returns its frame, -1 for a
    ground point."""
    b = ma.pt_body[k]
    fld = ma.pt_fld[k]
    if b < 0:
        for i in range(3):
            X[s, 0, i] = p[fld + i]
            X[s, 1, i] = dp[fld + i]
        return -1
    o = ma.b_org[b]
    f = ma.b_frame[b]
    l0 = p[o] + p[fld]
    l1 = p[o + 1] + p[fld + 1]
    l2 = p[o + 2] + p[fld + 2]
    x0 = r[f, 0] + A[f, 0, 0] * l0 + A[f, 0, 1] * l1 + A[f, 0, 2] * l2
    x1 = r[f, 1] + A[f, 1, 0] * l0 + A[f, 1, 1] * l1 + A[f, 1, 2] * l2
    x2 = r[f, 2] + A[f, 2, 0] * l0 + A[f, 2, 1] * l1 + A[f, 2, 2] * l2
    m0 = dp[o] + dp[fld]
    m1 = dp[o + 1] + dp[fld + 1]
    m2 = dp[o + 2] + dp[fld + 2]
    t0 = x0 - r[f, 0]
    t1 = x1 - r[f, 1]
    t2 = x2 - r[f, 2]
    h0, h1, h2 = th[f, 0], th[f, 1], th[f, 2]
    X[s, 0, 0] = x0
    X[s, 0, 1] = x1
    X[s, 0, 2] = x2
    X[s, 1, 0] = dr[f, 0] + h1 * t2 - h2 * t1 + A[f, 0, 0] * m0 + A[f, 0, 1] * m1 + A[f, 0, 2] * m2
    X[s, 1, 1] = dr[f, 1] + h2 * t0 - h0 * t2 + A[f, 1, 0] * m0 + A[f, 1, 1] * m1 + A[f, 1, 2] * m2
    X[s, 1, 2] = dr[f, 2] + h0 * t1 - h1 * t0 + A[f, 2, 0] * m0 + A[f, 2, 1] * m1 + A[f, 2, 2] * m2
    return f


@njit(cache=True)
def vector_pos_t(ma, A, th, k, X, s):
    """Rows ``X[s, 0] = e``, ``X[s, 1] = de`` of vector ``k`` (as
    :func:`workbench.kernels.tangents.vector_kinematics_tb`); returns its frame, -1 for a
    ground vector."""
    b = ma.vc_body[k]
    if b < 0:
        for i in range(3):
            X[s, 0, i] = ma.vc_val[k, i]
            X[s, 1, i] = 0.0
        return -1
    f = ma.b_frame[b]
    c0, c1, c2 = ma.vc_val[k, 0], ma.vc_val[k, 1], ma.vc_val[k, 2]
    e0 = A[f, 0, 0] * c0 + A[f, 0, 1] * c1 + A[f, 0, 2] * c2
    e1 = A[f, 1, 0] * c0 + A[f, 1, 1] * c1 + A[f, 1, 2] * c2
    e2 = A[f, 2, 0] * c0 + A[f, 2, 1] * c1 + A[f, 2, 2] * c2
    h0, h1, h2 = th[f, 0], th[f, 1], th[f, 2]
    X[s, 0, 0] = e0
    X[s, 0, 1] = e1
    X[s, 0, 2] = e2
    X[s, 1, 0] = h1 * e2 - h2 * e1
    X[s, 1, 1] = h2 * e0 - h0 * e2
    X[s, 1, 2] = h0 * e1 - h1 * e0
    return f


@njit(cache=True, inline="always")
def vector_cot(X, s, f, g0, g1, g2, h0, h1, h2, cZ, cdZ):
    """Add the cotangents of frame ``f``'s twist and twist tangent that a cotangent ``g``
    of the rate ``ed = w x e`` and ``h`` of its tangent ``ded = dw x e + w x de`` of the
    vector in ``X[s]`` (:func:`vector_pos_t`) carry: ``g.ed + h.ded = [0, e x g + de x
    h].Z + [0, e x h].dZ``."""
    if f < 0:
        return
    e0, e1, e2 = X[s, 0, 0], X[s, 0, 1], X[s, 0, 2]
    d0, d1, d2 = X[s, 1, 0], X[s, 1, 1], X[s, 1, 2]
    cZ[f, 3] += (e1 * g2 - e2 * g1) + (d1 * h2 - d2 * h1)
    cZ[f, 4] += (e2 * g0 - e0 * g2) + (d2 * h0 - d0 * h2)
    cZ[f, 5] += (e0 * g1 - e1 * g0) + (d0 * h1 - d1 * h0)
    cdZ[f, 3] += e1 * h2 - e2 * h1
    cdZ[f, 4] += e2 * h0 - e0 * h2
    cdZ[f, 5] += e0 * h1 - e1 * h0


@njit(cache=True, inline="always")
def point_cot(X, s, f, g0, g1, g2, h0, h1, h2, cZ, cdZ):
    """Add the cotangents of frame ``f``'s twist and twist tangent that a cotangent ``g``
    of the velocity ``v = Z_t + w x x`` and ``h`` of its tangent ``dv = dZ_t + dw x x + w
    x dx`` of the point in ``X[s]`` (:func:`point_pos_t`) carry: ``g.v + h.dv =
    [g, x x g + dx x h].Z + [h, x x h].dZ``."""
    if f < 0:
        return
    cZ[f, 0] += g0
    cZ[f, 1] += g1
    cZ[f, 2] += g2
    cdZ[f, 0] += h0
    cdZ[f, 1] += h1
    cdZ[f, 2] += h2
    # the angular parts are those of a vector at x (w x x, dw x x + w x dx)
    vector_cot(X, s, f, g0, g1, g2, h0, h1, h2, cZ, cdZ)

