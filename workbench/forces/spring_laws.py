"""Force laws of the point-to-point spring-damper element (pure numba functions of plain
floats and the field array ``p``), with their exact derivatives.

The element's tension (positive pulls its two points together) is

    T(L, Ldot) = T_k(L) + T_c(Ldot)

with ``L`` the distance between the points and ``Ldot`` its rate (positive = extension =
rebound).  Every law has exact partial derivatives ``dT/dL``, ``dT/dLdot`` (the
integrator's Newton matrix, the statics' stiffness, the sensitivities' state columns) and
an exact directional derivative along a direction ``dp`` of the fields (the parameter
columns).

Stiffness laws (``LAW_K_*``, fields at ``kx``)
----------------------------------------------
``LAW_K_LINEAR``: ``T_k = k (L - L0)`` (no extra field).

``LAW_K_AIR``: an air spring, the linear term plus the polytropic gas law of a bellows of
effective area ``A`` (fields ``kx .. kx+4`` = ``A, V0, P0, n, Pa``)::

    V(L) = V0 + A (L - L0)                  gas volume (V0 at the design length L0)
    P(L) = P0 (V0 / V)^n                    absolute pressure (P0 at L0; n = 1 isothermal,
                                            1.4 adiabatic air)
    T_k  = k (L - L0) - A (P - Pa)          the gas pushes the ends apart
    dT_k/dL = k + n A^2 P / V

so the static load at ``L0`` is ``A (P0 - Pa)`` and the gas stiffness there
``n A^2 P0 / V0``.  Potential energy ``U = int_L0^L T_k dL`` (the work stored by moving
the ends against the tension; energy checks)::

    U = k (L - L0)^2 / 2 - P0 V0 ((V/V0)^(1-n) - 1) / (1 - n) + A Pa (L - L0)
    (n = 1: - P0 V0 ln(V / V0) + A Pa (L - L0)).

A non-positive gas volume is outside the law: the tension is then NaN, which the
integrator reports as a non-finite state naming the time.

Damper laws (``LAW_C_*``, fields at ``cx``)
-------------------------------------------
``LAW_C_LINEAR``: ``T_c = c Ldot``.

``LAW_C_PIECEWISE``: a piecewise-linear damper (compression and rebound slopes with
breakpoints, e.g. bilinear: one knee at 0 with the compression slope below and the rebound
slope above), its corners rounded over a width ``w`` so that the force is smooth and has
exact derivatives.  Fields ``cx`` = ``w``, ``cx+1`` = ``c_0`` (slope below the first
knee), then per knee ``j = 1..K`` the pair ``(v_j, c_j)`` (knee velocity, slope above it;
knees increasing)::

    T_c(v) = c_0 v + sum_j (c_j - c_{j-1}) w [s((v - v_j)/w) - s(-v_j/w)]
    dT_c/dv = c_0 + sum_j (c_j - c_{j-1}) sigma((v - v_j)/w)

with ``s(x) = ln(1 + e^x)`` (softplus) and ``sigma = s'`` (logistic), so ``T_c(0) = 0``
and, away from the knees (``|v - v_j| >> w``), ``T_c`` is the piecewise-linear law shifted
by at most ``(c_j - c_{j-1}) w ln 2`` per knee; as ``w -> 0`` it tends to the sharp law.
"""

from __future__ import annotations

import numpy as np
from numba import njit

LAW_K_LINEAR, LAW_K_AIR = 0, 1
LAW_C_LINEAR, LAW_C_PIECEWISE = 0, 1

#: extra fields of the air-spring law: effective area, gas volume at L0, absolute
#: pressure at L0, polytropic exponent, ambient pressure
AIR_FIELDS = ("area", "volume", "pressure", "exponent", "ambient")
#: ambient pressure default (Pa): the standard atmosphere (ISO 2533)
AIR_AMBIENT = 101325.0
#: polytropic exponent default: 1.4, adiabatic (fast suspension motion of air, a diatomic
#: ideal gas); 1.0 is the isothermal (slow) limit
AIR_EXPONENT = 1.4
#: default rounding width of a piecewise damper's knees (m/s): small against the knee
#: velocities of vehicle dampers (0.05 - 0.3 m/s), wide enough for the Newton iteration
#: at millisecond steps
DAMPER_WIDTH = 0.01


@njit(cache=True)
def softplus(x):
    """``ln(1 + e^x)`` without overflow."""
    return max(x, 0.0) + np.log1p(np.exp(-abs(x)))


@njit(cache=True)
def logistic(x):
    """``1 / (1 + e^-x)`` without overflow."""
    if x >= 0.0:
        return 1.0 / (1.0 + np.exp(-x))
    e = np.exp(x)
    return e / (1.0 + e)


@njit(cache=True)
def tension(law, kx, cx, nk, p, fk, fc, fL0, L, Ld):
    """``(T, dT/dL, dT/dLdot, U)`` of one element: ``law = (stiffness law, damper law)``,
    ``kx``/``cx`` the first extra fields of each law, ``nk`` the damper's knee count,
    ``fk, fc, fL0`` the fields of ``k``, ``c``, ``L0``; ``U`` the potential energy."""
    k = p[fk]
    L0 = p[fL0]
    T = k * (L - L0)
    TL = k
    U = 0.5 * k * (L - L0) ** 2
    if law[0] == LAW_K_AIR:
        A, V0, P0, n, Pa = p[kx], p[kx + 1], p[kx + 2], p[kx + 3], p[kx + 4]
        V = V0 + A * (L - L0)
        if V <= 0.0 or V0 <= 0.0:
            return np.nan, np.nan, np.nan, np.nan
        P = P0 * (V0 / V) ** n
        T -= A * (P - Pa)
        TL += n * A * A * P / V
        if n == 1.0:
            U -= P0 * V0 * np.log(V / V0)
        else:
            U -= P0 * V0 * ((V / V0) ** (1.0 - n) - 1.0) / (1.0 - n)
        U += A * Pa * (L - L0)
    if law[1] == LAW_C_PIECEWISE:
        w = p[cx]
        cprev = p[cx + 1]
        T += cprev * Ld
        TLd = cprev
        for j in range(nk):
            v = p[cx + 2 + 2 * j]
            cj = p[cx + 3 + 2 * j]
            x = (Ld - v) / w
            T += (cj - cprev) * w * (softplus(x) - softplus(-v / w))
            TLd += (cj - cprev) * logistic(x)
            cprev = cj
    else:
        c = p[fc]
        T += c * Ld
        TLd = c
    return T, TL, TLd, U


@njit(cache=True)
def tension_dp(law, kx, cx, nk, p, dp, fk, fc, fL0, L, Ld):
    """Directional derivative of ``T`` along the field direction ``dp`` at fixed ``L``
    and ``Ldot`` (the parameter part of the tangent; the state part is ``dT/dL dL +
    dT/dLdot dLdot`` from :func:`tension`)."""
    k = p[fk]
    L0 = p[fL0]
    dL0 = dp[fL0]
    dT = dp[fk] * (L - L0) - k * dL0
    if law[0] == LAW_K_AIR:
        A, V0, P0, n, Pa = p[kx], p[kx + 1], p[kx + 2], p[kx + 3], p[kx + 4]
        dA, dV0, dP0, dn, dPa = dp[kx], dp[kx + 1], dp[kx + 2], dp[kx + 3], dp[kx + 4]
        V = V0 + A * (L - L0)
        if V <= 0.0 or V0 <= 0.0:
            return np.nan
        P = P0 * (V0 / V) ** n
        dV = dV0 + dA * (L - L0) - A * dL0
        dP = P * (dP0 / P0 + n * (dV0 / V0 - dV / V) + dn * np.log(V0 / V))
        dT -= dA * (P - Pa) + A * (dP - dPa)
    if law[1] == LAW_C_PIECEWISE:
        w = p[cx]
        dw = dp[cx]
        cprev = p[cx + 1]
        dcprev = dp[cx + 1]
        dT += dcprev * Ld
        for j in range(nk):
            v = p[cx + 2 + 2 * j]
            dv = dp[cx + 2 + 2 * j]
            cj = p[cx + 3 + 2 * j]
            dcj = dp[cx + 3 + 2 * j]
            x = (Ld - v) / w
            x0 = -v / w
            S = w * (softplus(x) - softplus(x0))
            sx = logistic(x)
            s0 = logistic(x0)
            # d/dw [w (s(x) - s(x0))] with x = (Ld - v)/w, x0 = -v/w
            Sw = softplus(x) - softplus(x0) - x * sx + x0 * s0
            Sv = -sx + s0
            dT += (dcj - dcprev) * S + (cj - cprev) * (Sw * dw + Sv * dv)
            cprev = cj
            dcprev = dcj
    else:
        dT += dp[fc] * Ld
    return dT
