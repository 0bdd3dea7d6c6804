"""Tire element with the Magic Formula 5.2 law, and the choice of tire law per element.

The model's tire element has two laws (``Model.tire(..., law=...)``):

* ``"disc"`` (:data:`LAW_DISC`, the default): the rigid disc with regularised Coulomb
  friction of :mod:`workbench.forces.tire`;
* ``"magic-formula"`` (:data:`LAW_MF`): the same contact kinematics and normal force, with
  the tangential force and the aligning moment of the steady-state Magic Formula 5.2
  (:mod:`workbench.forces.magic_formula`).

The dispatchers :func:`element_force`, :func:`element_force_dir` and
:func:`element_wrench_state_jacobian` are what the kernels call; the law of tire ``s`` is
``ma.ty_law[s]`` and its fields are the :func:`tire_npar` consecutive fields of ``p`` from
``ma.ty_par[s]``.

Magic Formula element
---------------------
Fields ``tp = [R, k, c, mu, v_eps, depth_ramp, force_ramp, p_MF (108)]``: the seven fields of
the disc (``mu`` is not read: the friction of this law is in ``PDX*``, ``PDY*``, ``LMUX``,
``LMUY``) followed by the 108 coefficients of :data:`~workbench.forces.magic_formula.
COEFFICIENT_NAMES` (offset :data:`TP_MF`).  With the contact point ``P``, the road normal
``n``, the penetration and the normal force ``N`` of the disc law
(:func:`workbench.forces.tire.contact_dir`, module docstring of :mod:`workbench.forces.tire`
steps 1-3) and the velocity ``v_P = vc + w x (P - c)`` of the wheel's material point at
``P``:

1. contact frame (ISO-W): heading ``l = a x n/|a x n|``, lateral ``s = n x l`` (to the left
   of the heading), ``n`` up.  The spin axis ``a`` must point to the left of the direction
   of travel (then ``l`` points forward);
2. contact-centre velocities ``V_x = vc . l``, ``V_y = v_P . s`` and rolling speed
   ``V_r = V_x - v_P . l`` (``= -(w x (P - c)) . l = omega R`` for a wheel spinning at
   ``omega`` about ``a``): the effective rolling radius is the disc radius ``R``
   (``P = c + R d`` is the lowest point of the undeformed disc), the choice that makes the
   disc law's pure rolling also the MF law's zero slip;
3. inclination ``gamma = asin(a . n)`` (ISO-W: positive when the wheel top leans to the
   left of the heading, i.e. a rotation about ``+l``);
4. slips ``kappa, alpha`` = :func:`~workbench.forces.magic_formula.contact_slip` of
   ``(V_x, V_y, V_r, v_eps)``; ``(Fx, Fy, Mz)`` =
   :func:`~workbench.forces.magic_formula.mf52_forces` of ``(N, kappa, alpha, gamma)``;
5. force ``F = N n + Fx l + Fy s`` at ``P`` and the aligning moment ``M = Mz n`` (a pure
   torque on the wheel body).

Without contact (``delta <= 0``) ``F = M = 0``; a wheel whose axis is along ``n``
(``|a x n| < 1e-12``) gets the normal force only.

Derivatives: :func:`mf_tire_force_dir` is the forward-mode chain rule of the steps above,
through :func:`~workbench.forces.tire.contact_dir`,
:func:`~workbench.forces.magic_formula.contact_slip_dir` and
:func:`~workbench.forces.magic_formula.mf52_forces_dir` (no differences, no allocation);
:func:`mf_tire_force_jacobian` stacks it column by column over
``X = [c (0:3), vc (3:6), a (6:9), w (9:12), tp (12:127), road (127:)]`` (or a leading part of
``X``; the Newton matrix reads the 12 state columns).  The kernels here compare real values,
so they are real-valued only (the element test uses central differences).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from workbench.forces import tire as TY
from workbench.forces.magic_formula import N_COEFFICIENTS, contact_slip_dir, mf52_forces_dir

#: tire laws (``ma.ty_law``)
LAW_DISC, LAW_MF = 0, 1
LAW_NAMES = ("disc", "magic-formula")
#: offset of the Magic Formula coefficients in the fields of an MF tire
TP_MF = TY.TY_NPAR
#: number of fields of an MF tire
TY_NPAR_MF = TY.TY_NPAR + N_COEFFICIENTS
#: dimensions of the Magic Formula coefficients that are not dimensionless
_DIMENSIONS = {"FNOMIN": "force", "UNLOADED_RADIUS": "length",
               "VERTICAL_STIFFNESS": "stiffness", "VERTICAL_DAMPING": "damping"}


def coefficient_dimension(name: str) -> str:
    """Dimension (a name of :mod:`workbench.model.units`) of the Magic Formula coefficient
    ``name`` when it is bound to a parameter."""
    return _DIMENSIONS.get(name.upper(), "dimensionless")


@njit(cache=True)
def tire_npar(law):
    """Number of consecutive fields of a tire of law ``law``."""
    if law == LAW_MF:
        return TY_NPAR_MF
    return TY.TY_NPAR


@njit(cache=True)
def mf_tire_force_dir(c, vc, a, w, tp, road, dc, dvc, da, dw, dtp, droad, F, P, M, dF, dP, dM):
    """Force ``F`` at the contact point ``P`` and moment ``M`` of the Magic Formula element
    (module docstring) and their directional derivatives along ``(dc, dvc, da, dw, dtp,
    droad)``.

    Returns ``(delta, N, kappa, alpha, gamma)`` (penetration, normal load, slips and
    inclination; zeros out of contact).
    """
    for i in range(3):
        F[i] = 0.0
        dF[i] = 0.0
        M[i] = 0.0
        dM[i] = 0.0
    (delta, N, dN, n0, n2, dn0, dn2, vp0, vp1, vp2, dvp0, dvp1,
     dvp2) = TY.contact_dir(c, vc, a, w, tp, road, dc, dvc, da, dw, dtp, droad, P, dP)
    if not delta > 0.0:
        return delta, 0.0, 0.0, 0.0, 0.0
    F[0] = N * n0
    F[2] = N * n2
    dF[0] = dN * n0 + N * dn0
    dF[2] = dN * n2 + N * dn2
    # ---- heading l = a x n/|a x n| (n = (n0, 0, n2)), lateral s = n x l
    u0 = a[1] * n2
    u1 = a[2] * n0 - a[0] * n2
    u2 = -a[1] * n0
    du0 = da[1] * n2 + a[1] * dn2
    du1 = da[2] * n0 + a[2] * dn0 - da[0] * n2 - a[0] * dn2
    du2 = -da[1] * n0 - a[1] * dn0
    lu = np.sqrt(u0 * u0 + u1 * u1 + u2 * u2)
    if lu < 1e-12:
        return delta, N, 0.0, 0.0, 0.0
    l0 = u0 / lu
    l1 = u1 / lu
    l2 = u2 / lu
    dlu = l0 * du0 + l1 * du1 + l2 * du2
    dl0 = (du0 - l0 * dlu) / lu
    dl1 = (du1 - l1 * dlu) / lu
    dl2 = (du2 - l2 * dlu) / lu
    s0 = -n2 * l1
    s1 = n2 * l0 - n0 * l2
    s2 = n0 * l1
    ds0 = -dn2 * l1 - n2 * dl1
    ds1 = dn2 * l0 + n2 * dl0 - dn0 * l2 - n0 * dl2
    ds2 = dn0 * l1 + n0 * dl1
    # ---- contact-centre velocities and rolling speed
    vx = vc[0] * l0 + vc[1] * l1 + vc[2] * l2
    dvx = (dvc[0] * l0 + dvc[1] * l1 + dvc[2] * l2) + (vc[0] * dl0 + vc[1] * dl1 + vc[2] * dl2)
    vpl = vp0 * l0 + vp1 * l1 + vp2 * l2
    dvpl = (dvp0 * l0 + dvp1 * l1 + dvp2 * l2) + (vp0 * dl0 + vp1 * dl1 + vp2 * dl2)
    vr = vx - vpl
    dvr = dvx - dvpl
    vy = vp0 * s0 + vp1 * s1 + vp2 * s2
    dvy = (dvp0 * s0 + dvp1 * s1 + dvp2 * s2) + (vp0 * ds0 + vp1 * ds1 + vp2 * ds2)
    # ---- inclination gamma = asin(a . n)
    sg = a[0] * n0 + a[2] * n2
    dsg = da[0] * n0 + a[0] * dn0 + da[2] * n2 + a[2] * dn2
    gamma = np.arcsin(sg)
    dgamma = dsg / np.sqrt(1.0 - sg * sg)
    # ---- slips and the Magic Formula (M, dM hold (Fx, Fy, Mz) and its tangent for now)
    kappa, tana, alpha, dkappa, dtana, dalpha = contact_slip_dir(
        vx, vy, vr, tp[TY.TP_VEPS], dvx, dvy, dvr, dtp[TY.TP_VEPS])
    mf52_forces_dir(N, kappa, alpha, gamma, tp[TP_MF:], dN, dkappa, dalpha, dgamma, dtp[TP_MF:],
                    M, dM)
    fx = M[0]
    fy = M[1]
    mz = M[2]
    dfx = dM[0]
    dfy = dM[1]
    dmz = dM[2]
    F[0] += fx * l0 + fy * s0
    F[1] += fx * l1 + fy * s1
    F[2] += fx * l2 + fy * s2
    dF[0] += dfx * l0 + fx * dl0 + dfy * s0 + fy * ds0
    dF[1] += dfx * l1 + fx * dl1 + dfy * s1 + fy * ds1
    dF[2] += dfx * l2 + fx * dl2 + dfy * s2 + fy * ds2
    M[0] = mz * n0
    M[1] = 0.0
    M[2] = mz * n2
    dM[0] = dmz * n0 + mz * dn0
    dM[1] = 0.0
    dM[2] = dmz * n2 + mz * dn2
    return delta, N, kappa, alpha, gamma


@njit(cache=True)
def mf_tire_force(c, vc, a, w, tp, road, F, P, M):
    """Force ``F`` at ``P`` and moment ``M`` of the Magic Formula element (the value part of
    :func:`mf_tire_force_dir`).  Returns ``(delta, N, kappa, alpha, gamma)``."""
    z = np.zeros(12 + tp.shape[0] + road.shape[0] + 9)
    n = tp.shape[0]
    nr = road.shape[0]
    o = 12 + n + nr
    return mf_tire_force_dir(c, vc, a, w, tp, road, z[0:3], z[3:6], z[6:9], z[9:12],
                             z[12:12 + n], z[12 + n:12 + n + nr], F, P, M, z[o:o + 3],
                             z[o + 3:o + 6], z[o + 6:o + 9])


@njit(cache=True)
def mf_tire_force_jacobian(c, vc, a, w, tp, road, F, P, M, JF, JP, JM):
    """``F``, ``P``, ``M`` and their Jacobians with respect to the leading ``JF.shape[1]``
    inputs of ``X = [c, vc, a, w, tp, road]`` (one :func:`mf_tire_force_dir` per column).
    Returns ``(delta, N)``."""
    n = tp.shape[0]
    nr = road.shape[0]
    nx = 12 + n + nr
    ncol = JF.shape[1]
    X = np.zeros(nx)
    d = np.zeros(9)
    delta = 0.0
    N = 0.0
    for j in range(ncol):
        X[:] = 0.0
        X[j] = 1.0
        delta, N, _, _, _ = mf_tire_force_dir(c, vc, a, w, tp, road, X[0:3], X[3:6], X[6:9],
                                              X[9:12], X[12:12 + n], X[12 + n:nx], F, P, M,
                                              d[0:3], d[3:6], d[6:9])
        for i in range(3):
            JF[i, j] = d[i]
            JP[i, j] = d[3 + i]
            JM[i, j] = d[6 + i]
    if ncol == 0:
        delta, N, _, _, _ = mf_tire_force(c, vc, a, w, tp, road, F, P, M)
    return delta, N


# ----------------------------------------------------------------------------------------
# dispatch on the law of the element (called by the kernels)
# ----------------------------------------------------------------------------------------


@njit(cache=True)
def element_force(law, c, vc, a, w, tp, road, F, P, M):
    """Force ``F`` at the point ``P`` and moment ``M`` of a tire of law ``law`` (``tp``: its
    :func:`tire_npar` fields).  Returns ``(delta, N)``."""
    if law == LAW_MF:
        delta, N, _, _, _ = mf_tire_force(c, vc, a, w, tp, road, F, P, M)
        return delta, N
    for i in range(3):
        M[i] = 0.0
    delta, N, _, _ = TY.tire_force(c, vc, a, w, tp, road, F, P)
    return delta, N


@njit(cache=True)
def element_force_dir(law, c, vc, a, w, tp, road, dc, dvc, da, dw, dtp, droad, F, P, M, dF, dP,
                      dM):
    """:func:`element_force` and its directional derivative ``dF``, ``dP``, ``dM`` along
    ``(dc, dvc, da, dw, dtp, droad)``.  Returns ``(delta, N)``."""
    if law == LAW_MF:
        delta, N, _, _, _ = mf_tire_force_dir(c, vc, a, w, tp, road, dc, dvc, da, dw, dtp, droad,
                                              F, P, M, dF, dP, dM)
        return delta, N
    for i in range(3):
        M[i] = 0.0
        dM[i] = 0.0
    return TY.tire_force_dir(c, vc, a, w, tp, road, dc, dvc, da, dw, dtp, droad, F, P, dF, dP)


@njit(cache=True)
def wrench_state_cache(law, c, vc, a, w, tp, road, J):
    """The cache ``J`` (3 x 3 x 13) of one tire at the state inputs ``[c, vc, a, w]``:
    ``J[k, :, 0]`` the force ``F`` (k = 0), its point ``P`` (1) and the moment ``M`` (2),
    ``J[k, :, 1:13]`` their Jacobians (:func:`element_wrench_state_jacobian`), for
    :func:`wrench_state_product`."""
    W = np.empty((3, 3))
    JW = np.empty((3, 3, 12))
    element_wrench_state_jacobian(law, c, vc, a, w, tp, road, W[0], W[1], W[2], JW[0], JW[1],
                                  JW[2])
    for k in range(3):
        for i in range(3):
            J[k, i, 0] = W[k, i]
            for j in range(12):
                J[k, i, 1 + j] = JW[k, i, j]


@njit(cache=True)
def wrench_state_product(J, dc, dvc, da, dw, F, P, M, dF, dP, dM):
    """``F, P, M`` and their tangents ``(dF, dP, dM) = J dX`` along ``dX = [dc, dvc, da,
    dw]`` from the cache ``J`` (3 x 3 x 13) of one tire: ``J[k, :, 0]`` the value of ``F``
    (k = 0), ``P`` (1), ``M`` (2), ``J[k, :, 1:13]`` its Jacobian of
    :func:`element_wrench_state_jacobian`.  The tangent of the wrench along a direction
    that moves no tire or road field, on both formulations' sides."""
    for i in range(3):
        F[i] = J[0, i, 0]
        P[i] = J[1, i, 0]
        M[i] = J[2, i, 0]
    for k in range(3):
        for i in range(3):
            sk = 0.0
            for j in range(3):
                sk += (J[k, i, 1 + j] * dc[j] + J[k, i, 4 + j] * dvc[j]
                       + J[k, i, 7 + j] * da[j] + J[k, i, 10 + j] * dw[j])
            if k == 0:
                dF[i] = sk
            elif k == 1:
                dP[i] = sk
            else:
                dM[i] = sk


@njit(cache=True)
def element_wrench_state_jacobian(law, c, vc, a, w, tp, road, F, P, M, JF, JP, JM):
    """``F``, ``P``, ``M`` and their exact Jacobians with respect to the 12 state inputs
    ``[c, vc, a, w]`` (``JF``, ``JP``, ``JM``: 3 x 12), the moment included (zero for the
    disc law): what the tangent of the wrench along a direction that moves no tire or road
    field is a product with (``dF = JF dX``, :func:`workbench.kernels.tangents.tire_forces_t`),
    and the tire block of the Newton matrix (its moment left out there,
    :func:`workbench.formulations.semirecursive.matrixr.force_jacobians`).
    Returns ``(delta, N)``."""
    if law == LAW_MF:
        return mf_tire_force_jacobian(c, vc, a, w, tp, road, F, P, M, JF, JP, JM)
    delta, N = TY.tire_force_state_jacobian(c, vc, a, w, tp, road, F, P, JF, JP)
    for i in range(3):
        M[i] = 0.0
        for j in range(TY.NX_STATE):
            JM[i, j] = 0.0
    return delta, N
