"""Every bad input raises its typed exception (workbench.errors), and the message names
the model element involved and, during a run, the time."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from conftest import catalog_or_none, four_bar, pendulum

from workbench import (AssemblyError, Model, ModelError, NewtonConvergenceError, NonFiniteError,
                       SimulationError, SingularConfigurationError, UnitError, UnknownNameError,
                       WorkbenchError, simulate)
from workbench.formulations.semirecursive.state import assemble
from workbench.model.elements import GROUND


def small_model():
    m = Model("small")
    m.parameter("L", 0.5, "m")
    m.parameter("mass", 2.0, "kg")
    m.body("arm", mass="mass", com=("L", 0, 0), inertia=(0.01, 0.01, 0.01),
           points={"tip": (1.0, 0, 0)})
    m.revolute("hinge", GROUND, "arm", axis=(0, 0, 1))
    return m


def _time_in(message):
    """The time stamp 't = ... s' that SimulationError puts in front of its message."""
    found = re.match(r"t = ([-+0-9.eE]+) s: ", message)
    return None if found is None else float(found.group(1))


# ----------------------------------------------------------------------------------------
# unknown names
# ----------------------------------------------------------------------------------------


def test_unknown_body_in_builder():
    m = small_model()
    with pytest.raises(UnknownNameError, match="unknown body 'nobody'") as exc:
        m.revolute("j2", "nobody", "arm")
    assert exc.value.kind == "body" and exc.value.name == "nobody"
    assert "arm" in exc.value.known                       # the message lists the known ones
    with pytest.raises(UnknownNameError, match="'nobody'"):
        m.point("nobody", "p", (0, 0, 0))
    with pytest.raises(UnknownNameError, match="'nobody'"):
        m.spring("s", "arm", "tip", "nobody", (0, 0, 0), k=1.0)


def test_unknown_point_is_reported_with_its_body():
    m = small_model()
    m.body("other", 1.0, inertia=(0.1, 0.1, 0.1))
    m.revolute("j2", "arm", "other", parent_point="tip")
    m.cut("loop", "spherical", "other", GROUND, point1="no_such_point", point2=(0, 0, 0))
    with pytest.raises(UnknownNameError, match="no_such_point") as exc:
        m.compile()
    assert "'other'" in str(exc.value)                    # names the body it was looked up on
    cm = small_model().compile()
    with pytest.raises(UnknownNameError, match="arm.nope"):
        cm.point("arm.nope")


def test_unknown_parameter():
    m = small_model()
    m.body("b2", mass="no_such_mass", inertia=(0.1, 0.1, 0.1))
    m.revolute("j2", "arm", "b2")
    with pytest.raises(UnknownNameError, match="unknown parameter 'no_such_mass'"):
        m.compile()
    with pytest.raises(UnknownNameError, match="unknown parameter 'nope'"):
        small_model().compile({"nope": 1.0})


def test_unknown_coordinate_and_joint():
    cm = small_model().compile()
    with pytest.raises(UnknownNameError, match="unknown coordinate 'hinge.rz'") as exc:
        cm.coordinate("hinge.rz")
    assert "hinge" in exc.value.known
    m = small_model()
    m.dof("hinge.rz")
    with pytest.raises(UnknownNameError, match="'hinge.rz'"):
        m.compile()
    m = small_model()
    m.joint_spring("js", "no_such_joint", k=1.0)
    with pytest.raises(UnknownNameError, match="unknown joint 'no_such_joint'"):
        m.compile()


def test_unknown_errors_are_also_key_and_value_errors():
    """UnknownNameError is a ModelError (ValueError) and a KeyError, with a clean message."""
    with pytest.raises(KeyError) as exc:
        small_model().compile().coordinate("x")
    assert isinstance(exc.value, ModelError) and isinstance(exc.value, ValueError)
    assert str(exc.value).startswith("unknown coordinate 'x'")


@pytest.mark.skipif(catalog_or_none() is None, reason="workbench.catalog not available")
def test_unknown_model_name_in_catalog():
    cat = catalog_or_none()
    with pytest.raises(UnknownNameError, match="unknown model 'no-such-model'") as exc:
        cat.load("no-such-model")
    assert "pendulum" in exc.value.known
    with pytest.raises(ModelError, match="bogus"):
        cat.load("pendulum", bogus=1.0)


# ----------------------------------------------------------------------------------------
# units
# ----------------------------------------------------------------------------------------


def test_parameter_with_wrong_unit_bound_to_a_field():
    m = Model("units")
    m.parameter("L", 0.5, "kg")                           # a mass used as a length
    m.body("arm", mass=1.0, com=("L", 0, 0), inertia=(0.1, 0.1, 0.1))
    m.revolute("hinge", GROUND, "arm")
    with pytest.raises(UnitError) as exc:
        m.compile()
    msg = str(exc.value)
    assert "body arm com" in msg and "'L'" in msg and "length" in msg


def test_parameter_units_are_converted():
    """Not an error: a length in mm bound to a length field is converted to SI."""
    m = Model("units-ok", gravity=(0, -9.81, 0))
    m.parameter("L", 500.0, "mm")
    m.body("arm", mass=1.0, com=("L", 0, 0), inertia=(0.0, 0.0, 0.0))
    m.revolute("hinge", GROUND, "arm")
    cm = m.compile()
    # M = m L^2 with L = 0.5 m (1e-14 relative: one product, rounding only)
    from workbench.formulations.semirecursive.state import state_terms
    assert state_terms(cm).M_bar[0, 0] == pytest.approx(0.25, rel=1e-14)


def test_unknown_unit_and_wrong_joint_spring_unit():
    m = Model("units")
    with pytest.raises(UnitError, match="furlong"):
        m.parameter("x", 1.0, "furlong")
    m = small_model()
    m.parameter("k", 10.0, "kg")
    m.joint_spring("js", "hinge", k="k")
    with pytest.raises(UnitError, match="joint spring js k"):
        m.compile()


# ----------------------------------------------------------------------------------------
# builder consistency
# ----------------------------------------------------------------------------------------


def test_duplicate_names_are_rejected():
    m = small_model()
    with pytest.raises(ModelError, match="body 'arm' is declared twice"):
        m.body("arm", 1.0)
    with pytest.raises(ModelError, match="parameter 'L' is declared twice"):
        m.parameter("L", 1.0, "m")
    m.body("b2", 1.0, inertia=(0.1, 0.1, 0.1))
    with pytest.raises(ModelError, match="'hinge' is already used"):
        m.revolute("hinge", "arm", "b2")
    m.revolute("j2", "arm", "b2")
    with pytest.raises(ModelError, match="'j2' is already used"):
        m.spring("j2", "arm", "tip", GROUND, (0, 0, 0), k=1.0)


def test_body_without_tree_joint_is_rejected():
    m = small_model()
    m.body("floating_nowhere", 1.0, inertia=(0.1, 0.1, 0.1))
    with pytest.raises(ModelError, match="'floating_nowhere' has no tree joint"):
        m.compile()


def test_second_tree_joint_on_a_body_is_rejected():
    m = small_model()
    with pytest.raises(ModelError, match="already has tree joint 'hinge'"):
        m.revolute("again", GROUND, "arm")


def test_wrong_number_of_degrees_of_freedom():
    m = four_bar()
    m.dof("crank", "rocker")
    with pytest.raises(ModelError, match="1 degrees of freedom"):
        m.compile()


# ----------------------------------------------------------------------------------------
# failures while solving
# ----------------------------------------------------------------------------------------


def test_four_bar_with_too_short_coupler_cannot_be_assembled():
    # coupler 0.05 + rocker 0.1 < smallest pivot distance 0.5 - 0.2: no closed position
    model = four_bar(b=0.05, c=0.1, coupler_guess=(0.5, 1.0))
    cm = model.compile()
    with pytest.raises(AssemblyError) as exc:
        assemble(cm)
    assert "loop" in str(exc.value) and exc.value.constraints == ["loop"]
    assert "'four-bar'" in str(exc.value)
    assert exc.value.residual > 0.1          # the loop stays open by ~0.3 m
    with pytest.raises(AssemblyError) as exc:
        simulate(cm, 0.1, 1e-3)
    assert _time_in(str(exc.value)) == 0.0 and exc.value.time == 0.0
    assert "initial state" in str(exc.value)


def planar_slider_crank(theta=0.0, dof="slide"):
    """Crank 0.1 m, rod 0.3 m, slider on the x axis; dead point at theta = 0."""
    m = Model("slider-crank-2d", gravity=(0.0, -9.81, 0.0), planar=True)
    r_, l_ = 0.1, 0.3
    m.body("crank", 1.0, com=(0.05, 0, 0), inertia=(0, 0, 1e-3), points={"tip": (r_, 0, 0)})
    m.body("rod", 1.0, com=(0.15, 0, 0), inertia=(0, 0, 1e-2), points={"end": (l_, 0, 0)})
    m.body("slider", 1.0, inertia=(1e-3, 1e-3, 1e-3))
    phi = -math.asin(r_ * math.sin(theta) / l_)
    m.revolute("crank", GROUND, "crank", q0=theta)
    m.revolute("rod", "crank", "rod", parent_point="tip", q0=phi - theta)
    m.prismatic("slide", GROUND, "slider", axis=(1, 0, 0),
                q0=r_ * math.cos(theta) + l_ * math.cos(phi))
    m.cut("pin", "revolute", "rod", "slider", point1="end", point2=(0, 0, 0))
    m.dof(dof)
    return m


def test_slider_crank_at_dead_point_with_slider_dof_is_singular():
    """At the dead point the slider position does not determine the crank angle."""
    with pytest.raises(SingularConfigurationError) as exc:
        simulate(planar_slider_crank(0.0), 0.1, 1e-3)
    msg = str(exc.value)
    assert "'slider-crank-2d'" in msg and "['slide']" in msg
    assert exc.value.joints and set(exc.value.joints) <= {"crank", "rod", "slide"}
    assert exc.value.time == 0.0 and _time_in(msg) == 0.0
    # away from the dead point the same choice of DOF is fine
    res = simulate(planar_slider_crank(0.8), 0.05, 1e-3)
    assert res.max_constraint_violation < 1e-10   # position tolerance 1e-12 + rounding


def test_global_formulation_names_the_dependent_natural_coordinate():
    """The same dead point in the global formulation: a typed error naming a natural
    coordinate of one of the loop's bodies, the model and the time."""
    with pytest.raises(SingularConfigurationError) as exc:
        simulate(planar_slider_crank(0.0), 0.1, 1e-3, "global")
    msg = str(exc.value)
    assert "'slider-crank-2d' (global)" in msg and "['slide']" in msg
    assert "natural coordinate" in msg
    assert any(f"body '{b}'" in msg for b in ("crank", "rod", "slider"))
    assert exc.value.time == 0.0


def test_slider_crank_driven_into_its_dead_point_is_reported_as_singular():
    """Slider as DOF, moving towards the dead point (no gravity): the crank reaches
    theta = 0 where the slider position no longer determines the configuration."""
    model = planar_slider_crank(0.5)
    model.joints["slide"].qd0 = [0.5]
    model.gravity = [0.0, 0.0, 0.0]
    with pytest.raises(SingularConfigurationError) as exc:
        simulate(model, 1.0, 1e-3)
    assert 0.0 < exc.value.time < 1.0 and "['slide']" in str(exc.value)
    # at the first dead point: x reaches r + l at t ~ 0.0518 s (crank at 0.5 rad, rate
    # ~ -10 rad/s); crank and rod are the joints the slider position no longer determines
    assert 0.05 < exc.value.time < 0.053 and "'slider-crank-2d'" in str(exc.value)
    assert set(exc.value.joints) == {"crank", "rod"}
    assert _time_in(str(exc.value)) == pytest.approx(exc.value.time, rel=1e-5)
    # Phi_z keeps its rank there: the error names coordinates that do determine the
    # configuration (crank or rod angle), and the message says so
    better = exc.value.suggested_dof
    assert better and set(better) <= {"crank", "rod"} and str(better) in str(exc.value)


def test_rocker_as_dof_at_its_extreme_position_is_singular():
    """Crank and coupler aligned: the rocker is at an extreme, and its angle does not
    determine the crank angle (a poor choice of degree of freedom there)."""
    a, b, c, d = 0.2, 0.5, 0.4, 0.5
    th = math.acos(((a + b) ** 2 + d * d - c * c) / (2 * (a + b) * d))
    B = (a + b) * np.array([math.cos(th), math.sin(th)])
    model = four_bar(a, b, c, d, theta0=th, omega0=0.0,
                     coupler_guess=(0.0, math.atan2(B[1], B[0] - d)))
    model.dof("rocker")
    with pytest.raises(SingularConfigurationError) as exc:
        simulate(model, 0.1, 1e-3)
    assert "['rocker']" in str(exc.value) and exc.value.time == 0.0


def stiff_double_pendulum(k):
    m = Model("stiff", gravity=(0.0, -9.81, 0.0), planar=True)
    for name in ("link1", "link2"):
        m.body(name, 1.0, com=(0.5, 0, 0), inertia=(0, 0, 0.1), points={"tip": (1.0, 0, 0)})
    m.revolute("j1", GROUND, "link1", q0=0.3, qd0=2.0)
    m.revolute("j2", "link1", "link2", parent_point="tip", q0=0.5)
    m.spring("stiff", GROUND, (1.5, -0.5, 0.0), "link2", "tip", k=k, length=1.52)
    return m


def test_newton_failure_on_a_stiff_spring_with_a_large_step():
    """k = 1e8 N/m on 1 kg links (w ~ 1e4 rad/s) with h = 0.1 s: no sub-division of the
    step the integrator may try resolves the spring."""
    with pytest.raises(NewtonConvergenceError) as exc:
        simulate(stiff_double_pendulum(1e8), 1.0, 0.1)
    msg = str(exc.value)
    assert 0.0 < exc.value.time <= 0.1                  # fails within the first step
    assert _time_in(msg) == pytest.approx(exc.value.time, rel=1e-5)  # 6 digits printed
    assert "'stiff'" in msg and "step 1" in msg and "reduce the time step" in msg
    # the same model runs with a step that resolves the spring (w h = 0.1)
    res = simulate(stiff_double_pendulum(1e8), 1e-4, 1e-5)
    assert res.steps == 10


def test_newton_failure_is_reported_with_its_time():
    """Deterministic variant: one Newton iteration is never enough on a nonlinear model
    (convergence is only declared on a second, small correction)."""
    model = stiff_double_pendulum(1e2)
    with pytest.raises(NewtonConvergenceError) as exc:
        simulate(model, 1.0, 0.1, newton_maxit=1)
    assert 0.0 < exc.value.time <= 0.1
    assert _time_in(str(exc.value)) == pytest.approx(exc.value.time, rel=1e-5)
    assert np.isfinite(exc.value.residual)


def test_divergent_newton_is_not_reported_as_non_finite_state():
    """A conservative model with a too-large step either completes (the integrator may
    sub-divide the step) or fails with NewtonConvergenceError: the physical state stays
    bounded, so a NaN can only come from a divergent iteration."""
    try:
        simulate(stiff_double_pendulum(1e4), 1.0, 0.1)
    except NewtonConvergenceError:
        pass


def test_non_finite_value_during_a_run():
    """Two applied forces ramping to 1e308 N each within the first step: their sum
    overflows to inf at the first step's predictor (a non-finite input, not a divergence)."""
    m = Model("blowup", gravity=(0.0, -9.81, 0.0))
    m.body("bob", 1.0, com=(1.0, 0, 0), inertia=(0.1, 0.1, 0.1), points={"P": (1.0, 0, 0)})
    m.revolute("pin", GROUND, "bob")
    for name in ("rocket1", "rocket2"):
        m.force(name, "bob", "P", (0, 1, 0),
                {"type": "smoothstep", "t0": 0.0, "t1": 0.005, "y0": 0.0, "y1": 1e308})
    with pytest.raises(NonFiniteError) as exc:
        simulate(m, 2.0, 1e-2)
    msg = str(exc.value)
    # the first step ends at t = h = 0.01 s (default 1e-6 relative: 6 printed digits)
    assert exc.value.time == pytest.approx(0.01) and _time_in(msg) == pytest.approx(0.01)
    assert "'blowup'" in msg
    assert isinstance(exc.value, FloatingPointError) and isinstance(exc.value, SimulationError)


def zero_spring_model():
    m = Model("zero-spring", gravity=(0.0, -9.81, 0.0))
    m.body("bob", 1.0, com=(1.0, 0, 0), inertia=(0.1, 0.1, 0.1), points={"P": (1.0, 0, 0)})
    m.revolute("pin", GROUND, "bob")
    m.spring("other", GROUND, (0.0, 1.0, 0.0), "bob", "P", k=5.0)  # a regular spring
    m.spring("s", GROUND, (1.0, 0.0, 0.0), "bob", "P", k=10.0)   # both ends at (1, 0, 0)
    return m


def test_zero_length_spring_raises_a_typed_error():
    m = zero_spring_model()
    with pytest.raises(WorkbenchError) as exc:
        simulate(m, 0.1, 1e-2)
    msg = str(exc.value)
    assert isinstance(exc.value, NonFiniteError)
    assert "'zero-spring'" in msg and "spring 's'" in msg and "zero length" in msg
    assert "'other'" not in msg and exc.value.element == "s"
    assert exc.value.time == 0.0 and _time_in(msg) == 0.0 and "initial state" in msg
    # the single-state evaluation reports it the same way
    with pytest.raises(NonFiniteError, match="spring 's' has zero length"):
        assemble(m.compile())


def test_spring_reaching_zero_length_during_a_run_is_named_with_its_time():
    """The bob starts at rest at angle 0.1 rad and is driven (drive = a constraint) to
    angle 0 at t = 0.05 s, where the spring's end points coincide (the smoothstep returns
    exactly 0 from t1 on)."""
    m = zero_spring_model()
    m.joints["pin"].q0 = [0.1]
    m.drive("motor", "pin", {"type": "smoothstep", "t0": 0.0, "t1": 0.05, "y0": 0.1,
                             "y1": 0.0})
    m.dof()
    with pytest.raises(NonFiniteError) as exc:
        simulate(m, 0.1, 1e-2)
    msg = str(exc.value)
    assert "spring 's'" in msg and "'zero-spring'" in msg and "step 5" in msg
    # the first step ending at the drive's zero (1e-9: t = 5 h, rounding of the sum)
    assert exc.value.time == pytest.approx(0.05, abs=1e-9)


def test_bad_time_step_is_rejected():
    with pytest.raises(ValueError, match="time step"):
        simulate(pendulum(), 1.0, 0.0)
    with pytest.raises(ValueError, match="not a multiple"):
        simulate(pendulum(), 1.0, 0.3)
