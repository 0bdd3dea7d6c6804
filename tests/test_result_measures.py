"""Kinematics of named points, vectors and bodies along a simulation result
(``SimulationResult.point_position`` etc.), and the natural-coordinate model kept per
compiled model (no module-level cache that grows with the designs of an optimisation).

The histories are checked against independent computations: closed-form pendulum
kinematics from the stored coordinate history, and for a spatial tree the numpy forward
kinematics of ``conftest.ref_body_poses`` differentiated along ``z + s zd + s^2/2 zdd``;
and against the objective measures (``measure_values``), which the global formulation
evaluates from its own natural coordinates."""

import dataclasses
import gc
import weakref

import numpy as np
import pytest
from conftest import random_tree, ref_body_poses

from workbench import GROUND, Model, UnknownNameError, measure_values
from workbench import objectives as O
from workbench import simulate
from workbench.formulations.natural import build as NB
from workbench.objectives import compile_objectives

L = 0.8
FORMULATIONS = ("sr-com", "global")


def pendulum_model(L_=L):
    """Rigid pendulum about the global z axis; ``bob.tip`` and the body vector
    ``bob.radial`` lie along the body x axis, so ``tip = L (cos q, sin q, 0)``."""
    m = Model("result-pendulum", gravity=(0.0, -9.81, 0.0), planar=True)
    m.parameter("L", L_, "m", provenance="test")
    m.body("bob", mass=1.5, com=("L", 0.0, 0.0), inertia=(0.0, 0.0, 0.02),
           points={"tip": ("L", 0.0, 0.0), "mid": (0.3, 0.1, 0.0)},
           vectors={"radial": (1.0, 0.0, 0.0)})
    m.revolute("pivot", GROUND, "bob", axis=(0, 0, 1), q0=-0.4, qd0=1.3)
    return m


@pytest.fixture(scope="module")
def pendulum_runs():
    cm = pendulum_model().compile()
    return {f: simulate(cm, 0.3, 2e-3, formulation=f) for f in FORMULATIONS}


@pytest.mark.parametrize("form", FORMULATIONS)
def test_pendulum_point_kinematics_closed_form(pendulum_runs, form):
    r = pendulum_runs[form]
    q, qd, qdd = r.coordinate("pivot"), r.zd[:, 0], r.zdd[:, 0]
    assert np.ptp(q) > 0.1 and np.ptp(qd) > 0.1          # it moves
    c, s, zero = np.cos(q), np.sin(q), np.zeros_like(q)
    x_ref = L * np.c_[c, s, zero]
    v_ref = L * qd[:, None] * np.c_[-s, c, zero]
    a_ref = L * qdd[:, None] * np.c_[-s, c, zero] - L * (qd ** 2)[:, None] * np.c_[c, s, zero]
    x = r.point_position("bob.tip")
    v = r.point_velocity("bob.tip")
    a = r.point_acceleration("bob.tip")
    assert x.shape == v.shape == a.shape == (len(r.t), 3)
    np.testing.assert_allclose(x, x_ref, rtol=0, atol=1e-13)
    np.testing.assert_allclose(v, v_ref, rtol=0, atol=1e-12)
    np.testing.assert_allclose(a, a_ref, rtol=0, atol=1e-11)
    # all three at once
    for got, ref in zip(r.point_kinematics("bob.tip"), (x, v, a)):
        np.testing.assert_array_equal(got, ref)
    # the same point given as body + local coordinates, and another local point
    for got, ref in zip(r.point_kinematics("bob", (L, 0.0, 0.0)), (x, v, a)):
        np.testing.assert_allclose(got, ref, rtol=0, atol=1e-14)
    xm = r.point_position("bob", [0.3, 0.1, 0.0])
    np.testing.assert_allclose(xm, np.c_[0.3 * c - 0.1 * s, 0.3 * s + 0.1 * c, zero],
                               rtol=0, atol=1e-14)
    np.testing.assert_array_equal(xm, r.point_position("bob.mid"))
    # a ground point stays where it is
    g = r.point_kinematics(GROUND, (0.2, -0.1, 0.5))
    np.testing.assert_array_equal(g[0], np.tile([0.2, -0.1, 0.5], (len(r.t), 1)))
    assert not np.any(g[1]) and not np.any(g[2])


@pytest.mark.parametrize("form", FORMULATIONS)
def test_pendulum_angular_velocity_and_vector(pendulum_runs, form):
    r = pendulum_runs[form]
    q, qd, qdd = r.z[:, 0], r.zd[:, 0], r.zdd[:, 0]
    zero = np.zeros_like(q)
    w_ref = np.c_[zero, zero, qd]
    np.testing.assert_allclose(r.angular_velocity("bob"), w_ref, rtol=0, atol=1e-14)
    # rotation about z: the body z axis is the global z axis
    np.testing.assert_allclose(r.angular_velocity("bob", frame="body"), w_ref, rtol=0,
                               atol=1e-14)
    c, s = np.cos(q), np.sin(q)
    e = r.vector("bob.radial")
    np.testing.assert_allclose(e, np.c_[c, s, zero], rtol=0, atol=1e-14)
    np.testing.assert_allclose(r.vector("bob.radial", 1), qd[:, None] * np.c_[-s, c, zero],
                               rtol=0, atol=1e-13)
    np.testing.assert_allclose(r.vector("bob.radial", 2),
                               qdd[:, None] * np.c_[-s, c, zero]
                               - (qd ** 2)[:, None] * np.c_[c, s, zero], rtol=0, atol=1e-12)


def _objective_measures(sim, point, body):
    """The measures of the objectives module for a point (position, velocity,
    acceleration) and a body (angular velocity, global and body frame), ``(N, 15)``."""
    objs = [O.point_position("x", point), O.point_velocity("v", point),
            O.point_acceleration("a", point),
            O.angular_velocity("wg", body, frame="global"),
            O.angular_velocity("wb", body, frame="body")]
    return measure_values(sim, compile_objectives(sim.compiled, objs))


def _result_measures(sim, point, body):
    return np.hstack(list(sim.point_kinematics(point))
                     + [sim.angular_velocity(body), sim.angular_velocity(body, "body")])


@pytest.mark.parametrize("form", FORMULATIONS)
def test_pendulum_same_as_objective_measures(pendulum_runs, form):
    r = pendulum_runs[form]
    ref = _objective_measures(r, "bob.tip", "bob")
    got = _result_measures(r, "bob.tip", "bob")
    # the semi-recursive measures are evaluated by the same kernel from the re-solved
    # state; the global ones from the natural coordinates
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-9 * (1 + np.max(np.abs(ref))))


def spatial_tree():
    return random_tree(11, joint_types=["revolute", "prismatic", "revolute", "fixed",
                                        "revolute", "revolute"], name="result-tree")


@pytest.fixture(scope="module")
def tree_runs():
    m = spatial_tree()
    cm = m.compile()
    return m, {f: simulate(cm, 0.05, 1e-3, formulation=f) for f in FORMULATIONS}


def _ref_path(model, cm, z, zd, zdd, body, local):
    """Independent position, velocity, acceleration, angular velocity (global, body) of a
    body point along ``z(s) = z + s zd + s^2/2 zdd`` (numpy poses of conftest: central
    differences for the point, complex step of the rotation for the angular velocity)."""
    def pose(s):
        return ref_body_poses(model, cm, z + s * zd + 0.5 * s * s * zdd)[body]

    def x(s):
        rr, A = pose(s)
        return rr + A @ local

    h = 1e-4
    xp, x0, xm = x(h), x(0.0), x(-h)
    v = (xp - xm) / (2 * h)
    a = (xp - 2 * x0 + xm) / (h * h)
    A0 = pose(0.0)[1].real
    hc = 1e-30
    Ad = ref_body_poses(model, cm, z + 1j * hc * zd)[body][1].imag / hc
    W = Ad @ A0.T
    w = np.array([W[2, 1], W[0, 2], W[1, 0]])
    return x0, v, a, w, A0.T @ w


@pytest.mark.parametrize("form", FORMULATIONS)
def test_spatial_tree_against_reference_and_measures(tree_runs, form):
    model, runs = tree_runs
    r = runs[form]
    cm = r.compiled
    body, pname = "b4", "p1"
    local = np.asarray(model.bodies[body].points[pname], dtype=float)
    x, v, a = r.point_kinematics(f"{body}.{pname}")
    wg = r.angular_velocity(body)
    wb = r.angular_velocity(body, frame="body")
    for k in (0, len(r.t) // 2, len(r.t) - 1):
        xr, vr, ar, wr, wbr = _ref_path(model, cm, r.z[k], r.zd[k], r.zdd[k], body, local)
        np.testing.assert_allclose(x[k], xr, rtol=0, atol=1e-12)
        np.testing.assert_allclose(v[k], vr, rtol=0, atol=1e-7)
        np.testing.assert_allclose(a[k], ar, rtol=0, atol=1e-5)
        np.testing.assert_allclose(wg[k], wr, rtol=0, atol=1e-12)
        np.testing.assert_allclose(wb[k], wbr, rtol=0, atol=1e-12)
    assert np.max(np.abs(wg - wb)) > 1e-3          # the two frames differ here
    # a named point equals the same point given by its local coordinates
    for got, ref in zip(r.point_kinematics(body, local), (x, v, a)):
        np.testing.assert_allclose(got, ref, rtol=0, atol=1e-13)
    # and the objectives' measures (global: from the natural coordinates)
    for point, b in (("b4.p1", "b4"), ("b2.p0", "b5")):
        ref = _objective_measures(r, point, b)
        got = _result_measures(r, point, b)
        np.testing.assert_allclose(got, ref, rtol=0, atol=1e-9 * (1 + np.max(np.abs(ref))))


def test_unknown_names_raise_with_alternatives(pendulum_runs):
    r = pendulum_runs["sr-com"]
    with pytest.raises(UnknownNameError) as e:
        r.point_position("bob.tap")
    assert "bob.tap" in str(e.value) and "bob.tip" in e.value.known
    with pytest.raises(UnknownNameError) as e:
        r.point_velocity("bab.tip")
    assert "bab.tip" in str(e.value) and "bob.tip" in e.value.known
    with pytest.raises(UnknownNameError) as e:
        r.point_acceleration("bab", (0.0, 0.0, 0.0))
    assert "'bab'" in str(e.value) and "bob" in e.value.known
    with pytest.raises(UnknownNameError) as e:
        r.angular_velocity("bab")
    assert "'bab'" in str(e.value) and e.value.known == ["bob"]
    with pytest.raises(UnknownNameError) as e:
        r.vector("bob.axial")
    assert "bob.axial" in str(e.value) and e.value.known == ["bob.radial"]
    with pytest.raises(ValueError):
        r.angular_velocity("bob", frame="local")
    with pytest.raises(ValueError):
        r.point_position("bob", (1.0, 2.0))
    # a KeyError too (UnknownNameError is one)
    with pytest.raises(KeyError):
        r.point_position("nowhere")


# ----------------------------------------------------------------------------------------
# the natural-coordinate model of a compiled model is kept on it, not in a global table
# ----------------------------------------------------------------------------------------


def test_global_model_kept_per_instance():
    cm = pendulum_model().compile()
    first = NB.global_model(cm)
    assert NB.global_model(cm) is first
    # a copy with other fields (dataclasses.replace, as the DOF revision makes) builds
    # its own
    cm2 = dataclasses.replace(cm, z_guess=cm.z_guess + 0.1)
    second = NB.global_model(cm2)
    assert second is not first
    np.testing.assert_allclose(second[1], NB.build_global(cm2)[1])


def _module_tables(mod):
    """Total size of the module-level dicts, lists and sets of a module."""
    return sum(len(v) for k, v in vars(mod).items()
               if not k.startswith("__") and isinstance(v, (dict, list, set)))


def test_global_model_storage_does_not_grow_with_designs():
    base = pendulum_model().compile()
    simulate(base, 0.004, 2e-3, formulation="global")
    size0 = _module_tables(NB)
    refs = []
    ends = []
    for k in range(6):
        cm = base.with_parameters({"L": 0.5 + 0.1 * k})
        sim = simulate(cm, 0.004, 2e-3, formulation="global")
        ends.append(sim.point_position("bob.tip")[-1].copy())
        refs.append(weakref.ref(cm))
        del cm, sim
    gc.collect()
    assert [ref() for ref in refs] == [None] * len(refs)
    assert _module_tables(NB) == size0
    # the designs really differed (the tip radius follows L)
    radii = [np.linalg.norm(e) for e in ends]
    np.testing.assert_allclose(radii, [0.5 + 0.1 * k for k in range(6)], rtol=1e-12)
