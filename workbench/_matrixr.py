"""Numba kernels of the Matrix-R projection and the implicit trapezoidal integrator.

Seed 001 §2.2-2.3: the position problem ``Theta(z) = [Phi(z); h(z) - z^i] = 0`` (eqs 10-13)
is solved by Newton-Raphson, the velocity and acceleration problems (eqs 19, 21) by the
same leading matrix ``Theta_z = [Phi_z; B]``; ``[S R] = Theta_z^+`` (eqs 16-17, least
squares so that redundant constraints are allowed) and the equations of motion (eq 29)

    (R^T M^d R) zdd^i = R^T (Q^d - M^d (S c - R Bdot zd)).

Here the right-hand side is obtained from one inverse-dynamics evaluation with the
particular accelerations ``zdd_b = S c - R Bdot zd`` (the ``zdd^i = 0`` solution of eq 21):
``R^T tau(z, zd, zdd_b) = -(R^T Q^d - R^T M^d zdd_b)``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from . import _kernels as K
from . import _tire as TY
from . import _arrays as AR

# stack temporaries of constant shape (no allocation in the hot kernels)
_S3 = AR.scratch(3)
_S3x3 = AR.scratch(3, 3)
_S64 = AR.scratch(64)
_S256 = AR.scratch(256)

# status codes returned by the kernels
OK = 0
ST_NEWTON = 1
ST_SINGULAR = 2
ST_POSITION = 3
ST_NONFINITE = 4
ST_MASS = 5
ST_ZERO_SPRING = 6  # a point-to-point spring has zero length (bad = spring index)
ST_NEAR_SINGULAR = 7  # a step failed next to a singular configuration (value = rho)

NOISE_TOL = 1e-7
MAX_SUB = 16

# Near-singular configurations.  rho = sigma_min / sigma_max of the leading matrix
# Theta_z = [Phi_z; B] (estimated by :func:`sigma_ratio`, within a small factor).
# * SING_SKIP: the projected accelerations at a node with rho < SING_SKIP carry rounding
#   noise that grows like u / rho^2 or faster (u = 1.1e-16; measured on the N = 40
#   N-four-bar: relative noise 3e-6 at rho = 2e-5, 3e-3 at rho = 2e-6), and each noisy node
#   changes the energy permanently.  Such a node is skipped: the trapezoidal step is merged
#   with the next one (at most MAX_SPAN output intervals), the skipped output rows are
#   interpolated.
#   Only nodes where the constraints themselves degenerate are skipped (a bifurcation
#   such as the N-four-bar's aligned position, where R stays bounded): the near-null
#   direction v must leave the DOF rows almost unchanged, |B v| < SING_DOF_SHARE |Theta_z v|
#   (see :func:`dof_share`; measured: 1e-5..4e-3 on the N-four-bar, 0.7 at a dead point of
#   a slider-crank with the slider as DOF, where R grows like 1/sigma and the DOF do not
#   determine the motion: such a node is never stepped over).
# * SING_DIAG: a step that fails with every sub-step retry, starting from a state with
#   rho < SING_DIAG, is reported as a singular configuration (ST_NEAR_SINGULAR) rather than
#   as a Newton/position failure: the degrees of freedom no longer determine the motion
#   (e.g. a dead point, where a step ending within h of the singularity fails).
SING_SKIP = 3e-5
SING_DOF_SHARE = 0.1
SING_DIAG = 1e-3
MAX_SPAN = 4

FORM_COM = 0     # SR-I, RTdyn0: centre of mass of each body as reference point
FORM_ORIGIN = 1  # SR-II, RTdyn1: global origin as reference point


# ----------------------------------------------------------------------------------------
# dense least squares (Householder QR), small sizes
# ----------------------------------------------------------------------------------------


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
    elimination with partial pivoting; ``M`` (n x n) is a work array (``A`` is not
    changed).  Returns False when ``A`` is numerically singular (``X`` is then garbage);
    ``n = 0`` is solved trivially."""
    n = A.shape[0]
    nr = X.shape[1]
    if n == 0:
        return True
    scale = 0.0
    for i in range(n):
        for j in range(n):
            M[i, j] = A[i, j]
            scale = max(scale, abs(A[i, j]))
    if scale == 0.0:
        return False
    for k in range(n):
        piv = k
        for i in range(k + 1, n):
            if abs(M[i, k]) > abs(M[piv, k]):
                piv = i
        if abs(M[piv, k]) <= 1e-14 * scale:
            return False
        if piv != k:
            for j in range(n):
                tmp = M[k, j]
                M[k, j] = M[piv, j]
                M[piv, j] = tmp
            for c in range(nr):
                tmp = X[k, c]
                X[k, c] = X[piv, c]
                X[piv, c] = tmp
        for i in range(k + 1, n):
            f = M[i, k] / M[k, k]
            if f != 0.0:
                for j in range(k, n):
                    M[i, j] -= f * M[k, j]
                for c in range(nr):
                    X[i, c] -= f * X[k, c]
    for c in range(nr):
        for i in range(n - 1, -1, -1):
            s = X[i, c]
            for j in range(i + 1, n):
                s -= M[i, j] * X[j, c]
            X[i, c] = s / M[i, i]
    return True


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
    y = np.empty(n)
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
def dof_share(Th, m, v):
    """``|B v| / |Theta_z v|`` for ``Theta_z = [Phi_z; B]`` (``m`` constraint rows): near 0
    when the near-null direction ``v`` is one the constraints hardly resist (their Jacobian
    degenerates: a bifurcation, the DOF still determine the motion), of order 1 when ``v``
    is a motion the constraints allow and the DOF barely measure (a dead point of the
    chosen DOF)."""
    rows = Th.shape[0]
    n = Th.shape[1]
    sb = 0.0
    sa = 0.0
    for i in range(rows):
        s = 0.0
        for j in range(n):
            s += Th[i, j] * v[j]
        sa += s * s
        if i >= m:
            sb += s * s
    if sa == 0.0:
        return 1.0
    return np.sqrt(sb / sa)


# ----------------------------------------------------------------------------------------
# workspace
# ----------------------------------------------------------------------------------------


@njit(cache=True)
def make_workspace(ma, n):
    nf = ma.fr_parent.shape[0]
    m = ma.c_type.shape[0]
    d = ma.dof_type.shape[0]
    nb = ma.b_frame.shape[0]
    return (np.zeros((nf, 3, 3)), np.zeros((nf, 3)), np.zeros((nf, 3)), np.zeros((nf, 6)),
            np.zeros((nf, 6)), np.zeros((nf, 6)), np.zeros((m + d, n)), np.zeros((n, m + d)),
            np.zeros(n), np.zeros((n, n)), np.zeros(m), np.zeros(d), np.zeros(d), np.zeros(d),
            np.zeros((nb, 3)), np.zeros((nb, 3)), np.zeros(n),
            # 17-19: residual and correction of the position problem, a zero n-vector
            np.zeros(m + d), np.zeros(n), np.zeros(n),
            # 20-21: right-hand side and solution column of the velocity problem
            np.zeros(m + d), np.zeros(n),
            # 22-25: SR-I reference points, columns, velocities, accelerations
            np.zeros((nf, 3)), np.zeros((nf, 6)), np.zeros((nf, 6)), np.zeros((nf, 6)))


# The converged state of an output row, kept by the integrator for the sensitivity sweeps
# (``store`` of :func:`integrate_trapezoidal`): a flag (1: the row holds the state), the
# full rates, accelerations and ``tau``, ``R^Phi``, the frame kinematics, the QR factors of
# ``Theta_z``, the applied forces and the SR-I reference-point terms, i.e. everything the
# step Jacobians (:func:`_sens.jacobian_rows`) would otherwise re-evaluate (position
# and velocity problems, inverse dynamics) at that state.  Laid out by :func:`_copy_state`.


@njit(cache=True)
def state_record_size(ma, n):
    """Floats per row of the stored converged states (flag included): the layout of
    :func:`_copy_state`, counted by it."""
    ws = make_workspace(ma, n)
    v = np.zeros(n)
    return _copy_state(v[:0], ws, v, v, v, np.zeros((n, ma.dof_type.shape[0])), 0)


@njit(cache=True, inline="always")
def _copy_state(row, ws, zd, zdd, tau, Rphi, out):
    """Copy between ``row`` and the arrays of a state (``out`` 1: into the row, -1: from
    it, 0: only count), in one fixed layout after the flag (explicit loops: no views are
    made).  Returns the row length."""
    o = 1
    o = _cp1(row, o, zd, out)
    o = _cp1(row, o, zdd, out)
    o = _cp1(row, o, tau, out)
    o = _cp1(row, o, ws[8], out)        # beta
    o = _cp1(row, o, ws[16], out)       # Qj
    o = _cp2(row, o, Rphi, out)
    o = _cp2(row, o, ws[7], out)        # V
    o = _cp2(row, o, ws[9], out)        # Rm
    o = _cp3(row, o, ws[0], out)        # A
    o = _cp2(row, o, ws[1], out)        # r, u, SR-I reference points (nf x 3)
    o = _cp2(row, o, ws[2], out)
    o = _cp2(row, o, ws[22], out)
    o = _cp2(row, o, ws[3], out)        # bcol, Z, Zd, SR-I columns, velocities (nf x 6)
    o = _cp2(row, o, ws[4], out)
    o = _cp2(row, o, ws[5], out)
    o = _cp2(row, o, ws[23], out)
    o = _cp2(row, o, ws[24], out)
    o = _cp2(row, o, ws[25], out)
    o = _cp2(row, o, ws[14], out)       # fb
    o = _cp2(row, o, ws[15], out)       # nb
    return o


@njit(cache=True, inline="always")
def _cp1(row, o, a, out):
    n0 = a.shape[0]
    if out > 0:
        for i in range(n0):
            row[o + i] = a[i]
    elif out < 0:
        for i in range(n0):
            a[i] = row[o + i]
    return o + n0


@njit(cache=True, inline="always")
def _cp2(row, o, a, out):
    n0, n1 = a.shape[0], a.shape[1]
    if out > 0:
        for i in range(n0):
            for j in range(n1):
                row[o + i * n1 + j] = a[i, j]
    elif out < 0:
        for i in range(n0):
            for j in range(n1):
                a[i, j] = row[o + i * n1 + j]
    return o + n0 * n1


@njit(cache=True, inline="always")
def _cp3(row, o, a, out):
    for i in range(a.shape[0]):
        o = _cp2(row, o, a[i], out)
    return o


@njit(cache=True)
def store_state(ws, zd, zdd, tau, Rphi, row):
    """Copy the converged state (see above) into ``row`` and flag it."""
    _copy_state(row, ws, zd, zdd, tau, Rphi, 1)
    row[0] = 1.0


@njit(cache=True, inline="always")
def load_state(row, ws, zd, zdd, tau, Rphi):
    """Restore a state kept by :func:`store_state` into the work arrays; returns False
    (nothing changed) when ``row`` holds none."""
    if row.shape[0] == 0 or row[0] == 0.0:
        return False
    _copy_state(row, ws, zd, zdd, tau, Rphi, -1)
    return True


# ----------------------------------------------------------------------------------------
# kinematic problems
# ----------------------------------------------------------------------------------------


@njit(cache=True)
def factor_theta(ma, p, z, ws):
    """Position kinematics at ``z`` and the QR factorisation of ``Theta_z = [Phi_z; B]``
    left in ``ws``.  Returns the first rank-deficient column or -1."""
    A, r, u, bcol, Z, Zd, Th, V, beta, Rm = ws[:10]
    n = z.shape[0]
    m = ma.c_type.shape[0]
    K.frame_positions(ma, p, z, A, r, u)
    K.joint_columns(ma, r, u, bcol)
    K.constraint_jacobian(ma, p, A, r, bcol, n, Th[:m])
    K.dof_jacobian(ma, p, A, r, bcol, n, Th[m:])
    return qr_factor(Th, V, beta, Rm, 1e-12)


@njit(cache=True)
def solve_position(ma, p, t, zi, z, ws, tol, maxit, reuse):
    """Newton-Raphson on ``Theta(z) = [Phi; h(z) - z^i] = 0`` (seed 001 eqs 10-13).

    With ``reuse`` the factorisation of ``Theta_z`` left in ``ws`` by the previous solve
    (at a nearby configuration) is used as long as the residual contracts by at least a
    factor 10 per iteration (a simplified Newton iteration); otherwise ``Theta_z`` is
    re-evaluated.  Returns (status, iterations, residual, bad column).  On return with
    status OK the position kinematics in ``ws`` correspond to the final ``z``.
    """
    A, r, u, bcol, Z, Zd, Th, V, beta, Rm, phi, h, hd, hdd = ws[:14]
    n = z.shape[0]
    m = ma.c_type.shape[0]
    d = ma.dof_type.shape[0]
    res = ws[17]
    dz = ws[18]
    zero = ws[19]
    Z[:, :] = 0.0
    Zd[:, :] = 0.0
    err = 0.0
    err_prev = np.inf
    for it in range(maxit + 1):
        K.frame_positions(ma, p, z, A, r, u)
        K.constraints(ma, p, t, z, zero, zero, A, r, Z, Zd, 0, phi)
        K.dof_values(ma, p, A, r, Z, Zd, z, zero, zero, h, hd, hdd)
        err = 0.0
        for k in range(m):
            res[k] = phi[k]
            err = max(err, abs(phi[k]))
        for k in range(d):
            res[m + k] = h[k] - zi[k]
            err = max(err, abs(res[m + k]))
        if not np.isfinite(err):
            return ST_NONFINITE, it, err, -1
        if err <= tol:
            return OK, it, err, -1
        if it == maxit:
            break
        if not (reuse and err <= 0.1 * err_prev):
            K.joint_columns(ma, r, u, bcol)
            K.constraint_jacobian(ma, p, A, r, bcol, n, Th[:m])
            K.dof_jacobian(ma, p, A, r, bcol, n, Th[m:])
            bad = qr_factor(Th, V, beta, Rm, 1e-12)
            if bad >= 0:
                return ST_SINGULAR, it, err, bad
        err_prev = err
        for k in range(m + d):
            res[k] = -res[k]
        qr_solve(V, beta, Rm, res, dz)
        for k in range(n):
            z[k] += dz[k]
    return ST_POSITION, maxit, err, -1


@njit(cache=True)
def solve_velocity_acceleration(ma, p, t, zi, zdi, z, zd, zddb, Rphi, ws):
    """Velocity problem (eq 19), particular accelerations ``S c - R Bdot zd`` (eq 21 with
    ``zdd^i = 0``) and ``R^Phi`` (eq 16) at the converged position in ``ws``.

    Returns (status, bad column)."""
    st, bad = factor_r(ma, p, z, Rphi, ws)
    if st != OK:
        return st, bad
    velocity_acceleration(ma, p, t, zi, zdi, z, zd, zddb, ws)
    return OK, -1


@njit(cache=True)
def factor_r(ma, p, z, Rphi, ws):
    """Householder QR of ``Theta_z = [Phi_z; B]`` at the position kinematics in ``ws`` and
    ``R^Phi`` = the last ``d`` columns of ``Theta_z^{-1}`` (seed 001 eq 16).

    Returns (status, bad column)."""
    A, r, u, bcol, Z, Zd, Th, V, beta, Rm = ws[:10]
    n = z.shape[0]
    m = ma.c_type.shape[0]
    d = ma.dof_type.shape[0]
    K.joint_columns(ma, r, u, bcol)
    K.constraint_jacobian(ma, p, A, r, bcol, n, Th[:m])
    K.dof_jacobian(ma, p, A, r, bcol, n, Th[m:])
    bad = qr_factor(Th, V, beta, Rm, 1e-12)
    if bad >= 0:
        return ST_SINGULAR, bad
    rhs = ws[20]
    col = ws[21]
    for j in range(d):
        for k in range(m + d):
            rhs[k] = 0.0
        rhs[m + j] = 1.0
        qr_solve(V, beta, Rm, rhs, col)
        for k in range(n):
            Rphi[k, j] = col[k]
    return OK, -1


@njit(cache=True)
def velocity_acceleration(ma, p, t, zi, zdi, z, zd, zddb, ws):
    """Velocity problem (eq 19) and particular accelerations (eq 21 with ``zdd^i = 0``)
    with the factorisation of ``Theta_z`` left in ``ws`` by :func:`factor_r` at this
    position."""
    A, r, u, bcol, Z, Zd, Th, V, beta, Rm, phi, h, hd, hdd = ws[:14]
    m = ma.c_type.shape[0]
    d = ma.dof_type.shape[0]
    zero = ws[19]
    rhs = ws[20]
    # b = -Phi_t: constraint velocity residual with zd = 0
    Z[:, :] = 0.0
    Zd[:, :] = 0.0
    K.constraints(ma, p, t, z, zero, zero, A, r, Z, Zd, 1, phi)
    for k in range(m):
        rhs[k] = -phi[k]
    for k in range(d):
        rhs[m + k] = zdi[k]
    qr_solve(V, beta, Rm, rhs, zd)
    K.frame_velocities(ma, zd, bcol, Z)
    # c = -(dPhi_z/dt zd + Phi_tt): acceleration residual with zdd = 0
    K.frame_accelerations(ma, zd, zero, r, u, bcol, Z, Zd)
    K.constraints(ma, p, t, z, zd, zero, A, r, Z, Zd, 2, phi)
    K.dof_values(ma, p, A, r, Z, Zd, z, zd, zero, h, hd, hdd)
    for k in range(m):
        rhs[k] = -phi[k]
    for k in range(d):
        rhs[m + k] = -hdd[k]
    qr_solve(V, beta, Rm, rhs, zddb)


@njit(cache=True)
def residual_tau(ma, p, t, z, zd, zdd, ws, form, tau):
    """``tau = M(z) zdd - Q(z, zd, t)`` by the chosen semi-recursive variant.

    Returns the potential energy (gravity and springs)."""
    A, r, u, bcol, Z, Zd = ws[:6]
    fb = ws[14]
    nb_ = ws[15]
    Qj = ws[16]
    nf = ma.fr_parent.shape[0]
    K.frame_velocities(ma, zd, bcol, Z)
    K.frame_accelerations(ma, zd, zdd, r, u, bcol, Z, Zd)
    V = K.applied_forces(ma, p, t, z, zd, A, r, Z, Zd, fb, nb_, Qj)
    if form == FORM_ORIGIN:
        K.inverse_dynamics_origin(ma, p, A, r, bcol, Z, Zd, fb, nb_, Qj, tau)
    else:
        P = ws[22]
        bv = ws[23]
        Vc = ws[24]
        Vdc = ws[25]
        K.reference_points(ma, p, A, r, P)
        K.com_columns(ma, r, u, P, bv)
        K.com_kinematics(ma, zd, zdd, r, u, P, bv, Vc, Vdc)
        K.inverse_dynamics_com(ma, p, A, r, P, bv, Vc, Vdc, fb, nb_, Qj, tau)
    return V


@njit(cache=True)
def mass_matrix(ma, p, ws, form, n, M):
    A, r, u, bcol = ws[:4]
    if form == FORM_ORIGIN:
        K.mass_matrix_origin(ma, p, A, r, bcol, n, M)
    else:
        P = ws[22]
        bv = ws[23]
        K.reference_points(ma, p, A, r, P)
        K.com_columns(ma, r, u, P, bv)
        K.mass_matrix_com(ma, p, A, r, P, bv, n, M)


@njit(cache=True)
def force_jacobians(ma, p, t, z, zd, ws, n, Kd, Cd):
    """Stiffness and damping of the force elements with respect to ``z`` and ``zd``
    (tangent of the spring-damper forces through the point Jacobians; joint springs on
    the diagonal; tires through the analytic Jacobian of the tire law, see below).  Used
    for the Newton iteration matrix of the integrator and by the static-equilibrium
    solver.

    Tires: ``Q = J_m^T F`` with ``J_m`` the Jacobian of the wheel's material point at the
    contact point; ``K -= J_m^T (dF/dc J_c + dF/da J_a)`` and ``C -= J_m^T (dF/dvc J_c +
    dF/dw J_w)`` (``c``: wheel centre, ``a``: spin axis, ``w``: angular velocity).  The
    convective terms ``dF/dvc dvc/dz``, ``dF/dw dw/dz`` and the change of ``J_m`` are
    omitted (like the geometric stiffness of the other elements)."""
    A, r, u, bcol, Z, Zd = ws[:6]
    Kd[:, :] = 0.0
    Cd[:, :] = 0.0
    J1 = np.empty((3, n))
    J2 = np.empty((3, n))
    D = np.empty((3, n))
    x1 = _S3()
    v1 = _S3()
    a1 = _S3()
    x2 = _S3()
    v2 = _S3()
    a2 = _S3()
    e = _S3()
    Ks = _S3x3()
    Cs = _S3x3()
    SD = np.empty((3, n))
    for s in range(ma.sp_pt.shape[0]):
        k1 = ma.sp_pt[s, 0]
        k2 = ma.sp_pt[s, 1]
        K.point_kinematics(ma, p, A, r, Z, Zd, k1, x1, v1, a1)
        K.point_kinematics(ma, p, A, r, Z, Zd, k2, x2, v2, a2)
        L = 0.0
        for i in range(3):
            L += (x2[i] - x1[i]) ** 2
        L = np.sqrt(L)
        Ld = 0.0
        for i in range(3):
            e[i] = (x2[i] - x1[i]) / L
            Ld += e[i] * (v2[i] - v1[i])
        k = p[ma.sp_k[s]]
        c = p[ma.sp_c[s]]
        T = k * (L - p[ma.sp_L0[s]]) + c * Ld
        for i in range(3):
            for j in range(3):
                dij = 1.0 if i == j else 0.0
                Ks[i, j] = k * e[i] * e[j] + T / L * (dij - e[i] * e[j])
                Cs[i, j] = c * e[i] * e[j]
        K.point_jacobian(ma, p, A, r, bcol, k1, J1)
        K.point_jacobian(ma, p, A, r, bcol, k2, J2)
        for i in range(3):
            for c in range(n):
                D[i, c] = J2[i, c] - J1[i, c]
        _add_congruence(D, Ks, Kd, SD)
        _add_congruence(D, Cs, Cd, SD)
    for s in range(ma.js_coord.shape[0]):
        c_ = ma.js_coord[s]
        Kd[c_, c_] += p[ma.js_k[s]]
        Cd[c_, c_] += p[ma.js_c[s]]
    nty = ma.ty_pt.shape[0]
    if nty > 0:
        road = p[ma.rd_fld[0]:ma.rd_fld[0] + ma.rd_fld[1]]
        nX = TY.X_ROAD + road.shape[0]
        JF = np.empty((3, nX))
        JP = np.empty((3, nX))
        Ft = _S3()
        Pt = _S3()
        Jw = np.empty((3, n))
        Jm = np.empty((3, n))
        dFz = np.empty((3, n))
        dFzd = np.empty((3, n))
        for s in range(nty):
            k1 = ma.ty_pt[s]
            b = ma.pt_body[k1]
            f = ma.b_frame[b]
            K.point_kinematics(ma, p, A, r, Z, Zd, k1, x1, v1, a1)
            K.vector_global(ma, A, ma.ty_vc[s], e)
            o = ma.ty_par[s]
            delta, N = TY.tire_force_jacobian(x1, v1, e, Z[f, 3:6], p[o:o + TY.TY_NPAR], road,
                                             Ft, Pt, JF, JP)
            if not delta > 0.0:
                continue
            K.point_jacobian(ma, p, A, r, bcol, k1, J1)
            K.vector_jacobian(ma, A, bcol, ma.ty_vc[s], J2)
            K.omega_jacobian(ma, bcol, b, Jw)
            d0 = Pt[0] - x1[0]
            d1 = Pt[1] - x1[1]
            d2 = Pt[2] - x1[2]
            for c in range(n):
                # material point at P: v = vc + w x (P - c)
                Jm[0, c] = J1[0, c] + Jw[1, c] * d2 - Jw[2, c] * d1
                Jm[1, c] = J1[1, c] + Jw[2, c] * d0 - Jw[0, c] * d2
                Jm[2, c] = J1[2, c] + Jw[0, c] * d1 - Jw[1, c] * d0
                for i in range(3):
                    sz = 0.0
                    szd = 0.0
                    for j in range(3):
                        sz += JF[i, TY.X_C + j] * J1[j, c] + JF[i, TY.X_A + j] * J2[j, c]
                        szd += JF[i, TY.X_VC + j] * J1[j, c] + JF[i, TY.X_W + j] * Jw[j, c]
                    dFz[i, c] = sz
                    dFzd[i, c] = szd
            _sub_atb(Jm, dFz, Kd)
            _sub_atb(Jm, dFzd, Cd)


# ----------------------------------------------------------------------------------------
# implicit trapezoidal integrator
# ----------------------------------------------------------------------------------------


@njit(cache=True)
def _add_congruence(D, S, out, SD):
    """``out += D^T (S D)`` for ``D`` (3 x n), ``S`` (3 x 3); ``SD`` (3 x n) is work space."""
    n = D.shape[1]
    for i in range(3):
        for c in range(n):
            SD[i, c] = S[i, 0] * D[0, c] + S[i, 1] * D[1, c] + S[i, 2] * D[2, c]
    for a in range(n):
        for c in range(n):
            out[a, c] += D[0, a] * SD[0, c] + D[1, a] * SD[1, c] + D[2, a] * SD[2, c]


@njit(cache=True)
def _sub_atb(J, F, out):
    """``out -= J^T F`` for ``J, F`` (3 x n)."""
    n = J.shape[1]
    for a in range(n):
        for c in range(n):
            out[a, c] -= J[0, a] * F[0, c] + J[1, a] * F[1, c] + J[2, a] * F[2, c]


@njit(cache=True)
def _project(Rphi, M, out):
    """``out = Rphi^T M Rphi`` (explicit loops: small sizes, no BLAS call)."""
    n, d = Rphi.shape
    MR_ = _S256()[:n * d].reshape((n, d)) if n * d <= 256 else np.empty((n, d))
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


@njit(cache=True)
def _rt_vec(Rphi, v, out):
    """``out = Rphi^T v``."""
    n, d = Rphi.shape
    for j in range(d):
        s = 0.0
        for k in range(n):
            s += Rphi[k, j] * v[k]
        out[j] = s


@njit(cache=True, nogil=True)
def integrate_trapezoidal(ma, p, form, t0, h, nsteps, zi0, zdi0, z0, newton_tol, newton_maxit,
                          pos_tol, pos_maxit, conservative,
                          T_out, Z_out, ZD_out, ZDD_out, ZI_out, ZDI_out, ZDDI_out,
                          VIOL_out, VVIOL_out, IT_out, E_out, STEP_out, resume, a_init,
                          aprev_init, nplain_init, kofs, KS_out, progress):
    """Fixed-step implicit trapezoidal rule on the independent coordinates.

    Unknown per step: ``a = zdd^i_{n+1}``; ``z^i_{n+1} = z^i_n + h zd^i_n + h^2/4 (a_n + a)``,
    ``zd^i_{n+1} = zd^i_n + h/2 (a_n + a)``; residual ``r(a) = R^T tau(z, zd, zdd)``
    (seed 001 eq 29 in residual form).  Newton iteration matrix (modified Newton, formed
    once per step): ``Mbar + h/2 Cbar + h^2/4 Kbar`` with ``Mbar = R^T M R`` exact and
    ``Cbar, Kbar`` the force-element damping and stiffness projected with ``R``.

    Nodes next to a singular configuration of the constraints (SING_SKIP, SING_DOF_SHARE)
    are not used: the step is merged with the next one and the skipped output rows are
    interpolated (:func:`_dense_output`).  A step that cannot be completed next to a
    singular configuration returns ST_NEAR_SINGULAR (value = sigma_min/sigma_max, bad =
    largest component of the near-null vector).

    ``STEP_out[k] = (span, nsub)`` records how output row ``k`` was reached: ``(1, 1)`` one
    trapezoidal step from row ``k - 1`` (the discrete sensitivities assume this), ``nsub >
    1`` sub-steps, ``span > 1`` a step merged over ``span`` intervals, ``(0, 0)`` a row
    interpolated inside a merged step (the initial row is ``(0, 0)``).

    With ``resume`` the run continues a stored trajectory from one of its rows (adjoint
    checkpointing): the acceleration ``a_init`` of that row is taken as it is (not
    re-solved from ``Mbar a = -Qbar``) and the predictor starts from ``aprev_init`` (3 x d:
    the accelerations of the three previous rows, ``nplain_init`` of them usable), so that
    the re-run reproduces the stored rows bit for bit.  ``kofs`` is the index of the
    first row in the whole run (times are ``t0 + (kofs + k - 1) h + h`` as there).

    ``KS_out`` (rows x :func:`state_record_size`, or 0 columns: nothing kept) receives the
    converged state of every row reached by one plain step (:func:`store_state`; other
    rows, the initial one included, are left unflagged), for the sensitivity sweeps.
    ``progress[0]`` is the number of output rows written so far (rows below it are final):
    the kernel releases the GIL, so that another thread may read the finished rows while
    it runs (the pipelined sensitivities of :mod:`workbench.sensitivity`).

    Returns (status, step, time, value, bad column); on failure ``step`` is the first
    output row not written.
    """
    n = z0.shape[0]
    d = zi0.shape[0]
    # every work array of the run, owned here; the run itself sees views without
    # reference counts (no atomic increments per kernel call; _arrays.borrowed)
    own = (make_workspace(ma, n), np.zeros((13, n)), np.zeros((15, d)),
           np.zeros((n, d)), np.zeros((3, n, n)), np.zeros((6, d, d)))
    out = _integrate(ma, AR.borrow(p), form, t0, h, nsteps, AR.borrow(zi0), AR.borrow(zdi0),
                     AR.borrow(z0), newton_tol, newton_maxit, pos_tol, pos_maxit, conservative,
                     AR.borrow((T_out, Z_out, ZD_out, ZDD_out, ZI_out, ZDI_out, ZDDI_out,
                                VIOL_out, VVIOL_out, IT_out, E_out, STEP_out)),
                     resume, AR.borrow(a_init), AR.borrow(aprev_init), nplain_init, kofs,
                     AR.borrow(KS_out), AR.borrow(progress), AR.borrow(own))
    AR.keepalive(own)
    return out


@njit(cache=True, nogil=True)
def _integrate(ma, p, form, t0, h, nsteps, zi0, zdi0, z0, newton_tol, newton_maxit, pos_tol,
               pos_maxit, conservative, outs, resume, a_init, aprev_init, nplain_init, kofs,
               KS_out, progress, work):
    """The run of :func:`integrate_trapezoidal` with its work arrays ``work`` (borrowed
    views of the arrays it owns)."""
    (T_out, Z_out, ZD_out, ZDD_out, ZI_out, ZDI_out, ZDDI_out, VIOL_out, VVIOL_out, IT_out,
     E_out, STEP_out) = outs
    ws, vn, vd, Rphi, nn, dd = work
    n = z0.shape[0]
    d = zi0.shape[0]
    m = ma.c_type.shape[0]
    # three copies of the state, rows 3s .. 3s + 2 of vn (z, zd, zdd) and of vd (zi, zdi, a):
    # s = 0 the iterate, s = 1 the last accepted node (c...), s = 2 the last output row (...n)
    z, zd, zdd, cz, czd, czdd, zn, zdn, zddn = (vn[0], vn[1], vn[2], vn[3], vn[4], vn[5],
                                                vn[6], vn[7], vn[8])
    zi, zdi, a, czi, czdi, ca, zin, zdin, an = (vd[0], vd[1], vd[2], vd[3], vd[4], vd[5],
                                                vd[6], vd[7], vd[8])
    zddb, tau, vnull, zfac = vn[9], vn[10], vn[11], vn[12]
    res, aprev, aprev2, aprev3, rhs, da = vd[9], vd[10], vd[11], vd[12], vd[13], vd[14]
    Md, Kd, Cd = nn[0], nn[1], nn[2]
    Mb, Tm, Kb, Cb, Mw = dd[0], dd[1], dd[2], dd[3], dd[4]
    z[:] = z0
    zi[:] = zi0
    zdi[:] = zdi0
    t = t0 if kofs == 0 else t0 + (kofs - 1) * h + h

    # ---- initial state: position, velocity, acceleration (Algorithm 1 lines 2-5)
    st, it, err, bad = solve_position(ma, p, t, zi, z, ws, pos_tol, pos_maxit, False)
    if st != OK:
        return st, 0, t, err, bad
    st, bad = solve_velocity_acceleration(ma, p, t, zi, zdi, z, zd, zddb, Rphi, ws)
    if st != OK:
        return st, 0, t, 0.0, bad
    bad = K.zero_length_spring(ma, p, ws[0], ws[1])
    if bad >= 0:
        return ST_ZERO_SPRING, 0, t, 0.0, bad
    Vpot = residual_tau(ma, p, t, z, zd, zddb, ws, form, tau)
    if resume:
        a[:] = a_init
    else:
        mass_matrix(ma, p, ws, form, n, Md)
        _project(Rphi, Md, Mb)
        _rt_vec(Rphi, tau, rhs)
        for k in range(d):
            a[k] = -rhs[k]
        if not lu_solve_inplace(Mb, a.reshape((d, 1)), Mw):
            return ST_MASS, 0, t, 0.0, -1
    for k in range(n):
        zdd[k] = zddb[k]
        for j in range(d):
            zdd[k] += Rphi[k, j] * a[j]
    _record(ma, p, ws, 0, t, z, zd, zdd, zi, zdi, a, 0, Vpot, conservative, T_out, Z_out,
            ZD_out, ZDD_out, ZI_out, ZDI_out, ZDDI_out, VIOL_out, VVIOL_out, IT_out, E_out)
    progress[0] = 1

    _copy_state3(vn, vd, 1, 0)
    _copy_state3(vn, vd, 2, 0)
    # accelerations of the three nodes before ``an`` (for the predictor), ``nplain`` of them
    # usable: reached by plain steps of length h
    aprev[:] = a
    aprev2[:] = a
    aprev3[:] = a
    nplain = 0
    if resume:
        aprev[:] = aprev_init[0]
        aprev2[:] = aprev_init[1]
        aprev3[:] = aprev_init[2]
        nplain = nplain_init
    vnull[:] = 0.0
    # the factorisation of Theta_z and R^Phi in ws/Rphi are those at zfac while fac_ok
    zfac[:] = z
    fac_ok = True
    k0 = 0                               # last output row written
    while k0 < nsteps:
        # Attempts, from the state of row k0 (an, zin, ...):
        # * merging phase: one trapezoidal step over ``span`` output intervals.  If its end
        #   node is next to a singular configuration (rho = sigma_min/sigma_max of Theta_z
        #   below SING_SKIP, or Theta_z singular) the node is not used: the step is merged
        #   with the next one (span + 1, at most MAX_SPAN); skipped rows are interpolated.
        # * if a merged step fails: back to one interval, retried on Newton/position
        #   failure as 2, 4, ... MAX_SUB equal sub-steps (outputs stay at the fixed step h).
        # Other failures end the run; so does a failure with MAX_SUB sub-steps, reported
        # as a singular configuration when rho < SING_DIAG at the last accepted state.
        span = 1
        nsub = 1
        merging = True
        bad = -1
        err = 0.0
        rn = 0.0
        iters_total = 0
        while True:
            _copy_state3(vn, vd, 1, 2)
            status = OK
            iters_total = 0
            hs = span * h / nsub
            for sub in range(nsub):
                if sub == nsub - 1:
                    t = t0 + (kofs + k0 + span - 1) * h + h
                else:
                    t = t0 + (kofs + k0) * h + (sub + 1) * hs
                # predictor: the acceleration extrapolated from the last nodes, cubic from
                # four (error O(h^4): ~2 Newton evaluations per step on the five-bar at
                # dt = 1e-3 instead of ~3 with the quadratic one), quadratic from three,
                # linear from two, constant at the first step and in retried sub-steps
                plain = sub == 0 and nsub == 1
                for k in range(d):
                    if plain and span == 1 and nplain >= 3:
                        a[k] = 4.0 * ca[k] - 6.0 * aprev[k] + 4.0 * aprev2[k] - aprev3[k]
                    elif plain and span == 1 and nplain >= 2:
                        a[k] = 3.0 * ca[k] - 3.0 * aprev[k] + aprev2[k]
                    elif plain and nplain >= 1:
                        a[k] = ca[k] + (hs / h) * (ca[k] - aprev[k])
                    else:
                        a[k] = ca[k]
                for k in range(n):
                    z[k] = cz[k] + hs * czd[k] + 0.5 * hs * hs * czdd[k]
                converged = False
                dnorm = np.inf
                rbest = np.inf
                iters = 0
                rn = 0.0
                for it in range(newton_maxit + 1):
                    for k in range(d):
                        zi[k] = czi[k] + hs * czdi[k] + 0.25 * hs * hs * (ca[k] + a[k])
                        zdi[k] = czdi[k] + 0.5 * hs * (ca[k] + a[k])
                    st, pit, err, bad = solve_position(ma, p, t, zi, z, ws, pos_tol, pos_maxit, True)
                    if st != OK:
                        status = st
                        fac_ok = False
                        break
                    if pit == 0 and fac_ok and _same(z, zfac):
                        # the position did not move since Theta_z was factorised and R^Phi
                        # formed (a later Newton iterate: zi moved by h^2/4 da, within the
                        # position tolerance): both are still exact
                        velocity_acceleration(ma, p, t, zi, zdi, z, zd, zddb, ws)
                    else:
                        st, bad = solve_velocity_acceleration(ma, p, t, zi, zdi, z, zd, zddb,
                                                              Rphi, ws)
                        fac_ok = st == OK
                        if st != OK:
                            status = st
                            break
                        zfac[:] = z
                    for k in range(n):
                        zdd[k] = zddb[k]
                        for j in range(d):
                            zdd[k] += Rphi[k, j] * a[j]
                    bad = K.zero_length_spring(ma, p, ws[0], ws[1])
                    if bad >= 0:
                        status = ST_ZERO_SPRING
                        break
                    Vpot = residual_tau(ma, p, t, z, zd, zdd, ws, form, tau)
                    _rt_vec(Rphi, tau, res)
                    rn = _maxabs(res)
                    if d == 0:
                        # no degrees of freedom (fully driven): a kinematic step, no unknown
                        converged = True
                        iters = 0
                        break
                    if not np.isfinite(rn):
                        # non-finite at the predictor: bad input; after updates: divergence
                        status = ST_NONFINITE if it == 0 else ST_NEWTON
                        rn = rbest
                        break
                    anorm = 1.0 + _maxabs(a)
                    # Near singular positions the residual has a rounding-noise floor (the
                    # projection amplifies position round-off by 1/sigma): accept a stagnating
                    # iteration once the correction is below NOISE_TOL relative.
                    if it >= 4 and dnorm <= NOISE_TOL * anorm and rn >= 0.5 * rbest:
                        converged = True
                        iters = it + 1
                        break
                    rbest = min(rbest, rn)
                    if it == newton_maxit:
                        break
                    if it == 0:
                        mass_matrix(ma, p, ws, form, n, Md)
                        force_jacobians(ma, p, t, z, zd, ws, n, Kd, Cd)
                        _project(Rphi, Md, Mb)
                        _project(Rphi, Kd, Kb)
                        _project(Rphi, Cd, Cb)
                        for i in range(d):
                            for j in range(d):
                                Tm[i, j] = Mb[i, j] + 0.5 * hs * Cb[i, j] + 0.25 * hs * hs * Kb[i, j]
                    for k in range(d):
                        da[k] = -res[k]
                    if not lu_solve_inplace(Tm, da.reshape((d, 1)), Mw):
                        status = ST_MASS
                        break
                    dnorm = _maxabs(da)
                    if dnorm <= newton_tol * anorm:
                        # the correction from the current iterate is below the tolerance:
                        # accept the iterate (its state is the one evaluated above)
                        converged = True
                        iters = it + 1
                        break
                    for k in range(d):
                        a[k] += da[k]
                if status == OK and not converged:
                    status = ST_NEWTON
                if status != OK:
                    break
                iters_total += iters
                _copy_state3(vn, vd, 1, 0)
            if merging:
                if d > 0 and span < MAX_SPAN and k0 + span < nsteps:
                    # the last factorisation in ws is Theta_z at the end node (OK) or at the
                    # last iterate (failure)
                    skip = status == ST_SINGULAR
                    if status == OK or status == ST_NEWTON or status == ST_POSITION:
                        skip = (sigma_ratio(ws[9], vnull) < SING_SKIP
                                and dof_share(ws[6], m, vnull) < SING_DOF_SHARE)
                    if skip:
                        span += 1
                        continue
                if status == OK:
                    break
                merging = False
                if span > 1:
                    span = 1
                    continue
            if status == OK:
                break
            if (status == ST_NEWTON or status == ST_POSITION) and nsub < MAX_SUB:
                nsub *= 2
                continue
            if status == ST_NEWTON or status == ST_POSITION:
                # the step cannot be resolved: next to a singular configuration?
                factor_theta(ma, p, cz, ws)
                rho = sigma_ratio(ws[9], vnull)
                if rho < SING_DIAG:
                    return ST_NEAR_SINGULAR, k0 + 1, t, rho, _argmaxabs(vnull)
            return status, k0 + 1, t, (err if status == ST_POSITION else rn), bad
        k1 = k0 + span
        STEP_out[k1, 0] = span
        STEP_out[k1, 1] = nsub
        _record(ma, p, ws, k1, t, z, zd, zdd, zi, zdi, a, iters_total, Vpot, conservative,
                T_out, Z_out, ZD_out, ZDD_out, ZI_out, ZDI_out, ZDDI_out, VIOL_out, VVIOL_out,
                IT_out, E_out)
        if KS_out.shape[1] > 0 and span == 1 and nsub == 1:
            # the state evaluated at the accepted Newton iterate is still in the work arrays
            store_state(ws, zd, zdd, tau, Rphi, KS_out[k1])
        if span > 1:
            # rows skipped by a merged step: interpolated and corrected onto the
            # constraints (output only: the integration continues from the end node)
            H = span * h
            for j in range(1, span):
                tj = t0 + (kofs + k0 + j - 1) * h + h
                st, err, bad, Vj = _dense_output(
                    ma, p, form, tj, j / span, H, an, zin, zdin, zn, zdn, zddn, ca, czi, czdi,
                    cz, czd, czdd, ws, pos_tol, z, zd, zdd, zi, zdi, a, tau)
                if st != OK:
                    return st, k0 + j, tj, err, bad
                _record(ma, p, ws, k0 + j, tj, z, zd, zdd, zi, zdi, a, 0, Vj, conservative,
                        T_out, Z_out, ZD_out, ZDD_out, ZI_out, ZDI_out, ZDDI_out, VIOL_out,
                        VVIOL_out, IT_out, E_out)
            # leave the factorisation of the end node in ws (reused by the next step)
            factor_theta(ma, p, cz, ws)
            fac_ok = False
            t = t0 + (kofs + k1 - 1) * h + h
        if span == 1 and nsub == 1:
            aprev3[:] = aprev2
            aprev2[:] = aprev
            aprev[:] = an
            nplain = min(nplain + 1, 3)
        else:
            nplain = 0
        _copy_state3(vn, vd, 2, 1)
        k0 = k1
        progress[0] = k1 + 1
    return OK, nsteps, t, 0.0, -1


@njit(cache=True)
def _copy_state3(vn, vd, dst, src):
    """Copy the state ``src`` to ``dst`` in the integrator's work arrays (rows ``3s .. 3s +
    2`` of ``vn``: z, zd, zdd and of ``vd``: zi, zdi, a; see :func:`_integrate`)."""
    for i in range(3):
        vn[3 * dst + i, :] = vn[3 * src + i]
        vd[3 * dst + i, :] = vd[3 * src + i]


@njit(cache=True)
def _same(x, y):
    """``x == y`` element by element (bitwise equal floats)."""
    for k in range(x.shape[0]):
        if x[k] != y[k]:
            return False
    return True


@njit(cache=True)
def _maxabs(x):
    s = 0.0
    for v in x:
        if abs(v) > s or v != v:
            s = abs(v)
    return s


@njit(cache=True)
def _argmaxabs(x):
    k = -1
    s = -1.0
    for i in range(x.shape[0]):
        if abs(x[i]) > s:
            s = abs(x[i])
            k = i
    return k


@njit(cache=True)
def _hermite(s, H, y0, dy0, y1, dy1, out):
    s2 = s * s
    s3 = s2 * s
    h00 = 2.0 * s3 - 3.0 * s2 + 1.0
    h10 = (s3 - 2.0 * s2 + s) * H
    h01 = 3.0 * s2 - 2.0 * s3
    h11 = (s3 - s2) * H
    for k in range(out.shape[0]):
        out[k] = h00 * y0[k] + h10 * dy0[k] + h01 * y1[k] + h11 * dy1[k]


@njit(cache=True)
def _damped_correction(Th, res, mu, dx):
    """``dx = argmin |Th dx + res|^2 + mu^2 |dx|^2`` (QR of ``[Th; mu I]``): directions
    with singular values well above ``mu`` are corrected, near-null ones are left alone."""
    rows, n = Th.shape
    Ta = np.zeros((rows + n, n))
    Ta[:rows] = Th
    for i in range(n):
        Ta[rows + i, i] = mu
    Va = np.zeros((n, rows + n))
    ba = np.zeros(n)
    Ra = np.zeros((n, n))
    qr_factor(Ta, Va, ba, Ra, 0.0)
    rhs = np.zeros(rows + n)
    for i in range(rows):
        rhs[i] = -res[i]
    qr_solve(Va, ba, Ra, rhs, dx)


@njit(cache=True)
def _dense_output(ma, p, form, t, s, H, a0, zi0, zdi0, z0, zd0, zdd0, a1, zi1, zdi1, z1,
                  zd1, zdd1, ws, pos_tol, z, zd, zdd, zi, zdi, a, tau):
    """State at the fraction ``s`` of a merged step of length ``H`` between two nodes.

    ``zi, zdi, z`` by cubic Hermite interpolation (with the rates at both nodes: an
    O(H^4) error of ~1e-11 at H = 2e-3 on the N-four-bar), ``a, zdd`` linear.  The
    interpolated ``z`` is corrected onto the constraints by damped least squares (damping
    SING_SKIP * largest column norm of ``Theta_z``): the well-conditioned directions are
    solved to rounding, while the near-null directions of the (near-singular)
    configuration keep their interpolated values, which are more accurate there than a
    Newton solution (error up to tol / sigma_min; the velocities and the energy at a
    near-singular position are very sensitive to it).  ``zd`` solves the velocity problem.
    Output only: the integration continues from the end node.

    Returns (status, residual, bad, potential energy); the kinematics of the state are
    left in ``ws``."""
    A, r, u, bcol, Z, Zd, Th, V, beta, Rm, phi, hh, hd, hdd = ws[:14]
    n = z0.shape[0]
    d = zi0.shape[0]
    m = ma.c_type.shape[0]
    _hermite(s, H, zi0, zdi0, zi1, zdi1, zi)
    _hermite(s, H, zdi0, a0, zdi1, a1, zdi)
    _hermite(s, H, z0, zd0, z1, zd1, z)
    for k in range(d):
        a[k] = (1.0 - s) * a0[k] + s * a1[k]
    for k in range(n):
        zdd[k] = (1.0 - s) * zdd0[k] + s * zdd1[k]
    zero = np.zeros(n)
    res = np.zeros(m + d)
    dx = np.zeros(n)
    err = 0.0
    for it in range(4):
        K.frame_positions(ma, p, z, A, r, u)
        Z[:, :] = 0.0
        Zd[:, :] = 0.0
        K.constraints(ma, p, t, z, zero, zero, A, r, Z, Zd, 0, phi)
        K.dof_values(ma, p, A, r, Z, Zd, z, zero, zero, hh, hd, hdd)
        err = 0.0
        for k in range(m):
            res[k] = phi[k]
            err = max(err, abs(phi[k]))
        for k in range(d):
            res[m + k] = hh[k] - zi[k]
            err = max(err, abs(res[m + k]))
        if not np.isfinite(err):
            return ST_NONFINITE, err, -1, 0.0
        if it == 3:
            break
        K.joint_columns(ma, r, u, bcol)
        K.constraint_jacobian(ma, p, A, r, bcol, n, Th[:m])
        K.dof_jacobian(ma, p, A, r, bcol, n, Th[m:])
        mu = 0.0
        for j in range(n):
            c = 0.0
            for i in range(m + d):
                c += Th[i, j] * Th[i, j]
            mu = max(mu, np.sqrt(c))
        _damped_correction(Th, res, SING_SKIP * mu, dx)
        for k in range(n):
            z[k] += dx[k]
    if err > pos_tol:
        return ST_POSITION, err, -1, 0.0
    # velocity problem (eq 19) at the corrected position: a least-squares solve; its
    # rounding error u |zd| / sigma_min is harmless at velocity level
    K.joint_columns(ma, r, u, bcol)
    K.constraint_jacobian(ma, p, A, r, bcol, n, Th[:m])
    K.dof_jacobian(ma, p, A, r, bcol, n, Th[m:])
    bad = qr_factor(Th, V, beta, Rm, 1e-12)
    if bad >= 0:
        return ST_SINGULAR, 0.0, bad, 0.0
    Z[:, :] = 0.0
    K.constraints(ma, p, t, z, zero, zero, A, r, Z, Zd, 1, phi)
    for k in range(m):
        res[k] = -phi[k]
    for k in range(d):
        res[m + k] = zdi[k]
    qr_solve(V, beta, Rm, res, zd)
    bad = K.zero_length_spring(ma, p, A, r)
    if bad >= 0:
        return ST_ZERO_SPRING, 0.0, bad, 0.0
    Vp = residual_tau(ma, p, t, z, zd, zdd, ws, form, tau)
    return OK, 0.0, -1, Vp


@njit(cache=True)
def _record(ma, p, ws, k, t, z, zd, zdd, zi, zdi, a, iters, Vpot, conservative, T_out, Z_out,
            ZD_out, ZDD_out, ZI_out, ZDI_out, ZDDI_out, VIOL_out, VVIOL_out, IT_out, E_out):
    """Store output row ``k``: state, constraint violations, iterations and energy (the
    kinematics in ``ws`` are those of the state)."""
    A, r, Z, Zd, phi = ws[0], ws[1], ws[4], ws[5], ws[10]
    T_out[k] = t
    Z_out[k] = z
    ZD_out[k] = zd
    ZDD_out[k] = zdd
    ZI_out[k] = zi
    ZDI_out[k] = zdi
    ZDDI_out[k] = a
    K.constraints(ma, p, t, z, zd, zdd, A, r, Z, Zd, 0, phi)
    VIOL_out[k] = _maxabs(phi)
    K.constraints(ma, p, t, z, zd, zdd, A, r, Z, Zd, 1, phi)
    VVIOL_out[k] = _maxabs(phi)
    IT_out[k] = iters
    if conservative:
        E_out[k] = K.kinetic_energy(ma, p, A, r, Z) + Vpot


# ----------------------------------------------------------------------------------------
# single evaluations (used by the Python API and by tests)
# ----------------------------------------------------------------------------------------


@njit(cache=True)
def evaluate_state(ma, p, form, t, zi, zdi, z, pos_tol, pos_maxit):
    """Consistent state at ``(t, z^i, zd^i)``: returns status, z, zd, zdd_b, R, M^d, tau_b,
    Mbar, Qbar.  ``z`` is the starting guess of the position problem."""
    n = z.shape[0]
    d = zi.shape[0]
    ws = make_workspace(ma, n)
    zz = z.copy()
    zd = np.zeros(n)
    zddb = np.zeros(n)
    Rphi = np.zeros((n, d))
    tau = np.zeros(n)
    Md = np.zeros((n, n))
    Mb = np.zeros((d, d))
    st, it, err, bad = solve_position(ma, p, t, zi, zz, ws, pos_tol, pos_maxit, False)
    if st == OK:
        st, bad = solve_velocity_acceleration(ma, p, t, zi, zdi, zz, zd, zddb, Rphi, ws)
    if st == OK:
        bad = K.zero_length_spring(ma, p, ws[0], ws[1])
        if bad >= 0:
            st = ST_ZERO_SPRING
    if st == OK:
        residual_tau(ma, p, t, zz, zd, zddb, ws, form, tau)
        mass_matrix(ma, p, ws, form, n, Md)
        _project(Rphi, Md, Mb)
    Qb = -(Rphi.T @ tau)
    return st, err, bad, zz, zd, zddb, Rphi, Md, tau, Mb, Qb


@njit(cache=True)
def full_dynamics_terms(ma, p, form, t, z, zd, zdd):
    """Open-tree terms at an arbitrary state: mass matrix ``M^d`` and ``tau = M zdd - Q``."""
    n = z.shape[0]
    ws = make_workspace(ma, n)
    A, r, u, bcol = ws[:4]
    K.frame_positions(ma, p, z, A, r, u)
    K.joint_columns(ma, r, u, bcol)
    tau = np.zeros(n)
    Md = np.zeros((n, n))
    residual_tau(ma, p, t, z, zd, zdd, ws, form, tau)
    mass_matrix(ma, p, ws, form, n, Md)
    return Md, tau
