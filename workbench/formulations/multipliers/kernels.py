"""Kernels of the multiplier formulation (seed 000 eqs 58-63).

At a state ``(t, z, zd)`` of the open tree (all ``n`` relative coordinates), with ``M`` the
semi-recursive mass matrix (SR-I or SR-II, seed 000 eqs 45/52), ``Q`` the generalized
forces (``tau(z, zd, 0) = -Q``) and the closure ``Phi(z, t) = 0`` (``m`` equations), the
accelerations and multipliers solve the augmented index-1 system (seed 000 eq 61, with the
OCR fix ``[zdd; lambda]`` of shared/notes/seeds-000-002.md section 1.8)::

    [ M      Phi_z^T ] [ zdd    ]   [ Q                                   ]
    [ Phi_z  0       ] [ lambda ] = [ -c - 2 alpha Phi_dot - beta^2 Phi   ]

with ``c = Phi_dot_z zd + Phi_tt`` (the acceleration-level constraint at ``zdd = 0``) and
Baumgarte's stabilisation (seed 000 eq 60): the constraint error then obeys
``Phi_ddot + 2 alpha Phi_dot + beta^2 Phi = 0``.  ``lambda`` are the constraint forces
in the directions of ``Phi_z^T`` (the generalized reaction forces of the cut joints).

:func:`workbench.integrators.trapezoidal.integrate_multipliers` applies the implicit
trapezoidal rule to all ``n`` coordinates: unknowns ``a = zdd_{k+1}`` and ``lambda_{k+1}``, ``z_{k+1} = z_k + h zd_k +
h^2/4 (a_k + a)``, ``zd_{k+1} = zd_k + h/2 (a_k + a)``, residual ``r = [M a - Q + Phi_z^T
lambda; Phi_z a + c + 2 alpha Phi_dot + beta^2 Phi]``, Newton iteration matrix
``[M + h/2 C + h^2/4 K, Phi_z^T; (1 + alpha h + beta^2 h^2 / 4) Phi_z, 0]`` (``K``, ``C``:
the force elements' stiffness and damping, as in the Matrix-R loop), formed once per step
and solved in the least-squares sense, so that redundant constraints are tolerated (the
multipliers are then the minimum-norm ones).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from workbench.formulations.semirecursive import matrixr as MR
from workbench.kernels import tree as K


@njit(cache=True)
def augmented_terms(ma, p, form, t, z, zd, ws, M, Jc, phi, phid, cacc, tau):
    """The terms of the augmented system at ``(t, z, zd)``: ``M``, ``tau = -Q`` (inverse
    dynamics at ``zdd = 0``), ``Phi``, ``Phi_dot``, ``c`` and ``Phi_z``.  Returns the
    mechanical energy (kinetic + gravity + springs)."""
    n = z.shape[0]
    A, r, u, bcol, Z, Zd = ws.A, ws.r, ws.u, ws.bcol, ws.Z, ws.Zd
    zero = ws.zero_n
    K.frame_positions(ma, p, z, A, r, u)
    K.joint_columns(ma, r, u, bcol)
    V = MR.residual_tau(ma, p, t, z, zd, zero, ws, form, tau)
    MR.mass_matrix(ma, p, ws, form, n, M)
    K.constraints(ma, p, t, z, zd, zero, A, r, Z, Zd, 0, phi)
    K.constraints(ma, p, t, z, zd, zero, A, r, Z, Zd, 1, phid)
    K.constraints(ma, p, t, z, zd, zero, A, r, Z, Zd, 2, cacc)
    K.constraint_jacobian(ma, p, A, r, bcol, n, Jc)
    return V + K.kinetic_energy(ma, p, A, r, Z)


@njit(cache=True)
def constraint_rhs(phi, phid, cacc, alpha, beta, out):
    """``-c - 2 alpha Phi_dot - beta^2 Phi`` (seed 000 eq 60)."""
    for i in range(phi.shape[0]):
        out[i] = -cacc[i] - 2.0 * alpha * phid[i] - beta * beta * phi[i]


@njit(cache=True)
def solve_augmented(M, Jc, tau, crhs, S, rhs):
    """Accelerations and multipliers of the augmented system (least squares: redundant
    constraints give the minimum-norm multipliers).  Returns the solution vector
    ``[zdd; lambda]``."""
    n = M.shape[0]
    m = Jc.shape[0]
    S[:, :] = 0.0
    S[:n, :n] = M
    S[:n, n:] = Jc.T
    S[n:, :n] = Jc
    for i in range(n):
        rhs[i] = -tau[i]
    for i in range(m):
        rhs[n + i] = crhs[i]
    return np.linalg.lstsq(S, rhs, rcond=1e-13)[0]
