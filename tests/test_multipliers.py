"""The multiplier formulation (seed 000 eqs 58-63: loop closures kept as constraints with
their Lagrange multipliers, Baumgarte-stabilised), against independent references: the
reaction force of a pendulum released from rest (hand computation), the Matrix-R
formulation (the same equations of motion on the constraint manifold: their difference is
the integrators' error, second order in the step), and the bounded constraint drift that
Baumgarte's stabilisation promises (seed 000 eq 60).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import pinned_rod

import workbench as wb
from workbench.errors import OptionError


def test_pivot_reaction_of_a_rod_released_from_rest_is_the_hand_computation():
    """Uniform rod released horizontally at rest: angular acceleration 3 g / (2 L), so the
    pivot carries m g - m (3 g / (2 L)) (L / 2) = m g / 4 upwards and nothing sideways.
    The cut's constraint is Phi = r_rod.O - r_ground (x, y); the force it applies to the
    rod is -lambda."""
    m, L, g = 2.0, 0.8, 9.81
    res = wb.simulate(pinned_rod(m, L), t_end=0.01, dt=1e-3, formulation="multipliers")
    lam0 = res.multipliers[0]
    np.testing.assert_allclose(-lam0, [0.0, m * g / 4], atol=1e-9)
    np.testing.assert_allclose(res.zddi[0, 0], -3 * g / (2 * L), rtol=1e-10)


def test_pivot_reaction_follows_the_rigid_pendulum_equations():
    """Along the motion: with theta the rod angle, the centre of mass moves on a circle of
    radius L/2, so the reaction is m a_G - m g with a_G from theta, theta_dot, theta_ddot
    (Newton's law for the rod); to the integrator's accuracy of the accelerations."""
    m, L = 2.0, 0.8
    res = wb.simulate(pinned_rod(m, L), t_end=0.5, dt=1e-3, formulation="multipliers")
    th, w, al = res.zi[:, 0], res.zdi[:, 0], res.zddi[:, 0]
    r = L / 2
    aG = np.c_[-r * (al * np.sin(th) + w ** 2 * np.cos(th)),
               r * (al * np.cos(th) - w ** 2 * np.sin(th))]
    reaction = m * aG - m * np.array([0.0, -9.81])
    # 1e-6 N of forces of ~5 N: Newton's tolerance on the accelerations and the
    # Baumgarte-corrected constraint error (~1e-8 m) shifting the geometry
    np.testing.assert_allclose(-res.multipliers, reaction, atol=1e-6)


@pytest.mark.parametrize("name", ["quick-return", "five-bar"])
def test_same_motion_as_matrix_r_to_the_integrators_error(name):
    """Both integrate the same motion on the constraint manifold with the trapezoidal rule
    (on different coordinates): their difference is discretisation error and shrinks
    about four times when the step is halved (second order; at least 3x asserted)."""
    cm = wb.catalog.load(name).compile()
    diff = []
    for dt in (2e-3, 1e-3):
        ref = wb.simulate(cm, 0.4, dt, "sr-com")
        mul = wb.simulate(cm, 0.4, dt, "multipliers")
        diff.append(np.abs(mul.zi - ref.zi).max())
    assert diff[1] < diff[0] / 3, diff


def test_reference_points_give_the_same_multiplier_solution():
    cm = wb.catalog.load("quick-return").compile()
    a = wb.simulate(cm, 0.3, 1e-3, "multipliers")
    b = wb.simulate(cm, 0.3, 1e-3, "multipliers-origin")
    # SR-I and SR-II give the same M and Q (seed 000 after eq 55): rounding only
    np.testing.assert_allclose(b.z, a.z, atol=1e-10)
    np.testing.assert_allclose(b.multipliers, a.multipliers, rtol=1e-8, atol=1e-8)


def test_baumgarte_keeps_the_drift_bounded_and_tighter_values_hold_tighter():
    cm = wb.catalog.load("quick-return").compile()
    drift = {}
    for ab in ((20.0, 20.0), (100.0, 100.0)):
        res = wb.simulate(cm, 2.0, 1e-3, "multipliers", baumgarte=ab)
        v = res.constraint_violation
        half = len(v) // 2
        # bounded: the second second is no worse than twice the first (no growth)
        assert v[half:].max() < 2 * v[:half].max()
        drift[ab] = v.max()
    # five times stiffer stabilisation: measured 2.5 times less drift (the error source is
    # the trapezoidal rule's own error in the constraint equation, damped faster)
    assert drift[(100.0, 100.0)] < 0.6 * drift[(20.0, 20.0)]
    with pytest.raises(OptionError, match="baumgarte"):
        wb.simulate(cm, 0.01, 1e-3, "multipliers", baumgarte=(-1.0, 1.0))


def test_sensitivities_of_the_multiplier_formulation_are_refused_by_name():
    with pytest.raises(OptionError, match="no design sensitivities yet"):
        wb.sensitivity("five-bar", t_end=0.01, dt=1e-3, formulation="multipliers")


def test_objectives_of_a_multiplier_run_match_the_matrix_r_ones():
    """The measures of a multiplier run come from its stored coordinates, rates and
    accelerations; the integral objectives agree with the Matrix-R run to the
    integrators' difference (measured 1.5e-6 relative on the five-bar over 1 s)."""
    from workbench.objectives import resolve_objectives
    from workbench.sensitivities import objective_values
    cm = wb.catalog.load("five-bar").compile()
    co = resolve_objectives(cm, None)
    a = objective_values(wb.simulate(cm, 1.0, 1e-3, "sr-com"), co)
    b = objective_values(wb.simulate(cm, 1.0, 1e-3, "multipliers"), co)
    np.testing.assert_allclose(b, a, rtol=1e-5)


@pytest.mark.parametrize("formulation", ["sr-com", "sr-origin", "global", "multipliers"])
def test_every_formulation_gives_the_pivot_reaction(formulation):
    """Matrix-R and global runs recover the multipliers from the open-tree equations at each
    stored row (Phi_z^T lambda = -(M zdd - Q)); the hand computation m g / 4 at release
    and Newton's law for the rod along the motion hold to rounding, because the recovered
    force belongs exactly to the row's state."""
    m, L = 2.0, 0.8
    res = wb.simulate(pinned_rod(m, L), t_end=0.3, dt=1e-3, formulation=formulation)
    lam = res.constraint_forces()
    np.testing.assert_allclose(-lam[0], [0.0, m * 9.81 / 4], atol=1e-9)
    th, w, al = res.zi[:, 0], res.zdi[:, 0], res.zddi[:, 0]
    r = L / 2
    aG = np.c_[-r * (al * np.sin(th) + w ** 2 * np.cos(th)),
               r * (al * np.cos(th) - w ** 2 * np.sin(th))]
    tol = 1e-6 if formulation == "multipliers" else 1e-9    # integrated vs recovered
    np.testing.assert_allclose(-lam, m * aG - m * np.array([0.0, -9.81]), atol=tol)


def test_recovered_and_integrated_constraint_forces_agree_on_the_quick_return():
    cm = wb.catalog.load("quick-return").compile()
    a = wb.simulate(cm, 1.0, 1e-3, "sr-com").constraint_forces()
    b = wb.simulate(cm, 1.0, 1e-3, "multipliers").constraint_forces()
    # forces up to ~1000 N at the quick return; the trajectories differ by the integrators'
    # error (about 1e-3 rad), so do the forces: 1e-3 of the peak
    np.testing.assert_allclose(b, a, atol=1e-3 * np.abs(a).max())
