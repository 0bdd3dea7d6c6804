"""Comparisons with independent published references.

* IFToMM A01 planar pendulum released horizontally: exact solution with Jacobi elliptic
  functions, period ``4 K(m) sqrt(L/g)`` with ``m = sin^2(theta0/2)`` (scipy.special).
* Mass on a linear spring (joint spring, and point-to-point spring-damper): closed-form
  harmonic / damped harmonic solutions.
* IFToMM spatial rigid slider-crank: consistent initial velocities given in the EXUDYN
  benchmark script and reference slider histories of two library submitters
  (``tests/data/slider_crank_3d_iftomm_reference.csv``, provenance in its header).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from conftest import catalog_or_none, pendulum, ref_jacobians, ref_point, slider_crank
from scipy.special import ellipj, ellipk

from workbench import Model, simulate
from workbench.formulations.semirecursive.state import state_terms
from workbench.model.elements import GROUND

DATA = Path(__file__).parent / "data"
G = 9.81


def _catalog_has(name):
    cat = catalog_or_none()
    return cat is not None and name in cat.names()


def _source(name, builder):
    """Model from the test's own builder, or the shipped one (skipped if absent)."""
    def make(kind):
        if kind == "builder":
            return builder()
        if not _catalog_has(name):
            pytest.skip(f"catalog model {name!r} not available")
        return catalog_or_none().load(name)
    return make


SOURCES = ["builder", "catalog"]


# ----------------------------------------------------------------------------------------
# A01 pendulum
# ----------------------------------------------------------------------------------------


def pendulum_exact(t, L=1.0, g=G, phi0=math.pi / 2):
    """Angle from the downward vertical: sin(phi/2) = k sn(K - w0 t | k^2), k = sin(phi0/2)."""
    k = math.sin(phi0 / 2)
    mpar = k * k
    sn, _, _, _ = ellipj(ellipk(mpar) - math.sqrt(g / L) * t, mpar)
    return 2 * np.arcsin(k * sn)


def _bob_xy(model, res):
    cm = res.compiled
    com = model.bodies["bob"].com
    return np.array([ref_point(model, cm, z, "bob", com)[:2] for z in res.z])


@pytest.mark.parametrize("source", SOURCES)
def test_pendulum_period_matches_complete_elliptic_integral(source):
    model = _source("pendulum", pendulum)(source)
    h = 1e-3
    res = simulate(model, 5.0, h)
    xy = _bob_xy(model, res)
    # horizontal release at x = +L: the bob starts at (1, 0) (1e-12 m: rounding)
    np.testing.assert_allclose(xy[0], [1.0, 0.0], atol=1e-12)
    # times at which the bob crosses the bottom (x = 0, y < 0), with cubic Hermite
    # interpolation of x(t) (x' from the central difference of the sampled x)
    x = xy[:, 0]
    xd = np.gradient(x, h)
    crossings = []
    for i in np.nonzero(np.sign(x[1:]) != np.sign(x[:-1]))[0]:
        if xy[i, 1] > 0:
            continue
        # Newton on the Hermite cubic between samples i and i+1
        s = x[i] / (x[i] - x[i + 1])
        for _ in range(20):
            h00, h10 = 2 * s**3 - 3 * s**2 + 1, s**3 - 2 * s**2 + s
            h01, h11 = -2 * s**3 + 3 * s**2, s**3 - s**2
            p = h00 * x[i] + h10 * h * xd[i] + h01 * x[i + 1] + h11 * h * xd[i + 1]
            dp = ((6 * s**2 - 6 * s) * x[i] + (3 * s**2 - 4 * s + 1) * h * xd[i]
                  + (-6 * s**2 + 6 * s) * x[i + 1] + (3 * s**2 - 2 * s) * h * xd[i + 1])
            s -= p / dp
        crossings.append(res.t[i] + s * h)
    assert len(crossings) >= 4
    period_exact = 4.0 * ellipk(0.5) * math.sqrt(1.0 / G)   # m = sin^2(pi/4) = 1/2
    # textbook value for a 90 deg amplitude, T = 1.1803 T0 (quoted to 5 digits)
    assert period_exact == pytest.approx(2.3678, abs=1e-4)
    # crossings i and i+2 are one period apart
    periods = np.array(crossings[2:]) - np.array(crossings[:-2])
    # 2e-5 relative: trapezoidal phase error ~ (w h)^2 / 12 ~ 1e-6 per period, plus the
    # O(h^3) interpolation of the crossing times
    np.testing.assert_allclose(periods, period_exact, rtol=2e-5)
    # first bottom crossing at a quarter period
    assert crossings[0] == pytest.approx(period_exact / 4, rel=2e-5)


@pytest.mark.parametrize("source", SOURCES)
def test_pendulum_history_meets_a01_high_precision_criterion(source):
    """A01 criterion: x, y of the bob within 1e-3 m of the reference over the run (old
    LIM/UDC specification 'high precision'); here the reference is the exact solution."""
    model = _source("pendulum", pendulum)(source)
    res = simulate(model, 10.0, 1e-3)
    xy = _bob_xy(model, res)
    phi = pendulum_exact(res.t)
    exact = np.column_stack([np.sin(phi), -np.cos(phi)])
    err = np.max(np.abs(xy - exact))
    # 1e-3 m: the benchmark's high-precision threshold
    assert err < 1e-3
    # and the error is the expected O(h^2) phase drift, far below it (5e-5 m: the phase
    # error ~ t w^3 h^2 / 12 ~ 2e-5 rad after 10 s at h = 1e-3)
    assert err < 5e-5


# ----------------------------------------------------------------------------------------
# linear springs
# ----------------------------------------------------------------------------------------


def test_mass_on_joint_spring_matches_harmonic_solution():
    k, mass, x0, v0 = 200.0, 0.5, 0.05, 0.3
    m = Model("spring-mass", gravity=(0.0, 0.0, -G))       # gravity across the joint
    m.body("block", mass=mass, inertia=(0.01, 0.01, 0.01))
    m.prismatic("slide", GROUND, "block", axis=(1, 0, 0), q0=x0, qd0=v0)
    m.joint_spring("spring", "slide", k=k)
    res = simulate(m, 2.0, 1e-3)
    w = math.sqrt(k / mass)
    exact = x0 * np.cos(w * res.t) + v0 / w * np.sin(w * res.t)
    amp = math.hypot(x0, v0 / w)
    # 2e-3 relative to the amplitude: the trapezoidal phase error is t w (w h)^2 / 12
    # = 2 * 20 * 4e-4 / 12 = 1.3e-3 rad after 2 s (w = 20 rad/s, h = 1e-3)
    assert np.max(np.abs(res.z[:, 0] - exact)) < 2e-3 * amp
    # the amplitude itself is conserved exactly by the trapezoidal rule (1e-9: Newton
    # tolerance and rounding)
    amp_num = np.sqrt(res.z[:, 0] ** 2 + (res.zd[:, 0] / w) ** 2)
    np.testing.assert_allclose(amp_num, amp, rtol=1e-9)


def test_mass_on_damped_point_spring_matches_damped_solution():
    """Block on a horizontal prismatic joint, pulled by a point-to-point spring-damper
    from a ground point 1 m behind it (rest length 1 m): x'' = -(k x + c x') / m."""
    k, c, mass, x0, v0 = 100.0, 1.2, 1.0, 0.1, 0.0
    m = Model("damped", gravity=(0.0, -G, 0.0))
    m.body("block", mass=mass, inertia=(0.01, 0.01, 0.01), points={"hook": (0, 0, 0)})
    m.prismatic("slide", GROUND, "block", axis=(1, 0, 0), q0=x0, qd0=v0)
    m.spring("spring", GROUND, (-1.0, 0.0, 0.0), "block", "hook", k=k, c=c, length=1.0)
    res = simulate(m, 3.0, 1e-3)
    wn = math.sqrt(k / mass)
    zeta = c / (2 * math.sqrt(k * mass))
    wd = wn * math.sqrt(1 - zeta ** 2)
    t = res.t
    exact = np.exp(-zeta * wn * t) * (x0 * np.cos(wd * t)
                                      + (v0 + zeta * wn * x0) / wd * np.sin(wd * t))
    # 2e-3 relative to x0: trapezoidal phase error t wn^3 h^2 / 12 ~ 2.5e-4 rad after 3 s
    # at wn = 10 rad/s, times the decaying amplitude
    assert np.max(np.abs(res.z[:, 0] - exact)) < 2e-3 * x0
    # no energy is conserved here: the solution has decayed by exp(-zeta wn t)
    assert abs(res.z[-1, 0]) < 0.2 * x0


# ----------------------------------------------------------------------------------------
# IFToMM spatial slider-crank
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("source", SOURCES)
def test_slider_crank_initial_velocities_match_benchmark_values(source):
    """EXUDYN slidercrank3D script: with the crank at 6 rad/s the consistent initial
    velocities are conrod v_G = (0.12, -0.24, 0), omega = (1.92, -0.96, 0.48), slider
    v = (0.24, 0, 0) (benchmarks.md §4)."""
    model = _source("slider-crank", slider_crank)(source)
    cm = model.compile()
    st = state_terms(cm)
    jac = ref_jacobians(model, cm, st.z, method="complex")
    _, Jv, Jw, _, xg = jac["conrod"]
    # 1e-10: linear velocity problem solved by least squares (rounding only)
    np.testing.assert_allclose(Jv @ st.zd, [0.12, -0.24, 0.0], atol=1e-10)
    np.testing.assert_allclose(Jw @ st.zd, [1.92, -0.96, 0.48], atol=1e-10)
    np.testing.assert_allclose(jac["slider"][1] @ st.zd, [0.24, 0.0, 0.0], atol=1e-10)
    # initial slider position sqrt(0.3^2 - 0.1^2 - 0.2^2) = 0.2 m (assembly to 1e-12)
    assert ref_point(model, cm, st.z, "slider", (0, 0, 0))[0] == pytest.approx(0.2, abs=1e-12)


def _reference_table():
    """Columns t, x_gonzalez, x_masarati, crank_masarati (see the file's header)."""
    lines = (DATA / "slider_crank_3d_iftomm_reference.csv").read_text().splitlines()
    rows = [ln for ln in lines if ln and not ln.startswith("#")]
    assert rows[0] == "t,x_gonzalez,x_masarati,crank_masarati"
    return np.array([[float(v) for v in ln.split(",")] for ln in rows[1:]])


@pytest.mark.parametrize("source", SOURCES)
def test_slider_crank_matches_iftomm_reference_histories(source):
    model = _source("slider-crank", slider_crank)(source)
    ref = _reference_table()
    assert ref.shape == (61, 4)
    h = 1e-3
    res = simulate(model, 1.2, h)
    cm = res.compiled
    idx = np.rint(ref[:, 0] / h).astype(int)
    np.testing.assert_allclose(res.t[idx], ref[:, 0], atol=1e-12)  # same sampling instants
    x = np.array([ref_point(model, cm, res.z[i], "slider", (0, 0, 0))[0] for i in idx])
    # 1e-3 m: the library's 'high precision' threshold; the two submissions differ from
    # each other by up to 8.7e-4 m over this interval.  (Changing g or the initial crank
    # rate by 1 % moves the slider by more than 1.5e-3 m, so the check discriminates.)
    assert np.max(np.abs(x - ref[:, 1])) < 1e-3, "vs Gonzalez"
    assert np.max(np.abs(x - ref[:, 2])) < 1e-3, "vs Masarati"
    # the slider sweeps its whole stroke twice in 1.2 s (0.185 m ... 0.290 m)
    assert x.min() < 0.186 and x.max() > 0.289
