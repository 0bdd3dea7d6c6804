"""The stateless speed controller (vehicle-kit issue, item 4): drive torque
T = T_max tanh(K (v_set - v) / T_max) about the driven wheels' axes, reaction on their
carriers.

Independent references: a rolling wheel without resistances needs no torque at steady
state, so the controlled speed settles at the set speed; a wheel held at rest by a rigid
carrier (no traction) takes the saturated torque law's value exactly; the carrier receives
the reaction (the total moment on wheel + carrier vanishes); the gradients with respect to
the gain, the saturation, the share and the set speed are direct = adjoint = central
differences, in the semi-recursive and the global formulation (which also gives the
same motion).
"""

from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench.errors import ModelError
from workbench.model.elements import GROUND
from workbench.model.files import model_from_dict
from workbench.model.serialize import model_to_dict


def driven_wheel(vset=5.0, gain=40.0, tmax=60.0):
    """A wheel on a carrier that slides along x and lifts along z, rolling on a flat road
    under gravity; the controller measures the carrier's x velocity and drives the wheel
    about its left-pointing axis, the reaction on the carrier."""
    m = wb.Model("driven-wheel", gravity=(0.0, 0.0, -9.81))
    for name, val, unit in (("vset", vset, "m/s"), ("K", gain, None), ("Tmax", tmax, "N*m"),
                            ("share", 1.0, "1")):
        m.parameter(name, val, unit)
    m.body("base", mass=0.0, inertia=(0, 0, 0))
    m.body("carrier", mass=20.0, inertia=(0.2, 0.2, 0.2), points={"C": (0, 0, 0)},
           vectors={"forward": (1, 0, 0)})
    m.body("wheel", mass=10.0, inertia=(0.2, 0.35, 0.2), vectors={"spin": (0, 1, 0)})
    m.prismatic("drive", GROUND, "base", axis=(1, 0, 0))
    m.prismatic("lift", "base", "carrier", axis=(0, 0, 1), q0=0.2985)
    m.revolute("spin", "carrier", "wheel", axis=(0, 1, 0))
    m.tire("tire", "wheel", (0, 0, 0), "spin", radius=0.3, k=1e5, c=2000.0, mu=0.9,
           v_eps=0.1)
    m.speed_control("cruise", "carrier", "C", "forward", "vset",
                    [("wheel", "carrier", "spin", "share")], gain="K", torque_max="Tmax")
    m.dof("drive", "lift", "spin")
    return m


def test_the_controlled_wheel_settles_at_the_set_speed():
    """No rolling resistance or drag: the steady state needs no torque, so the speed
    reaches v_set (to 1e-6 m/s after 6 s: the approach is exponential with the rate
    ~K / (R^2 m_total + I) ~ 3 1/s, slowed by the saturation at the start)."""
    res = wb.simulate(driven_wheel(), t_end=6.0, dt=2e-3)
    v = res.zd[:, 0]
    assert v[0] == 0.0 and np.all(np.diff(v[50:]) > -1e-9)     # accelerates monotonically
    np.testing.assert_allclose(v[-1], 5.0, atol=1e-6)
    # the wheel rolls: omega R = v (ISO: the left-pointing spin axis, positive rate
    # rolls forward), slip ~1e-9 at steady state
    np.testing.assert_allclose(res.zd[-1, 2] * 0.3, v[-1], rtol=1e-6)


def test_torque_law_and_its_reaction_on_the_carrier():
    """Wheel lifted off the road and the carrier at rest: the wheel spins up under the
    saturated torque T_max tanh(K v_set / T_max) (its axis is fixed, so the spin rate
    grows as T t / I_yy exactly), and the carrier takes the reaction: no net moment on
    the two (the carrier is guided without rotation, so only the spin moves)."""
    m = driven_wheel()
    m.joints["lift"].q0 = [1.0]                    # out of contact
    m.gravity = (0.0, 0.0, 0.0)
    res = wb.simulate(m, t_end=0.5, dt=1e-3)
    T = 60.0 * np.tanh(40.0 * 5.0 / 60.0)
    np.testing.assert_allclose(res.zd[:, 2], T * res.t / 0.35, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(res.zd[:, 0], 0.0, atol=1e-12)   # no traction, no reaction


@pytest.mark.parametrize("method,formulation", [("direct", "sr-com"), ("adjoint", "sr-com"),
                                                ("adjoint", "global")])
def test_speed_control_gradients_equal_central_differences(method, formulation):
    """Direct = adjoint (1e-12 relative) = central differences (1e-6 relative) for the gain,
    the saturation, the share and the set speed, over the acceleration phase, in both
    formulation families."""
    cm = driven_wheel().compile()
    obj = [wb.objectives.coordinate("speed", "drive", level=1),
           wb.objectives.coordinate("spin", "spin", level=1, power=1)]
    kw = dict(parameters=["K", "Tmax", "share", "vset"], t_end=0.5, dt=1e-3,
              formulation=formulation)
    g = wb.sensitivity(cm, obj, method=method, **kw)
    d = wb.sensitivity(cm, obj, method="direct", **kw) if method == "adjoint" else g
    f = wb.sensitivity(cm, obj, method="fd", **kw)
    scale = np.abs(d.gradient).max(axis=1, keepdims=True)
    assert np.all(np.abs(g.gradient - d.gradient) <= 1e-12 * scale)
    assert np.all(np.abs(f.gradient - g.gradient) <= 1e-6 * scale)
    assert np.all(g.gradient[0] != 0.0)


def test_global_formulation_gives_the_same_controlled_motion():
    """The natural-coordinate kernels apply the same law: the two families' trajectories
    agree to their Newton tolerances (1e-8 on the speed of ~3 m/s)."""
    cm = driven_wheel().compile()
    a = wb.simulate(cm, t_end=1.0, dt=1e-3)
    b = wb.simulate(cm, t_end=1.0, dt=1e-3, formulation="global")
    np.testing.assert_allclose(b.zd, a.zd, atol=1e-8)


def test_speed_control_round_trip_and_bad_input():
    m = driven_wheel()
    cm = m.compile()
    cm2 = model_from_dict(model_to_dict(m)).compile()
    np.testing.assert_array_equal(cm2.arrays.p, cm.arrays.p)
    np.testing.assert_array_equal(cm2.arrays.sw_body, cm.arrays.sw_body)
    bad = driven_wheel()
    with pytest.raises(ModelError, match="wheel #1"):
        bad.speed_control("c2", "carrier", "C", "forward", 5.0, [("wheel", "carrier")],
                          gain=1.0, torque_max=1.0)
    bad.speed_control("c3", "carrier", "C", "forward", 5.0,
                      [("wheel", "carrier", "spin", 1.0)], gain=1.0, torque_max=0.0)
    with pytest.raises(ModelError, match="torque_max"):
        bad.compile()
