"""The anti-roll bar (vehicle-kit issue, item 3): two massless bar halves twisting against
each other (the angular spring between the bar ends), droplinks to the suspension.

Independent references: on a roll rig of two trailing arms with vertical springs, the
linear (small-deflection) wheel rate in roll computed by hand from the lever arms
(k_wheel = k_s + 2 k_t (l_link / (a l_tip))^2, derived in the test); heave (both wheels
pushed alike) does not twist the bar, so the heave deflection is the springs' alone; and
the design gradients (bar stiffness, link length) direct = adjoint = central differences
in the semi-recursive and global formulations.
"""

from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench.model.files import model_from_dict
from workbench.model.serialize import model_to_dict

KS, KT, F = 20000.0, 2000.0, 1.0      # spring rate (N/m), bar rate (N m/rad), tip load (N)
TIP, LINK, ARM = 0.4, 0.3, 0.2        # arm tip, droplink point on the arm, bar arm (m)


def roll_rig(bar=True, kt=KT, loads=(F, -F), gravity=False):
    """Two trailing arms (hinges about y at y = +-0.6, along +x) with vertical springs at
    their tips; the bar's bushings on the ground at x = 0.1, z = 0.45, its arms 0.2 m along
    +x, vertical droplinks of 0.15 m down to the arms at x = 0.3; vertical loads at the
    tips."""
    mod = wb.Model("roll-rig", gravity=(0, 0, -9.81 if gravity else 0.0))
    mod.parameter("kt", kt, "N*m/rad")
    mod.parameter("Ld", 0.15, "m")
    for side, y in (("L", 0.6), ("R", -0.6)):
        mod.body(f"arm{side}", mass=10.0, com=(0.2, 0, 0), inertia=(0.05, 0.2, 0.2),
                 points={"tip": (TIP, 0, 0), "link": (LINK, 0, 0)})
        mod.revolute(f"hinge{side}", "ground", f"arm{side}", parent_point=(0, y, 0.3),
                     axis=(0, 1, 0))
        mod.spring(f"spring{side}", "ground", (TIP, y, 0.8), f"arm{side}", "tip", k=KS,
                   length=0.5)
    for side, f in zip("LR", loads):
        mod.force(f"load{side}", f"arm{side}", "tip", (0, 0, 1), f)
    if bar:
        mod.anti_roll_bar("arb", "ground", pivots=((0.1, 0.6, 0.45), (0.1, -0.6, 0.45)),
                          arms=((ARM, 0, 0), (ARM, 0, 0)),
                          links=(("armL", "link"), ("armR", "link")), link_length="Ld",
                          k="kt")
    mod.dof("hingeL", "hingeR")
    return mod


def _tips(mod):
    """Vertical tip displacements at the static equilibrium (arm angle theta about +y:
    the tip moves by -TIP sin(theta)).  Tolerance 1e-8 N on the generalized residual (no
    gravity, so the default is relative to 1 N; the closure projection of the bar rounds
    at ~3e-10 N): 5e-13 m of the ~5e-5 m deflections."""
    eq = wb.equilibrium(mod, tol=1e-8)
    return -TIP * np.sin(eq.zi)


def test_roll_wheel_rate_is_the_hand_computed_lever_arm_rate():
    """Opposite tip loads +-F: each arm turns by theta, the droplink point moves by
    LINK theta, the bar arm follows with phi = LINK theta / ARM, the bar twists by 2 phi.
    Energy: 2 * k_s (TIP theta)^2 / 2 + k_t (2 LINK theta / ARM)^2 / 2, load work
    2 F TIP theta: the wheel rate in roll is k_s + 2 k_t (LINK / (ARM TIP))^2
    = 20000 + 28125 N/m.  A 1 N load turns the arms by ~3e-5 rad: the geometric
    nonlinearity is ~1e-5 relative, hence rtol 1e-4."""
    z = _tips(roll_rig())
    rate = KS + 2 * KT * (LINK / (ARM * TIP)) ** 2
    np.testing.assert_allclose(z, [F / rate, -F / rate], rtol=1e-4)


def test_heave_does_not_twist_the_bar():
    """Equal loads turn both halves alike: no twist, no bar force, the heave deflection is
    the springs' alone (to the equilibrium solver's tolerance, 1e-8 relative)."""
    with_bar = _tips(roll_rig(loads=(F, F)))
    without = _tips(roll_rig(bar=False, loads=(F, F)))
    np.testing.assert_allclose(with_bar, without, rtol=1e-7)
    np.testing.assert_allclose(without, [F / KS, F / KS], rtol=1e-4)


@pytest.mark.parametrize("formulation", ["sr-com", "global"])
def test_bar_gradients_equal_central_differences(formulation):
    """A roll oscillation after a sudden one-sided load: the roll angle's objective with
    respect to the bar rate and the droplink length; direct = adjoint (1e-12 relative),
    = central differences (1e-5 relative: the droplink length moves the closure, whose
    position problem converges to ~1e-12 m, and the difference quotient divides that by
    its 2e-7 m step; measured 1.4e-6)."""
    cm = roll_rig(loads=(200.0, 0.0)).compile()
    obj = [wb.objectives.coordinate("rollL", "hingeL"),
           wb.objectives.coordinate("rollR", "hingeR", level=1)]
    kw = dict(parameters=["kt", "Ld"], t_end=0.3, dt=1e-3, formulation=formulation)
    d = wb.sensitivity(cm, obj, method="direct", **kw)
    a = wb.sensitivity(cm, obj, method="adjoint", **kw)
    f = wb.sensitivity(cm, obj, method="fd", **kw)
    scale = np.abs(d.gradient).max(axis=1, keepdims=True)
    assert np.all(np.abs(a.gradient - d.gradient) <= 1e-12 * scale)
    assert np.all(np.abs(f.gradient - d.gradient) <= 1e-5 * scale)


def test_the_bar_is_ordinary_named_elements_and_survives_the_file_round_trip():
    mod = roll_rig()
    assert {"arb.left", "arb.right"} <= set(mod.bodies)
    assert {"arb.bushing", "arb.twist"} <= set(mod.joints)
    assert "arb.torsion" in mod.joint_springs
    assert {"arb.link_left", "arb.link_right"} <= set(mod.distances)
    cm = mod.compile()
    assert (cm.n, cm.m, cm.d) == (4, 2, 2)
    cm2 = model_from_dict(model_to_dict(mod)).compile()
    np.testing.assert_array_equal(cm2.arrays.p, cm.arrays.p)
