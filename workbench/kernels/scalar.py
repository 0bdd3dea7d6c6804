"""Scalar numba kernels shared by the model description (Python evaluation of time
functions) and the tree kernels."""

from __future__ import annotations

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

