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

from collections import namedtuple

import numpy as np
from numba import njit, types

from workbench.forces import spring_laws as SL
from workbench.forces import tire as TY
from workbench.forces import tire_mf as TL
# the reference-point codes of this family, read by the kernels and as MR.FORM_COM, ...
from workbench.formulations.interface import FORM_COM, FORM_ORIGIN  # noqa: F401
from workbench.kernels import layout as AR
from workbench.kernels import tree as K
from workbench.kernels.layout import DOF_COORD
from workbench.kernels.linalg import (lu_factor_small, lu_solve_factored,
                                      lu_solve_factored_columns, lu_solve_transpose_factored,
                                      maxabs, projected_matrix, qr_factor, qr_solve)
# the status codes, re-exported for the callers that read them as MR.OK, MR.ST_... (noqa)
from workbench.kernels.status import (OK, ST_MASS, ST_NEAR_SINGULAR, ST_NEWTON,  # noqa: F401
                                      ST_NONFINITE, ST_POSITION, ST_SINGULAR, ST_ZERO_SPRING)

# stack temporaries of constant shape (no allocation in the hot kernels)
_S3 = AR.scratch(3)
_S3x3 = AR.scratch(3, 3)
_S64 = AR.scratch(64)
_S256 = AR.scratch(256)
# the tire law's Jacobians with respect to its state (force, point, moment: 3 x NX_STATE)
_SX = AR.scratch(3, TY.NX_STATE)
# bounded buffer of the model-sized temporaries (AR.take1/take2; heap arrays beyond it):
# 3 x n Jacobians (n <= 64), n indices.  scratch() returns one helper per shape, and each
# call of it in a kernel is a buffer of its own
_S192 = AR.scratch(192)
_I64 = AR.scratch(64, dtype=types.int64)


# Near-singular configurations.  rho = sigma_min / sigma_max of the leading matrix
# Theta_z = [Phi_z; B] (estimated by :func:`sigma_ratio`, within a small factor).
# * SING_SKIP: the projected accelerations at a node with rho < SING_SKIP carry rounding
#   noise that grows like u / rho^2 or faster (u = 1.1e-16; measured on the N = 40
#   N-four-bar: relative noise 3e-6 at rho = 2e-5, 3e-3 at rho = 2e-6), and each noisy node
#   changes the energy permanently.  Such a node is skipped: the trapezoidal step is merged
#   with the next one (at most trapezoidal.MAX_SPAN output intervals), the skipped output rows are
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


# ----------------------------------------------------------------------------------------
# dense least squares (Householder QR), small sizes
# ----------------------------------------------------------------------------------------


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


#: The per-run work arrays of the semi-recursive kernels (one named field each; ``nf``
#: frames, ``nb`` bodies, ``n`` joint coordinates, ``m`` constraints, ``d`` DOF):
#: frame kinematics ``A`` (nf x 3 x 3 rotations), ``r`` (origins), ``u`` (joint axes),
#: ``bcol`` (joint columns, nf x 6), ``Z``/``Zd`` (frame velocities/accelerations, nf x 6);
#: the leading matrix ``Th`` = Theta_z = [Phi_z; B] ((m + d) x n) and its Householder QR
#: ``V``, ``beta``, ``Rm``; constraint values ``phi`` (m) and DOF values ``h``, ``hd``,
#: ``hdd`` (d); applied forces ``fb``/``nb`` (body forces and moments, nb x 3) and joint
#: forces ``Qj`` (n); the position problem's residual ``pos_res`` and correction ``pos_dz``,
#: a zero n-vector ``zero_n``; the velocity problem's right-hand side ``vel_rhs`` and
#: solution column ``vel_col``; the SR-I (centre of mass) terms ``P`` (reference points),
#: ``bv`` (columns), ``Vc``/``Vdc`` (velocities/accelerations); ``zddb`` (the particular
#: accelerations of a state, used by the step Jacobians); ``moved`` (nf flags: the frames a
#: position correction moved, :func:`solve_position`).
Workspace = namedtuple("Workspace", ["A", "r", "u", "bcol", "Z", "Zd", "Th", "V", "beta", "Rm",
                                     "phi", "h", "hd", "hdd", "fb", "nb", "Qj", "pos_res",
                                     "pos_dz", "zero_n", "vel_rhs", "vel_col", "P", "bv", "Vc",
                                     "Vdc", "zddb", "moved"])


@njit(cache=True)
def make_workspace(ma, n):
    """The per-run kinematic workspace :data:`Workspace` of the semi-recursive kernels."""
    nf = ma.fr_parent.shape[0]
    m = ma.c_type.shape[0]
    d = ma.dof_type.shape[0]
    nb = ma.b_frame.shape[0]
    return Workspace(
        np.zeros((nf, 3, 3)), np.zeros((nf, 3)), np.zeros((nf, 3)), np.zeros((nf, 6)),
        np.zeros((nf, 6)), np.zeros((nf, 6)), np.zeros((m + d, n)), np.zeros((n, m + d)),
        np.zeros(n), np.zeros((n, n)), np.zeros(m), np.zeros(d), np.zeros(d), np.zeros(d),
        np.zeros((nb, 3)), np.zeros((nb, 3)), np.zeros(n),
        np.zeros(m + d), np.zeros(n), np.zeros(n),
        np.zeros(m + d), np.zeros(n),
        np.zeros((nf, 3)), np.zeros((nf, 6)), np.zeros((nf, 6)), np.zeros((nf, 6)),
        np.zeros(n), np.zeros(nf, dtype=np.bool_))


# The converged state of an output row, kept by the integrator for the sensitivity sweeps
# (``store`` of :func:`workbench.integrators.trapezoidal.integrate_semirecursive`): a flag (1: the
# row holds the state), the
# full rates, accelerations and ``tau``, ``R^Phi``, the frame kinematics, the QR factors of
# ``Theta_z``, the applied forces and the SR-I reference-point terms, i.e. everything the
# step Jacobians (:func:`workbench.formulations.semirecursive.step_jacobians.jacobian_rows`) would
# otherwise re-evaluate (position
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
    o = _cp1(row, o, ws.beta, out)        # beta
    o = _cp1(row, o, ws.Qj, out)       # Qj
    o = _cp2(row, o, Rphi, out)
    o = _cp2(row, o, ws.V, out)        # V
    o = _cp2(row, o, ws.Rm, out)        # Rm
    o = _cp3(row, o, ws.A, out)        # A
    o = _cp2(row, o, ws.r, out)        # r, u, SR-I reference points (nf x 3)
    o = _cp2(row, o, ws.u, out)
    o = _cp2(row, o, ws.P, out)
    o = _cp2(row, o, ws.bcol, out)        # bcol, Z, Zd, SR-I columns, velocities (nf x 6)
    o = _cp2(row, o, ws.Z, out)
    o = _cp2(row, o, ws.Zd, out)
    o = _cp2(row, o, ws.bv, out)
    o = _cp2(row, o, ws.Vc, out)
    o = _cp2(row, o, ws.Vdc, out)
    o = _cp2(row, o, ws.fb, out)       # fb
    o = _cp2(row, o, ws.nb, out)       # nb
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
def leading_matrix(ma, p, ws):
    """The leading matrix ``Theta_z = [Phi_z; B]`` (seed 001 eqs 12, 16) into ``ws.Th`` at
    the position kinematics ``ws.A, ws.r, ws.u`` (the joint columns ``ws.bcol`` are formed
    here): the one place it is assembled."""
    m = ma.c_type.shape[0]
    n = ws.Th.shape[1]
    K.joint_columns(ma, ws.r, ws.u, ws.bcol)
    K.constraint_jacobian(ma, p, ws.A, ws.r, ws.bcol, n, ws.Th[:m])
    K.dof_jacobian(ma, p, ws.A, ws.r, ws.bcol, n, ws.Th[m:])


@njit(cache=True)
def factor_theta(ma, p, z, ws):
    """Position kinematics at ``z`` and the QR factorisation of ``Theta_z = [Phi_z; B]``
    left in ``ws``.  Returns the first rank-deficient column or -1."""
    K.frame_positions(ma, p, z, ws.A, ws.r, ws.u)
    leading_matrix(ma, p, ws)
    return qr_factor(ws.Th, ws.V, ws.beta, ws.Rm, 1e-12)


@njit(cache=True)
def solve_position(ma, p, t, zi, z, ws, tol, maxit, reuse, PL=None, same=False):
    """Newton-Raphson on ``Theta(z) = [Phi; h(z) - z^i] = 0`` (seed 001 eqs 10-13).

    With ``reuse`` the factorisation of ``Theta_z`` left in ``ws`` by the previous solve
    (at a nearby configuration) is used as long as the residual contracts by at least a
    factor 10 per iteration (a simplified Newton iteration); otherwise ``Theta_z`` is
    re-evaluated.  Returns (status, iterations, residual, bad column).  On return with
    status OK the position kinematics in ``ws`` correspond to the final ``z``.

    ``PL`` (:func:`partition_factor`): the factorisation is the coordinate partition's LU
    instead of the QR (a singular ``Phi_dep`` returns ST_SINGULAR with bad column -1: the
    caller falls back to the QR).

    ``same``: the caller's promise that ``z`` and the position kinematics in ``ws`` are
    those this function returned OK with last, at the same ``t`` (a later Newton iterate of
    the integrator: only ``z^i`` moved).  The first evaluation then reuses that one's
    constraint values (in ``ws.pos_res``) and DOF values (``ws.h``, which the velocity
    problem rewrites with the same bits).  After a correction only the frames below the
    coordinates it moved are recomputed.  Both give the bits of full evaluations.
    """
    A, r, u, Z, Zd, phi, h, hd, hdd = ws.A, ws.r, ws.u, ws.Z, ws.Zd, ws.phi, ws.h, ws.hd, ws.hdd
    Th, V, beta, Rm = ws.Th, ws.V, ws.beta, ws.Rm
    n = z.shape[0]
    m = ma.c_type.shape[0]
    d = ma.dof_type.shape[0]
    res = ws.pos_res
    dz = ws.pos_dz
    zero = ws.zero_n
    Z[:, :] = 0.0
    Zd[:, :] = 0.0
    err = 0.0
    err_prev = np.inf
    for it in range(maxit + 1):
        if it > 0 or not same:
            if it == 0:
                K.frame_positions(ma, p, z, A, r, u)
            else:
                K.frame_positions(ma, p, z, A, r, u, dz, ws.moved)
            K.constraints(ma, p, t, z, zero, zero, A, r, Z, Zd, 0, phi)
            K.dof_values(ma, p, A, r, Z, Zd, z, zero, zero, h, hd, hdd)
            for k in range(m):
                res[k] = phi[k]
        err = 0.0
        for k in range(m):
            err = max(err, abs(res[k]))
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
            leading_matrix(ma, p, ws)
            if PL is None:
                bad = qr_factor(Th, V, beta, Rm, 1e-12)
                if bad >= 0:
                    return ST_SINGULAR, it, err, bad
            elif not partition_factor(Th, PL):
                return ST_SINGULAR, it, err, -1
        err_prev = err
        for k in range(m + d):
            res[k] = -res[k]
        if PL is None:
            qr_solve(V, beta, Rm, res, dz)
        else:
            partition_solve(ma, Th, PL, res, dz)
        for k in range(n):
            z[k] += dz[k]
    return ST_POSITION, maxit, err, -1


@njit(cache=True)
def full_accelerations(zddb, Rphi, a, zdd):
    """``zdd = zddb + R^Phi zdd^i`` (seed 001 eq 21): the accelerations of every coordinate
    from the particular ones and the DOF accelerations."""
    n, d = Rphi.shape
    for k in range(n):
        s = zddb[k]
        for j in range(d):
            s += Rphi[k, j] * a[j]
        zdd[k] = s


@njit(cache=True)
def coordinate_dofs(ma):
    """Every DOF is a joint coordinate (``B`` a selection of rows of the identity)."""
    for k in range(ma.dof_type.shape[0]):
        if ma.dof_type[k] != DOF_COORD:
            return False
    return True


@njit(cache=True)
def constant_theta(ma):
    """``Theta_z = [Phi_z; B]`` does not depend on ``z``: no constraint equations and every
    DOF a joint coordinate (an open tree), so that ``z^i`` are coordinates of ``z`` and the
    factorisation of ``Theta_z`` and ``R^Phi`` (eq 16) are the same at every position."""
    return ma.c_type.shape[0] == 0 and coordinate_dofs(ma)


@njit(cache=True)
def coordinate_position(ma, p, zi, z, ws):
    """The position problem (eqs 10-13) when :func:`constant_theta` holds: ``z`` takes the
    DOF values ``z^i`` and the position kinematics and joint columns at ``z`` go into
    ``ws``; the factorisation of ``Theta_z`` in ``ws`` stays valid (for
    :func:`velocity_acceleration`)."""
    for k in range(zi.shape[0]):
        z[ma.dof_i[k, 0]] = zi[k]
    K.frame_positions(ma, p, z, ws.A, ws.r, ws.u)
    K.joint_columns(ma, ws.r, ws.u, ws.bcol)


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
    Th, V, beta, Rm = ws.Th, ws.V, ws.beta, ws.Rm
    n = z.shape[0]
    m = ma.c_type.shape[0]
    d = ma.dof_type.shape[0]
    leading_matrix(ma, p, ws)
    bad = qr_factor(Th, V, beta, Rm, 1e-12)
    if bad >= 0:
        return ST_SINGULAR, bad
    if partitioned_r(ma, Th, Rphi):
        return OK, -1
    rhs = ws.vel_rhs
    col = ws.vel_col
    for j in range(d):
        for k in range(m + d):
            rhs[k] = 0.0
        rhs[m + j] = 1.0
        qr_solve(V, beta, Rm, rhs, col)
        for k in range(n):
            Rphi[k, j] = col[k]
    return OK, -1


@njit(cache=True)
def partitioned_r(ma, Th, Rphi):
    """``R^Phi`` (eq 16) by coordinate partitioning when every DOF is a joint coordinate:
    with ``i_j`` the coordinate of DOF ``j`` and the other ``m`` coordinates the dependent
    ones, ``Theta_z R_j = [0; e_j]`` reads ``R[i_k, j] = delta_kj`` and
    ``Phi_dep R[dep, j] = -Phi_z[:, i_j]``: one ``m x m`` LU with partial pivoting instead
    of ``d`` solves with the ``n x n`` QR of ``Theta_z`` (``Th``: its first ``m`` rows are
    ``Phi_z``; :func:`partition_factor`, :func:`partition_r`).  Returns False, ``Rphi``
    untouched, when a DOF is not a coordinate or ``Phi_dep`` is numerically singular (then
    the QR solves form it)."""
    m = ma.c_type.shape[0]
    n = Th.shape[1]
    if not coordinate_dofs(ma):
        return False
    PL = (np.empty(m, dtype=np.int64), np.empty((m, m)), np.empty(m, dtype=np.int64))
    if not _dependent_coords(ma, n, PL[0]) or not partition_factor(Th, PL):
        return False
    partition_r(ma, Th, PL, Rphi)
    return True


@njit(cache=True)
def partition_setup(ma, n, dep):
    """The dependent coordinates into ``dep`` (m): True when every DOF is a joint coordinate
    and the model has closure equations (``Theta_z`` is then block triangular, above)."""
    m = ma.c_type.shape[0]
    d = ma.dof_type.shape[0]
    if m == 0 or not coordinate_dofs(ma) or m + d != n:
        return False
    return _dependent_coords(ma, n, dep)


@njit(cache=True)
def _dependent_coords(ma, n, dep):
    """The ``m`` coordinates that are not a DOF's into ``dep``; False when there are not
    ``m`` of them (redundant closures)."""
    m = ma.c_type.shape[0]
    d = ma.dof_type.shape[0]
    isdof = np.zeros(n, dtype=np.int64)
    for k in range(d):
        isdof[ma.dof_i[k, 0]] = 1
    c = 0
    for k in range(n):
        if isdof[k] == 0:
            if c == m:
                return False
            dep[c] = k
            c += 1
    return c == m


@njit(cache=True)
def partition_factor(Th, PL):
    """LU with partial pivoting of ``Phi_dep`` (the columns ``dep`` of the first ``m`` rows
    of the leading matrix ``Th``) into ``PL``.  False when it is numerically singular."""
    dep, LU, piv = PL
    m = dep.shape[0]
    A = AR.take2(_S256(), m, m)
    for r in range(m):
        for c in range(m):
            A[r, c] = Th[r, dep[c]]
    return lu_factor_small(A, LU, piv)


@njit(cache=True)
def partition_solve(ma, Th, PL, b, x):
    """``Theta_z x = b`` by the factors of :func:`partition_factor` (``b``: m + d)."""
    dep, LU, piv = PL
    m = dep.shape[0]
    d = ma.dof_type.shape[0]
    y = AR.take1(_S64(), m)
    for r in range(m):
        s = b[r]
        for k in range(d):
            s -= Th[r, ma.dof_i[k, 0]] * b[m + k]
        y[r] = s
    lu_solve_factored(LU, piv, y)
    for k in range(d):
        x[ma.dof_i[k, 0]] = b[m + k]
    for c in range(m):
        x[dep[c]] = y[c]


@njit(cache=True)
def partition_r(ma, Th, PL, Rphi):
    """``R^Phi`` (eq 16) by the factors of :func:`partition_factor`."""
    dep, LU, piv = PL
    m = dep.shape[0]
    d = ma.dof_type.shape[0]
    Rphi[:, :] = 0.0
    X = AR.take2(_S256(), m, d)
    for r in range(m):
        for j in range(d):
            X[r, j] = -Th[r, ma.dof_i[j, 0]]
    lu_solve_factored_columns(LU, piv, X)
    for j in range(d):
        Rphi[ma.dof_i[j, 0], j] = 1.0
        for c in range(m):
            Rphi[dep[c], j] = X[c, j]


@njit(cache=True, inline="always")
def _inverse(LU, piv, X):
    """``Phi_dep^-1`` into ``X`` (m x m; the factors of :func:`partition_factor`)."""
    m = X.shape[0]
    for r in range(m):
        for c in range(m):
            X[r, c] = 1.0 if r == c else 0.0
    lu_solve_factored_columns(LU, piv, X)


@njit(cache=True)
def partition_bound(ma, Th, PL, Rphi):
    """A lower bound of ``sigma_min / sigma_max`` of ``Theta_z``: ``1 / (|Theta_z|_F
    |Theta_z^-1|_F)``, with ``Theta_z^-1 = [S R^Phi]`` and ``S`` (the constraint columns:
    ``Phi_dep^-1`` on the dependent rows, zero on the DOF rows) from the factors of
    :func:`partition_factor`.  It is also a lower bound of :func:`sigma_ratio`'s estimate
    (whose ``sigma_min`` is ``|R v| >= sigma_min`` and whose ``sigma_max`` is the largest
    column norm, ``<= |Theta_z|_F``), so a bound above a threshold decides that test."""
    dep, LU, piv = PL
    m = dep.shape[0]
    rows = Th.shape[0]
    n = Th.shape[1]
    d = Rphi.shape[1]
    a = 0.0
    for r in range(rows):
        for c in range(n):
            a += Th[r, c] * Th[r, c]
    b = 0.0
    for c in range(n):
        for j in range(d):
            b += Rphi[c, j] * Rphi[c, j]
    X = AR.take2(_S256(), m, m)
    _inverse(LU, piv, X)
    for i in range(m):
        for r in range(m):
            b += X[r, i] * X[r, i]
    if a == 0.0 or not b > 0.0 or not np.isfinite(b):
        return 0.0
    return 1.0 / np.sqrt(a * b)


@njit(cache=True)
def theta_partitioned(ma, p, ws, PL, tau, mu, S):
    """At a state whose position kinematics are in ``ws``: the leading matrix, the
    partition's LU (:func:`partition_factor`), the constraint columns ``S`` of ``Theta_z^-1
    = [S R^Phi]`` (``Phi_dep^-1`` on the dependent rows, exact zeros on the DOF rows) and
    ``mu = Theta_z^-T tau`` (``Phi_dep^T mu[:m] = tau_dep``, ``mu[m + k] = tau_{i_k} -
    Phi_z[:, i_k] . mu[:m]``): what the step Jacobians take from the QR otherwise.  False
    when ``Phi_dep`` is singular (only the leading matrix is then formed)."""
    leading_matrix(ma, p, ws)
    Th = ws.Th
    if not partition_factor(Th, PL):
        return False
    dep, LU, piv = PL
    m = dep.shape[0]
    S[:, :] = 0.0
    X = AR.take2(_S256(), m, m)
    _inverse(LU, piv, X)
    for i in range(m):
        for c in range(m):
            S[dep[c], i] = X[c, i]
    partition_solve_transpose(ma, Th, PL, tau, mu)
    return True


@njit(cache=True)
def partition_solve_transpose(ma, Th, PL, b, x):
    """``Theta_z^T x = b`` by the factors of :func:`partition_factor` (``x``: m + d):
    ``Phi_dep^T x[:m] = b_dep``, ``x[m + k] = b_{i_k} - Phi_z[:, i_k] . x[:m]``."""
    dep, LU, piv = PL
    m = dep.shape[0]
    d = ma.dof_type.shape[0]
    e = AR.take1(_S64(), m)
    for c in range(m):
        e[c] = b[dep[c]]
    lu_solve_transpose_factored(LU, piv, e)
    for c in range(m):
        x[c] = e[c]
    for k in range(d):
        col = ma.dof_i[k, 0]
        s = b[col]
        for r in range(m):
            s -= Th[r, col] * e[r]
        x[m + k] = s


@njit(cache=True)
def factor_r_lu(ma, p, Rphi, ws, PL):
    """:func:`factor_r` by coordinate partitioning: the leading matrix, the LU of
    ``Phi_dep`` (no QR) and ``R^Phi``.  Returns False when ``Phi_dep`` is singular."""
    leading_matrix(ma, p, ws)
    if not partition_factor(ws.Th, PL):
        return False
    partition_r(ma, ws.Th, PL, Rphi)
    return True


@njit(cache=True)
def velocity_acceleration(ma, p, t, zi, zdi, z, zd, zddb, ws, PL=None):
    """Velocity problem (eq 19) and particular accelerations (eq 21 with ``zdd^i = 0``)
    with the factorisation of ``Theta_z`` left in ``ws`` by :func:`factor_r` at this
    position (``PL``: the coordinate partition's, :func:`factor_r_lu`)."""
    A, r, u, bcol, Z, Zd, phi, h, hd, hdd = (ws.A, ws.r, ws.u, ws.bcol, ws.Z, ws.Zd, ws.phi,
                                             ws.h, ws.hd, ws.hdd)
    V, beta, Rm = ws.V, ws.beta, ws.Rm
    m = ma.c_type.shape[0]
    d = ma.dof_type.shape[0]
    zero = ws.zero_n
    rhs = ws.vel_rhs
    # b = -Phi_t: constraint velocity residual with zd = 0
    Z[:, :] = 0.0
    Zd[:, :] = 0.0
    K.constraints(ma, p, t, z, zero, zero, A, r, Z, Zd, 1, phi)
    for k in range(m):
        rhs[k] = -phi[k]
    for k in range(d):
        rhs[m + k] = zdi[k]
    if PL is None:
        qr_solve(V, beta, Rm, rhs, zd)
    else:
        partition_solve(ma, ws.Th, PL, rhs, zd)
    K.frame_velocities(ma, zd, bcol, Z)
    # c = -(dPhi_z/dt zd + Phi_tt): acceleration residual with zdd = 0
    K.frame_accelerations(ma, zd, zero, r, u, bcol, Z, Zd)
    K.constraints(ma, p, t, z, zd, zero, A, r, Z, Zd, 2, phi)
    K.dof_values(ma, p, A, r, Z, Zd, z, zd, zero, h, hd, hdd)
    for k in range(m):
        rhs[k] = -phi[k]
    for k in range(d):
        rhs[m + k] = -hdd[k]
    if PL is None:
        qr_solve(V, beta, Rm, rhs, zddb)
    else:
        partition_solve(ma, ws.Th, PL, rhs, zddb)


@njit(cache=True)
def residual_tau(ma, p, t, z, zd, zdd, ws, form, tau):
    """``tau = M(z) zdd - Q(z, zd, t)`` by the chosen semi-recursive variant (rods
    exact).

    Returns the potential energy (gravity and springs)."""
    return residual_tau_rods(ma, p, t, z, zd, zdd, ws, form, tau, ws.Zd, K.ROD_EXACT)


@njit(cache=True)
def residual_tau_rods(ma, p, t, z, zd, zdd, ws, form, tau, Zdh, rod_mode):
    """:func:`residual_tau` with the rods' inertia taken as ``rod_mode`` says
    (:func:`workbench.kernels.tree.rod_forces`; ``Zdh``: the frame accelerations of the
    extrapolated relative accelerations, read unless the mode is exact)."""
    A, r, u, bcol, Z, Zd = ws.A, ws.r, ws.u, ws.bcol, ws.Z, ws.Zd
    fb = ws.fb
    nb_ = ws.nb
    Qj = ws.Qj
    K.frame_velocities(ma, zd, bcol, Z)
    K.frame_accelerations(ma, zd, zdd, r, u, bcol, Z, Zd)
    V = K.element_forces(ma, p, t, z, zd, A, r, Z, Zd, fb, nb_, Qj)
    if ma.rd_pt.shape[0] > 0:
        V += K.rod_forces(ma, p, A, r, Z, Zd, Zdh, rod_mode, fb, nb_)
    if form == FORM_ORIGIN:
        K.inverse_dynamics_origin(ma, p, A, r, bcol, Z, Zd, fb, nb_, Qj, tau)
    else:
        P = ws.P
        bv = ws.bv
        Vc = ws.Vc
        Vdc = ws.Vdc
        K.reference_points(ma, p, A, r, P)
        K.com_columns(ma, r, u, P, bv)
        K.com_kinematics(ma, zd, zdd, r, u, P, bv, Vc, Vdc)
        K.inverse_dynamics_com(ma, p, A, r, P, bv, Vc, Vdc, fb, nb_, Qj, tau)
    return V


@njit(cache=True)
def mass_matrix(ma, p, ws, form, n, M, rod_mode=K.ROD_EXACT):
    """The mass matrix ``M(z)`` of the open tree at the position kinematics in ``ws`` by
    the chosen semi-recursive variant, with the rods' share (seed 002 eq 24:
    :func:`workbench.kernels.tree.rod_mass_matrix`; ``rod_mode`` selects the exact,
    partitioned or extrapolated share)."""
    A, r, u, bcol = ws.A, ws.r, ws.u, ws.bcol
    if form == FORM_ORIGIN:
        K.mass_matrix_origin(ma, p, A, r, bcol, n, M)
    else:
        P = ws.P
        bv = ws.bv
        K.reference_points(ma, p, A, r, P)
        K.com_columns(ma, r, u, P, bv)
        K.mass_matrix_com(ma, p, A, r, P, bv, n, M)
    K.rod_mass_matrix(ma, p, A, r, bcol, n, M, rod_mode)


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
    omitted (like the geometric stiffness of the other elements), and so is the aligning
    moment of the Magic Formula law (:func:`workbench.forces.tire_mf.element_wrench_state_jacobian`)."""
    A, r, u, bcol, Z, Zd = ws.A, ws.r, ws.u, ws.bcol, ws.Z, ws.Zd
    Kd[:, :] = 0.0
    Cd[:, :] = 0.0
    J1 = AR.take2(_S192(), 3, n)
    J2 = AR.take2(_S192(), 3, n)
    D = AR.take2(_S192(), 3, n)
    x1 = _S3()
    v1 = _S3()
    a1 = _S3()
    x2 = _S3()
    v2 = _S3()
    a2 = _S3()
    e = _S3()
    Ks = _S3x3()
    Cs = _S3x3()
    SD = AR.take2(_S192(), 3, n)
    cols = AR.take1(_I64(), n)
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
        T, k, c, _ = SL.tension(ma.sp_law[s], ma.sp_x[s, 0], ma.sp_x[s, 1], ma.sp_law[s, 2], p,
                                ma.sp_k[s], ma.sp_c[s], ma.sp_L0[s], L, Ld)
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
        _add_congruence(D, Ks, Kd, SD, cols)
        _add_congruence(D, Cs, Cd, SD, cols)
    for s in range(ma.js_coord.shape[0]):
        c_ = ma.js_coord[s]
        Kd[c_, c_] += p[ma.js_k[s]]
        Cd[c_, c_] += p[ma.js_c[s]]
    # path followers: Q_c = k (-g (y_P - f(x_P)) - z_c) - c zd_c, so K[c, c] += k,
    # C[c, c] += c and K[c, :] += k g (J_P[1, :] - f'(x_P) J_P[0, :])
    for s in range(ma.pf_pt.shape[0]):
        k1 = ma.pf_pt[s]
        c_ = ma.pf_coord[s]
        o = ma.pf_fld[s]
        K.point_position(ma, p, A, r, k1, x1)
        fx = K.time_function(ma, p, ma.pf_tf[s], x1[0])[1]
        kg = p[o + 1] * p[o]
        Kd[c_, c_] += p[o + 1]
        Cd[c_, c_] += p[o + 2]
        K.point_jacobian(ma, p, A, r, bcol, k1, J1)
        for j in range(n):
            Kd[c_, j] += kg * (J1[1, j] - fx * J1[0, j])
    nty = ma.ty_pt.shape[0]
    if nty > 0:
        fr_coord, fr_parent = ma.fr_coord, ma.fr_parent
        road = p[ma.rd_fld[0]:ma.rd_fld[0] + ma.rd_fld[1]]
        JF = _SX()
        JP = _SX()
        JM = _SX()
        Ft = _S3()
        Pt = _S3()
        Mt = _S3()
        Jw = AR.take2(_S192(), 3, n)
        Jm = AR.take2(_S192(), 3, n)
        dFz = AR.take2(_S192(), 3, n)
        dFzd = AR.take2(_S192(), 3, n)
        for s in range(nty):
            k1 = ma.ty_pt[s]
            b = ma.pt_body[k1]
            f = ma.b_frame[b]
            K.point_kinematics(ma, p, A, r, Z, Zd, k1, x1, v1, a1)
            K.vector_global(ma, A, ma.ty_vc[s], e)
            o = ma.ty_par[s]
            law = ma.ty_law[s]
            delta, N = TL.element_wrench_state_jacobian(law, x1, v1, e, Z[f, 3:6],
                                                        p[o:o + TL.tire_npar(law)], road, Ft,
                                                        Pt, Mt, JF, JP, JM)
            if not delta > 0.0:
                continue
            K.point_jacobian(ma, p, A, r, bcol, k1, J1)
            K.vector_jacobian(ma, A, bcol, ma.ty_vc[s], J2)
            K.omega_jacobian(ma, bcol, b, Jw)
            d0 = Pt[0] - x1[0]
            d1 = Pt[1] - x1[1]
            d2 = Pt[2] - x1[2]
            # J1, J2 and Jw are zero off the coordinates of the wheel's path to the root:
            # so are Jm, dFz and dFzd, and those entries of K and C are left as they are
            kp = 0
            g = f
            while g >= 0:
                if fr_coord[g] >= 0:
                    cols[kp] = fr_coord[g]
                    kp += 1
                g = fr_parent[g]
            for t_ in range(kp):
                c = cols[t_]
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
            for ta in range(kp):
                a = cols[ta]
                for tc in range(kp):
                    c = cols[tc]
                    Kd[a, c] -= Jm[0, a] * dFz[0, c] + Jm[1, a] * dFz[1, c] + Jm[2, a] * dFz[2, c]
                    Cd[a, c] -= (Jm[0, a] * dFzd[0, c] + Jm[1, a] * dFzd[1, c]
                                 + Jm[2, a] * dFzd[2, c])


# ----------------------------------------------------------------------------------------
# implicit trapezoidal integrator
# ----------------------------------------------------------------------------------------


@njit(cache=True)
def _nonzero_columns(D, cols):
    """The columns of ``D`` (3 x n) with a nonzero entry into ``cols[:k]``; returns ``k``
    (a point Jacobian is nonzero only on the coordinates of the joints on its path)."""
    k = 0
    for c in range(D.shape[1]):
        if D[0, c] != 0.0 or D[1, c] != 0.0 or D[2, c] != 0.0:
            cols[k] = c
            k += 1
    return k


@njit(cache=True)
def _add_congruence(D, S, out, SD, cols):
    """``out += D^T (S D)`` for ``D`` (3 x n), ``S`` (3 x 3); ``SD`` (3 x n) and ``cols``
    (n integers) are work space.  Only the entries ``(a, c)`` with both columns of ``D``
    nonzero are visited: the others would add an exact zero (the same bits)."""
    k = _nonzero_columns(D, cols)
    for i in range(3):
        for t in range(k):
            c = cols[t]
            SD[i, c] = S[i, 0] * D[0, c] + S[i, 1] * D[1, c] + S[i, 2] * D[2, c]
    for ta in range(k):
        a = cols[ta]
        for tc in range(k):
            c = cols[tc]
            out[a, c] += D[0, a] * SD[0, c] + D[1, a] * SD[1, c] + D[2, a] * SD[2, c]


@njit(cache=True)
def record_row(ma, p, ws, k, t, z, zd, zdd, zi, zdi, a, iters, Vpot, conservative, T_out, Z_out,
            ZD_out, ZDD_out, ZI_out, ZDI_out, ZDDI_out, VIOL_out, VVIOL_out, IT_out, E_out):
    """Store output row ``k``: state, constraint violations, iterations and energy (the
    kinematics in ``ws`` are those of the state)."""
    A, r, Z, Zd, phi = ws.A, ws.r, ws.Z, ws.Zd, ws.phi
    T_out[k] = t
    Z_out[k] = z
    ZD_out[k] = zd
    ZDD_out[k] = zdd
    ZI_out[k] = zi
    ZDI_out[k] = zdi
    ZDDI_out[k] = a
    K.constraints(ma, p, t, z, zd, zdd, A, r, Z, Zd, 0, phi)
    VIOL_out[k] = maxabs(phi)
    K.constraints(ma, p, t, z, zd, zdd, A, r, Z, Zd, 1, phi)
    VVIOL_out[k] = maxabs(phi)
    IT_out[k] = iters
    if conservative:
        E_out[k] = K.kinetic_energy(ma, p, A, r, Z) + Vpot


# ----------------------------------------------------------------------------------------
# single evaluations (used by the Python API and by tests)
# ----------------------------------------------------------------------------------------


#: The result of :func:`evaluate_state`: kernel ``status``, position residual ``err`` and
#: ``bad`` column, the consistent ``z``, ``zd``, the particular accelerations ``zddb``,
#: ``R`` = R^Phi, the mass matrix ``Md`` and bias forces ``tau`` (inverse dynamics at
#: ``zddb``), ``Mbar`` = R^T M R and ``Qbar`` = -R^T tau (seed 001 eqs 42-44).
StateEvaluation = namedtuple("StateEvaluation", ["status", "err", "bad", "z", "zd", "zddb", "R",
                                                 "Md", "tau", "Mbar", "Qbar"])


@njit(cache=True)
def evaluate_state(ma, p, form, t, zi, zdi, z, pos_tol, pos_maxit):
    """Consistent state at ``(t, z^i, zd^i)`` (:data:`StateEvaluation`).  ``z`` is the
    starting guess of the position problem."""
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
        bad = K.zero_length_spring(ma, p, ws.A, ws.r)
        if bad >= 0:
            st = ST_ZERO_SPRING
    if st == OK:
        residual_tau(ma, p, t, zz, zd, zddb, ws, form, tau)
        mass_matrix(ma, p, ws, form, n, Md)
        projected_matrix(Rphi, Md, Mb)
    Qb = -(Rphi.T @ tau)
    return StateEvaluation(st, err, bad, zz, zd, zddb, Rphi, Md, tau, Mb, Qb)


@njit(cache=True)
def full_dynamics_terms(ma, p, form, t, z, zd, zdd):
    """Open-tree terms at an arbitrary state: mass matrix ``M^d`` and ``tau = M zdd - Q``."""
    n = z.shape[0]
    ws = make_workspace(ma, n)
    A, r, u, bcol = ws.A, ws.r, ws.u, ws.bcol
    K.frame_positions(ma, p, z, A, r, u)
    K.joint_columns(ma, r, u, bcol)
    tau = np.zeros(n)
    Md = np.zeros((n, n))
    residual_tau(ma, p, t, z, zd, zdd, ws, form, tau)
    mass_matrix(ma, p, ws, form, n, Md)
    return Md, tau
