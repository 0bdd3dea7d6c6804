"""Air springs and piecewise-linear dampers (vehicle-kit issue, item 3): the force laws of
:mod:`workbench.forces.spring_laws` against independent references: the polytropic gas law
by hand (static load, gas stiffness), the potential energy against a quadrature of the
tension, the damper's slopes far from its knees, the static equilibrium of a mass on an
air spring computed by hand, energy conservation of the undamped air spring, and the
design gradients (direct = adjoint = central differences) through both laws in the
semi-recursive and the global formulations.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.integrate import quad
from scipy.optimize import brentq

import workbench as wb
from workbench.errors import ModelError
from workbench.forces import spring_laws as SL
from workbench.model.files import model_from_dict
from workbench.model.serialize import model_to_dict

G = 9.81
AIR = dict(area=0.02, volume=0.004, pressure=3.0e5, exponent=1.4, ambient=1.0e5)


def _law_fields(air=None, damper=None, k=0.0, c=0.0, L0=0.3):
    """``(law, kx, cx, nk, p, fk, fc, fL0)`` for one element from plain numbers."""
    p = [k, c, L0]
    law = np.array([0, 0, 0], dtype=np.int64)
    kx = cx = 0
    if air is not None:
        law[0] = SL.LAW_K_AIR
        kx = len(p)
        p += [air[k_] for k_ in SL.AIR_FIELDS]
    if damper is not None:
        law[1], law[2] = SL.LAW_C_PIECEWISE, len(damper["knees"])
        cx = len(p)
        p += [damper.get("width", SL.DAMPER_WIDTH), damper["slopes"][0]]
        for v, s in zip(damper["knees"], damper["slopes"][1:]):
            p += [v, s]
    return law, kx, cx, int(law[2]), np.array(p, float), 0, 1, 2


def test_air_spring_carries_the_gas_load_with_the_gas_stiffness():
    """At the design length the bellows pushes with A (P0 - Pa) and its stiffness is
    n A^2 P0 / V0 (differentiating P0 (V0 / V)^n with dV = A dL)."""
    law, kx, cx, nk, p, fk, fc, fL0 = _law_fields(air=AIR, k=1000.0)
    T, TL, TLd, U = SL.tension(law, kx, cx, nk, p, fk, fc, fL0, 0.3, 0.0)
    A, V0, P0, n, Pa = (AIR[k] for k in SL.AIR_FIELDS)
    np.testing.assert_allclose(T, -A * (P0 - Pa), rtol=1e-14)
    np.testing.assert_allclose(TL, 1000.0 + n * A * A * P0 / V0, rtol=1e-14)
    assert TLd == 0.0 and U == 0.0


@pytest.mark.parametrize("n", [1.0, 1.4])
def test_air_spring_energy_is_the_work_of_its_tension(n):
    """U(L) = int_L0^L T dL (scipy quadrature of the law's own tension), both the
    isothermal (logarithmic) and the polytropic branch."""
    air = dict(AIR, exponent=n)
    law, kx, cx, nk, p, fk, fc, fL0 = _law_fields(air=air, k=500.0)

    def T(L):
        return SL.tension(law, kx, cx, nk, p, fk, fc, fL0, L, 0.0)[0]

    for L in (0.2, 0.35, 0.45):
        U = SL.tension(law, kx, cx, nk, p, fk, fc, fL0, L, 0.0)[3]
        work = quad(T, 0.3, L, epsabs=0, epsrel=1e-13)[0]
        np.testing.assert_allclose(U, work, rtol=1e-10)


def test_bilinear_damper_has_its_two_slopes_away_from_the_knee():
    """Compression slope below the knee at 0, rebound slope above it: far from the knee
    (|v| >> w) the force is the sharp law shifted by at most (c1 - c0) w ln 2; the slope
    is exactly the logistic blend of the two."""
    dmp = dict(slopes=[1500.0, 4000.0], knees=[0.0], width=0.01)
    law, kx, cx, nk, p, fk, fc, fL0 = _law_fields(damper=dmp)
    shift = (4000.0 - 1500.0) * 0.01 * np.log(2.0)
    for v, c in ((-0.5, 1500.0), (0.5, 4000.0)):
        T, _, TLd, _ = SL.tension(law, kx, cx, nk, p, fk, fc, fL0, 0.3, v)
        assert abs(T - c * v) <= shift * (1 + 1e-12)
        np.testing.assert_allclose(TLd, c, rtol=1e-15, atol=1e-9 * c)
    T0 = SL.tension(law, kx, cx, nk, p, fk, fc, fL0, 0.3, 0.0)[0]
    assert T0 == 0.0
    # as the width shrinks the law tends to the sharp one
    law, kx, cx, nk, p, fk, fc, fL0 = _law_fields(damper=dict(dmp, width=1e-6))
    for v, c in ((-0.05, 1500.0), (0.05, 4000.0)):
        T = SL.tension(law, kx, cx, nk, p, fk, fc, fL0, 0.3, v)[0]
        np.testing.assert_allclose(T, c * v, rtol=1e-4)


def test_force_law_derivatives_equal_central_differences():
    """dT/dL, dT/dLdot and the directional derivative along every field, against central
    differences of the law itself (step 1e-6 relative: truncation and rounding ~1e-9)."""
    dmp = dict(slopes=[3000.0, 1200.0, 5000.0, 2000.0], knees=[-0.2, 0.0, 0.25], width=0.03)
    law, kx, cx, nk, p, fk, fc, fL0 = _law_fields(air=AIR, damper=dmp, k=800.0, c=0.0)
    for L, Ld in ((0.28, -0.21), (0.33, 0.05), (0.31, 0.3)):
        T, TL, TLd, _ = SL.tension(law, kx, cx, nk, p, fk, fc, fL0, L, Ld)
        h = 1e-6
        fL = (SL.tension(law, kx, cx, nk, p, fk, fc, fL0, L + h, Ld)[0]
              - SL.tension(law, kx, cx, nk, p, fk, fc, fL0, L - h, Ld)[0]) / (2 * h)
        fLd = (SL.tension(law, kx, cx, nk, p, fk, fc, fL0, L, Ld + h)[0]
               - SL.tension(law, kx, cx, nk, p, fk, fc, fL0, L, Ld - h)[0]) / (2 * h)
        np.testing.assert_allclose(TL, fL, rtol=1e-7)
        np.testing.assert_allclose(TLd, fLd, rtol=1e-7)
        for i in range(len(p)):
            dp = np.zeros_like(p)
            dp[i] = 1.0
            hi = 1e-6 * max(abs(p[i]), 1e-3)
            pp, pm = p.copy(), p.copy()
            pp[i] += hi
            pm[i] -= hi
            fd = (SL.tension(law, kx, cx, nk, pp, fk, fc, fL0, L, Ld)[0]
                  - SL.tension(law, kx, cx, nk, pm, fk, fc, fL0, L, Ld)[0]) / (2 * hi)
            an = SL.tension_dp(law, kx, cx, nk, p, dp, fk, fc, fL0, L, Ld)
            assert abs(an - fd) <= 1e-7 * max(abs(fd), abs(T) / max(abs(p[i]), 1e-3), 1.0), i


def corner(damped=True, mass=400.0):
    """A mass on a vertical slider carried by an air spring (and a bilinear damper) from
    a ground point 0.6 m below it: a quarter-car corner without tire, starting at the design length.  Every law number is
    a parameter."""
    mod = wb.Model("air-corner", gravity=(0, 0, -G))
    for name, val, unit in (("m", mass, "kg"), ("A", 0.02, "m^2"), ("V0", 0.004, "m^3"),
                            ("P0", 3.0e5, "Pa"), ("n", 1.4, "1"), ("Lair", 0.3, "m"),
                            ("c_comp", 1500.0, "N*s/m"), ("c_reb", 4000.0, "N*s/m"),
                            ("v_knee", 0.0, "m/s"), ("w", 0.02, "m/s")):
        mod.parameter(name, val, unit)
    mod.body("mass", mass={"param": "m"}, inertia=(1, 1, 1), points={"top": (0, 0, 0)})
    mod.prismatic("slide", "ground", "mass", parent_point=(0, 0, 0.3), axis=(0, 0, 1))
    air = {"area": "A", "volume": "V0", "pressure": "P0", "exponent": "n"}
    damper = ({"slopes": ["c_comp", "c_reb"], "knees": ["v_knee"], "width": "w"}
              if damped else None)
    mod.spring("strut", "ground", (0, 0, 0), "mass", "top", k=0.0, length="Lair", air=air,
               damper=damper)
    mod.dof("slide")
    return mod


def test_mass_on_an_air_spring_settles_at_the_hand_computed_equilibrium():
    """A (P(L) - Pa) = m g at the equilibrium length (brentq on the gas law by hand); the
    damped run settles there."""
    m = 400.0
    A, V0, P0, n, Pa = 0.02, 0.004, 3.0e5, 1.4, SL.AIR_AMBIENT
    L = brentq(lambda L: A * (P0 * (V0 / (V0 + A * (L - 0.3))) ** n - Pa) - m * G, 0.15, 0.6)
    # released 1.2 mm from equilibrium with ~20 % damping at ~10 rad/s: after 5 s the
    # offset is below 1e-7 m
    res = wb.simulate(corner(True, m), t_end=5.0, dt=2e-3)
    np.testing.assert_allclose(0.3 + res.zi[-1, 0], L, atol=1e-6)
    eq = wb.equilibrium(corner(True, m))
    np.testing.assert_allclose(0.3 + eq.zi[0], L, atol=1e-10)


def test_undamped_air_spring_conserves_energy():
    """Without the damper the corner is conservative: its energy (kinetic + gravity + the
    gas's potential) drifts only by the trapezoidal rule's bounded ripple."""
    res = wb.simulate(corner(False, mass=250.0), t_end=2.0, dt=1e-3)
    amplitude = np.ptp(res.zi[:, 0])
    assert amplitude > 0.01                     # it does oscillate
    assert abs(res.energy_drift) < 1e-6 * 250.0 * G * amplitude


@pytest.mark.parametrize("formulation", ["sr-com", "global"])
def test_gradients_through_the_air_spring_and_damper_laws(formulation):
    """Direct = adjoint (1e-12 relative: the same step Jacobians forward and backward) =
    central differences of the simulation (1e-6 relative: step 1e-6, measured ~1e-9)
    for every number of both laws."""
    cm = corner(True).compile()
    obj = [wb.objectives.coordinate("travel", "slide", relative=True),
           wb.objectives.coordinate("speed", "slide", level=1)]
    pars = ["A", "V0", "P0", "n", "Lair", "c_comp", "c_reb", "v_knee", "w", "m"]
    kw = dict(parameters=pars, t_end=0.6, dt=1e-3, formulation=formulation)
    d = wb.sensitivity(cm, obj, method="direct", **kw)
    a = wb.sensitivity(cm, obj, method="adjoint", **kw)
    f = wb.sensitivity(cm, obj, method="fd", **kw)
    scale = np.abs(d.gradient).max(axis=1, keepdims=True)
    assert np.all(np.abs(a.gradient - d.gradient) <= 1e-12 * scale)
    assert np.all(np.abs(f.gradient - d.gradient) <= 1e-6 * scale)
    assert np.all(d.gradient != 0.0)            # every law number acts on the motion


def test_laws_survive_the_model_file_round_trip_and_bad_tables_are_named():
    mod = corner(True)
    cm = mod.compile()
    cm2 = model_from_dict(model_to_dict(mod)).compile()
    np.testing.assert_array_equal(cm2.arrays.sp_law, cm.arrays.sp_law)
    np.testing.assert_array_equal(cm2.arrays.p, cm.arrays.p)
    bad = wb.Model("bad")
    bad.body("b", mass=1.0, inertia=(1, 1, 1))
    bad.prismatic("s", "ground", "b", axis=(0, 0, 1))
    bad.spring("d1", "ground", (0, 0, 0), "b", (0, 0, 0), k=1.0,
               damper={"slopes": [1.0, 2.0], "knees": []})
    with pytest.raises(ModelError, match="d1 damper"):
        bad.compile()
    with pytest.raises(ModelError, match="air"):
        bad.spring("a1", "ground", (0, 0, 0), "b", (0, 0, 0), k=1.0, air={"area": 0.01})
