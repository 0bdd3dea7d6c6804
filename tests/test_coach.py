"""The 16-DOF coach of seed 003 (``workbench/model/data/coach.toml``, a documented
RECONSTRUCTION; docs/coach.md).

Independent references: the seed's totals (17 048 kg, 16 DOF, the element counts of its
topology); the static axle loads from a moment balance of the design's body masses about
the rear axle; the vertical balance of the tyre loads against the weight; mirror symmetry
(a straight run with zero steering stays on the centre line); the kinematic bicycle model
of the lane change (lateral offset ``2 v^2 A / (L pi)`` at 2 s, heading back to zero);
direct = adjoint = central differences for the gradients.  Every simulation here runs at
dt = 10 ms (the model's default, the seed's middle step).
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

import workbench as wb
from workbench import catalog, statics
from workbench.forces import tire_mf as TL
from workbench.integrators.result_kinematics import (angular_velocity_history, point_history,
                                                     vector_history)
from workbench.model.files import model_from_dict
from workbench.model.serialize import model_to_dict
from workbench.sensitivities.driver import sensitivity

V0 = 50.0 / 3.6                     # the seed's speed, m/s
A_STEER, WHEELBASE = 0.013, 6.0     # the seed's steering amplitude (rad); the file's wheelbase
TIRES = {"fl_tire": ("fl_wheel", "c"), "fr_tire": ("fr_wheel", "c"),
         "rl_tire_in": ("rl_wheel", "c_in"), "rl_tire_out": ("rl_wheel", "c_out"),
         "rr_tire_in": ("rr_wheel", "c_in"), "rr_tire_out": ("rr_wheel", "c_out")}


@pytest.fixture(scope="module")
def coach():
    return catalog.load("coach")


@pytest.fixture(scope="module")
def lane_change():
    return wb.simulate(catalog.load("coach"), t_end=2.0, dt=0.01)


def body_mass_sum(cm) -> float:
    ma = cm.arrays
    return float(sum(ma.p[ma.b_mass[b]] for b in range(ma.b_mass.shape[0])))


def tire_loads(cm, z, zd):
    """Normal load of every tyre at the state ``(z, zd)``: the tyre element's own law
    (``tire_mf.element_force``) evaluated at the wheel centre, spin axis and wheel angular
    velocity of that state."""
    ma = cm.arrays
    p = np.asarray(ma.p)
    Z, ZD = z[None, :], zd[None, :]
    zero = np.zeros_like(Z)
    road = p[ma.rd_fld[0]:ma.rd_fld[0] + ma.rd_fld[1]]
    out = {}
    for k, (name, (wheel, centre)) in enumerate(TIRES.items()):
        c, vc, _ = point_history(cm, Z, ZD, zero, f"{wheel}.{centre}")
        a = vector_history(cm, Z, ZD, zero, f"{wheel}.spin")[0][0]
        w = angular_velocity_history(cm, Z, ZD, zero, wheel)[0]
        law = int(ma.ty_law[k])
        tp = p[ma.ty_par[k]:ma.ty_par[k] + TL.tire_npar(law)]
        F, P, M = np.zeros(3), np.zeros(3), np.zeros(3)
        _, N = TL.element_force(law, c[0], vc[0], a, w, tp, road, F, P, M)
        out[name] = N
    return out


# ----------------------------------------------------------------------------------------
# the seed's totals
# ----------------------------------------------------------------------------------------


def test_total_mass_is_the_seeds_17048_kg(coach):
    """Sum of the body masses (the stabiliser-bar halves and the axle carrier are
    massless): exactly 17 048 kg (integers, no rounding)."""
    assert body_mass_sum(coach.compile()) == 17048.0


def test_sixteen_dof_in_the_seeds_sense(coach):
    """15 free DOF + the kinematically guided steering coordinate = the seed's 16.  The
    project counts a driven coordinate as constrained (its drive is one of the m
    equations); without the drive the same mechanism has exactly 16 DOF, the steering
    coordinate among them."""
    cm = coach.compile()
    assert (cm.n, cm.m, cm.d) == (28, 13, 15)
    assert list(coach.drives) == ["steering"] and coach.drives["steering"].joint == "steer"
    assert "steer" not in cm.dof_names
    free = copy.deepcopy(coach)
    del free.drives["steering"]
    free.dof(*cm.dof_names, "steer")
    cf = free.compile()
    assert (cf.n, cf.m, cf.d) == (28, 12, 16)


def test_the_seeds_topology(coach):
    """6 air springs (linear), 6 piecewise-bilinear dampers, 2 stabiliser bars, the body
    torsion spring on a revolute joint about x, 2 front + 2 x 2 rear Magic Formula tyres
    (two on each dual-wheel body), the track rods as distance constraints and the upper
    ball joints as cut joints, the speed controller on the rear wheels."""
    air = [s for s in coach.springs.values() if s.damper is None]
    dampers = [s for s in coach.springs.values() if s.damper is not None]
    assert len(air) == 6 and len(dampers) == 6
    assert all(len(s.damper["slopes"]) == 2 and s.damper["knees"] == [0.0] for s in dampers)
    assert {"front_arb.torsion", "rear_arb.torsion"} <= set(coach.joint_springs)
    assert coach.joint_springs["torsion_spring"].joint == "torsion"
    assert coach.joints["torsion"].type == "revolute"
    np.testing.assert_array_equal(coach.joints["torsion"].axis, [1.0, 0.0, 0.0])
    assert set(coach.distances) >= {"fl_tie", "fr_tie"} and set(coach.cuts) == {"fl_ubj",
                                                                                 "fr_ubj"}
    assert [t.law for t in coach.tires.values()] == ["magic-formula"] * 6
    assert sorted(t.body for t in coach.tires.values()) == sorted(w for w, _ in TIRES.values())
    (sc,) = coach.speed_controls.values()
    assert [w[0] for w in sc.wheels] == ["rl_wheel", "rr_wheel"]
    # the file round trip compiles to the same arrays
    a, b = coach.compile(), model_from_dict(model_to_dict(coach)).compile()
    for x, y in zip(a.arrays, b.arrays):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


# ----------------------------------------------------------------------------------------
# static equilibrium
# ----------------------------------------------------------------------------------------


def test_static_equilibrium_carries_the_weight_on_the_tyres(coach):
    """The equilibrium exists (speed controller off and steering held at rest,
    workbench.statics.at_rest) and the six tyre loads balance the weight: the vertical
    residual is the z component of the projected force, below the solver's tolerance
    1e-10 m g = 1.7e-5 N, so the loads sum to m g within 1e-9 relative.  Axle loads: the
    moment balance of the design's masses about the rear axle gives 6004.1 kg on the
    front axle; the equilibrium pose differs from the design by a pitch of ~4e-4 rad and a
    ~3 mm drop of the axle pivots, which moves the centres of mass by < 1 mm: 1e-3
    relative.  Left and right loads are equal (mirror symmetry, 1e-9 relative)."""
    cm = coach.compile()
    eq = wb.equilibrium(cm)
    assert eq.residual <= eq.tolerance
    N = tire_loads(cm, eq.z, np.zeros(cm.n))
    mg = 17048.0 * 9.81
    assert abs(sum(N.values()) - mg) <= 1e-9 * mg
    front = 9.81 * (6500 * 5.4 - 8778 * 0.25 + 510 * 6.0 + 10 * 5.9) / 6.0
    np.testing.assert_allclose(N["fl_tire"] + N["fr_tire"], front, rtol=1e-3)
    for left, right in (("fl_tire", "fr_tire"), ("rl_tire_in", "rr_tire_in"),
                        ("rl_tire_out", "rr_tire_out")):
        np.testing.assert_allclose(N[left], N[right], rtol=1e-9)
    # a coach tyre's load: 27-30 kN each (FNOMIN of the scaled set is 30 kN)
    assert all(26e3 < n < 30.5e3 for n in N.values())


def test_at_rest_switches_off_the_controller_and_holds_the_steering(coach):
    """The copy solved for equilibrium has the controller gain and the steering's omega at
    0; the model itself is unchanged."""
    cm = coach.compile()
    rest = statics.at_rest(cm)
    fields = statics._rest_fields(cm, 0.0)
    assert fields.size == 2
    assert np.all(np.asarray(rest.arrays.p)[fields] == 0.0)
    assert np.all(np.asarray(cm.arrays.p)[fields] != 0.0)
    others = np.setdiff1d(np.arange(cm.arrays.p.shape[0]), fields)
    np.testing.assert_array_equal(np.asarray(rest.arrays.p)[others],
                                  np.asarray(cm.arrays.p)[others])


# ----------------------------------------------------------------------------------------
# runs at 50 km/h
# ----------------------------------------------------------------------------------------


def test_straight_run_stays_straight_and_holds_the_speed():
    """Zero steering amplitude: the mirror-symmetric coach rolls along the centre line
    (lateral drift and yaw at rounding level: bounds 1e-9 m and 1e-9 rad, measured
    ~1e-15) at the set speed (measured within 1.1e-6 m/s: the tyres have no rolling
    resistance, so the controller needs no torque; bound 1e-5 m/s)."""
    res = wb.simulate(catalog.load("coach", steer_amp=0.0), t_end=2.0, dt=0.01)
    assert np.abs(res.coordinate("front_body.y")).max() < 1e-9
    assert np.abs(res.coordinate("front_body.rz")).max() < 1e-9
    v = res.point_velocity("front_body.G")
    assert np.abs(v[:, 0] - V0).max() < 1e-5
    np.testing.assert_allclose(res.coordinate("front_body.x")[-1], 2.0 * V0, rtol=1e-6)
    assert res.max_constraint_violation < 1e-8


def test_lane_change_moves_the_coach_to_the_side_of_the_steering(lane_change):
    """delta(t) = 0.013 sin(pi t) (positive: steers left, +y).  Kinematic bicycle model:
    heading psi = v A / (L pi) (1 - cos pi t), back to 0 at 2 s, lateral offset
    2 v^2 A / (L pi) = 0.266 m at 2 s.  The coach understeers and its yaw lags the
    steering, so the offset is smaller (measured 0.243 m; required 0.5-1.0 of the
    kinematic value) and the heading at 2 s is not exactly 0: required below the heading a
    0.2 s lag behind the kinematic yaw rate v A / L would leave (6.0e-3 rad; measured
    3.9e-3 rad, against a peak of 1.65e-2 rad)."""
    res = lane_change
    y = res.coordinate("front_body.y")
    psi = res.coordinate("front_body.rz")
    y_kin = 2 * V0 ** 2 * A_STEER / (WHEELBASE * np.pi)
    assert 0.5 * y_kin < y[-1] < 1.0 * y_kin
    assert y.min() > -1e-6                       # never to the other side
    assert psi.max() > 0.01                      # it turned left first ...
    assert abs(psi[-1]) < 0.2 * V0 * A_STEER / WHEELBASE    # ... and came back
    np.testing.assert_allclose(res.coordinate("steer"),
                               A_STEER * np.sin(np.pi * res.t), atol=1e-12)


def test_lane_change_holds_the_speed_and_the_constraints(lane_change):
    """The controller holds 50 km/h: the cornering drag of the tyres is compensated with
    a proportional error (measured at most 2.3e-3 m/s, bound 1e-2 m/s = 0.036 km/h).
    Loop closures (ball joints, track rods, droplinks) hold to the position tolerance:
    bound 1e-8 (measured 5e-13)."""
    res = lane_change
    v = res.point_velocity("front_body.G")
    assert np.abs(v[:, 0] - V0).max() < 1e-2
    assert res.max_constraint_violation < 1e-8
    assert res.summary()["max_velocity_constraint_violation"] < 1e-8


def test_lane_change_rolls_the_body_outwards(lane_change):
    """At the peak lateral acceleration (0.38 m/s^2 to the left at t = 0.5 s) the front
    body rolls outwards (positive about x: the left side up).  Roll gradient, hand
    estimate: suspension roll stiffness ~2.4 MN m/rad (springs and bars, coach.toml) in
    series with the tyres' ~5.4 MN m/rad, sprung weight 15 278 kg x 0.9 m above the roll
    axis: 4.7 deg/g quasi-static, x ~1.16 dynamic amplification of the 1.35 Hz roll mode
    at the 0.5 Hz steering; required 3-8 deg/g (measured 5.5)."""
    res = lane_change
    ay = res.point_acceleration("front_body.G")[:, 1]
    roll = res.coordinate("front_body.rx")
    k = int(np.argmax(np.abs(ay)))
    assert ay[k] > 0.3 and roll[k] > 0.0
    assert 3.0 < np.degrees(roll[k]) / (ay[k] / 9.81) < 8.0


def test_lane_change_converges_in_the_step(lane_change):
    """The seed's 20 ms step gives the same maneuver: lateral offset within 1e-3 m
    (measured 6e-5 m between 10 and 20 ms)."""
    coarse = wb.simulate(catalog.load("coach"), t_end=2.0, dt=0.02)
    assert abs(coarse.coordinate("front_body.y")[-1]
               - lane_change.coordinate("front_body.y")[-1]) < 1e-3


# ----------------------------------------------------------------------------------------
# gradients
# ----------------------------------------------------------------------------------------


def test_gradients_direct_adjoint_and_differences_agree(coach):
    """Both objectives over 0.2 s (20 steps) with respect to a stabiliser bar, a damper
    slope, the body torsion, a body mass (which moves the equilibrium start: its exact
    derivative seeds the sweeps), a rear air spring, the controller gain and the
    steering's omega (both zeroed at rest: statics._rest_columns), a tyre coefficient.
    Direct = adjoint to 1e-10 relative (measured 2e-16); = central differences of
    re-equilibrated designs to 1e-6 of each objective's largest parameter-scaled entry
    (measured 2e-9)."""
    cm = coach.compile()
    params = ["k_arb_f", "c_reb_f", "k_tor", "m_fb", "k_as_r", "K_v", "steer_omega",
              "tire_ky"]
    kw = dict(parameters=params, t_end=0.2, dt=0.01)
    D = sensitivity(cm, method="direct", **kw)
    A = sensitivity(cm, method="adjoint", **kw)
    F = sensitivity(cm, method="fd", **kw)
    scale = np.abs(D.gradient).max(axis=1, keepdims=True)
    assert np.all(np.abs(A.gradient - D.gradient) <= 1e-10 * scale)
    rho = np.array([cm.param_values[cm.param_names.index(p)] for p in params])
    sc = np.abs(D.gradient * rho).max(axis=1, keepdims=True)
    assert np.all(np.abs((F.gradient - D.gradient) * rho) <= 1e-6 * sc)
