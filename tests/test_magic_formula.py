"""Magic Formula 5.2 tire law (workbench/forces/magic_formula.py), its exact tangent, the slip
definitions with the regularised |V_x|, and the .tir reader (workbench/forces/tir.py).

The references are independent of the kernels: the peak ``D = mu Fz``, the slip stiffnesses
``K``, the shifts and the moment arm ``s`` are computed here by hand from the coefficient
values read from the file, and derivatives are checked against complex-step differences of the
value kernel.  The cross-check against an independent implementation (MFeval, run outside the
test suite because it is MATLAB code) is in docs/magic-formula.md, "Checked against".
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import minimize_scalar

from workbench.errors import ModelError, UnknownNameError
from workbench.forces import magic_formula as MF
from workbench.forces import tir

DATA = tir.read_tir(tir.EXAMPLE_TIR)
P = DATA.array
C = DATA.coefficients
FZ0 = C["FNOMIN"]                      # LFZO = 1 in the file
IDX = MF.coefficient_index()


def forces(Fz, kappa, alpha, gamma, p=P):
    F = np.zeros(3)
    MF.mf52_forces(Fz, kappa, alpha, gamma, p, F)
    return F


def pure(Fz, kappa, alpha, gamma, p=P):
    F0 = np.zeros(3)
    MF.mf52_pure_slip(Fz, kappa, alpha, gamma, p, F0)
    return F0


def tangent(Fz, kappa, alpha, gamma, dx, p=P, dp=None):
    F, dF = np.zeros(3), np.zeros(3)
    dp = np.zeros(len(p)) if dp is None else dp
    MF.mf52_forces_dir(Fz, kappa, alpha, gamma, p, dx[0], dx[1], dx[2], dx[3], dp, F, dF)
    return F, dF


def with_values(p=P, **values):
    q = p.copy()
    for name, value in values.items():
        q[IDX[name]] = value
    return q


def dfz(Fz):
    return (Fz - FZ0) / FZ0


# ----------------------------------------------------------------------------------------
# coefficient layout
# ----------------------------------------------------------------------------------------


def test_index_constants_follow_the_coefficient_names():
    assert len(set(MF.COEFFICIENT_NAMES)) == MF.N_COEFFICIENTS == len(P)
    for i, name in enumerate(MF.COEFFICIENT_NAMES):
        assert getattr(MF, f"I_{name}") == i == IDX[name]


def test_coefficient_array_defaults_scalings_to_one_and_the_rest_to_zero():
    p = MF.coefficient_array({"fnomin": 3000.0, "PKY1": -12.0})
    for i, name in enumerate(MF.COEFFICIENT_NAMES):
        expected = {"FNOMIN": 3000.0, "PKY1": -12.0}.get(
            name, 1.0 if name in MF.SCALING_NAMES else 0.0)
        assert p[i] == expected, name
    with pytest.raises(UnknownNameError, match="PKY9"):
        MF.coefficient_array({"FNOMIN": 3000.0, "PKY9": 1.0})
    with pytest.raises(ModelError, match="FNOMIN"):
        MF.coefficient_array({"FNOMIN": 0.0})


# ----------------------------------------------------------------------------------------
# pure-slip shapes against the hand-computed B, C, D, E, K of the formula
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("Fz", [2000.0, 4000.0, 6500.0])
def test_longitudinal_peak_is_D_equal_mu_x_Fz(Fz):
    mu_x = C["PDX1"] + C["PDX2"] * dfz(Fz)             # no camber, LMUX = 1
    D = mu_x * Fz                                      # SVx = 0: PVX1 = PVX2 = 0
    for sign in (1.0, -1.0):
        res = minimize_scalar(lambda k: -sign * pure(Fz, k, 0.0, 0.0)[0], bounds=(-0.6, 0.6),
                              method="bounded", options={"xatol": 1e-10})
        # 1e-9: the optimiser finds the flat top to xatol; the value error is quadratic in it
        assert -res.fun == pytest.approx(D, rel=1e-9)
        assert sign * res.x > 0.0


@pytest.mark.parametrize("Fz", [2000.0, 4000.0, 6500.0])
def test_lateral_peaks_are_D_equal_mu_y_Fz_around_the_vertical_shift(Fz):
    d = dfz(Fz)
    D = abs((C["PDY1"] + C["PDY2"] * d) * Fz)
    SVy = Fz * (C["PVY1"] + C["PVY2"] * d)
    top = minimize_scalar(lambda a: -pure(Fz, 0.0, a, 0.0)[1], bounds=(-0.6, 0.6),
                          method="bounded", options={"xatol": 1e-10})
    bottom = minimize_scalar(lambda a: pure(Fz, 0.0, a, 0.0)[1], bounds=(-0.6, 0.6),
                             method="bounded", options={"xatol": 1e-10})
    assert -top.fun == pytest.approx(SVy + D, rel=1e-9)
    assert bottom.fun == pytest.approx(SVy - D, rel=1e-9)
    assert top.x < 0.0 < bottom.x                      # ISO: Fy opposes alpha (PKY1 < 0)


def test_large_slip_asymptotes_are_D_sin_C_pi_over_2():
    Fz = 5000.0
    d = dfz(Fz)
    Dx = (C["PDX1"] + C["PDX2"] * d) * Fz
    Dy = (C["PDY1"] + C["PDY2"] * d) * Fz
    SVy = Fz * (C["PVY1"] + C["PVY2"] * d)
    # B x = O(1e8): atan(w) is pi/2 to O(1e-8), well inside 1e-7 relative
    assert pure(Fz, 1e7, 0.0, 0.0)[0] == pytest.approx(Dx * math.sin(C["PCX1"] * math.pi / 2),
                                                       rel=1e-7)
    assert pure(Fz, -1e7, 0.0, 0.0)[0] == pytest.approx(
        -Dx * math.sin(C["PCX1"] * math.pi / 2), rel=1e-7)
    assert pure(Fz, 0.0, 1e7, 0.0)[1] == pytest.approx(
        Dy * math.sin(C["PCY1"] * math.pi / 2) + SVy, rel=1e-7)


@pytest.mark.parametrize("Fz", [1500.0, 4000.0, 7000.0])
def test_slip_stiffness_at_zero_slip_is_BCD_equal_the_formula_K(Fz):
    d = dfz(Fz)
    Kx = Fz * (C["PKX1"] + C["PKX2"] * d) * math.exp(C["PKX3"] * d)
    Ky = C["PKY1"] * FZ0 * math.sin(2.0 * math.atan(Fz / (C["PKY2"] * FZ0)))
    SHx = C["PHX1"] + C["PHX2"] * d
    SHy = C["PHY1"] + C["PHY2"] * d
    # the slope at the shifted origin kappa_x = 0, alpha_y = 0 (combined forces, other slip 0)
    _, dF = tangent(Fz, -SHx, 0.0, 0.0, (0.0, 1.0, 0.0, 0.0))
    # 1e-9: B = K/(C D + eps) with eps = 1e-6 against C D of about 1e3..1e4 N
    assert dF[0] == pytest.approx(Kx, rel=1e-9)
    _, dF = tangent(Fz, 0.0, -SHy, 0.0, (0.0, 0.0, 1.0, 0.0))
    assert dF[1] == pytest.approx(Ky, rel=1e-9)
    # the kernel's own diagnostics are the same numbers
    assert MF.mf52_forces(Fz, 0.1, 0.1, 0.0, P, np.zeros(3))[:2] == pytest.approx((Kx, Ky),
                                                                                  rel=1e-14)


def test_cornering_stiffness_is_largest_at_Fz_equal_PKY2_Fz0_where_it_is_PKY1_Fz0():
    Fz_star = C["PKY2"] * FZ0
    Ky = [MF.mf52_forces(Fz, 0.0, 0.0, 0.0, P, np.zeros(3))[1]
          for Fz in (0.9 * Fz_star, Fz_star, 1.1 * Fz_star)]
    assert Ky[1] == pytest.approx(C["PKY1"] * FZ0, rel=1e-14)
    assert abs(Ky[1]) > abs(Ky[0]) and abs(Ky[1]) > abs(Ky[2])


def test_friction_coefficient_falls_with_load_as_PDX2_PDY2_say():
    # PDX2 < 0 and PDY2 > 0 with PDY1 < 0: both |mu| fall linearly in dfz
    mus = [MF.mf52_forces(Fz, 0.0, 0.0, 0.0, P, np.zeros(3))[2:] for Fz in (2000.0, 6000.0)]
    assert abs(mus[1][0]) < abs(mus[0][0]) and abs(mus[1][1]) < abs(mus[0][1])
    assert mus[1][0] - mus[0][0] == pytest.approx(C["PDX2"] * 4000.0 / FZ0, rel=1e-12)
    assert mus[1][1] - mus[0][1] == pytest.approx(C["PDY2"] * 4000.0 / FZ0, rel=1e-12)


SYMMETRIC = with_values(**{name: 0.0 for name in (
    "PHX1", "PHX2", "PVX1", "PVX2", "PEX4", "RHX1", "PHY1", "PHY2", "PHY3", "PVY1", "PVY2",
    "PVY3", "PVY4", "PEY3", "PEY4", "RBY3", "RHY1", "RHY2", "RVY1", "RVY2", "RVY3", "RVY4",
    "RVY5", "RVY6", "QHZ1", "QHZ2", "QHZ3", "QHZ4", "QEZ4", "QEZ5", "QDZ6", "QDZ7", "QDZ8",
    "QDZ9", "SSZ1", "SSZ2", "SSZ3", "SSZ4")})


@pytest.mark.parametrize("kappa,alpha", [(0.04, 0.03), (0.3, -0.12), (-0.02, 0.25)])
def test_without_shifts_Fx_is_odd_in_kappa_and_Fy_Mz_are_odd_in_alpha(kappa, alpha):
    Fz = 4700.0
    F = forces(Fz, kappa, alpha, 0.0, SYMMETRIC)
    for sk, sa in ((-1, 1), (1, -1), (-1, -1)):
        G = forces(Fz, sk * kappa, sa * alpha, 0.0, SYMMETRIC)
        np.testing.assert_allclose(G, [sk * F[0], sa * F[1], sa * F[2]], rtol=1e-13,
                                   atol=1e-12 * np.abs(F).max())
    # and with zero slips there is no force at all
    np.testing.assert_array_equal(forces(Fz, 0.0, 0.0, 0.0, SYMMETRIC), 0.0)


# ----------------------------------------------------------------------------------------
# combined slip, load, camber
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("gamma", [0.0, 0.03, -0.05])
def test_combined_slip_reduces_to_pure_slip_when_the_other_slip_is_zero(gamma):
    Fz = 4500.0
    d = dfz(Fz)
    for kappa in (-0.3, -0.01, 0.02, 0.15):
        assert forces(Fz, kappa, 0.0, gamma)[0] == pure(Fz, kappa, 0.0, gamma)[0]
    for alpha in (-0.2, -0.01, 0.03, 0.12):
        F = forces(Fz, 0.0, alpha, gamma)
        F0 = pure(Fz, 0.0, alpha, gamma)
        assert F[1] == F0[1]
        # Mz = Mz0 + s Fx: the moment arm of the (shift-induced) Fx at kappa = 0
        s = C["UNLOADED_RADIUS"] * (C["SSZ1"] + C["SSZ2"] * F[1] / FZ0
                                    + (C["SSZ3"] + C["SSZ4"] * d) * gamma)
        assert F[2] == pytest.approx(F0[2] + s * F[0], rel=1e-13, abs=1e-12)


def test_combined_slip_reduces_each_force_below_its_pure_slip_value():
    Fz = 4000.0
    for kappa in (0.05, 0.2):
        for alpha in (0.05, 0.2):
            F = forces(Fz, kappa, alpha, 0.0)
            F0 = pure(Fz, kappa, alpha, 0.0)
            assert abs(F[0]) < abs(F0[0]) and abs(F[1]) < abs(F0[1])


def test_camber_thrust_has_the_sign_and_size_of_PVY3_PVY4():
    """At alpha = -SHy (alpha_y = 0) the only first-order camber term of Fy is
    dSVy/dgamma = Fz (PVY3 + PVY4 dfz) (PHY3 = 0 in this set)."""
    for Fz in (3000.0, 5000.0):
        d = dfz(Fz)
        alpha = -(C["PHY1"] + C["PHY2"] * d)
        _, dF = tangent(Fz, 0.0, alpha, 0.0, (0.0, 0.0, 0.0, 1.0))
        expected = Fz * (C["PVY3"] + C["PVY4"] * d)
        assert dF[1] == pytest.approx(expected, rel=1e-12)
        assert dF[1] < 0.0                                 # PVY3 < 0: ISO camber thrust
        assert forces(Fz, 0.0, alpha, 0.02)[1] < forces(Fz, 0.0, alpha, 0.0)[1]


def test_no_load_no_force():
    for Fz in (0.0, -100.0):
        np.testing.assert_array_equal(forces(Fz, 0.1, 0.1, 0.02), 0.0)
        F, dF = tangent(Fz, 0.1, 0.1, 0.02, (1.0, 1.0, 1.0, 1.0))
        np.testing.assert_array_equal(np.concatenate([F, dF]), 0.0)


# ----------------------------------------------------------------------------------------
# exact derivatives against complex step
# ----------------------------------------------------------------------------------------

H = 1e-30
POINTS = {
    "moderate": ((4300.0, 0.07, -0.06, 0.025), P),
    "large-slip": ((2500.0, -0.4, 0.25, -0.03), P),
    "overload": ((7000.0, 0.01, 0.004, 0.04), P),
    # E > 1 is limited to 1: the derivative with respect to PEX1 is zero on both sides
    "clamped-E": ((4000.0, 0.2, 0.1, 0.01), with_values(PEX1=1.5)),
    # alpha_t = 0 and kappa = 0: the root of the equivalent slip angle
    "root-of-alpha_t,eq": ((FZ0, 0.0, -C["QHZ1"], 0.0), P),
}


def forces_cs(x, p, j, in_p):
    """Column ``j`` of dF/dx (``in_p`` False) or dF/dp by a complex step of the value kernel."""
    xc = np.asarray(x, dtype=complex)
    pc = p.astype(complex)
    if in_p:
        pc[j] += 1j * H
    else:
        xc[j] += 1j * H
    F = np.zeros(3, complex)
    MF.mf52_forces(xc[0], xc[1], xc[2], xc[3], pc, F)
    return F.real, F.imag / H


@pytest.mark.parametrize("where", sorted(POINTS))
def test_jacobian_matches_complex_step(where):
    x, p = POINTS[where]
    F = np.zeros(3)
    Jx = np.zeros((3, 4))
    Jp = np.zeros((3, len(p)))
    MF.mf52_jacobian(*x, p, F, Jx, Jp)
    # the tangent's primal is the value kernel's, to rounding (products grouped differently)
    np.testing.assert_allclose(F, forces(*x, p), rtol=1e-14)
    for J, in_p in ((Jx, False), (Jp, True)):
        for j in range(J.shape[1]):
            Fc, col = forces_cs(x, p, j, in_p)
            # same branches taken (complex arithmetic may round the real part differently)
            np.testing.assert_allclose(Fc, F, rtol=1e-14)
            # 1e-11: complex step has no cancellation (exact to rounding, h = 1e-30); the
            # tangent is the same derivative in another operation order (measured <= 3e-15)
            np.testing.assert_allclose(J[:, j], col, rtol=1e-11,
                                       atol=1e-11 * np.abs(col).max(), err_msg=f"column {j}")
    if where == "clamped-E":
        assert Jp[0, IDX["PEX1"]] == 0.0


def test_directional_derivative_is_the_jacobian_contracted():
    x, p = POINTS["moderate"]
    rng = np.random.default_rng(7)
    dx = rng.normal(size=4) * np.array([300.0, 0.01, 0.01, 0.01])
    dp = rng.normal(size=len(p)) * 0.01 * np.abs(p)
    F = np.zeros(3)
    Jx = np.zeros((3, 4))
    Jp = np.zeros((3, len(p)))
    MF.mf52_jacobian(*x, p, F, Jx, Jp)
    _, dF = tangent(*x, dx, p, dp)
    np.testing.assert_allclose(dF, Jx @ dx + Jp @ dp, rtol=1e-12)


# ----------------------------------------------------------------------------------------
# slips from the contact-patch velocities
# ----------------------------------------------------------------------------------------


def test_slip_definitions_and_their_regularised_denominator():
    v_eps = MF.DEFAULT_V_EPS
    for vx, vy, vr in ((13.9, 0.4, 14.3), (-5.0, 0.2, -4.5), (0.0, 0.05, 0.02)):
        kappa, tana, alpha = MF.contact_slip(vx, vy, vr, v_eps)
        vd = math.sqrt(vx * vx + v_eps * v_eps)
        assert kappa * vd == pytest.approx(vr - vx, rel=1e-14)
        assert tana * vd == pytest.approx(vy, rel=1e-14)
        assert alpha == math.atan(tana)
    # at speed: the textbook slips up to the factor |Vx|/Vd = 1 - v_eps^2/(2 Vx^2) + ...
    vx = 13.9
    kappa, tana, _ = MF.contact_slip(vx, 0.4, 14.3, v_eps)
    factor = kappa / ((14.3 - vx) / vx)
    assert factor == pytest.approx(tana / (0.4 / vx), rel=1e-14)
    assert 1.0 - factor == pytest.approx(v_eps ** 2 / (2 * vx ** 2), rel=1e-2)
    assert 1.0 - factor < 7e-4                         # at the coach's 50 km/h


def test_forces_vanish_smoothly_at_standstill_instead_of_dividing_by_zero():
    """Scaling every velocity by s -> 0 drives the slips to zero linearly (no 0/0), so a
    tire without shifts goes to zero force like a linear damper, F/s finite."""
    Fz = 4000.0
    v = np.array([0.3, -0.2, 0.5])                     # vx, vy, vr
    ratios = []
    for s in (1e-2, 1e-4, 1e-6):
        kappa, _, alpha = MF.contact_slip(*(s * v), MF.DEFAULT_V_EPS)
        F = forces(Fz, kappa, alpha, 0.0, SYMMETRIC)
        assert np.all(np.isfinite(F))
        ratios.append(F / s)
    np.testing.assert_allclose(ratios[1], ratios[2], rtol=1e-3)
    assert np.abs(ratios[2][:2]).min() > 1e3           # a real damper, not a zero force
    # with the shipped set the standstill limit is the MF's zero-slip force (the shifts:
    # rolling-resistance-like SHx, ply-steer/conicity SHy, SVy), not zero
    kappa, _, alpha = MF.contact_slip(0.0, 0.0, 0.0, MF.DEFAULT_V_EPS)
    np.testing.assert_array_equal(forces(Fz, kappa, alpha, 0.0), forces(Fz, 0.0, 0.0, 0.0))
    assert abs(forces(Fz, 0.0, 0.0, 0.0)[0]) > 100.0


@pytest.mark.parametrize("v", [(13.9, 0.4, 14.3, 0.5), (0.0, -0.03, 0.01, 0.5),
                               (-2.0, 1.5, 0.0, 0.2)])
def test_slip_tangent_matches_complex_step(v):
    dv = np.array([0.3, -0.7, 1.1, 0.05])
    out = MF.contact_slip_dir(*v, *dv)
    vc = np.asarray(v, dtype=complex) + 1j * H * dv
    ref = MF.contact_slip(*vc)
    np.testing.assert_allclose(out[:3], [r.real for r in ref], rtol=1e-15)
    # 1e-13: complex step is exact to rounding (see above)
    np.testing.assert_allclose(out[3:], [r.imag / H for r in ref], rtol=1e-13, atol=1e-16)


# ----------------------------------------------------------------------------------------
# the .tir reader
# ----------------------------------------------------------------------------------------


def test_shipped_file_is_read_with_its_unused_and_defaulted_names_reported():
    assert DATA.value("fnomin") == 4000.0 and DATA.value("PKY1") == -14.95
    assert P[IDX["PKX1"]] == 21.51 and P[IDX["QBZ9"]] == 18.47 and P[IDX["LMUY"]] == 1.0
    assert DATA.header["FILE_TYPE"] == "tir" and DATA.units["ANGLE"] == "radians"
    assert sorted(DATA.unknown) == ["FITTYP", "LONGVL", "QSX1", "QSX2", "QSX3", "QSY1"]
    assert sorted(DATA.defaulted) == sorted(["PDX3", "PHY3", "QBZ4", "REX1", "REX2", "REY1",
                                             "REY2", "RHY2", "VERTICAL_STIFFNESS",
                                             "VERTICAL_DAMPING"])
    assert all(P[IDX[name]] == 0.0 for name in DATA.defaulted)
    assert DATA.sections["PKY1"] == "LATERAL_COEFFICIENTS"
    known = {k: v for k, v in DATA.coefficients.items() if k in IDX}
    np.testing.assert_array_equal(MF.coefficient_array(known), P)


GOOD = """[MDI_HEADER]
FILE_TYPE = 'tir'   $ a comment
[UNITS]
LENGTH = 'meter'
[model]
FITTYP = 21 ! MF 5.2
[VERTICAL]
fnomin = 4.0D+03
[DIMENSION]
UNLOADED_RADIUS = 0.3
[SHAPE]
{radial width}
 1.0    0.0
 0.9    1.0
[LATERAL_COEFFICIENTS]
PKY1 = -12.5 $ with a $ and a ! in the comment
MY_EXTRA = "kept"
"""


def test_format_features_comments_strings_fortran_exponents_and_tables():
    d = tir.parse_tir(GOOD, source="good.tir")
    assert d.value("FNOMIN") == 4000.0 and d.value("PKY1") == -12.5
    assert d.value("my_extra") == "kept" and "MY_EXTRA" in d.unknown
    assert d.sections["FITTYP"] == "MODEL"
    assert d.tables["SHAPE"] == (["radial", "width"], [[1.0, 0.0], [0.9, 1.0]])
    assert d.array[IDX["LKY"]] == 1.0 and "LKY" in d.defaulted


@pytest.mark.parametrize("text,message", [
    ("FNOMIN = 4000\n", r"bad\.tir:1: 'FNOMIN = 4000' comes before the first \[SECTION\]"),
    ("[VERTICAL]\nFNOMIN 4000\n", r"bad\.tir:2: cannot read 'FNOMIN 4000'"),
    ("[VERTICAL]\nFNOMIN = four\n", r"bad\.tir:2: cannot read the value 'four' of FNOMIN"),
    ("[VERTICAL]\nFNOMIN = 'x\n", r"bad\.tir:2: cannot read the value"),
    ("[A]\nFNOMIN = 1\n[B]\nFNOMIN = 2\n", r"bad\.tir:4: FNOMIN is given twice \(first at "
                                           r"bad\.tir:2\)"),
    ("[UNITS]\nLENGTH = 'mm'\n[V]\nFNOMIN = 1\nUNLOADED_RADIUS = 1\n", r"only SI units"),
    ("[MODEL]\nFITTYP = 61\n[V]\nFNOMIN = 1\nUNLOADED_RADIUS = 1\n",
     r"bad\.tir:2: FITTYP = 61 is not a Magic Formula 5.2 file"),
    ("[V]\nUNLOADED_RADIUS = 0.3\n", r"bad\.tir: FNOMIN is missing"),
    ("[V]\nFNOMIN = -4000\nUNLOADED_RADIUS = 0.3\n", r"bad\.tir:2: FNOMIN must be positive"),
    ("[V]\nFNOMIN = 4000\nUNLOADED_RADIUS = 0.3\nPKY1 = 'a'\n",
     r"bad\.tir:4: PKY1 must be a number"),
    ("[SHAPE]\n{radial width\n", r"bad\.tir:2: malformed table header"),
])
def test_malformed_input_raises_a_model_error_naming_file_and_line(text, message):
    with pytest.raises(ModelError, match=message):
        tir.parse_tir(text, source="bad.tir")


def test_read_tir_names_the_file_and_can_skip_the_version_check(tmp_path):
    path = tmp_path / "mf61.tir"
    path.write_text("[MODEL]\nFITTYP = 61\n[V]\nFNOMIN = 4000\nUNLOADED_RADIUS = 0.3\n")
    with pytest.raises(ModelError, match=f"{path}:2"):
        tir.read_tir(path)
    assert tir.read_tir(path, check_version=False).value("FNOMIN") == 4000.0
