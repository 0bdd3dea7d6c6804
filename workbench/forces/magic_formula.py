"""Steady-state Magic Formula tire law, version MF 5.2 (MF-Tyre 5.2 / PAC2002), as pure numba
kernels of flat float arrays, with exact forward-mode tangents.

Like :mod:`workbench.forces.tire` these functions know nothing about the model: they map the
normal load and the slips to the contact forces, so that a tire element and the sensitivity
layer can chain their exact derivatives.  The model's tire element uses them with
``law="magic-formula"`` (:mod:`workbench.forces.tire_mf`; docs/magic-formula.md "Using it in
a vehicle model").

Version and equations
---------------------
One version only: the steady-state Magic Formula 5.2 of TNO's MF-Tyre 5.2, which is MSC
Adams' PAC2002 and the model of H.B. Pacejka, *Tire and Vehicle Dynamics* (1st ed. 2002), in
the equation structure and numbering of the 2nd/3rd editions (2006/2012), section 4.3.2,
eqs. (4.E1)-(4.E78), with the MF 5.2 forms where the later book version differs (camber
enters linearly through ``PHY3``, ``QBZ4``, ``QDZ3``; ``Ky = ... (1 - PKY3 |gamma|)``; no
``PKY4..7``, ``PEY5``, ``QBZ6``, ``QDZ10/11``, ``RBX3``, ``RBY4``; the combined aligning moment
of MF 5.2, ``Mz = -t (Fy - SVyk) + Mzr + s Fx``).  No turn slip (all zeta = 1), no inflation
pressure terms, no speed-dependent friction (``LMUV = 0``), the slip angle ``alpha`` itself in
the formulas (not ``tan(alpha)``, the TNO convention), ISO-W (TYDEX W) axes and signs:

* ``kappa = -V_sx/|V_cx|`` (> 0 when driving: ``Fx > 0``), ``tan(alpha) = V_cy/|V_cx|`` (> 0
  when the contact centre slides to the left: ``Fy < 0`` for the usual negative ``PKY1``),
  ``gamma`` the inclination angle, ``Fz >= 0`` the normal load, all SI units;
* for ``Fz <= 0`` every output is zero (the tire has left the road).

docs/magic-formula.md lists every equation with its book number.  The singularity guards
``B = K/(C D + eps sgn(D))`` and ``K' = K + eps sgn(K)`` use ``eps = 1e-6`` (:data:`EPS`, the
book's small epsilon, p. 177).  The curvature factors are limited to ``E <= 1`` as the
equations require (a kink only where a coefficient set violates that bound; there the
derivative of ``E`` is taken as zero).

Coefficients
------------
One flat float array ``p`` holds every coefficient in the order of :data:`COEFFICIENT_NAMES`
(the standard .tir names, upper case); :func:`coefficient_index` maps names to positions and
:func:`coefficient_array` builds ``p`` from a name -> value mapping (scaling factors ``L*``
default to 1, every other coefficient to 0).  ``VERTICAL_STIFFNESS`` and ``VERTICAL_DAMPING``
ride along for the tire element; the force kernels do not read them.  Any entry of ``p`` can
be a design parameter: the tangent kernel takes a direction ``dp`` in the same layout.

Kernels
-------
* :func:`mf52_forces` - combined-slip ``(Fx, Fy, Mz)``;
* :func:`mf52_pure_slip` - pure-slip ``(Fx0, Fy0, Mz0)`` (each at the other slips' values of
  the call: ``Fx0`` does not depend on ``alpha``, ``Fy0`` not on ``kappa``);
* :func:`mf52_forces_dir` - combined forces and their directional derivative along
  ``(dFz, dkappa, dalpha, dgamma, dp)``: the forward-mode chain rule of the same formulas,
  hand-written line by line (no differences), as :func:`workbench.forces.tire.tire_force_dir`;
* :func:`mf52_jacobian` - ``d(Fx, Fy, Mz)/d(Fz, kappa, alpha, gamma)`` (3 x 4) and
  ``d(Fx, Fy, Mz)/dp`` (3 x len(p)), one tangent per column;
* :func:`contact_slip`, :func:`contact_slip_dir` - ``kappa``, ``tan(alpha)`` and ``alpha`` from
  the contact-centre velocities with the regularised ``|V_cx|`` (below) and their tangent.

The branches compare real parts only and ``|x|``, ``sgn(x)`` are written with real-part tests,
so the value kernels also run on complex inputs (complex-step checks in
``tests/test_magic_formula.py``).

Slip definitions and the low-speed regularisation
-------------------------------------------------
With ``V_x`` the longitudinal and ``V_y`` the lateral velocity of the contact centre (wheel
heading and its left normal in the road plane) and ``V_r = omega R_e`` the rolling speed
(spin rate times effective rolling radius),

    V_d = sqrt(V_x^2 + v_eps^2),  kappa = (V_r - V_x)/V_d,  tan(alpha) = V_y/V_d,

i.e. ``|V_x|`` in the denominators of the MF slip definitions is replaced by the smooth
``V_d >= v_eps > 0``.  At speed the slips are the textbook ones up to the factor
``|V_x|/V_d = 1 - v_eps^2/(2 V_x^2) + ...``; towards standstill the slips become linear in
the slip velocities, ``kappa -> (V_r - V_x)/v_eps``, ``tan(alpha) -> V_y/v_eps``, so the
forces go smoothly to zero with the velocities (a linear damper of coefficient ``K/v_eps``)
instead of dividing by zero.  Default ``v_eps`` = :data:`DEFAULT_V_EPS` = 0.5 m/s (reasons
in docs/magic-formula.md).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from numba import njit

from workbench.errors import ModelError, UnknownNameError

#: singularity guard of the B factors and of 1/K (Pacejka 2006 p. 177; the value MFeval uses)
EPS = 1e-6
#: default regularisation speed of |V_x| in the slip definitions [m/s]
DEFAULT_V_EPS = 0.5

GENERAL_NAMES = ("FNOMIN", "UNLOADED_RADIUS", "VERTICAL_STIFFNESS", "VERTICAL_DAMPING")
#: scaling factors (user "lambda" factors), 1 by default
SCALING_NAMES = ("LFZO", "LCX", "LMUX", "LEX", "LKX", "LHX", "LVX", "LGAX",
                 "LCY", "LMUY", "LEY", "LKY", "LHY", "LVY", "LGAY",
                 "LTR", "LRES", "LGAZ", "LXAL", "LYKA", "LVYKA", "LS")
LONGITUDINAL_NAMES = ("PCX1", "PDX1", "PDX2", "PDX3", "PEX1", "PEX2", "PEX3", "PEX4",
                      "PKX1", "PKX2", "PKX3", "PHX1", "PHX2", "PVX1", "PVX2",
                      "RBX1", "RBX2", "RCX1", "REX1", "REX2", "RHX1")
LATERAL_NAMES = ("PCY1", "PDY1", "PDY2", "PDY3", "PEY1", "PEY2", "PEY3", "PEY4",
                 "PKY1", "PKY2", "PKY3", "PHY1", "PHY2", "PHY3", "PVY1", "PVY2", "PVY3", "PVY4",
                 "RBY1", "RBY2", "RBY3", "RCY1", "REY1", "REY2", "RHY1", "RHY2",
                 "RVY1", "RVY2", "RVY3", "RVY4", "RVY5", "RVY6")
ALIGNING_NAMES = ("QBZ1", "QBZ2", "QBZ3", "QBZ4", "QBZ5", "QBZ9", "QBZ10", "QCZ1",
                  "QDZ1", "QDZ2", "QDZ3", "QDZ4", "QDZ6", "QDZ7", "QDZ8", "QDZ9",
                  "QEZ1", "QEZ2", "QEZ3", "QEZ4", "QEZ5", "QHZ1", "QHZ2", "QHZ3", "QHZ4",
                  "SSZ1", "SSZ2", "SSZ3", "SSZ4")
#: every coefficient, in the order of the flat array ``p``
COEFFICIENT_NAMES = (GENERAL_NAMES + SCALING_NAMES + LONGITUDINAL_NAMES + LATERAL_NAMES
                     + ALIGNING_NAMES)
N_COEFFICIENTS = len(COEFFICIENT_NAMES)
#: the inputs (columns of ``Jx``) and outputs (rows) of :func:`mf52_jacobian`
INPUT_NAMES = ("Fz", "kappa", "alpha", "gamma")
OUTPUT_NAMES = ("Fx", "Fy", "Mz")

# positions in p (same order as COEFFICIENT_NAMES; tests/test_magic_formula.py checks it)
(I_FNOMIN, I_UNLOADED_RADIUS, I_VERTICAL_STIFFNESS, I_VERTICAL_DAMPING, I_LFZO, I_LCX, I_LMUX,
 I_LEX, I_LKX, I_LHX, I_LVX, I_LGAX, I_LCY, I_LMUY, I_LEY, I_LKY, I_LHY, I_LVY, I_LGAY, I_LTR,
 I_LRES, I_LGAZ, I_LXAL, I_LYKA, I_LVYKA, I_LS, I_PCX1, I_PDX1, I_PDX2, I_PDX3, I_PEX1, I_PEX2,
 I_PEX3, I_PEX4, I_PKX1, I_PKX2, I_PKX3, I_PHX1, I_PHX2, I_PVX1, I_PVX2, I_RBX1, I_RBX2,
 I_RCX1, I_REX1, I_REX2, I_RHX1, I_PCY1, I_PDY1, I_PDY2, I_PDY3, I_PEY1, I_PEY2, I_PEY3,
 I_PEY4, I_PKY1, I_PKY2, I_PKY3, I_PHY1, I_PHY2, I_PHY3, I_PVY1, I_PVY2, I_PVY3, I_PVY4,
 I_RBY1, I_RBY2, I_RBY3, I_RCY1, I_REY1, I_REY2, I_RHY1, I_RHY2, I_RVY1, I_RVY2, I_RVY3,
 I_RVY4, I_RVY5, I_RVY6, I_QBZ1, I_QBZ2, I_QBZ3, I_QBZ4, I_QBZ5, I_QBZ9, I_QBZ10, I_QCZ1,
 I_QDZ1, I_QDZ2, I_QDZ3, I_QDZ4, I_QDZ6, I_QDZ7, I_QDZ8, I_QDZ9, I_QEZ1, I_QEZ2, I_QEZ3,
 I_QEZ4, I_QEZ5, I_QHZ1, I_QHZ2, I_QHZ3, I_QHZ4, I_SSZ1, I_SSZ2, I_SSZ3, I_SSZ4) = range(108)


def coefficient_index() -> dict[str, int]:
    """Position of every coefficient name in the flat array ``p``."""
    return {name: i for i, name in enumerate(COEFFICIENT_NAMES)}


def default_value(name: str) -> float:
    """Default of a coefficient that a data set does not give: 1 for the scaling factors,
    0 otherwise (the MF 5.2 convention)."""
    return 1.0 if name in SCALING_NAMES else 0.0


def coefficient_array(values: Mapping[str, float]) -> np.ndarray:
    """The flat array ``p`` from a ``name -> value`` mapping (names case-insensitive); names
    not given take :func:`default_value`.  An unknown name raises
    :class:`~workbench.errors.UnknownNameError`; ``FNOMIN`` and ``LFZO`` must be positive
    (:class:`~workbench.errors.ModelError`)."""
    index = coefficient_index()
    p = np.array([default_value(name) for name in COEFFICIENT_NAMES])
    for name, value in values.items():
        key = name.upper()
        if key not in index:
            raise UnknownNameError("Magic Formula coefficient", name, COEFFICIENT_NAMES)
        p[index[key]] = float(value)
    for key in ("FNOMIN", "LFZO"):
        if not p[index[key]] > 0.0:
            raise ModelError(f"Magic Formula coefficient {key} must be positive, "
                             f"got {p[index[key]]!r}")
    return p


# ----------------------------------------------------------------------------------------
# scalar helpers (complex-step safe: real-part tests only)
# ----------------------------------------------------------------------------------------


@njit(cache=True)
def _sgn(x):
    """Sign with sgn(0) = +1 (as the book's sgn in the epsilon guards)."""
    if x.real >= 0.0:
        return 1.0
    return -1.0


@njit(cache=True)
def _abs(x):
    """|x| by the real part (abs() of a complex number is its modulus)."""
    if x.real >= 0.0:
        return x
    return -x


@njit(cache=True)
def _mf_sin(B, C, D, E, x):
    """The Magic Formula ``D sin(C atan(B x - E (B x - atan(B x))))``."""
    u = B * x
    return D * np.sin(C * np.arctan(u - E * (u - np.arctan(u))))


@njit(cache=True)
def _mf_cos(B, C, E, x):
    """The cosine form ``cos(C atan(B x - E (B x - atan(B x))))`` (weighting functions)."""
    u = B * x
    return np.cos(C * np.arctan(u - E * (u - np.arctan(u))))


@njit(cache=True)
def _mf_sin_dir(B, C, D, E, x, dB, dC, dD, dE, dx):
    """:func:`_mf_sin` and its directional derivative."""
    u = B * x
    du = dB * x + B * dx
    au = np.arctan(u)
    dau = du / (1.0 + u * u)
    w = u - E * (u - au)
    dw = du - dE * (u - au) - E * (du - dau)
    aw = np.arctan(w)
    phi = C * aw
    dphi = dC * aw + C * dw / (1.0 + w * w)
    s = np.sin(phi)
    return D * s, dD * s + D * np.cos(phi) * dphi


@njit(cache=True)
def _mf_cos_dir(B, C, E, x, dB, dC, dE, dx):
    """:func:`_mf_cos` and its directional derivative."""
    u = B * x
    du = dB * x + B * dx
    au = np.arctan(u)
    dau = du / (1.0 + u * u)
    w = u - E * (u - au)
    dw = du - dE * (u - au) - E * (du - dau)
    aw = np.arctan(w)
    phi = C * aw
    dphi = dC * aw + C * dw / (1.0 + w * w)
    return np.cos(phi), -np.sin(phi) * dphi


# ----------------------------------------------------------------------------------------
# values
# ----------------------------------------------------------------------------------------


@njit(cache=True)
def _mf52_all(Fz, kappa, alpha, gamma, p):
    """Every output of the law: ``(Fx, Fy, Mz, Fx0, Fy0, Mz0, Kx, Ky, mux, muy)``
    (combined forces, pure-slip forces, longitudinal slip stiffness dFx0/dkappa, cornering
    stiffness dFy0/dalpha, friction coefficients).  Equation numbers: docs/magic-formula.md."""
    z = 0.0 * Fz
    if Fz.real <= 0.0:
        return z, z, z, z, z, z, z, z, z, z
    # ---- load, camber (4.E1, 4.E2a; MF 5.2 camber scaling)
    Fz0p = p[I_FNOMIN] * p[I_LFZO]
    dfz = (Fz - Fz0p) / Fz0p
    R0 = p[I_UNLOADED_RADIUS]
    LMUX = p[I_LMUX]
    LMUY = p[I_LMUY]
    LKY = p[I_LKY]
    gx = gamma * p[I_LGAX]
    gy = gamma * p[I_LGAY]
    gz = gamma * p[I_LGAZ]
    # ---- longitudinal force, pure slip (4.E9-4.E18)
    Cx = p[I_PCX1] * p[I_LCX]
    mux = (p[I_PDX1] + p[I_PDX2] * dfz) * (1.0 - p[I_PDX3] * gx * gx) * LMUX
    Dx = mux * Fz
    Kx = Fz * (p[I_PKX1] + p[I_PKX2] * dfz) * np.exp(p[I_PKX3] * dfz) * p[I_LKX]
    Bx = Kx / (Cx * Dx + EPS * _sgn(Dx))
    SHx = (p[I_PHX1] + p[I_PHX2] * dfz) * p[I_LHX]
    SVx = Fz * (p[I_PVX1] + p[I_PVX2] * dfz) * p[I_LVX] * LMUX
    kx = kappa + SHx
    Ex = ((p[I_PEX1] + p[I_PEX2] * dfz + p[I_PEX3] * dfz * dfz)
          * (1.0 - p[I_PEX4] * _sgn(kx)) * p[I_LEX])
    if Ex.real > 1.0:
        Ex = 1.0 + 0.0 * Ex
    Fx0 = _mf_sin(Bx, Cx, Dx, Ex, kx) + SVx
    # ---- lateral force, pure slip (4.E19-4.E29, MF 5.2 camber terms)
    Cy = p[I_PCY1] * p[I_LCY]
    muy = (p[I_PDY1] + p[I_PDY2] * dfz) * (1.0 - p[I_PDY3] * gy * gy) * LMUY
    Dy = muy * Fz
    Ky = (p[I_PKY1] * Fz0p * np.sin(2.0 * np.arctan(Fz / (p[I_PKY2] * Fz0p)))
          * (1.0 - p[I_PKY3] * _abs(gy)) * LKY)
    By = Ky / (Cy * Dy + EPS * _sgn(Dy))
    SHy = (p[I_PHY1] + p[I_PHY2] * dfz) * p[I_LHY] + p[I_PHY3] * gy
    SVy = (Fz * ((p[I_PVY1] + p[I_PVY2] * dfz) * p[I_LVY] + (p[I_PVY3] + p[I_PVY4] * dfz) * gy)
           * LMUY)
    ay = alpha + SHy
    Ey = ((p[I_PEY1] + p[I_PEY2] * dfz) * (1.0 - (p[I_PEY3] + p[I_PEY4] * gy) * _sgn(ay))
          * p[I_LEY])
    if Ey.real > 1.0:
        Ey = 1.0 + 0.0 * Ey
    Fy0 = _mf_sin(By, Cy, Dy, Ey, ay) + SVy
    # ---- aligning moment: trail and residual moment parameters (4.E31-4.E49, MF 5.2 forms)
    SHt = p[I_QHZ1] + p[I_QHZ2] * dfz + (p[I_QHZ3] + p[I_QHZ4] * dfz) * gz
    at = alpha + SHt
    Kyp = Ky + EPS * _sgn(Ky)
    ar = alpha + SHy + SVy / Kyp
    Bt = ((p[I_QBZ1] + p[I_QBZ2] * dfz + p[I_QBZ3] * dfz * dfz)
          * (1.0 + p[I_QBZ4] * gz + p[I_QBZ5] * _abs(gz)) * LKY / LMUY)
    Ct = p[I_QCZ1]
    Dt = (Fz * (p[I_QDZ1] + p[I_QDZ2] * dfz) * (1.0 + p[I_QDZ3] * gz + p[I_QDZ4] * gz * gz)
          * R0 / Fz0p * p[I_LTR])
    Et = ((p[I_QEZ1] + p[I_QEZ2] * dfz + p[I_QEZ3] * dfz * dfz)
          * (1.0 + (p[I_QEZ4] + p[I_QEZ5] * gz) * (2.0 / np.pi) * np.arctan(Bt * Ct * at)))
    if Et.real > 1.0:
        Et = 1.0 + 0.0 * Et
    Br = p[I_QBZ9] * LKY / LMUY + p[I_QBZ10] * By * Cy
    Dr = (Fz * ((p[I_QDZ6] + p[I_QDZ7] * dfz) * p[I_LRES] + (p[I_QDZ8] + p[I_QDZ9] * dfz) * gz)
          * R0 * LMUY)
    ca = np.cos(alpha)
    Mz0 = -Dt * _mf_cos(Bt, Ct, Et, at) * ca * Fy0 + Dr * np.cos(np.arctan(Br * ar)) * ca
    # ---- longitudinal force, combined slip (4.E50-4.E57)
    Bxa = p[I_RBX1] * np.cos(np.arctan(p[I_RBX2] * kappa)) * p[I_LXAL]
    Cxa = p[I_RCX1]
    Exa = p[I_REX1] + p[I_REX2] * dfz
    if Exa.real > 1.0:
        Exa = 1.0 + 0.0 * Exa
    SHxa = p[I_RHX1]
    Gxa = _mf_cos(Bxa, Cxa, Exa, alpha + SHxa) / _mf_cos(Bxa, Cxa, Exa, SHxa)
    Fx = Gxa * Fx0
    # ---- lateral force, combined slip (4.E58-4.E67)
    DVyk = (muy * Fz * (p[I_RVY1] + p[I_RVY2] * dfz + p[I_RVY3] * gy)
            * np.cos(np.arctan(p[I_RVY4] * alpha)))
    SVyk = DVyk * np.sin(p[I_RVY5] * np.arctan(p[I_RVY6] * kappa)) * p[I_LVYKA]
    SHyk = p[I_RHY1] + p[I_RHY2] * dfz
    Byk = p[I_RBY1] * np.cos(np.arctan(p[I_RBY2] * (alpha - p[I_RBY3]))) * p[I_LYKA]
    Cyk = p[I_RCY1]
    Eyk = p[I_REY1] + p[I_REY2] * dfz
    if Eyk.real > 1.0:
        Eyk = 1.0 + 0.0 * Eyk
    Gyk = _mf_cos(Byk, Cyk, Eyk, kappa + SHyk) / _mf_cos(Byk, Cyk, Eyk, SHyk)
    Fy = Gyk * Fy0 + SVyk
    # ---- aligning moment, combined slip (MF 5.2: Besselink et al. 2010 eqs. A54-A56)
    q = Kx / Kyp * kappa
    ateq = np.arctan(np.sqrt(np.tan(at) ** 2 + q * q)) * _sgn(at)
    areq = np.arctan(np.sqrt(np.tan(ar) ** 2 + q * q)) * _sgn(ar)
    t = Dt * _mf_cos(Bt, Ct, Et, ateq) * ca
    Mzr = Dr * np.cos(np.arctan(Br * areq)) * ca
    s = R0 * (p[I_SSZ1] + p[I_SSZ2] * Fy / Fz0p + (p[I_SSZ3] + p[I_SSZ4] * dfz) * gz) * p[I_LS]
    Mz = -t * (Fy - SVyk) + Mzr + s * Fx
    return Fx, Fy, Mz, Fx0, Fy0, Mz0, Kx, Ky, mux, muy


@njit(cache=True)
def mf52_forces(Fz, kappa, alpha, gamma, p, F):
    """Combined-slip forces ``F = (Fx, Fy, Mz)`` of the MF 5.2 law (module docstring) at the
    normal load ``Fz`` [N], longitudinal slip ``kappa``, slip angle ``alpha`` [rad] and
    inclination ``gamma`` [rad], coefficients ``p`` (:data:`COEFFICIENT_NAMES`).

    Returns the diagnostics ``(Kx, Ky, mux, muy)``: longitudinal slip stiffness
    ``dFx0/dkappa`` and cornering stiffness ``dFy0/dalpha`` at zero (shifted) slip [N/-, N/rad]
    and the peak friction coefficients of the pure-slip curves.
    """
    Fx, Fy, Mz, Fx0, Fy0, Mz0, Kx, Ky, mux, muy = _mf52_all(Fz, kappa, alpha, gamma, p)
    F[0] = Fx
    F[1] = Fy
    F[2] = Mz
    return Kx, Ky, mux, muy


@njit(cache=True)
def mf52_pure_slip(Fz, kappa, alpha, gamma, p, F0):
    """Pure-slip forces ``F0 = (Fx0, Fy0, Mz0)``: ``Fx0(Fz, kappa, gamma)`` with no side
    slip, ``Fy0(Fz, alpha, gamma)`` and ``Mz0(Fz, alpha, gamma)`` with no longitudinal slip
    (the ``s Fx`` term of the combined moment is not part of ``Mz0``).  Returns the
    diagnostics of :func:`mf52_forces`."""
    Fx, Fy, Mz, Fx0, Fy0, Mz0, Kx, Ky, mux, muy = _mf52_all(Fz, kappa, alpha, gamma, p)
    F0[0] = Fx0
    F0[1] = Fy0
    F0[2] = Mz0
    return Kx, Ky, mux, muy


# ----------------------------------------------------------------------------------------
# directional derivative (forward mode, one direction, no allocation)
# ----------------------------------------------------------------------------------------


@njit(cache=True)
def _eq_slip_dir(a, da, q, dq):
    """``a_eq = atan(sqrt(tan(a)^2 + q^2)) sgn(a)`` (MF 5.2 equivalent slip angle of the
    combined moment) and its derivative.  At ``tan(a) = q = 0`` the root has no derivative;
    there ``a_eq = a`` along ``q = 0`` and ``da`` is returned (the trail and residual-moment
    cosines that use ``a_eq`` have zero slope at 0, so their tangent is exact either way)."""
    ta = np.tan(a)
    dta = (1.0 + ta * ta) * da
    u = np.sqrt(ta * ta + q * q)
    sg = _sgn(a)
    if u.real == 0.0:
        return 0.0 * a, da
    du = (ta * dta + q * dq) / u
    return np.arctan(u) * sg, sg * du / (1.0 + u * u)


@njit(cache=True)
def mf52_forces_dir(Fz, kappa, alpha, gamma, p, dFz, dkappa, dalpha, dgamma, dp, F, dF):
    """Combined forces ``F = (Fx, Fy, Mz)`` (as :func:`mf52_forces`) and their directional
    derivative ``dF`` along the input direction ``(dFz, dkappa, dalpha, dgamma)`` and the
    coefficient direction ``dp`` (same layout as ``p``): the forward-mode chain rule of the
    formulas of :func:`_mf52_all`, line by line (tested against complex-step differences).

    Returns ``(Kx, Ky)`` (as :func:`mf52_forces`).
    """
    for i in range(3):
        F[i] = 0.0
        dF[i] = 0.0
    if Fz <= 0.0:
        return 0.0, 0.0
    # ---- load, camber
    FN = p[I_FNOMIN]
    LFZO = p[I_LFZO]
    Fz0p = FN * LFZO
    dFz0p = dp[I_FNOMIN] * LFZO + FN * dp[I_LFZO]
    dfz = (Fz - Fz0p) / Fz0p
    ddfz = dFz / Fz0p - Fz * dFz0p / (Fz0p * Fz0p)
    R0 = p[I_UNLOADED_RADIUS]
    dR0 = dp[I_UNLOADED_RADIUS]
    LMUX = p[I_LMUX]
    dLMUX = dp[I_LMUX]
    LMUY = p[I_LMUY]
    dLMUY = dp[I_LMUY]
    LKY = p[I_LKY]
    dLKY = dp[I_LKY]
    gx = gamma * p[I_LGAX]
    dgx = dgamma * p[I_LGAX] + gamma * dp[I_LGAX]
    gy = gamma * p[I_LGAY]
    dgy = dgamma * p[I_LGAY] + gamma * dp[I_LGAY]
    gz = gamma * p[I_LGAZ]
    dgz = dgamma * p[I_LGAZ] + gamma * dp[I_LGAZ]
    # ---- longitudinal force, pure slip
    Cx = p[I_PCX1] * p[I_LCX]
    dCx = dp[I_PCX1] * p[I_LCX] + p[I_PCX1] * dp[I_LCX]
    m1 = p[I_PDX1] + p[I_PDX2] * dfz
    dm1 = dp[I_PDX1] + dp[I_PDX2] * dfz + p[I_PDX2] * ddfz
    m2 = 1.0 - p[I_PDX3] * gx * gx
    dm2 = -dp[I_PDX3] * gx * gx - 2.0 * p[I_PDX3] * gx * dgx
    mux = m1 * m2 * LMUX
    dmux = (dm1 * m2 + m1 * dm2) * LMUX + m1 * m2 * dLMUX
    Dx = mux * Fz
    dDx = dmux * Fz + mux * dFz
    k1 = p[I_PKX1] + p[I_PKX2] * dfz
    dk1 = dp[I_PKX1] + dp[I_PKX2] * dfz + p[I_PKX2] * ddfz
    ek = np.exp(p[I_PKX3] * dfz)
    dek = ek * (dp[I_PKX3] * dfz + p[I_PKX3] * ddfz)
    LKX = p[I_LKX]
    Kx = Fz * k1 * ek * LKX
    dKx = (dFz * k1 * ek + Fz * dk1 * ek + Fz * k1 * dek) * LKX + Fz * k1 * ek * dp[I_LKX]
    den = Cx * Dx + EPS * _sgn(Dx)
    dden = dCx * Dx + Cx * dDx
    Bx = Kx / den
    dBx = (dKx - Bx * dden) / den
    h1 = p[I_PHX1] + p[I_PHX2] * dfz
    dh1 = dp[I_PHX1] + dp[I_PHX2] * dfz + p[I_PHX2] * ddfz
    SHx = h1 * p[I_LHX]
    dSHx = dh1 * p[I_LHX] + h1 * dp[I_LHX]
    v1 = p[I_PVX1] + p[I_PVX2] * dfz
    dv1 = dp[I_PVX1] + dp[I_PVX2] * dfz + p[I_PVX2] * ddfz
    LVX = p[I_LVX]
    SVx = Fz * v1 * LVX * LMUX
    dSVx = (dFz * v1 + Fz * dv1) * LVX * LMUX + Fz * v1 * (dp[I_LVX] * LMUX + LVX * dLMUX)
    kx = kappa + SHx
    dkx = dkappa + dSHx
    e1 = p[I_PEX1] + p[I_PEX2] * dfz + p[I_PEX3] * dfz * dfz
    de1 = (dp[I_PEX1] + dp[I_PEX2] * dfz + dp[I_PEX3] * dfz * dfz
           + (p[I_PEX2] + 2.0 * p[I_PEX3] * dfz) * ddfz)
    sk = _sgn(kx)
    e2 = 1.0 - p[I_PEX4] * sk
    de2 = -dp[I_PEX4] * sk
    Ex = e1 * e2 * p[I_LEX]
    dEx = (de1 * e2 + e1 * de2) * p[I_LEX] + e1 * e2 * dp[I_LEX]
    if Ex > 1.0:
        Ex = 1.0
        dEx = 0.0
    Fx0, dFx0 = _mf_sin_dir(Bx, Cx, Dx, Ex, kx, dBx, dCx, dDx, dEx, dkx)
    Fx0 += SVx
    dFx0 += dSVx
    # ---- lateral force, pure slip
    Cy = p[I_PCY1] * p[I_LCY]
    dCy = dp[I_PCY1] * p[I_LCY] + p[I_PCY1] * dp[I_LCY]
    u1 = p[I_PDY1] + p[I_PDY2] * dfz
    du1 = dp[I_PDY1] + dp[I_PDY2] * dfz + p[I_PDY2] * ddfz
    u2 = 1.0 - p[I_PDY3] * gy * gy
    du2 = -dp[I_PDY3] * gy * gy - 2.0 * p[I_PDY3] * gy * dgy
    muy = u1 * u2 * LMUY
    dmuy = (du1 * u2 + u1 * du2) * LMUY + u1 * u2 * dLMUY
    Dy = muy * Fz
    dDy = dmuy * Fz + muy * dFz
    PKY1 = p[I_PKY1]
    PKY2 = p[I_PKY2]
    PKY3 = p[I_PKY3]
    c0 = PKY2 * Fz0p
    dc0 = dp[I_PKY2] * Fz0p + PKY2 * dFz0p
    zk = Fz / c0
    dzk = (dFz - zk * dc0) / c0
    th = 2.0 * np.arctan(zk)
    dth = 2.0 * dzk / (1.0 + zk * zk)
    sth = np.sin(th)
    dsth = np.cos(th) * dth
    gya = _abs(gy)
    dgya = _sgn(gy) * dgy
    c3 = 1.0 - PKY3 * gya
    dc3 = -dp[I_PKY3] * gya - PKY3 * dgya
    Ky = PKY1 * Fz0p * sth * c3 * LKY
    dKy = ((dp[I_PKY1] * Fz0p * sth * c3 + PKY1 * dFz0p * sth * c3 + PKY1 * Fz0p * dsth * c3
            + PKY1 * Fz0p * sth * dc3) * LKY + PKY1 * Fz0p * sth * c3 * dLKY)
    deny = Cy * Dy + EPS * _sgn(Dy)
    ddeny = dCy * Dy + Cy * dDy
    By = Ky / deny
    dBy = (dKy - By * ddeny) / deny
    h2 = p[I_PHY1] + p[I_PHY2] * dfz
    dh2 = dp[I_PHY1] + dp[I_PHY2] * dfz + p[I_PHY2] * ddfz
    SHy = h2 * p[I_LHY] + p[I_PHY3] * gy
    dSHy = dh2 * p[I_LHY] + h2 * dp[I_LHY] + dp[I_PHY3] * gy + p[I_PHY3] * dgy
    w1 = p[I_PVY1] + p[I_PVY2] * dfz
    dw1 = dp[I_PVY1] + dp[I_PVY2] * dfz + p[I_PVY2] * ddfz
    w2 = p[I_PVY3] + p[I_PVY4] * dfz
    dw2 = dp[I_PVY3] + dp[I_PVY4] * dfz + p[I_PVY4] * ddfz
    LVY = p[I_LVY]
    w3 = w1 * LVY + w2 * gy
    dw3 = dw1 * LVY + w1 * dp[I_LVY] + dw2 * gy + w2 * dgy
    SVy = Fz * w3 * LMUY
    dSVy = dFz * w3 * LMUY + Fz * dw3 * LMUY + Fz * w3 * dLMUY
    ay = alpha + SHy
    day = dalpha + dSHy
    f1 = p[I_PEY1] + p[I_PEY2] * dfz
    df1 = dp[I_PEY1] + dp[I_PEY2] * dfz + p[I_PEY2] * ddfz
    sy = _sgn(ay)
    f2 = 1.0 - (p[I_PEY3] + p[I_PEY4] * gy) * sy
    df2 = -(dp[I_PEY3] + dp[I_PEY4] * gy + p[I_PEY4] * dgy) * sy
    Ey = f1 * f2 * p[I_LEY]
    dEy = (df1 * f2 + f1 * df2) * p[I_LEY] + f1 * f2 * dp[I_LEY]
    if Ey > 1.0:
        Ey = 1.0
        dEy = 0.0
    Fy0, dFy0 = _mf_sin_dir(By, Cy, Dy, Ey, ay, dBy, dCy, dDy, dEy, day)
    Fy0 += SVy
    dFy0 += dSVy
    # ---- aligning moment parameters
    SHt = p[I_QHZ1] + p[I_QHZ2] * dfz + (p[I_QHZ3] + p[I_QHZ4] * dfz) * gz
    dSHt = (dp[I_QHZ1] + dp[I_QHZ2] * dfz + p[I_QHZ2] * ddfz
            + (dp[I_QHZ3] + dp[I_QHZ4] * dfz + p[I_QHZ4] * ddfz) * gz
            + (p[I_QHZ3] + p[I_QHZ4] * dfz) * dgz)
    at = alpha + SHt
    dat = dalpha + dSHt
    Kyp = Ky + EPS * _sgn(Ky)
    dKyp = dKy
    ar = alpha + SHy + SVy / Kyp
    dar = dalpha + dSHy + (dSVy - SVy * dKyp / Kyp) / Kyp
    b1 = p[I_QBZ1] + p[I_QBZ2] * dfz + p[I_QBZ3] * dfz * dfz
    db1 = (dp[I_QBZ1] + dp[I_QBZ2] * dfz + dp[I_QBZ3] * dfz * dfz
           + (p[I_QBZ2] + 2.0 * p[I_QBZ3] * dfz) * ddfz)
    gza = _abs(gz)
    dgza = _sgn(gz) * dgz
    b2 = 1.0 + p[I_QBZ4] * gz + p[I_QBZ5] * gza
    db2 = dp[I_QBZ4] * gz + p[I_QBZ4] * dgz + dp[I_QBZ5] * gza + p[I_QBZ5] * dgza
    rk = LKY / LMUY
    drk = dLKY / LMUY - LKY * dLMUY / (LMUY * LMUY)
    Bt = b1 * b2 * rk
    dBt = (db1 * b2 + b1 * db2) * rk + b1 * b2 * drk
    Ct = p[I_QCZ1]
    dCt = dp[I_QCZ1]
    d1 = p[I_QDZ1] + p[I_QDZ2] * dfz
    dd1 = dp[I_QDZ1] + dp[I_QDZ2] * dfz + p[I_QDZ2] * ddfz
    d2 = 1.0 + p[I_QDZ3] * gz + p[I_QDZ4] * gz * gz
    dd2 = (dp[I_QDZ3] * gz + p[I_QDZ3] * dgz + dp[I_QDZ4] * gz * gz
           + 2.0 * p[I_QDZ4] * gz * dgz)
    LTR = p[I_LTR]
    hr = R0 * LTR / Fz0p
    dhr = (dR0 * LTR + R0 * dp[I_LTR]) / Fz0p - hr * dFz0p / Fz0p
    Dt = Fz * d1 * d2 * hr
    dDt = dFz * d1 * d2 * hr + Fz * dd1 * d2 * hr + Fz * d1 * dd2 * hr + Fz * d1 * d2 * dhr
    e3 = p[I_QEZ1] + p[I_QEZ2] * dfz + p[I_QEZ3] * dfz * dfz
    de3 = (dp[I_QEZ1] + dp[I_QEZ2] * dfz + dp[I_QEZ3] * dfz * dfz
           + (p[I_QEZ2] + 2.0 * p[I_QEZ3] * dfz) * ddfz)
    bat = Bt * Ct * at
    dbat = dBt * Ct * at + Bt * dCt * at + Bt * Ct * dat
    e4 = p[I_QEZ4] + p[I_QEZ5] * gz
    de4 = dp[I_QEZ4] + dp[I_QEZ5] * gz + p[I_QEZ5] * dgz
    abat = (2.0 / np.pi) * np.arctan(bat)
    dabat = (2.0 / np.pi) * dbat / (1.0 + bat * bat)
    e5 = 1.0 + e4 * abat
    de5 = de4 * abat + e4 * dabat
    Et = e3 * e5
    dEt = de3 * e5 + e3 * de5
    if Et > 1.0:
        Et = 1.0
        dEt = 0.0
    Br = p[I_QBZ9] * rk + p[I_QBZ10] * By * Cy
    dBr = (dp[I_QBZ9] * rk + p[I_QBZ9] * drk + dp[I_QBZ10] * By * Cy
           + p[I_QBZ10] * (dBy * Cy + By * dCy))
    r1 = p[I_QDZ6] + p[I_QDZ7] * dfz
    dr1 = dp[I_QDZ6] + dp[I_QDZ7] * dfz + p[I_QDZ7] * ddfz
    r2 = p[I_QDZ8] + p[I_QDZ9] * dfz
    dr2 = dp[I_QDZ8] + dp[I_QDZ9] * dfz + p[I_QDZ9] * ddfz
    LRES = p[I_LRES]
    r3 = r1 * LRES + r2 * gz
    dr3 = dr1 * LRES + r1 * dp[I_LRES] + dr2 * gz + r2 * dgz
    Dr = Fz * r3 * R0 * LMUY
    dDr = (dFz * r3 * R0 + Fz * dr3 * R0 + Fz * r3 * dR0) * LMUY + Fz * r3 * R0 * dLMUY
    ca = np.cos(alpha)
    dca = -np.sin(alpha) * dalpha
    # ---- longitudinal force, combined slip
    xk = p[I_RBX2] * kappa
    dxk = dp[I_RBX2] * kappa + p[I_RBX2] * dkappa
    axk = np.arctan(xk)
    daxk = dxk / (1.0 + xk * xk)
    LXAL = p[I_LXAL]
    Bxa = p[I_RBX1] * np.cos(axk) * LXAL
    dBxa = ((dp[I_RBX1] * np.cos(axk) - p[I_RBX1] * np.sin(axk) * daxk) * LXAL
            + p[I_RBX1] * np.cos(axk) * dp[I_LXAL])
    Cxa = p[I_RCX1]
    dCxa = dp[I_RCX1]
    Exa = p[I_REX1] + p[I_REX2] * dfz
    dExa = dp[I_REX1] + dp[I_REX2] * dfz + p[I_REX2] * ddfz
    if Exa > 1.0:
        Exa = 1.0
        dExa = 0.0
    SHxa = p[I_RHX1]
    dSHxa = dp[I_RHX1]
    gn, dgn = _mf_cos_dir(Bxa, Cxa, Exa, alpha + SHxa, dBxa, dCxa, dExa, dalpha + dSHxa)
    g0, dg0 = _mf_cos_dir(Bxa, Cxa, Exa, SHxa, dBxa, dCxa, dExa, dSHxa)
    Gxa = gn / g0
    dGxa = (dgn - Gxa * dg0) / g0
    Fx = Gxa * Fx0
    dFx = dGxa * Fx0 + Gxa * dFx0
    # ---- lateral force, combined slip
    x4 = p[I_RVY4] * alpha
    dx4 = dp[I_RVY4] * alpha + p[I_RVY4] * dalpha
    a4 = np.arctan(x4)
    da4 = dx4 / (1.0 + x4 * x4)
    ca4 = np.cos(a4)
    dca4 = -np.sin(a4) * da4
    v2 = p[I_RVY1] + p[I_RVY2] * dfz + p[I_RVY3] * gy
    dv2 = dp[I_RVY1] + dp[I_RVY2] * dfz + p[I_RVY2] * ddfz + dp[I_RVY3] * gy + p[I_RVY3] * dgy
    DVyk = muy * Fz * v2 * ca4
    dDVyk = (dmuy * Fz * v2 * ca4 + muy * dFz * v2 * ca4 + muy * Fz * dv2 * ca4
             + muy * Fz * v2 * dca4)
    x6 = p[I_RVY6] * kappa
    dx6 = dp[I_RVY6] * kappa + p[I_RVY6] * dkappa
    a6 = np.arctan(x6)
    da6 = dx6 / (1.0 + x6 * x6)
    ph5 = p[I_RVY5] * a6
    dph5 = dp[I_RVY5] * a6 + p[I_RVY5] * da6
    s5 = np.sin(ph5)
    ds5 = np.cos(ph5) * dph5
    LVYKA = p[I_LVYKA]
    SVyk = DVyk * s5 * LVYKA
    dSVyk = (dDVyk * s5 + DVyk * ds5) * LVYKA + DVyk * s5 * dp[I_LVYKA]
    SHyk = p[I_RHY1] + p[I_RHY2] * dfz
    dSHyk = dp[I_RHY1] + dp[I_RHY2] * dfz + p[I_RHY2] * ddfz
    x2 = p[I_RBY2] * (alpha - p[I_RBY3])
    dx2 = dp[I_RBY2] * (alpha - p[I_RBY3]) + p[I_RBY2] * (dalpha - dp[I_RBY3])
    a2 = np.arctan(x2)
    da2 = dx2 / (1.0 + x2 * x2)
    LYKA = p[I_LYKA]
    Byk = p[I_RBY1] * np.cos(a2) * LYKA
    dByk = ((dp[I_RBY1] * np.cos(a2) - p[I_RBY1] * np.sin(a2) * da2) * LYKA
            + p[I_RBY1] * np.cos(a2) * dp[I_LYKA])
    Cyk = p[I_RCY1]
    dCyk = dp[I_RCY1]
    Eyk = p[I_REY1] + p[I_REY2] * dfz
    dEyk = dp[I_REY1] + dp[I_REY2] * dfz + p[I_REY2] * ddfz
    if Eyk > 1.0:
        Eyk = 1.0
        dEyk = 0.0
    hn, dhn = _mf_cos_dir(Byk, Cyk, Eyk, kappa + SHyk, dByk, dCyk, dEyk, dkappa + dSHyk)
    h0, dh0 = _mf_cos_dir(Byk, Cyk, Eyk, SHyk, dByk, dCyk, dEyk, dSHyk)
    Gyk = hn / h0
    dGyk = (dhn - Gyk * dh0) / h0
    Fy = Gyk * Fy0 + SVyk
    dFy = dGyk * Fy0 + Gyk * dFy0 + dSVyk
    # ---- aligning moment, combined slip
    rq = Kx / Kyp
    q = rq * kappa
    dq = (dKx - rq * dKyp) / Kyp * kappa + rq * dkappa
    ateq, dateq = _eq_slip_dir(at, dat, q, dq)
    areq, dareq = _eq_slip_dir(ar, dar, q, dq)
    tc, dtc = _mf_cos_dir(Bt, Ct, Et, ateq, dBt, dCt, dEt, dateq)
    t = Dt * tc * ca
    dt = dDt * tc * ca + Dt * dtc * ca + Dt * tc * dca
    xr = Br * areq
    dxr = dBr * areq + Br * dareq
    axr = np.arctan(xr)
    cr = np.cos(axr)
    dcr = -np.sin(axr) * dxr / (1.0 + xr * xr)
    Mzr = Dr * cr * ca
    dMzr = dDr * cr * ca + Dr * dcr * ca + Dr * cr * dca
    si = p[I_SSZ1] + p[I_SSZ2] * Fy / Fz0p + (p[I_SSZ3] + p[I_SSZ4] * dfz) * gz
    dsi = (dp[I_SSZ1] + dp[I_SSZ2] * Fy / Fz0p + p[I_SSZ2] * (dFy - Fy * dFz0p / Fz0p) / Fz0p
           + (dp[I_SSZ3] + dp[I_SSZ4] * dfz + p[I_SSZ4] * ddfz) * gz
           + (p[I_SSZ3] + p[I_SSZ4] * dfz) * dgz)
    LS = p[I_LS]
    s = R0 * si * LS
    ds = dR0 * si * LS + R0 * dsi * LS + R0 * si * dp[I_LS]
    Fyr = Fy - SVyk
    dFyr = dFy - dSVyk
    Mz = -t * Fyr + Mzr + s * Fx
    dMz = -dt * Fyr - t * dFyr + dMzr + ds * Fx + s * dFx
    F[0] = Fx
    F[1] = Fy
    F[2] = Mz
    dF[0] = dFx
    dF[1] = dFy
    dF[2] = dMz
    return Kx, Ky


@njit(cache=True)
def mf52_jacobian(Fz, kappa, alpha, gamma, p, F, Jx, Jp):
    """``F = (Fx, Fy, Mz)``, ``Jx = dF/d(Fz, kappa, alpha, gamma)`` (3 x 4) and
    ``Jp = dF/dp`` (3 x len(p)): one :func:`mf52_forces_dir` per column (exact)."""
    npar = p.shape[0]
    dp = np.zeros(npar)
    dF = np.zeros(3)
    dx = np.zeros(4)
    for j in range(4):
        dx[j] = 1.0
        mf52_forces_dir(Fz, kappa, alpha, gamma, p, dx[0], dx[1], dx[2], dx[3], dp, F, dF)
        dx[j] = 0.0
        for i in range(3):
            Jx[i, j] = dF[i]
    for j in range(npar):
        dp[j] = 1.0
        mf52_forces_dir(Fz, kappa, alpha, gamma, p, 0.0, 0.0, 0.0, 0.0, dp, F, dF)
        dp[j] = 0.0
        for i in range(3):
            Jp[i, j] = dF[i]


# ----------------------------------------------------------------------------------------
# slips from the contact-centre velocities (regularised |V_x|)
# ----------------------------------------------------------------------------------------


@njit(cache=True)
def contact_slip(vx, vy, vr, v_eps):
    """``(kappa, tan_alpha, alpha)`` from the longitudinal and lateral velocities ``vx``,
    ``vy`` of the contact centre and the rolling speed ``vr = omega R_e``, with ``|vx|``
    regularised as ``V_d = sqrt(vx^2 + v_eps^2)`` (module docstring):
    ``kappa = (vr - vx)/V_d``, ``tan_alpha = vy/V_d``, ``alpha = atan(tan_alpha)``."""
    vd = np.sqrt(vx * vx + v_eps * v_eps)
    kappa = (vr - vx) / vd
    tana = vy / vd
    return kappa, tana, np.arctan(tana)


@njit(cache=True)
def contact_slip_dir(vx, vy, vr, v_eps, dvx, dvy, dvr, dv_eps):
    """:func:`contact_slip` and its directional derivative along
    ``(dvx, dvy, dvr, dv_eps)``: ``(kappa, tan_alpha, alpha, dkappa, dtan_alpha, dalpha)``."""
    vd = np.sqrt(vx * vx + v_eps * v_eps)
    dvd = (vx * dvx + v_eps * dv_eps) / vd
    kappa = (vr - vx) / vd
    dkappa = (dvr - dvx - kappa * dvd) / vd
    tana = vy / vd
    dtana = (dvy - tana * dvd) / vd
    return kappa, tana, np.arctan(tana), dkappa, dtana, dtana / (1.0 + tana * tana)
