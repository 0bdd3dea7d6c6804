"""Tire-ground contact force law and road profile (pure numba functions of plain arrays).

These functions know nothing about the model arrays: they map plain floats/arrays to a
force, so that the sensitivity layer can chain their analytic Jacobians.  They are called
by :func:`workbench.kernels.tree.applied_forces` (force) and
:func:`workbench.formulations.semirecursive.matrixr.force_jacobians` (Newton-matrix stiffness and
damping).

Road
----
``road`` is a flat float array ``[z0, x_1, dh_1, L_1, x_2, dh_2, L_2, ...]`` (an empty
array is the flat road ``z = 0``).  The height is

    h(x) = z0 + sum_i dh_i s((x - x_i) / L_i + 1/2),
    s(u) = 10 u^3 - 15 u^4 + 6 u^5 on [0, 1], s = 0 below, s = 1 above,

i.e. a quintic (C2) step of height ``dh_i`` (negative = descent) *centred* at ``x_i`` and
spread over the length ``L_i`` (from ``x_i - L_i/2`` to ``x_i + L_i/2``).  Largest slope
``15/8 dh/L``, largest curvature ``10/sqrt(3) dh/L^2``.  :func:`road_profile` returns
``h, h', h'', h'''``; :func:`road_profile_param_grad` the partial derivatives of ``h, h',
h''`` with respect to the entries of ``road``.

Tire law (rigid disc, point contact, regularised Coulomb friction)
------------------------------------------------------------------
Inputs: wheel centre ``c`` and its velocity ``vc``, unit spin axis ``a`` and angular
velocity ``w`` of the wheel (all global), tire parameters
``tp = [R, k, c_n, mu, v_eps, d_ramp, N_ramp]`` (see ``TP_*``) and the road.

1. Contact point ``P = c + R d``: the lowest point of the disc, ``d = -g/|g|`` with
   ``g = e_z - (a . e_z) a`` (the upward direction projected onto the wheel plane).
2. Road normal at ``x_P``: ``n = (-h', 0, 1)/q``, ``q = sqrt(1 + h'^2)``; penetration
   ``delta = (h(x_P) - P_z)/q`` = distance of ``P`` below the road's tangent line at
   ``x_P``.  ``delta_dot`` is its exact time derivative (``P`` moves with ``c`` and with
   the wheel-plane direction ``d``, ``a_dot = w x a``; the road is fixed).
3. Normal force ``N = pos(k S(delta) + c_n H(delta) delta_dot)`` with the C1 ramps
   (``u = delta/d_ramp``)

       S = 0 (delta <= 0),  delta (1 - (1 - u)^2) (0 < u < 1),  delta (u >= 1)
       H = 0 (delta <= 0),  3u^2 - 2u^3          (0 < u < 1),  1     (u >= 1)
       pos(x) = 0 (x <= 0), x (1 - (1 - x/N_ramp)^2) (0 < x < N_ramp), x (x >= N_ramp)

   so ``N`` is C1 in every input, never negative, zero out of contact, and equal to
   ``k delta + c_n delta_dot`` once ``delta >= d_ramp`` and that value is ``>= N_ramp``
   (the static penetration under a load ``W`` is exactly ``W/k`` when ``W/k >= d_ramp``).
4. Slip: velocity of the wheel's material point at ``P``, ``v_P = vc + w x (P - c)``, and
   its part in the road plane ``v_t = v_P - (v_P . n) n``.  Longitudinal and lateral slip
   velocities are ``v_t . l`` and ``v_t . (n x l)`` with ``l = a x n / |a x n|`` (wheel
   heading); the friction law uses the vector ``v_t`` (isotropic):

       F_t = -mu N v_t / sqrt(|v_t|^2 + v_eps^2)

   (regularised Coulomb: ``|F_t| < mu N``, ``F_t . v_t <= 0``, smooth; linear with slope
   ``mu N / v_eps`` for ``|v_t| << v_eps``, saturating at ``mu N``).  Pure rolling of a
   disc of radius ``R`` (``w x (R d) = -vc``) gives ``v_t = 0`` and no tangential force.
5. Output: ``F = N n + F_t`` applied at ``P`` (on the wheel body).

Inputs of the Jacobian :func:`tire_force_jacobian` are ordered
``X = [c (0:3), vc (3:6), a (6:9), w (9:12), tp (12:19), road (19:)]``; it returns
``dF/dX`` and ``dP/dX`` (3 x (19 + len(road))), exact derivatives of the formulas above
(``a`` is treated as a free 3-vector, as the formulas are written; at ``|a| = 1`` its
radial component does not matter for motions of a rigid wheel).
:func:`tire_force_state_jacobian` computes its first :data:`NX_STATE` = 12 columns (the
state inputs ``c, vc, a, w``) in scalars, without allocation: what the Newton matrix and
the step Jacobians use (through :func:`workbench.forces.tire_mf.element_wrench_state_jacobian`).

:func:`tire_force_dir` is the same chain rule for ONE input direction (scalars only, no
allocation): ``dF = JF . dX``, ``dP = JP . dX``.  It is what the exact design
sensitivities use (:func:`workbench.kernels.tangents.tire_forces_t`, the tangent of the tire
wrench inside :func:`workbench.kernels.tangents.applied_forces_t`, seed 001 eqs 49-61 for the
applied-force terms ``Qbar_z``, ``Qbar_zd``, ``Qbar_rho``).  The branches compare real
parts only, so every function here also runs on complex inputs (complex-step checks in
``tests/test_tire.py``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

# tire parameter layout (consecutive fields of the field vector p)
TP_R, TP_K, TP_C, TP_MU, TP_VEPS, TP_DRAMP, TP_NRAMP = 0, 1, 2, 3, 4, 5, 6
TY_NPAR = 7
TP_NAMES = ("radius", "k", "c", "mu", "v_eps", "depth_ramp", "force_ramp")
# column offsets of the inputs in the Jacobian
X_C, X_VC, X_A, X_W, X_TP, X_ROAD = 0, 3, 6, 9, 12, 19
NX_STATE = 12


@njit(cache=True)
def _qstep(u):
    """Quintic step s(u) and its first three derivatives."""
    if u.real <= 0.0:
        return 0.0, 0.0, 0.0, 0.0
    if u.real >= 1.0:
        return 1.0, 0.0, 0.0, 0.0
    u2 = u * u
    s = u2 * u * (10.0 - 15.0 * u + 6.0 * u2)
    s1 = 30.0 * u2 * (1.0 - u) * (1.0 - u)
    s2 = 60.0 * u * (1.0 - u) * (1.0 - 2.0 * u)
    s3 = 60.0 * (1.0 - 6.0 * u + 6.0 * u2)
    return s, s1, s2, s3


@njit(cache=True)
def road_profile(road, x):
    """Height ``h``, slope ``h'``, curvature ``h''`` and ``h'''`` of the road at ``x``."""
    nr = road.shape[0]
    if nr == 0:
        return 0.0, 0.0, 0.0, 0.0
    h = road[0]
    h1 = 0.0
    h2 = 0.0
    h3 = 0.0
    for i in range((nr - 1) // 3):
        xi = road[1 + 3 * i]
        dh = road[2 + 3 * i]
        L = road[3 + 3 * i]
        s, s1, s2, s3 = _qstep((x - xi) / L + 0.5)
        h += dh * s
        h1 += dh * s1 / L
        h2 += dh * s2 / (L * L)
        h3 += dh * s3 / (L * L * L)
    return h, h1, h2, h3


@njit(cache=True)
def road_profile_param_grad(road, x, gh, gh1, gh2):
    """Partial derivatives of ``h, h', h''`` at fixed ``x`` with respect to ``road``."""
    nr = road.shape[0]
    for j in range(nr):
        gh[j] = 0.0
        gh1[j] = 0.0
        gh2[j] = 0.0
    if nr == 0:
        return
    gh[0] = 1.0
    for i in range((nr - 1) // 3):
        b = 1 + 3 * i
        xi = road[b]
        dh = road[b + 1]
        L = road[b + 2]
        u = (x - xi) / L + 0.5
        s, s1, s2, s3 = _qstep(u)
        du_dx = -1.0 / L
        du_dL = -(u - 0.5) / L
        gh[b] = dh * s1 * du_dx
        gh[b + 1] = s
        gh[b + 2] = dh * s1 * du_dL
        gh1[b] = dh * s2 * du_dx / L
        gh1[b + 1] = s1 / L
        gh1[b + 2] = dh * (s2 * du_dL / L - s1 / (L * L))
        gh2[b] = dh * s3 * du_dx / (L * L)
        gh2[b + 1] = s2 / (L * L)
        gh2[b + 2] = dh * (s3 * du_dL / (L * L) - 2.0 * s2 / (L * L * L))


@njit(cache=True)
def _ramps(delta, d0):
    """S(delta), dS/ddelta, dS/dd0, H(delta), dH/ddelta, dH/dd0 (C1 ramps)."""
    if delta.real <= 0.0:
        return 0.0, 0.0, 0.0, 0.0, 0.0, 0.0
    if delta.real >= d0.real:
        return delta, 1.0, 0.0, 1.0, 0.0, 0.0
    u = delta / d0
    S = delta * (2.0 * u - u * u)
    S_d = 4.0 * u - 3.0 * u * u
    S_d0 = -2.0 * u * u + 2.0 * u * u * u
    H = u * u * (3.0 - 2.0 * u)
    Hu = 6.0 * u * (1.0 - u)
    return S, S_d, S_d0, H, Hu / d0, -Hu * u / d0


@njit(cache=True)
def _pos(x, x0):
    """C1 positive part: value, d/dx, d/dx0."""
    if x.real <= 0.0:
        return 0.0, 0.0, 0.0
    if x.real >= x0.real:
        return x, 1.0, 0.0
    y = x / x0
    return x * (2.0 * y - y * y), 4.0 * y - 3.0 * y * y, -2.0 * y * y + 2.0 * y * y * y


@njit(cache=True, inline="always")
def _upward_in_plane(a):
    """``a . e_z`` and ``g = e_z - (a . e_z) a`` (the upward direction projected onto the
    wheel plane) with its norm: ``(sa, g0, g1, g2, |g|)``."""
    sa = a[2]
    g0 = -sa * a[0]
    g1 = -sa * a[1]
    g2 = 1.0 - sa * a[2]
    return sa, g0, g1, g2, np.sqrt(g0 * g0 + g1 * g1 + g2 * g2)


@njit(cache=True, inline="always")
def _contact_geometry(c, g0, g1, g2, gn, R, road, P):
    """Steps 1-2 of the law from ``g`` and ``|g|`` (``|g| > 0``): the lowest point ``P = c
    + R d`` of the disc (into ``P``), the road at ``x_P`` and the penetration.  Returns
    ``(d0, d1, d2, h', h'', h''', q, n0, n2, delta)``."""
    d0 = -g0 / gn
    d1 = -g1 / gn
    d2 = -g2 / gn
    P[0] = c[0] + R * d0
    P[1] = c[1] + R * d1
    P[2] = c[2] + R * d2
    h, h1, h2, h3 = road_profile(road, P[0])
    q = np.sqrt(1.0 + h1 * h1)
    n0 = -h1 / q
    n2 = 1.0 / q
    delta = (h - P[2]) / q
    return d0, d1, d2, h1, h2, h3, q, n0, n2, delta


@njit(cache=True, inline="always")
def _normal_force(vc, a, w, tp, sa, g0, g1, g2, gn, h1, h2, q, delta):
    """Steps 2-3 of the law in contact (``delta > 0``): the rate of penetration (``a_dot =
    w x a``, ``g_dot``, ``P_dot`` in x and z, ``delta_dot``) and the normal force ``N =
    pos(k S + c_n H delta_dot)``, with the intermediates the state Jacobian
    (:func:`tire_force_state_jacobian`) reuses.  Returns ``(ad0, ad1, ad2, gd0, gd1, gd2,
    proj, Pd0, Pd2, qd, deltad, S, S_d, H, H_d, N, N_x)``."""
    R = tp[TP_R]
    ad0 = w[1] * a[2] - w[2] * a[1]
    ad1 = w[2] * a[0] - w[0] * a[2]
    ad2 = w[0] * a[1] - w[1] * a[0]
    gd0 = -ad2 * a[0] - sa * ad0
    gd1 = -ad2 * a[1] - sa * ad1
    gd2 = -ad2 * a[2] - sa * ad2
    proj = (g0 * gd0 + g1 * gd1 + g2 * gd2) / gn
    Pd0 = vc[0] - R * (gd0 - g0 / gn * proj) / gn
    Pd2 = vc[2] - R * (gd2 - g2 / gn * proj) / gn
    qd = h1 * h2 * Pd0 / q
    deltad = (h1 * Pd0 - Pd2) / q - delta * qd / q
    S, S_d, S_d0, H, H_d, H_d0 = _ramps(delta, tp[TP_DRAMP])
    Nr = tp[TP_K] * S + tp[TP_C] * H * deltad
    N, N_x, N_x0 = _pos(Nr, tp[TP_NRAMP])
    return ad0, ad1, ad2, gd0, gd1, gd2, proj, Pd0, Pd2, qd, deltad, S, S_d, H, H_d, N, N_x


@njit(cache=True, inline="always")
def _contact_force(vc, w, tp, d0, d1, d2, n0, n2, N, F):
    """Steps 4-5 of the law in contact: the velocity ``v_P`` of the wheel's material point
    at ``P = c + R d``, its part ``v_t`` in the road plane, the regularised Coulomb friction
    ``phi = mu N / rho`` and ``F = N n - phi v_t`` (into ``F``).  Returns ``(vp0, vp1, vp2,
    vn, vt0, vt1, vt2, rho, phi)``."""
    R = tp[TP_R]
    vp0 = vc[0] + R * (w[1] * d2 - w[2] * d1)
    vp1 = vc[1] + R * (w[2] * d0 - w[0] * d2)
    vp2 = vc[2] + R * (w[0] * d1 - w[1] * d0)
    vn = vp0 * n0 + vp2 * n2
    vt0 = vp0 - vn * n0
    vt1 = vp1
    vt2 = vp2 - vn * n2
    rho = np.sqrt(vt0 * vt0 + vt1 * vt1 + vt2 * vt2 + tp[TP_VEPS] * tp[TP_VEPS])
    phi = tp[TP_MU] * N / rho
    F[0] = N * n0 - phi * vt0
    F[1] = -phi * vt1
    F[2] = N * n2 - phi * vt2
    return vp0, vp1, vp2, vn, vt0, vt1, vt2, rho, phi


@njit(cache=True)
def tire_force(c, vc, a, w, tp, road, F, P):
    """Contact force ``F`` (global) and its application point ``P`` (module docstring).

    Returns ``(delta, N, v_long, v_lat)``: penetration, normal force and the longitudinal
    and lateral slip velocities (diagnostics).  Out of contact ``F = 0`` and ``P`` is the
    lowest point of the disc.
    """
    R = tp[TP_R]
    for i in range(3):
        F[i] = 0.0
        P[i] = c[i]
    sa, g0, g1, g2, gn = _upward_in_plane(a)
    if gn.real < 1e-12:
        return -np.inf, 0.0, 0.0, 0.0          # disc lying flat: no lowest point
    d0, d1, d2, h1, h2, h3, q, n0, n2, delta = _contact_geometry(c, g0, g1, g2, gn, R, road,
                                                                 P)
    if delta.real <= 0.0:
        return delta, 0.0, 0.0, 0.0
    # rate of penetration and normal force
    (ad0, ad1, ad2, gd0, gd1, gd2, proj, Pd0, Pd2, qd, deltad, S, S_d, H, H_d, N,
     N_x) = _normal_force(vc, a, w, tp, sa, g0, g1, g2, gn, h1, h2, q, delta)
    # slip velocity of the material point at P, friction, the force
    vp0, vp1, vp2, vn, vt0, vt1, vt2, rho, phi = _contact_force(vc, w, tp, d0, d1, d2, n0,
                                                                n2, N, F)
    # heading l = a x n / |a x n|, lateral s = n x l (diagnostics)
    l0 = a[1] * n2
    l1 = a[2] * n0 - a[0] * n2
    l2 = -a[1] * n0
    ln = np.sqrt(l0 * l0 + l1 * l1 + l2 * l2)
    v_long = 0.0
    v_lat = 0.0
    if ln.real > 0.0:
        l0 /= ln
        l1 /= ln
        l2 /= ln
        s0 = -n2 * l1
        s1 = n2 * l0 - n0 * l2
        s2 = n0 * l1
        v_long = vt0 * l0 + vt1 * l1 + vt2 * l2
        v_lat = vt0 * s0 + vt1 * s1 + vt2 * s2
    return delta, N, v_long, v_lat


@njit(cache=True)
def _cross_grad(u, du, v, dv, out):
    """Gradient of ``u x v``: ``du x v + u x dv`` column by column."""
    for j in range(out.shape[1]):
        out[0, j] = (du[1, j] * v[2] - du[2, j] * v[1]) + (u[1] * dv[2, j] - u[2] * dv[1, j])
        out[1, j] = (du[2, j] * v[0] - du[0, j] * v[2]) + (u[2] * dv[0, j] - u[0] * dv[2, j])
        out[2, j] = (du[0, j] * v[1] - du[1, j] * v[0]) + (u[0] * dv[1, j] - u[1] * dv[0, j])


@njit(cache=True)
def tire_force_jacobian(c, vc, a, w, tp, road, F, P, JF, JP):
    """``F``, ``P`` and their exact Jacobians ``JF = dF/dX``, ``JP = dP/dX`` with
    ``X = [c, vc, a, w, tp, road]`` (3 x (19 + len(road)); forward-mode chain rule of
    the formulas of :func:`tire_force`)."""
    nr = road.shape[0]
    nX = X_ROAD + nr
    JF[:, :] = 0.0
    JP[:, :] = 0.0
    for i in range(3):
        F[i] = 0.0
        P[i] = c[i]
        JP[i, X_C + i] = 1.0
    R = tp[TP_R]
    k = tp[TP_K]
    cn = tp[TP_C]
    mu = tp[TP_MU]
    ve = tp[TP_VEPS]
    dramp = tp[TP_DRAMP]
    nramp = tp[TP_NRAMP]
    # seeds
    dc = np.zeros((3, nX))
    dvc = np.zeros((3, nX))
    da = np.zeros((3, nX))
    dw = np.zeros((3, nX))
    for i in range(3):
        dc[i, X_C + i] = 1.0
        dvc[i, X_VC + i] = 1.0
        da[i, X_A + i] = 1.0
        dw[i, X_W + i] = 1.0
    # ---- lowest point
    sa = a[2]
    dsa = da[2].copy()
    g = np.empty(3)
    g[0] = -sa * a[0]
    g[1] = -sa * a[1]
    g[2] = 1.0 - sa * a[2]
    gn = np.sqrt(g[0] * g[0] + g[1] * g[1] + g[2] * g[2])
    if gn < 1e-12:
        return -np.inf, 0.0
    dg = np.empty((3, nX))
    for i in range(3):
        dg[i] = -a[i] * dsa - sa * da[i]
    gh = g / gn
    dgn = gh[0] * dg[0] + gh[1] * dg[1] + gh[2] * dg[2]
    dgh = np.empty((3, nX))
    for i in range(3):
        dgh[i] = (dg[i] - gh[i] * dgn) / gn
    d = -gh
    dd = -dgh
    dP = np.empty((3, nX))
    for i in range(3):
        P[i] = c[i] + R * d[i]
        dP[i] = dc[i] + R * dd[i]
        dP[i, X_TP + TP_R] += d[i]
    for i in range(3):
        JP[i] = dP[i]
    # ---- road at x_P
    h, h1, h2, h3 = road_profile(road, P[0])
    ph = np.zeros(nr)
    ph1 = np.zeros(nr)
    ph2 = np.zeros(nr)
    road_profile_param_grad(road, P[0], ph, ph1, ph2)
    dh = h1 * dP[0]
    dh1 = h2 * dP[0]
    dh2 = h3 * dP[0]
    for j in range(nr):
        dh[X_ROAD + j] += ph[j]
        dh1[X_ROAD + j] += ph1[j]
        dh2[X_ROAD + j] += ph2[j]
    q = np.sqrt(1.0 + h1 * h1)
    dq = h1 * dh1 / q
    n = np.empty(3)
    n[0] = -h1 / q
    n[1] = 0.0
    n[2] = 1.0 / q
    dn = np.zeros((3, nX))
    dn[0] = -dh1 / q + h1 * dq / (q * q)
    dn[2] = -dq / (q * q)
    delta = (h - P[2]) / q
    if delta <= 0.0:
        return delta, 0.0
    ddelta = (dh - dP[2]) / q - delta * dq / q
    # ---- rate of penetration
    ad = np.empty(3)
    ad[0] = w[1] * a[2] - w[2] * a[1]
    ad[1] = w[2] * a[0] - w[0] * a[2]
    ad[2] = w[0] * a[1] - w[1] * a[0]
    dad = np.empty((3, nX))
    _cross_grad(w, dw, a, da, dad)
    sad = ad[2]
    dsad = dad[2].copy()
    gd = np.empty(3)
    dgd = np.empty((3, nX))
    for i in range(3):
        gd[i] = -sad * a[i] - sa * ad[i]
        dgd[i] = -a[i] * dsad - sad * da[i] - ad[i] * dsa - sa * dad[i]
    proj = gh[0] * gd[0] + gh[1] * gd[1] + gh[2] * gd[2]
    dproj = np.zeros(nX)
    for i in range(3):
        dproj += gh[i] * dgd[i] + gd[i] * dgh[i]
    # d_dot = -m / gn with m = gd - gh proj
    Pd = np.empty(3)
    dPd = np.empty((3, nX))
    for i in range(3):
        m = gd[i] - gh[i] * proj
        dm = dgd[i] - gh[i] * dproj - proj * dgh[i]
        ddot = -m / gn
        dddot = -dm / gn + m * dgn / (gn * gn)
        Pd[i] = vc[i] + R * ddot
        dPd[i] = dvc[i] + R * dddot
        dPd[i, X_TP + TP_R] += ddot
    hd = h1 * Pd[0]
    dhd = Pd[0] * dh1 + h1 * dPd[0]
    qd = h1 * h2 * Pd[0] / q
    dqd = (h2 * Pd[0] * dh1 + h1 * Pd[0] * dh2 + h1 * h2 * dPd[0]) / q - qd * dq / q
    deltad = (hd - Pd[2]) / q - delta * qd / q
    ddeltad = ((dhd - dPd[2]) / q - (hd - Pd[2]) * dq / (q * q)
               - (qd * ddelta + delta * dqd) / q + delta * qd * dq / (q * q))
    # ---- normal force
    S, S_d, S_d0, H, H_d, H_d0 = _ramps(delta, dramp)
    dS = S_d * ddelta
    dS[X_TP + TP_DRAMP] += S_d0
    dH = H_d * ddelta
    dH[X_TP + TP_DRAMP] += H_d0
    Nr = k * S + cn * H * deltad
    dNr = k * dS + cn * deltad * dH + cn * H * ddeltad
    dNr[X_TP + TP_K] += S
    dNr[X_TP + TP_C] += H * deltad
    N, N_x, N_x0 = _pos(Nr, nramp)
    dN = N_x * dNr
    dN[X_TP + TP_NRAMP] += N_x0
    # ---- slip velocity and friction
    wd = np.empty(3)
    wd[0] = w[1] * d[2] - w[2] * d[1]
    wd[1] = w[2] * d[0] - w[0] * d[2]
    wd[2] = w[0] * d[1] - w[1] * d[0]
    dwd = np.empty((3, nX))
    _cross_grad(w, dw, d, dd, dwd)
    vp = np.empty(3)
    dvp = np.empty((3, nX))
    for i in range(3):
        vp[i] = vc[i] + R * wd[i]
        dvp[i] = dvc[i] + R * dwd[i]
        dvp[i, X_TP + TP_R] += wd[i]
    vn = vp[0] * n[0] + vp[1] * n[1] + vp[2] * n[2]
    dvn = np.zeros(nX)
    for i in range(3):
        dvn += vp[i] * dn[i] + n[i] * dvp[i]
    vt = np.empty(3)
    dvt = np.empty((3, nX))
    for i in range(3):
        vt[i] = vp[i] - vn * n[i]
        dvt[i] = dvp[i] - n[i] * dvn - vn * dn[i]
    rho = np.sqrt(vt[0] * vt[0] + vt[1] * vt[1] + vt[2] * vt[2] + ve * ve)
    drho = (vt[0] * dvt[0] + vt[1] * dvt[1] + vt[2] * dvt[2]) / rho
    drho[X_TP + TP_VEPS] += ve / rho
    phi = mu * N / rho
    dphi = mu * dN / rho - phi * drho / rho
    dphi[X_TP + TP_MU] += N / rho
    for i in range(3):
        F[i] = N * n[i] - phi * vt[i]
        JF[i] = n[i] * dN + N * dn[i] - vt[i] * dphi - phi * dvt[i]
    return delta, N


@njit(cache=True)
def tire_force_state_jacobian(c, vc, a, w, tp, road, F, P, JF, JP):
    """``F``, ``P`` (as :func:`tire_force`, the same formulas in the same order, so the
    same values) and their exact Jacobians ``JF = dF/dX``, ``JP = dP/dX`` with respect to
    the 12 state inputs ``X = [c, vc, a, w]`` only (``JF``, ``JP``: 3 x 12, supplied by the
    caller): the first :data:`NX_STATE` columns of :func:`tire_force_jacobian` (equal to
    round-off, tested), without its allocations.  The primal quantities are computed once,
    then each column is the forward-mode chain rule of the formulas of the module
    docstring along one unit input direction (the terms its zero seeds cancel dropped), in
    scalars: no array temporaries, no heap allocation (about 13 times faster than
    :func:`tire_force_jacobian`).  The branches compare real parts, as in
    :func:`tire_force`, so it also runs on complex inputs (with complex ``F``, ``P``,
    ``JF``, ``JP``), which :func:`tire_force_jacobian` does not.

    Returns ``(delta, N)`` as :func:`tire_force_jacobian`; out of contact ``F = JF = 0``
    and ``JP`` is the Jacobian of the lowest point of the disc (``[I 0 0 0]`` for a disc
    lying flat, ``delta = -inf``).
    """
    R = tp[TP_R]
    for i in range(3):
        F[i] = 0.0
        P[i] = c[i]
    for i in range(3):
        for j in range(NX_STATE):
            JF[i, j] = 0.0
            JP[i, j] = 0.0
    # ---- lowest point (as tire_force)
    sa, g0, g1, g2, gn = _upward_in_plane(a)
    if gn.real < 1e-12:
        for i in range(3):
            JP[i, X_C + i] = 1.0
        return -np.inf, 0.0                  # disc lying flat: no lowest point
    gh0 = g0 / gn
    gh1 = g1 / gn
    gh2 = g2 / gn
    d0, d1, d2, h1, h2, h3, q, n0, n2, delta = _contact_geometry(c, g0, g1, g2, gn, R, road,
                                                                 P)
    contact = delta.real > 0.0
    N = 0.0
    # primal values of the contact branch (as tire_force); placeholders out of contact
    ad0 = ad1 = ad2 = gd0 = gd1 = gd2 = proj = Pd0 = Pd2 = qd = deltad = 0.0
    S_d = H = H_d = N_x = vp0 = vp1 = vp2 = vn = vt0 = vt1 = vt2 = rho = phi = 0.0
    m0 = m2 = irho = cNd = cNdd = 0.0
    k = tp[TP_K]
    cn = tp[TP_C]
    mu = tp[TP_MU]
    if contact:
        (ad0, ad1, ad2, gd0, gd1, gd2, proj, Pd0, Pd2, qd, deltad, S, S_d, H, H_d, N,
         N_x) = _normal_force(vc, a, w, tp, sa, g0, g1, g2, gn, h1, h2, q, delta)
        vp0, vp1, vp2, vn, vt0, vt1, vt2, rho, phi = _contact_force(vc, w, tp, d0, d1, d2,
                                                                    n0, n2, N, F)
        # quantities shared by the columns: d_dot = -(gd - gh proj)/|g| = -m/|g|
        m0 = gd0 - g0 / gn * proj
        m2 = gd2 - g2 / gn * proj
        irho = 1.0 / rho
        cNd = N_x * (k * S_d + cn * deltad * H_d)      # dN = cNd ddelta + cNdd ddeltad
        cNdd = N_x * cn * H
    iq = 1.0 / q
    ign = 1.0 / gn
    hdp = h1 * Pd0 - Pd2
    # ---- one column per state input j = 3 grp + i (grp: c, vc, a, w): tangents along
    # the unit direction e_j; first the kinematic ones, P, P_dot (x, z) and v_P, from the
    # group's seed (zero seeds dropped), then the common chain to F
    for j in range(NX_STATE):
        grp = j // 3
        i = j - 3 * grp
        e0 = 1.0 if i == 0 else 0.0
        e1 = 1.0 if i == 1 else 0.0
        e2 = 1.0 if i == 2 else 0.0
        dP0 = dP1 = dP2 = dPd0 = dPd2 = dvp0 = dvp1 = dvp2 = 0.0
        if grp == 0:                       # c: P moves with it
            dP0 = e0
            dP1 = e1
            dP2 = e2
        elif grp == 1:                     # vc: P_dot and v_P move with it
            dPd0 = e0
            dPd2 = e2
            dvp0 = e0
            dvp1 = e1
            dvp2 = e2
        elif grp == 2:                     # a: d = -g/|g| turns, a_dot = w x a too
            dg0 = -a[0] * e2 - sa * e0
            dg1 = -a[1] * e2 - sa * e1
            dg2 = -a[2] * e2 - sa * e2
            dgn = gh0 * dg0 + gh1 * dg1 + gh2 * dg2
            dgh0 = (dg0 - gh0 * dgn) * ign
            dgh1 = (dg1 - gh1 * dgn) * ign
            dgh2 = (dg2 - gh2 * dgn) * ign
            dP0 = -R * dgh0
            dP1 = -R * dgh1
            dP2 = -R * dgh2
            if contact:
                dad0 = w[1] * e2 - w[2] * e1
                dad1 = w[2] * e0 - w[0] * e2
                dad2 = w[0] * e1 - w[1] * e0
                dgd0 = -a[0] * dad2 - ad2 * e0 - ad0 * e2 - sa * dad0
                dgd1 = -a[1] * dad2 - ad2 * e1 - ad1 * e2 - sa * dad1
                dgd2 = -a[2] * dad2 - ad2 * e2 - ad2 * e2 - sa * dad2
                dproj = (gh0 * dgd0 + gh1 * dgd1 + gh2 * dgd2
                         + gd0 * dgh0 + gd1 * dgh1 + gd2 * dgh2)
                dm0 = dgd0 - gh0 * dproj - proj * dgh0
                dm2 = dgd2 - gh2 * dproj - proj * dgh2
                dPd0 = R * (m0 * dgn * ign - dm0) * ign
                dPd2 = R * (m2 * dgn * ign - dm2) * ign
                # v_P = vc + R w x d: d turns (dd = -dgh)
                dvp0 = R * (w[2] * dgh1 - w[1] * dgh2)
                dvp1 = R * (w[0] * dgh2 - w[2] * dgh0)
                dvp2 = R * (w[1] * dgh0 - w[0] * dgh1)
        else:                              # w: a_dot = w x a and v_P = vc + R w x d
            dad0 = e1 * a[2] - e2 * a[1]
            dad1 = e2 * a[0] - e0 * a[2]
            dad2 = e0 * a[1] - e1 * a[0]
            dgd0 = -a[0] * dad2 - sa * dad0
            dgd2 = -a[2] * dad2 - sa * dad2
            dproj = gh0 * dgd0 + gh1 * (-a[1] * dad2 - sa * dad1) + gh2 * dgd2
            dPd0 = -R * (dgd0 - gh0 * dproj) * ign
            dPd2 = -R * (dgd2 - gh2 * dproj) * ign
            dvp0 = R * (e1 * d2 - e2 * d1)
            dvp1 = R * (e2 * d0 - e0 * d2)
            dvp2 = R * (e0 * d1 - e1 * d0)
        JP[0, j] = dP0
        JP[1, j] = dP1
        JP[2, j] = dP2
        if not contact:
            continue
        # road at x_P: height, normal, penetration and its rate
        dh1 = h2 * dP0
        dq = h1 * dh1 * iq
        dn0 = (h1 * dq * iq - dh1) * iq
        dn2 = -dq * iq * iq
        ddelta = (h1 * dP0 - dP2 - delta * dq) * iq
        dqd = (h2 * Pd0 * dh1 + h1 * Pd0 * h3 * dP0 + h1 * h2 * dPd0 - qd * dq) * iq
        ddeltad = ((Pd0 * dh1 + h1 * dPd0 - dPd2) - hdp * dq * iq
                   - (qd * ddelta + delta * dqd) + delta * qd * dq * iq) * iq
        # normal force, slip and friction
        dN = cNd * ddelta + cNdd * ddeltad
        dvn = vp0 * dn0 + vp2 * dn2 + n0 * dvp0 + n2 * dvp2
        dvt0 = dvp0 - n0 * dvn - vn * dn0
        dvt1 = dvp1
        dvt2 = dvp2 - n2 * dvn - vn * dn2
        drho = (vt0 * dvt0 + vt1 * dvt1 + vt2 * dvt2) * irho
        dphi = (mu * dN - phi * drho) * irho
        JF[0, j] = n0 * dN + N * dn0 - vt0 * dphi - phi * dvt0
        JF[1, j] = -vt1 * dphi - phi * dvt1
        JF[2, j] = n2 * dN + N * dn2 - vt2 * dphi - phi * dvt2
    return delta, N


# ----------------------------------------------------------------------------------------
# directional derivatives (one tangent direction, no allocation): used by the exact
# sensitivity kernels (workbench.kernels.tangents.tire_forces_t)
# ----------------------------------------------------------------------------------------


@njit(cache=True)
def road_profile_dir(road, x, droad):
    """Directional derivative of ``h, h', h''`` at fixed ``x`` along a direction
    ``droad`` of the road parameters (contracted :func:`road_profile_param_grad`)."""
    nr = road.shape[0]
    if nr == 0:
        return 0.0, 0.0, 0.0
    g = droad[0]
    g1 = 0.0
    g2 = 0.0
    for i in range((nr - 1) // 3):
        b = 1 + 3 * i
        xi = road[b]
        dh = road[b + 1]
        L = road[b + 2]
        u = (x - xi) / L + 0.5
        s, s1, s2, s3 = _qstep(u)
        ddh = droad[b + 1]
        dL = droad[b + 2]
        du = -droad[b] / L - (u - 0.5) / L * dL
        g += ddh * s + dh * s1 * du
        g1 += ddh * s1 / L + dh * s2 * du / L - dh * s1 * dL / (L * L)
        g2 += (ddh * s2 / (L * L) + dh * s3 * du / (L * L)
               - 2.0 * dh * s2 * dL / (L * L * L))
    return g, g1, g2


@njit(cache=True)
def contact_dir(c, vc, a, w, tp, road, dc, dvc, da, dw, dtp, droad, P, dP):
    """Contact kinematics and normal force shared by the tire laws, with their directional
    derivatives along ``(dc, dvc, da, dw, dtp, droad)`` (steps 1-3 and the first line of
    step 4 of the module docstring; only the fields ``radius, k, c, depth_ramp,
    force_ramp`` of ``tp`` are read).

    Fills the contact point ``P`` and ``dP`` and returns ``(delta, N, dN, n0, n2, dn0,
    dn2, vp0, vp1, vp2, dvp0, dvp1, dvp2)``: penetration, normal force, road normal
    ``n = (n0, 0, n2)`` and the velocity ``v_P = vc + w x (P - c)`` of the wheel's
    material point at ``P``, each with its tangent.  Out of contact (``delta <= 0``, or
    ``-inf`` for a disc lying flat) every other value is 0.
    """
    R = tp[TP_R]
    k = tp[TP_K]
    cn = tp[TP_C]
    dramp = tp[TP_DRAMP]
    nramp = tp[TP_NRAMP]
    dR = dtp[TP_R]
    for i in range(3):
        P[i] = c[i]
        dP[i] = dc[i]
    # ---- lowest point P = c + R d, d = -g/|g|, g = e_z - a_z a
    sa = a[2]
    dsa = da[2]
    g0 = -sa * a[0]
    g1 = -sa * a[1]
    g2 = 1.0 - sa * a[2]
    dg0 = -a[0] * dsa - sa * da[0]
    dg1 = -a[1] * dsa - sa * da[1]
    dg2 = -a[2] * dsa - sa * da[2]
    gn = np.sqrt(g0 * g0 + g1 * g1 + g2 * g2)
    if gn < 1e-12:
        return (-np.inf, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    gh0 = g0 / gn
    gh1 = g1 / gn
    gh2 = g2 / gn
    dgn = gh0 * dg0 + gh1 * dg1 + gh2 * dg2
    dgh0 = (dg0 - gh0 * dgn) / gn
    dgh1 = (dg1 - gh1 * dgn) / gn
    dgh2 = (dg2 - gh2 * dgn) / gn
    d0 = -gh0
    d1 = -gh1
    d2 = -gh2
    dd0 = -dgh0
    dd1 = -dgh1
    dd2 = -dgh2
    P[0] = c[0] + R * d0
    P[1] = c[1] + R * d1
    P[2] = c[2] + R * d2
    dP[0] = dc[0] + R * dd0 + dR * d0
    dP[1] = dc[1] + R * dd1 + dR * d1
    dP[2] = dc[2] + R * dd2 + dR * d2
    # ---- road at x_P: height, normal, penetration
    h, h1, h2, h3 = road_profile(road, P[0])
    rh, rh1, rh2 = road_profile_dir(road, P[0], droad)
    dh = h1 * dP[0] + rh
    dh1 = h2 * dP[0] + rh1
    dh2 = h3 * dP[0] + rh2
    q = np.sqrt(1.0 + h1 * h1)
    dq = h1 * dh1 / q
    n0 = -h1 / q
    n2 = 1.0 / q
    dn0 = -dh1 / q + h1 * dq / (q * q)
    dn2 = -dq / (q * q)
    delta = (h - P[2]) / q
    if delta <= 0.0:
        return (delta, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    ddelta = (dh - dP[2]) / q - delta * dq / q
    # ---- rate of penetration (a_dot = w x a)
    ad0 = w[1] * a[2] - w[2] * a[1]
    ad1 = w[2] * a[0] - w[0] * a[2]
    ad2 = w[0] * a[1] - w[1] * a[0]
    dad0 = (dw[1] * a[2] - dw[2] * a[1]) + (w[1] * da[2] - w[2] * da[1])
    dad1 = (dw[2] * a[0] - dw[0] * a[2]) + (w[2] * da[0] - w[0] * da[2])
    dad2 = (dw[0] * a[1] - dw[1] * a[0]) + (w[0] * da[1] - w[1] * da[0])
    gd0 = -ad2 * a[0] - sa * ad0
    gd1 = -ad2 * a[1] - sa * ad1
    gd2 = -ad2 * a[2] - sa * ad2
    dgd0 = -a[0] * dad2 - ad2 * da[0] - ad0 * dsa - sa * dad0
    dgd1 = -a[1] * dad2 - ad2 * da[1] - ad1 * dsa - sa * dad1
    dgd2 = -a[2] * dad2 - ad2 * da[2] - ad2 * dsa - sa * dad2
    proj = gh0 * gd0 + gh1 * gd1 + gh2 * gd2
    dproj = (gh0 * dgd0 + gh1 * dgd1 + gh2 * dgd2
             + gd0 * dgh0 + gd1 * dgh1 + gd2 * dgh2)
    # d_dot = -(gd - gh proj)/gn; only the x and z components of P_dot are needed
    m0 = gd0 - gh0 * proj
    m2 = gd2 - gh2 * proj
    dm0 = dgd0 - gh0 * dproj - proj * dgh0
    dm2 = dgd2 - gh2 * dproj - proj * dgh2
    ddot0 = -m0 / gn
    ddot2 = -m2 / gn
    dddot0 = -dm0 / gn + m0 * dgn / (gn * gn)
    dddot2 = -dm2 / gn + m2 * dgn / (gn * gn)
    Pd0 = vc[0] + R * ddot0
    Pd2 = vc[2] + R * ddot2
    dPd0 = dvc[0] + R * dddot0 + dR * ddot0
    dPd2 = dvc[2] + R * dddot2 + dR * ddot2
    hd = h1 * Pd0
    dhd = Pd0 * dh1 + h1 * dPd0
    qd = h1 * h2 * Pd0 / q
    dqd = (h2 * Pd0 * dh1 + h1 * Pd0 * dh2 + h1 * h2 * dPd0) / q - qd * dq / q
    deltad = (hd - Pd2) / q - delta * qd / q
    ddeltad = ((dhd - dPd2) / q - (hd - Pd2) * dq / (q * q)
               - (qd * ddelta + delta * dqd) / q + delta * qd * dq / (q * q))
    # ---- normal force
    S, S_d, S_d0, H, H_d, H_d0 = _ramps(delta, dramp)
    dS = S_d * ddelta + S_d0 * dtp[TP_DRAMP]
    dH = H_d * ddelta + H_d0 * dtp[TP_DRAMP]
    Nr = k * S + cn * H * deltad
    dNr = (k * dS + cn * deltad * dH + cn * H * ddeltad + dtp[TP_K] * S
           + dtp[TP_C] * H * deltad)
    N, N_x, N_x0 = _pos(Nr, nramp)
    dN = N_x * dNr + N_x0 * dtp[TP_NRAMP]
    # ---- velocity of the wheel's material point at P
    wd0 = w[1] * d2 - w[2] * d1
    wd1 = w[2] * d0 - w[0] * d2
    wd2 = w[0] * d1 - w[1] * d0
    dwd0 = (dw[1] * d2 - dw[2] * d1) + (w[1] * dd2 - w[2] * dd1)
    dwd1 = (dw[2] * d0 - dw[0] * d2) + (w[2] * dd0 - w[0] * dd2)
    dwd2 = (dw[0] * d1 - dw[1] * d0) + (w[0] * dd1 - w[1] * dd0)
    vp0 = vc[0] + R * wd0
    vp1 = vc[1] + R * wd1
    vp2 = vc[2] + R * wd2
    dvp0 = dvc[0] + R * dwd0 + dR * wd0
    dvp1 = dvc[1] + R * dwd1 + dR * wd1
    dvp2 = dvc[2] + R * dwd2 + dR * wd2
    return delta, N, dN, n0, n2, dn0, dn2, vp0, vp1, vp2, dvp0, dvp1, dvp2


@njit(cache=True)
def tire_force_dir(c, vc, a, w, tp, road, dc, dvc, da, dw, dtp, droad, F, P, dF, dP):
    """Contact force ``F``, point ``P`` (as :func:`tire_force`) and their directional
    derivatives ``dF``, ``dP`` along the input direction ``(dc, dvc, da, dw, dtp,
    droad)``: the forward-mode chain rule of the formulas of the module docstring, line
    by line the contraction ``JF . dX`` of :func:`tire_force_jacobian` (which it equals to
    round-off; tested, and against complex-step differences of :func:`tire_force`).

    Returns ``(delta, N)``.
    """
    mu = tp[TP_MU]
    ve = tp[TP_VEPS]
    for i in range(3):
        F[i] = 0.0
        dF[i] = 0.0
    (delta, N, dN, n0, n2, dn0, dn2, vp0, vp1, vp2, dvp0, dvp1,
     dvp2) = contact_dir(c, vc, a, w, tp, road, dc, dvc, da, dw, dtp, droad, P, dP)
    if not delta > 0.0:
        return delta, 0.0
    # ---- slip velocity of the material point at P and friction
    vn = vp0 * n0 + vp2 * n2
    dvn = vp0 * dn0 + vp2 * dn2 + n0 * dvp0 + n2 * dvp2
    vt0 = vp0 - vn * n0
    vt1 = vp1
    vt2 = vp2 - vn * n2
    dvt0 = dvp0 - n0 * dvn - vn * dn0
    dvt1 = dvp1
    dvt2 = dvp2 - n2 * dvn - vn * dn2
    rho = np.sqrt(vt0 * vt0 + vt1 * vt1 + vt2 * vt2 + ve * ve)
    drho = (vt0 * dvt0 + vt1 * dvt1 + vt2 * dvt2 + ve * dtp[TP_VEPS]) / rho
    phi = mu * N / rho
    dphi = (dtp[TP_MU] * N + mu * dN) / rho - phi * drho / rho
    F[0] = N * n0 - phi * vt0
    F[1] = -phi * vt1
    F[2] = N * n2 - phi * vt2
    dF[0] = dN * n0 + N * dn0 - dphi * vt0 - phi * dvt0
    dF[1] = -dphi * vt1 - phi * dvt1
    dF[2] = dN * n2 + N * dn2 - dphi * vt2 - phi * dvt2
    return delta, N
