"""Load magnitudes, load directions and drive coefficients as named design parameters.

Every coefficient of a time function (of an applied force or torque, of a drive) and
every component of a load direction is a field of the field vector ``p``, bindable to a
parameter like any other numeric field: the Python and the file forms compile to the
same arrays, bad input raises typed errors naming the element, the kernels' tangents of
the time functions are exact, and the gradients of whole simulations agree (direct =
adjoint = central differences of the same discrete computation) in the semi-recursive
and the global formulation."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import random_tree

from workbench import (GROUND, Model, ModelError, TimeFunction, UnitError, UnknownNameError,
                       catalog, load_model, model_from_dict, model_to_dict)
from workbench import objectives as O
from workbench import sensitivity, simulate
from workbench.compiled.parameters import kinematic_parameters, reverse_parameters
from workbench.kernels import tree as K

FORMULATIONS = ["sr-com", "global"]


# ----------------------------------------------------------------------------------------
# models
# ----------------------------------------------------------------------------------------


def loaded_pendulum(bound=True):
    """A planar pendulum driven by a constant torque ``mom`` and a sine force of amplitude
    ``Famp`` at its tip whose direction has the component ``dy`` (``bound`` False: the
    same numbers written in place of the parameters)."""
    m = Model("loaded-pendulum", gravity=(0.0, -9.81, 0.0), planar=True)
    m.parameter("mom", 1.5, "N*m", provenance="test")
    m.parameter("Famp", 4.0, "N", provenance="test")
    m.parameter("dy", 0.8, provenance="test: a load-direction component")
    m.body("arm", 1.2, com=(0.4, 0.0, 0.0), inertia=(0.0, 0.0, 0.05),
           points={"tip": (0.8, 0.0, 0.0)})
    m.revolute("pin", GROUND, "arm")
    # forces before torques: the order in which a model file adds them
    m.force("F1", "arm", "tip", (0.3, "dy" if bound else 0.8, 0.0),
            {"type": "sine", "amplitude": "Famp" if bound else 4.0, "omega": 5.0,
             "phase": 0.2})
    m.torque("T1", "arm", (0.0, 0.0, 1.0), "mom" if bound else 1.5)
    m.dof("pin")
    return m


PENDULUM_OBJECTIVES = [O.point_velocity("v", "arm.tip"),
                       O.coordinate("q", "pin", level=0)]


def torqued_five_bar():
    """The shipped five-bar with a constant torque ``mom`` on the crank bar_A1."""
    m = catalog.load("five-bar")
    m.parameter("mom", 2.0, "N*m", provenance="test")
    m.torque("T1", "bar_A1", (0.0, 0.0, 1.0), {"type": "constant", "value": "mom"})
    return m


def driven_pendulum():
    """A pendulum hung from a crank that a sine drive turns (amplitude ``amp``, rate
    ``w``) on a cart that a smoothstep drive lifts (end time ``t1``, height ``lift``); the
    pendulum's hinge is the one degree of freedom."""
    m = Model("driven-pendulum", gravity=(0.0, -9.81, 0.0), planar=True)
    m.parameter("amp", 0.4, "rad", provenance="test")
    m.parameter("w", 6.0, "rad/s", provenance="test")
    # t1 off the time grid: at a grid point t = t1 the step's acceleration is not
    # differentiable in t1 (one-sided derivatives)
    m.parameter("t1", 0.1537, "s", provenance="test")
    m.parameter("lift", 0.1, "m", provenance="test")
    m.body("cart", 2.0)
    m.body("crank", 1.0, com=(0.25, 0.0, 0.0), inertia=(0.0, 0.0, 0.02),
           points={"B": (0.5, 0.0, 0.0)})
    m.body("link", 0.8, com=(0.3, 0.0, 0.0), inertia=(0.0, 0.0, 0.03),
           points={"C": (0.6, 0.0, 0.0)})
    m.prismatic("track", GROUND, "cart", axis=(0.0, 1.0, 0.0))
    m.revolute("crankpin", "cart", "crank")
    m.revolute("hinge", "crank", "link", parent_point="B", q0=-1.2)
    m.drive("lifter", "track", {"type": "smoothstep", "t0": 0.0, "t1": "t1", "y0": 0.0,
                                "y1": "lift"})
    m.drive("motor", "crankpin", {"type": "sine", "amplitude": "amp", "omega": "w",
                                  "phase": 0.3})
    m.dof("hinge")
    return m


DRIVEN_OBJECTIVES = [O.point_velocity("v", "link.C"), O.coordinate("qd", "hinge", level=1)]


def loaded_spatial_tree():
    """The spatial random tree of the tests (every joint type) whose torque magnitude
    ``tw``, force amplitude ``pa`` and a torque-direction component ``tdx`` are
    parameters (spatial load kernels: three-component torques and moments)."""
    m = random_tree(3, forces=True, shuffle=False, name="loaded-tree")
    m.parameter("tw", 1.5, "N*m", provenance="test")
    m.parameter("pa", 2.0, "N", provenance="test")
    m.parameter("tdx", 1.0, provenance="test")
    tw, push = m.loads["twist"], m.loads["push"]
    tw.function = TimeFunction.constant("tw")
    tw.direction = ["tdx"] + list(tw.direction[1:])
    # on the branch of the torque (b0 - b1 - b2, b6; b3 - b4 hangs from ground apart and
    # b5 on its floating joint is dynamically free), so both loads move both objectives
    push.body = "b1"
    push.function = TimeFunction.sine("pa", 3.0, 0.4)
    return m


TREE_OBJECTIVES = [O.point_velocity("v", "b6.p1"),
                   O.angular_velocity("w", "b2", components="xz", frame="body")]


def _check_gradients(model, objectives, names, t_end, dt, formulation):
    kw = dict(objectives=objectives, parameters=names, t_end=t_end, dt=dt,
              formulation=formulation)
    D = sensitivity(model, method="direct", **kw)
    A = sensitivity(model, method="adjoint", simulation=D.simulation, **kw)
    F = sensitivity(model, method="fd", fd_step=1e-6, **kw)
    assert np.all(np.abs(D.gradient) > 0.0)        # every parameter reaches every objective
    # 1e-10: the same linear recursion run forward and transposed backward
    assert np.max(np.abs(A.gradient - D.gradient)) <= 1e-10 * np.max(np.abs(D.gradient))
    # per objective, relative to its largest entry.  1e-6: central differences with the
    # relative step 1e-6 of simulations whose Newton iterations stop at 1e-13 (rounding
    # ~1e-13 / 1e-6 = 1e-7 of the objective; truncation ~1e-12), of the same discrete
    # computation
    for k in range(len(D.objectives)):
        scale = np.max(np.abs(D.gradient[k]))
        np.testing.assert_allclose(D.gradient[k], F.gradient[k], rtol=0, atol=1e-6 * scale)
    return D


# ----------------------------------------------------------------------------------------
# compiled form
# ----------------------------------------------------------------------------------------


def test_bound_coefficients_are_fields_with_their_parameter_columns():
    cm = loaded_pendulum().compile()
    where = dict(zip(cm.field_where, range(len(cm.field_where))))
    col = {nm: cm.G[:, cm.param_names.index(nm)] for nm in cm.param_names}
    assert np.flatnonzero(col["mom"]).tolist() == [where["torque 'T1' function value"]]
    assert np.flatnonzero(col["Famp"]).tolist() == [where["force 'F1' function amplitude"]]
    assert np.flatnonzero(col["dy"]).tolist() == [where["force 'F1' direction.y"]]
    ma = cm.arrays
    assert ma.p[ma.tf_fld[ma.af_tf[1]]] == 1.5 and ma.tf_n[ma.af_tf[1]] == 1
    assert ma.p[ma.af_dfld[0] + 1] == 0.8
    # load data are force parameters (forward columns), not kinematic, not reverse mode
    Gm = cm.G
    assert kinematic_parameters(cm, Gm).tolist() == [0, 0, 0]
    assert reverse_parameters(cm, Gm).tolist() == [0, 0, 0]
    # drive coefficients are kinematic
    cd = driven_pendulum().compile()
    assert kinematic_parameters(cd, cd.G).tolist() == [1, 1, 1, 1]


def test_a_bound_load_gives_the_bit_identical_trajectory_of_the_number():
    for form in FORMULATIONS:
        a = simulate(loaded_pendulum(bound=True).compile(), 0.2, 1e-3, form)
        b = simulate(loaded_pendulum(bound=False).compile(), 0.2, 1e-3, form)
        assert np.array_equal(a.z, b.z) and np.array_equal(a.zd, b.zd)


def test_time_function_tangents_are_the_derivatives_of_the_values():
    """``time_function_t`` along each coefficient against central differences of
    ``time_function`` in that coefficient, for every kind, before, inside and after the
    transitions (tolerance 1e-7 of the scale: differences with the step 1e-6 of smooth
    functions, truncation ~1e-12, rounding ~1e-10)."""
    m = Model("tfs", gravity=(0.0, 0.0, 0.0), planar=True)
    m.body("a", 1.0, inertia=(0.0, 0.0, 1.0))
    m.revolute("j", GROUND, "a")
    fns = [{"type": "constant", "value": 1.3},
           {"type": "polynomial", "coefficients": [0.3, -1.0, 2.0, 0.7]},
           {"type": "sine", "amplitude": 1.1, "omega": 3.0, "phase": 0.4, "offset": 0.2,
            "t_start": 0.3},
           {"type": "smoothstep", "t0": 0.2, "t1": 0.9, "y0": -0.5, "y1": 1.5},
           {"type": "steps", "initial": 0.1, "steps": [[0.1, 0.4, 2.0], [0.5, 1.2, -1.0]]}]
    for i, f in enumerate(fns):
        m.torque(f"T{i}", "a", (0.0, 0.0, 1.0), f)
    cm = m.compile()
    ma = cm.arrays
    p0 = np.array(ma.p)
    h = 1e-6
    for k in range(len(fns)):
        for i in range(int(ma.tf_n[k])):
            dp = np.zeros_like(p0)
            dp[ma.tf_fld[k] + i] = 1.0
            for t in (0.0, 0.25, 0.35, 0.45, 0.7, 1.0, 1.5):
                exact = np.array(K.time_function_t(ma, p0, dp, k, t))
                hi = np.array(K.time_function(ma, p0 + h * dp, k, t))
                lo = np.array(K.time_function(ma, p0 - h * dp, k, t))
                fd = (hi - lo) / (2 * h)
                np.testing.assert_allclose(exact, fd, rtol=0, atol=1e-7 * max(1.0, *abs(fd)),
                                           err_msg=f"function {fns[k]}, field {i}, t={t}")
    # the values are those of the Python evaluation
    for k, f in enumerate(fns):
        tf = TimeFunction.from_spec(f)
        for t in (0.0, 0.35, 0.7, 1.5):
            assert K.time_function(ma, p0, k, t)[0] == pytest.approx(tf(t), rel=1e-14,
                                                                    abs=1e-14)


# ----------------------------------------------------------------------------------------
# the file form
# ----------------------------------------------------------------------------------------


TOML = """
[model]
name = "loaded-pendulum"
gravity = [0.0, -9.81, 0.0]
planar = true
dof = ["pin"]

[parameters.mom]
value = 1.5
unit = "N*m"
provenance = "test"

[parameters.Famp]
value = 4.0
unit = "N"
provenance = "test"

[parameters.dy]
value = 0.8
provenance = "test: a load-direction component"

[[bodies]]
name = "arm"
mass = 1.2
com = [0.4, 0.0, 0.0]
inertia = [0.0, 0.0, 0.05]
points = { tip = [0.8, 0.0, 0.0] }

[[joints]]
name = "pin"
type = "revolute"
parent = "ground"
child = "arm"

[[torques]]
name = "T1"
body = "arm"
direction = [0.0, 0.0, 1.0]
function = { type = "constant", value = "mom" }

[[forces]]
name = "F1"
body = "arm"
point = "tip"
direction = [0.3, "dy", 0.0]
function = { type = "sine", amplitude = { param = "Famp", scale = 1.0 }, omega = 5.0, phase = 0.2 }
"""


def _same_compiled(a, b):
    assert a.param_names == b.param_names
    assert np.array_equal(a.arrays.p, b.arrays.p)
    assert np.array_equal(a.G, b.G)
    assert a.field_where == b.field_where
    for key in ("af_type", "af_idx", "af_dfld", "af_tf", "tf_kind", "tf_fld", "tf_n"):
        assert np.array_equal(getattr(a.arrays, key), getattr(b.arrays, key)), key


def test_the_file_form_compiles_to_the_python_form(tmp_path):
    path = tmp_path / "loaded-pendulum.toml"
    path.write_text(TOML, encoding="utf-8")
    py = loaded_pendulum().compile()
    _same_compiled(load_model(path).compile(), py)
    # written back and read again (the bound coefficients stay bound)
    doc = model_to_dict(loaded_pendulum())
    assert doc["torques"][0]["function"] == {"type": "constant", "value": "mom"}
    _same_compiled(model_from_dict(doc).compile(), py)
    # an override of the parameter reaches the compiled coefficient
    over = load_model(path, mom=2.5).compile()
    assert over.arrays.p[over.field_where.index("torque 'T1' function value")] == 2.5
    # every kind of time function takes parameter references, also in lists
    doc = model_to_dict(driven_pendulum())
    doc["drives"][1]["function"] = {"type": "steps", "initial": ["amp", 0.5],
                                    "steps": [[0.0, "t1", "amp"], ["t1", 0.4, -0.1]]}
    cm = model_from_dict(doc).compile()
    steps = cm.arrays.tf_fld[1] + np.arange(cm.arrays.tf_n[1])
    amp, t1 = cm.param_names.index("amp"), cm.param_names.index("t1")
    assert cm.G[steps, amp].tolist() == [0.5, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0]
    assert cm.G[steps, t1].tolist() == [0.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0]


# ----------------------------------------------------------------------------------------
# typed errors naming the element
# ----------------------------------------------------------------------------------------


def _torque_model(function, direction=(0.0, 0.0, 1.0)):
    m = Model("bad", gravity=(0.0, -9.81, 0.0), planar=True)
    m.parameter("mom", 1.0, "N*m")
    m.parameter("len", 1.0, "m")
    m.body("arm", 1.0, com=(0.5, 0.0, 0.0), inertia=(0.0, 0.0, 0.1))
    m.revolute("pin", GROUND, "arm")
    m.torque("T1", "arm", direction, function)
    return m


def test_bad_load_and_drive_parameters_raise_typed_errors_naming_the_element(tmp_path):
    with pytest.raises(UnknownNameError, match=r"torque 'T1'.*unknown parameter 'nope'"):
        _torque_model("nope").compile()
    with pytest.raises(UnknownNameError, match=r"torque 'T1'.*unknown parameter 'nope'"):
        _torque_model({"type": "sine", "amplitude": 1.0, "omega": ("nope", 2.0)}).compile()
    with pytest.raises(UnknownNameError, match=r"torque 'T1' direction.*unknown parameter"):
        _torque_model("mom", direction=(0.0, "nope", 1.0)).compile()
    with pytest.raises(UnitError, match=r"torque 'T1' function value.*'len'.*length.*torque"):
        _torque_model("len").compile()
    with pytest.raises(UnitError, match=r"torque 'T1' function t0.*'mom'"):
        _torque_model({"type": "smoothstep", "t0": "mom", "t1": 1.0, "y0": 0.0,
                       "y1": 1.0}).compile()
    with pytest.raises(UnitError, match=r"torque 'T1' function value.*'m'.*torque"):
        _torque_model({"value": 2.0, "unit": "m"}).compile()
    for bad in (True, [1.0, 2.0, 3.0], ("mom", "x"), {"param": 3}):
        with pytest.raises(ModelError, match=r"torque 'T1'"):
            _torque_model(bad)
    with pytest.raises(ModelError, match=r"torque 'T1'.*amplitude"):
        _torque_model({"type": "sine", "amplitude": None, "omega": 1.0})
    # transition times bound to parameters are checked on the compiled values
    m = _torque_model({"type": "smoothstep", "t0": 0.0, "t1": "t1", "y0": 0.0, "y1": 1.0})
    m.parameter("t1", 0.5, "s")
    m.compile()
    with pytest.raises(ModelError, match=r"torque 'T1' function: needs t1 > t0"):
        m.compile({"t1": -0.5})
    # a drive: its coefficients have the dimension of the driven coordinate (an angle)
    m = _torque_model(0.0)
    m.drive("motor", "pin", {"type": "sine", "amplitude": "len", "omega": 1.0})
    with pytest.raises(UnitError, match=r"drive 'motor' function amplitude.*angle"):
        m.compile()
    # the file form names the file and the element
    path = tmp_path / "bad.toml"
    path.write_text(TOML.replace('value = "mom"', 'value = "nope"'), encoding="utf-8")
    with pytest.raises(UnknownNameError, match=r"bad.toml.*torques.*T1.*unknown parameter"):
        load_model(path)


# ----------------------------------------------------------------------------------------
# gradients of whole simulations
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("formulation", FORMULATIONS)
def test_load_magnitude_and_direction_gradients(formulation):
    _check_gradients(loaded_pendulum(), PENDULUM_OBJECTIVES, ["mom", "Famp", "dy"], 0.5,
                     1e-3, formulation)


@pytest.mark.parametrize("formulation", FORMULATIONS)
def test_spatial_load_gradients(formulation):
    _check_gradients(loaded_spatial_tree(), TREE_OBJECTIVES, ["tw", "pa", "tdx"], 0.2, 1e-3,
                     formulation)


@pytest.mark.parametrize("formulation", FORMULATIONS)
def test_five_bar_torque_gradient(formulation):
    _check_gradients(torqued_five_bar(), None, ["mom", "Ls1"], 0.3, 1e-3, formulation)


@pytest.mark.parametrize("formulation", FORMULATIONS)
def test_drive_coefficient_gradients(formulation):
    _check_gradients(driven_pendulum(), DRIVEN_OBJECTIVES, ["amp", "w", "t1", "lift"], 0.3,
                     1e-3, formulation)
