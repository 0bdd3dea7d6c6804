"""Scalar numba kernels shared by the model description (Python evaluation of time
functions) and the tree kernels."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def smoothstep(t0, t1, y0, y1, t):
    """Quintic (C2) transition from y0 at t0 to y1 at t1."""
    if t <= t0:
        return y0, 0.0, 0.0
    if t >= t1:
        return y1, 0.0, 0.0
    T = t1 - t0
    s = (t - t0) / T
    dy = y1 - y0
    f = y0 + dy * s * s * s * (10.0 - 15.0 * s + 6.0 * s * s)
    fd = dy * 30.0 * s * s * (1.0 - s) * (1.0 - s) / T
    fdd = dy * 60.0 * s * (1.0 - s) * (1.0 - 2.0 * s) / (T * T)
    return f, fd, fdd



@njit(cache=True)
def cam_profile_cs(c, o, N, cu, su):
    """A cam's polar profile ``s(u) = a0 + sum_{k=1..N} (a_k cos(k u) + b_k sin(k u))`` and
    its first three derivatives ``(s, s', s'', s''')`` from ``cu = cos u``, ``su = sin u``
    (``cos(k u)``, ``sin(k u)`` by the angle-addition recursion); the coefficients are
    ``c[o] = a0``, ``c[o + 2k - 1] = a_k``, ``c[o + 2k] = b_k``.  ``d^j/du^j`` of
    ``a cos(k u) + b sin(k u)`` is ``k^j`` times the same form with ``(a, b)`` turned by
    ``j`` quarter turns: ``(b, -a)``, ``(-a, -b)``, ``(-b, a)``.  The profile is linear in
    its coefficients: called with coefficient directions ``dc`` it gives the tangent
    ``(ds, ds', ds'', ds''')`` along them (``ds/da_k = cos(k u)``, ``ds/db_k = sin(k u)``)."""
    s = c[o]
    s1 = 0.0
    s2 = 0.0
    s3 = 0.0
    ck = 1.0
    sk = 0.0
    for k in range(1, N + 1):
        ck, sk = ck * cu - sk * su, sk * cu + ck * su
        a = c[o + 2 * k - 1]
        b = c[o + 2 * k]
        v0 = a * ck + b * sk
        v1 = b * ck - a * sk
        s += v0
        s1 += k * v1
        s2 -= k * k * v0
        s3 -= k * k * k * v1
    return s, s1, s2, s3


@njit(cache=True)
def cam_profile(c, o, N, u):
    """:func:`cam_profile_cs` at the polar angle ``u``."""
    return cam_profile_cs(c, o, N, np.cos(u), np.sin(u))
