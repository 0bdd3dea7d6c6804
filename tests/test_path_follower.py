"""The closed-loop path-following steering driver (vehicle-kit issue 24, item 5):
``Model.path_follower`` (a stateless servo on the steering coordinate toward
``-gain (y_P - f(x_P))``) and ``maneuver(..., driver="path")``.

Independent references: central differences of the whole simulation for the gain, the
servo stiffness and a path amplitude (the element's tangent, the Newton-matrix terms only
change convergence, not the converged step); the course's own gate boundaries; a straight
path started with a lateral offset, which a stable pure-pursuit loop removes.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import workbench
from workbench.apps import vehicle
from workbench.errors import ModelError
from workbench.integrators.result_kinematics import point_history
from workbench.maneuvers import maneuver
from workbench.model import catalog
from workbench.model.files import load_model, model_from_dict
from workbench.model.serialize import model_to_dict
from workbench.sensitivities.driver import sensitivity

DT = 0.015                                   # the buggy double lane change's step
SPEED = 11.0                                 # the buggy double lane change's speed (m/s)


@pytest.fixture(scope="module")
def buggy():
    return catalog.load("buggy-step")


def _prepared(m):
    """Static equilibrium, rolling start; the friction regularisation v_eps = v0/30 of the
    buggy's maneuver files (as tests/test_maneuvers.py)."""
    return vehicle.prepare(m, parameters={"v_eps": m.parameters["v0"].si_value / 30.0})


def _axle_points(sim, m):
    """Ground-plane paths of the chassis at the front axle (its frame origin) and at the
    rear axle (2 m behind; the measured wheelbase)."""
    cm = m.compile()
    L = m.meta["maneuver"]["wheelbase"]
    front = point_history(cm, sim.z, sim.zd, sim.zd, "chassis", [0.0, 0.0, 0.0])[0]
    rear = point_history(cm, sim.z, sim.zd, sim.zd, "chassis", [-L, 0.0, 0.0])[0]
    return front, rear


def test_path_follower_gradients_direct_adjoint_differences(buggy):
    """d(lateral objectives)/d(gain, servo stiffness, servo damping, lane-change offset):
    direct = adjoint (1e-9) = central differences (1e-6, each entry relative to itself;
    measured ~1e-8), over the first half of the first lane change (the path bends at the
    preview point from t ~ 1.3 s).  The differences' tolerance has a floor of 1e-10 of the
    row's largest entry: the rack objective's servo-stiffness and damping entries (6e-10
    and 3.5e-8 of their row) sit at the difference quotient's noise (seen: 1.4e-18 and
    3.9e-17 absolute, 6e-14 of the row's largest entry, 3.5e-6 of themselves)."""
    m = _prepared(maneuver(buggy, "iso3888-1", driver="path", speed=SPEED, dt=DT))
    obj = [workbench.objectives.coordinate("lateral", "chassis.y", power=2),
           workbench.objectives.coordinate("rack", "rack", power=2)]
    kw = dict(objectives=obj, parameters=["driver_gain", "driver_k", "driver_c", "lc1_Y"],
              t_end=3.0)
    D = sensitivity(m, method="direct", **kw)
    A = sensitivity(m, method="adjoint", simulation=D.simulation, **kw)
    F = sensitivity(m, method="fd", **kw)
    assert np.all(D.gradient != 0.0)
    np.testing.assert_allclose(A.gradient, D.gradient, rtol=1e-9, atol=0)
    floor = 1e-10 * np.abs(D.gradient).max(axis=1, keepdims=True)
    assert np.all(np.abs(F.gradient - D.gradient) <= 1e-6 * np.abs(D.gradient) + floor)


def test_dlc_with_the_path_driver_stays_in_the_lanes(buggy):
    """The buggy at 11 m/s through the ISO 3888-1 course steered by the path follower:
    the chassis at both axles inside each gated section (lane boundaries from the
    course), and the loop ends straight on the exit lane's centre line."""
    m = maneuver(buggy, "iso3888-1", driver="path", speed=SPEED, dt=DT)
    mm = m.meta["maneuver"]
    assert mm["driver"] == "path" and not mm["open_loop"]
    assert "steering" not in m.drives and "driver" in m.path_followers
    sim = workbench.simulate(_prepared(m), m.meta["t_end"], m.meta["dt"])
    assert np.all(np.asarray(sim.step_kind)[1:] == 1)
    front, rear = _axle_points(sim, m)
    for lane in mm["course"]:
        for x in (front, rear):
            sel = (x[:, 0] >= lane["x0"]) & (x[:, 0] <= lane["x1"])
            assert sel.sum() > 20
            assert np.all(x[sel, 1] < lane["y_left"]) and np.all(x[sel, 1] > lane["y_right"])
    # exit: the centre line of section 5 is y = lc1_Y + lc2_Y
    y_exit = mm["derived"]["lc1_Y"] + mm["derived"]["lc2_Y"]
    assert abs(front[-1, 1] - y_exit) < 0.1


def test_initial_lateral_offset_converges_to_the_path(buggy):
    """Started 0.3 m left of a straight path (the course moved 60 m ahead), the driver
    steers back: the offset falls below 1 cm within 4 s and does not overshoot by more
    than 10 %."""
    m = maneuver(buggy, "iso3888-1", driver="path", speed=SPEED, dt=DT, x0=60.0, t_end=4.5)
    m.joints["chassis"].q0 = list(m.joints["chassis"].q0)
    m.joints["chassis"].q0[1] = 0.3
    sim = workbench.simulate(_prepared(m), m.meta["t_end"], m.meta["dt"])
    front, rear = _axle_points(sim, m)
    assert abs(front[0, 1] - 0.3) < 1e-3
    late = sim.t >= 4.0
    assert np.all(np.abs(front[late, 1]) < 0.01) and np.all(np.abs(rear[late, 1]) < 0.01)
    assert front[:, 1].min() > -0.03
    assert np.all(front[:, 0] < 60.0 + 15.0)          # still before the first transition


def test_slalom_and_obstacle_avoidance_with_the_path_driver(buggy):
    """The driver is installed for iso3888-2 and the slalom (path through the cone peaks,
    amplitude bound to slalom_amplitude), and refused for open-loop inputs."""
    m = maneuver(buggy, "slalom", driver="path", speed=8.0, t0=0.3, dt=DT)
    pf = m.path_followers["driver"]
    assert "slalom_amplitude" in pf.path.parameter_names()
    m2 = maneuver(buggy, "iso3888-2", driver="path", speed=SPEED, dt=DT)
    assert "oa1_Y" in m2.path_followers["driver"].path.parameter_names()
    with pytest.raises(ModelError, match="step-steer"):
        maneuver(buggy, "step-steer", driver="path")
    with pytest.raises(ModelError, match="driver"):
        maneuver(buggy, "iso3888-1", driver="human")
    with pytest.raises(ModelError, match="preview"):
        maneuver(buggy, "iso3888-1", preview=5.0)        # a driver option, open loop


def test_bad_input_raises_model_errors_naming_the_element(buggy):
    m = maneuver(buggy, "iso3888-1", driver="path", speed=SPEED, dt=DT)
    # round trip through the model file form
    cm = m.compile()
    cm2 = model_from_dict(model_to_dict(m)).compile()
    np.testing.assert_array_equal(cm2.arrays.p, cm.arrays.p)
    np.testing.assert_array_equal(cm2.arrays.pf_coord, cm.arrays.pf_coord)
    with pytest.raises(ModelError, match="path follower 'p2'.*joint"):
        m.path_follower("p2", "chassis", [1, 0, 0], "no-such-joint", 0.0, 1.0, 1.0, 1.0)
    with pytest.raises(ModelError, match="path follower 'p3'.*ground"):
        m.path_follower("p3", "ground", [1, 0, 0], "rack", 0.0, 1.0, 1.0, 1.0)
    with pytest.raises(ModelError, match="path follower 'p4' path"):
        m.path_follower("p4", "chassis", [1, 0, 0], "rack", {"type": "nope"}, 1.0, 1.0, 1.0)
    bad = maneuver(buggy, "iso3888-1", driver="path", speed=SPEED, dt=DT)
    bad.path_follower("p5", "chassis", [1, 0, 0], "fl_lower", 0.0, 1.0, -1.0, 1.0)
    with pytest.raises(ModelError, match="path follower 'p5' stiffness"):
        bad.compile()
    driven = catalog.load("buggy-step")
    driven.path_follower("p6", "chassis", [1, 0, 0], "rack", 0.0, 1.0, 1.0, 1.0)
    with pytest.raises(ModelError, match="path follower 'p6'.*driven"):
        driven.compile()
    with pytest.raises(ModelError, match="path follower 'driver'.*global"):
        workbench.simulate(m, 0.03, DT, formulation="global")


def _car(path):
    """A rigid car gliding on the ground plane (x, y, yaw) with a steered lever; no
    gravity, no other force element: the only stiffness is the path follower's."""
    m = workbench.Model("glider", gravity=(0.0, 0.0, 0.0))
    m.body("b0", mass=0.0, inertia=(0, 0, 0))
    m.body("b1", mass=0.0, inertia=(0, 0, 0))
    m.body("car", mass=100.0, inertia=(20.0, 30.0, 40.0), points={"P": (3.0, 0.2, 0.0)})
    m.body("lever", mass=1.0, inertia=(0.1, 0.1, 0.1), com=(0.1, 0.0, 0.0))
    m.prismatic("px", "ground", "b0", axis=(1, 0, 0), q0=1.3)
    m.prismatic("py", "b0", "b1", axis=(0, 1, 0), q0=0.4)
    m.revolute("yaw", "b1", "car", axis=(0, 0, 1), q0=0.3)
    m.revolute("steer", "car", "lever", axis=(0, 0, 1), parent_point=(2.0, 0.0, 0.0),
               q0=0.05)
    m.path_follower("pf", "car", "P", "steer", path, gain=0.7, stiffness=500.0,
                    damping=3.0)
    return m


def test_newton_matrix_terms_equal_the_exact_stiffness():
    """The path follower's rows of the Newton matrix (force_jacobians: K[c, c] += k,
    K[c, :] += k g (J_P[1, :] - f'(x_P) J_P[0, :])) equal the exact -dQ/dz from the
    tangent kernels (two implementations), for a curved path (f' != 0 at x_P)."""
    from workbench.statics import exact_stiffness, projected_stiffness
    cm = _car({"type": "sine", "amplitude": 0.8, "omega": 0.5, "phase": 0.2}).compile()
    assert not cm.conservative
    z = np.array(cm.z_guess, float)
    n = z.shape[0]
    Kp = projected_stiffness(cm, 0.0, z, np.eye(n))
    Ke = exact_stiffness(cm, 0.0, z, z)
    c = cm.coord_names.index("steer")
    assert np.count_nonzero(np.abs(Kp[c]) > 1e-12) == 4          # x, y, yaw and steer
    np.testing.assert_allclose(Kp, Ke, rtol=1e-12, atol=1e-12 * np.abs(Kp).max())


def test_penalty_formulation_gives_the_same_motion():
    """The penalty formulation (its load group: the preview body with the steered body)
    follows the same law: trajectories agree with the semi-recursive one to 1e-7."""
    m = _car({"type": "sine", "amplitude": 0.8, "omega": 0.5, "phase": 0.2})
    m.joints["px"].qd0 = [3.0]
    a = workbench.simulate(m, 1.0, 1e-3)
    b = workbench.simulate(m, 1.0, 1e-3, formulation="penalty")
    assert abs(a.z[-1, a.coord_names.index("steer")] - 0.05) > 0.1      # the servo acts
    np.testing.assert_allclose(b.z, a.z, atol=1e-7)


def test_model_file_form(tmp_path, buggy):
    """``[maneuver] driver = "path"`` in a model file gives the Python form's driver."""
    shutil.copy(catalog.path("buggy-step"), tmp_path / "buggy-step.toml")
    (tmp_path / "dlc.toml").write_text(
        'base = "buggy-step.toml"\n[model.meta]\ndt = 0.015\n'
        '[maneuver]\nkind = "iso3888-1"\nspeed = 11.0\ndriver = "path"\n'
        'preview = {value = 700, unit = "cm"}\n')
    f = load_model(tmp_path / "dlc.toml")
    p = maneuver(buggy, "iso3888-1", driver="path", speed=SPEED, dt=DT, preview=7.0)
    assert f.path_followers["driver"].path == p.path_followers["driver"].path
    for name in ("driver_preview", "driver_gain", "driver_k", "driver_c", "lc1_Y"):
        assert f.parameters[name].value == pytest.approx(p.parameters[name].value, rel=1e-12)
        assert f.parameters[name].provenance.strip()
    assert f.parameters["driver_preview"].value == pytest.approx(7.0)
