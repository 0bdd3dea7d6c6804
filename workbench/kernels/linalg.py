"""Dense linear algebra of small sizes (numba, no allocation in the hot paths): Householder
QR least squares (the factorisation of the leading matrix ``Theta_z = [Phi_z; B]``, seed 001
eqs 16-17), its transpose solve, LU solves of the projected mass and iteration matrices, and
the condition estimate ``sigma_min / sigma_max`` of a triangular factor."""

from __future__ import annotations

import numpy as np
from numba import njit, types

from workbench.kernels import layout as AR

# stack temporaries of constant shape (no allocation in the hot kernels)
_S64 = AR.scratch(64)
_S256 = AR.scratch(256)
_I64 = AR.scratch(64, dtype=types.int64)
_I512 = AR.scratch(512, dtype=types.int64)


@njit(cache=True)
def qr_factor(A, V, beta, Rm, rtol):
    """Householder QR of ``A`` (mr x n, mr >= n), working on the transpose so that every
    column operation is on contiguous memory.  ``V`` (n x mr) receives the Householder
    vectors, ``Rm`` (n x n) the triangular factor.  Returns the index of the first column
    whose diagonal entry is below ``rtol`` times the largest column norm, or -1."""
    mr, n = A.shape
    W = A.T.copy()
    scale = 0.0
    for j in range(n):
        s = 0.0
        for i in range(mr):
            s += W[j, i] * W[j, i]
        scale = max(scale, np.sqrt(s))
    if scale == 0.0:
        scale = 1.0
    bad = -1
    # rows indexed in place (W[k, i], V[k, i]): a row view per column costs an atomic
    # reference-count pair
    for k in range(n):
        nrm = 0.0
        for i in range(k, mr):
            nrm += W[k, i] * W[k, i]
        nrm = np.sqrt(nrm)
        alpha = -nrm if W[k, k] >= 0.0 else nrm
        for i in range(k):
            V[k, i] = 0.0
        vn = 0.0
        for i in range(k, mr):
            V[k, i] = W[k, i]
        V[k, k] -= alpha
        for i in range(k, mr):
            vn += V[k, i] * V[k, i]
        beta[k] = 2.0 / vn if vn > 0.0 else 0.0
        bk = beta[k]
        for j in range(k, n):
            s = 0.0
            for i in range(k, mr):
                s += V[k, i] * W[j, i]
            s *= bk
            if s != 0.0:
                for i in range(k, mr):
                    W[j, i] -= s * V[k, i]
        if abs(W[k, k]) <= rtol * scale and bad < 0:
            bad = k
    for i in range(n):
        for j in range(n):
            Rm[i, j] = W[j, i] if j >= i else 0.0
    return bad


@njit(cache=True)
def qr_solve(V, beta, Rm, b, x):
    """Least-squares solution of ``A x = b`` from :func:`qr_factor`."""
    mr = V.shape[1]
    n = Rm.shape[0]
    if mr <= 64:
        y = _S64()[:mr]
        y[:] = b
    else:
        y = b.copy()
    for k in range(n):
        s = 0.0
        for i in range(k, mr):
            s += V[k, i] * y[i]
        s *= beta[k]
        for i in range(k, mr):
            y[i] -= s * V[k, i]
    for i in range(n - 1, -1, -1):
        s = y[i]
        for j in range(i + 1, n):
            s -= Rm[i, j] * x[j]
        x[i] = s / Rm[i, i]


@njit(cache=True)
def lu_solve_small(A, b):
    """Solve a small dense system by Gaussian elimination with partial pivoting.
    Returns (x, ok); the empty system (``n = 0``, a mechanism without degrees of
    freedom) is solved by the empty vector."""
    n = A.shape[0]
    M = np.empty((n, n))
    x = b.copy()
    ok = lu_solve_inplace(A, x.reshape((n, 1)), M)
    return x, ok


@njit(cache=True)
def lu_solve_inplace(A, X, M):
    """``X <- A^-1 X`` (``X``: n x k, every column with the same pivoting) by Gaussian
    elimination with partial pivoting (:func:`lu_factor_small` into the work array ``M``,
    n x n; ``A`` is not changed; then :func:`lu_solve_factored` per column).  Returns False
    when ``A`` is numerically singular (``X`` is then unchanged); ``n = 0`` is solved
    trivially."""
    n = A.shape[0]
    if n == 0:
        return True
    piv = np.empty(n, dtype=np.int64)
    if not lu_factor_small(A, M, piv):
        return False
    for c in range(X.shape[1]):
        lu_solve_factored(M, piv, X[:, c])
    return True


@njit(cache=True)
def lu_factor_small(A, LU, piv):
    """Gaussian elimination with partial pivoting of ``A`` (n x n, not changed): ``LU``
    receives ``U`` on and above the diagonal and the multipliers of elimination step ``k``
    below it in column ``k``, ``piv[k]`` the row exchanged with row ``k`` at that step
    (rows are exchanged from column ``k`` on, so the multipliers stay where they were
    computed), for :func:`lu_solve_factored`.  Returns False when ``A`` is numerically
    singular (a pivot below ``1e-14`` times its largest entry)."""
    n = A.shape[0]
    if n == 0:
        return True
    scale = 0.0
    for i in range(n):
        for j in range(n):
            LU[i, j] = A[i, j]
            scale = max(scale, abs(A[i, j]))
    if scale == 0.0:
        return False
    for k in range(n):
        p = k
        for i in range(k + 1, n):
            if abs(LU[i, k]) > abs(LU[p, k]):
                p = i
        if abs(LU[p, k]) <= 1e-14 * scale:
            return False
        piv[k] = p
        if p != k:
            for j in range(k, n):
                tmp = LU[k, j]
                LU[k, j] = LU[p, j]
                LU[p, j] = tmp
        for i in range(k + 1, n):
            f = LU[i, k] / LU[k, k]
            if f != 0.0:
                for j in range(k + 1, n):
                    LU[i, j] -= f * LU[k, j]
            LU[i, k] = f
    return True


@njit(cache=True)
def lu_solve_factored(LU, piv, x):
    """``x <- A^-1 x`` from :func:`lu_factor_small` of ``A``."""
    n = LU.shape[0]
    for k in range(n):
        p = piv[k]
        if p != k:
            tmp = x[k]
            x[k] = x[p]
            x[p] = tmp
        for i in range(k + 1, n):
            f = LU[i, k]
            if f != 0.0:
                x[i] -= f * x[k]
    for i in range(n - 1, -1, -1):
        s = x[i]
        for j in range(i + 1, n):
            s -= LU[i, j] * x[j]
        x[i] = s / LU[i, i]


@njit(cache=True)
def lu_solve_factored_columns(LU, piv, X):
    """``X <- A^-1 X`` for every column of ``X`` (n x k) from :func:`lu_factor_small` of
    ``A``: for each column the operations of :func:`lu_solve_factored` in the same order
    (so the same bits), with the ``k`` columns carried together in the inner loops (the
    row operations of the elimination and of the back substitution run over contiguous
    rows of ``X`` instead of one strided solve per column)."""
    n = LU.shape[0]
    k = X.shape[1]
    for c in range(n):
        p = piv[c]
        if p != c:
            for j in range(k):
                tmp = X[c, j]
                X[c, j] = X[p, j]
                X[p, j] = tmp
        for i in range(c + 1, n):
            f = LU[i, c]
            if f != 0.0:
                for j in range(k):
                    X[i, j] -= f * X[c, j]
    for i in range(n - 1, -1, -1):
        for j in range(i + 1, n):
            u = LU[i, j]
            for c in range(k):
                X[i, c] -= u * X[j, c]
        u = LU[i, i]
        for c in range(k):
            X[i, c] = X[i, c] / u


@njit(cache=True)
def lu_solve_transpose_factored(LU, piv, x):
    """``x <- A^-T x`` from :func:`lu_factor_small` of ``A``: the elimination (step ``k``:
    the exchange ``P_k``, then ``E_k = I - l_k e_k^T`` with the multipliers ``l_k`` stored
    below the diagonal of column ``k``) reduces ``A`` to ``U``, so ``A^-T = P_0 E_0^T ...
    P_{n-1} E_{n-1}^T U^-T``."""
    n = LU.shape[0]
    for i in range(n):
        s = x[i]
        for j in range(i):
            s -= LU[j, i] * x[j]
        x[i] = s / LU[i, i]
    for k in range(n - 1, -1, -1):
        s = x[k]
        for i in range(k + 1, n):
            s -= LU[i, k] * x[i]
        x[k] = s
        p = piv[k]
        if p != k:
            tmp = x[k]
            x[k] = x[p]
            x[p] = tmp


@njit(cache=True)
def sigma_ratio(Rm, v):
    """Estimate of ``sigma_min / sigma_max`` of the ``n x n`` triangular factor ``Rm`` of
    :func:`qr_factor` (the singular values of ``Theta_z``); ``v`` receives the estimated
    right singular vector of ``sigma_min`` (unit length).

    ``sigma_min``: a LINPACK-style start (``R^T y = e`` with the signs of ``e`` chosen for
    growth) and two inverse iterations on ``R^T R``, then ``|R v|`` (an upper bound, usually
    within a few percent); ``sigma_max``: the largest column norm (within ``sqrt(n)``).
    Cost O(n^2)."""
    n = Rm.shape[0]
    if n == 0:
        return 1.0
    smax = 0.0
    for j in range(n):
        s = 0.0
        for i in range(j + 1):
            s += Rm[i, j] * Rm[i, j]
        smax = max(smax, np.sqrt(s))
    for i in range(n):
        v[i] = 0.0
    if smax == 0.0:
        v[0] = 1.0
        return 0.0
    for i in range(n):
        if abs(Rm[i, i]) <= 1e-300 * smax:
            v[i] = 1.0
            return 0.0
    y = AR.take1(_S64(), n)
    for i in range(n):                      # R^T y = e, e_i = +-1
        s = 0.0
        for j in range(i):
            s += Rm[j, i] * y[j]
        e = 1.0 if s <= 0.0 else -1.0
        y[i] = (e - s) / Rm[i, i]
    for rep in range(3):
        for i in range(n - 1, -1, -1):      # R v = y
            s = y[i]
            for j in range(i + 1, n):
                s -= Rm[i, j] * v[j]
            v[i] = s / Rm[i, i]
        nv = 0.0
        for i in range(n):
            nv += v[i] * v[i]
        nv = np.sqrt(nv)
        if not (nv > 0.0 and np.isfinite(nv)):
            return 0.0
        for i in range(n):
            v[i] /= nv
        if rep == 2:
            break
        for i in range(n):                  # R^T y = v
            s = v[i]
            for j in range(i):
                s -= Rm[j, i] * y[j]
            y[i] = s / Rm[i, i]
    smin = 0.0
    for i in range(n):
        s = 0.0
        for j in range(i, n):
            s += Rm[i, j] * v[j]
        smin += s * s
    return np.sqrt(smin) / smax



@njit(cache=True)
def qr_solve_transpose(V, beta, Rm, c, mu):
    """Minimum-norm solution of ``A^T mu = c`` from :func:`qr_factor` of ``A``
    (``mu = Q [Rm^-T c; 0]``), i.e. ``mu = (A^+)^T c``."""
    mr = V.shape[1]
    n = Rm.shape[0]
    y = _S64()[:mr] if mr <= 64 else np.empty(mr)
    y[:] = 0.0
    for i in range(n):
        s = c[i]
        for j in range(i):
            s -= Rm[j, i] * y[j]
        y[i] = s / Rm[i, i]
    for k in range(n - 1, -1, -1):
        vk = V[k]
        s = 0.0
        for i in range(k, mr):
            s += vk[i] * y[i]
        s *= beta[k]
        for i in range(k, mr):
            y[i] -= s * vk[i]
    for i in range(mr):
        mu[i] = y[i]


@njit(cache=True, inline="always")
def column_pattern(R, ptr, idx):
    """The rows ``idx[ptr[j]:ptr[j + 1]]`` (increasing) where column ``j`` of ``R`` is
    nonzero: a sum over them adds the same products in the same order as the dense sum,
    without the exact zeros."""
    n, d = R.shape
    t = 0
    for j in range(d):
        ptr[j] = t
        for k in range(n):
            if R[k, j] != 0.0:
                idx[t] = k
                t += 1
    ptr[d] = t


@njit(cache=True)
def projected_matrix(Rphi, M, out):
    """``out = Rphi^T M Rphi`` (explicit loops: small sizes, no BLAS call).

    When at most half of the entries of ``Rphi`` are non-zero (``R^Phi`` of an open tree
    is a selection matrix; by coordinate partitioning a closed loop's has the unit rows of
    its DOF coordinates; a QR solve leaves rounding-level entries everywhere) only those
    are visited, in the order of the dense sums: the same numbers."""
    n, d = Rphi.shape
    MR_ = _S256()[:n * d].reshape((n, d)) if n * d <= 256 else np.empty((n, d))
    cnt = 0
    for j in range(d):
        for k in range(n):
            if Rphi[k, j] != 0.0:
                cnt += 1
    if 2 * cnt > n * d:
        for i in range(n):
            for j in range(d):
                s = 0.0
                for k in range(n):
                    s += M[i, k] * Rphi[k, j]
                MR_[i, j] = s
        for i in range(d):
            for j in range(d):
                s = 0.0
                for k in range(n):
                    s += Rphi[k, i] * MR_[k, j]
                out[i, j] = s
        return
    nzk = AR.take1(_I512(), max(cnt, 1))
    ptr = AR.take1(_I64(), d + 1)
    column_pattern(Rphi, ptr, nzk)
    for i in range(n):
        for j in range(d):
            s = 0.0
            for q in range(ptr[j], ptr[j + 1]):
                k = nzk[q]
                s += M[i, k] * Rphi[k, j]
            MR_[i, j] = s
    for i in range(d):
        for j in range(d):
            s = 0.0
            for q in range(ptr[i], ptr[i + 1]):
                k = nzk[q]
                s += Rphi[k, i] * MR_[k, j]
            out[i, j] = s


@njit(cache=True)
def transpose_times(Rphi, v, out):
    """``out = Rphi^T v``."""
    n, d = Rphi.shape
    for j in range(d):
        s = 0.0
        for k in range(n):
            s += Rphi[k, j] * v[k]
        out[j] = s


@njit(cache=True)
def maxabs(x):
    """``max |x_k|`` (0 for an empty vector; NaN when a component is NaN)."""
    s = 0.0
    for v in x:
        if abs(v) > s or v != v:
            s = abs(v)
    return s
