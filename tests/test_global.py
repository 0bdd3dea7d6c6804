"""Global formulation in natural coordinates (issue 6): same trajectories and the same
exact gradients as the semi-recursive formulation on the same independent coordinates."""

import numpy as np
import pytest
from conftest import random_tree

from workbench import objectives as O
from workbench.errors import ModelError
from workbench.formulations.natural import step_jacobians as GS
from workbench.formulations.natural.build import global_model
from workbench.formulations.semirecursive import matrixr as MR
from workbench.integrators.simulation import simulate
from workbench.model import catalog
from workbench.model.elements import GROUND
from workbench.sensitivities.driver import sensitivity


def _rel_err(a, b):
    return np.max(np.abs(a - b)) / np.max(np.abs(b))


def random_closed(seed=5):
    """Spatial random tree of revolute/prismatic/fixed joints with a spring-damper, a
    joint spring, a force and a torque, closed by a rigid rod (distance constraint)."""
    m = random_tree(seed, joint_types=["revolute", "prismatic", "revolute", "fixed",
                                       "revolute", "revolute"], forces=True,
                    name="random-closed")
    cm = m.compile()
    from workbench.kernels import tree as K
    ma = cm.arrays
    nf = ma.fr_parent.shape[0]
    A, r, u = np.zeros((nf, 3, 3)), np.zeros((nf, 3)), np.zeros((nf, 3))
    K.frame_positions(ma, ma.p, cm.z_guess, A, r, u)
    x = []
    for nm in ("b5.p1", "b1.p0"):
        v = np.zeros(3)
        K.point_position(ma, ma.p, A, r, cm.point(nm), v)
        x.append(v)
    m.parameter("Lrod", float(np.linalg.norm(x[0] - x[1])), "m", provenance="test")
    m.distance("rod", "b5", "p1", "b1", "p0", "Lrod")
    m.parameter("k", 40.0, "N/m", provenance="test")
    m.springs["spring"].k = "k"
    return m


CASES = [("pendulum", {}, 0.5), ("five-bar", {}, 0.5), ("slider-crank", {}, 0.3),
         ("n-four-bar", {"N": 3}, 0.3)]


@pytest.mark.parametrize("name,opts,t_end", CASES)
def test_global_trajectories_equal_semi_recursive(name, opts, t_end):
    cm = catalog.load(name, **opts).compile()
    g = simulate(cm, t_end, 1e-3, formulation="global")
    s = simulate(cm, t_end, 1e-3, formulation="sr-com")
    # both integrate the same discrete equations on the same independent coordinates;
    # Newton stops at |da| <= 1e-10 (1 + |a|), so states agree to ~1e-10 relative
    scale = 1.0 + np.max(np.abs(s.zdi))
    assert np.max(np.abs(g.zi - s.zi)) < 1e-9 * scale
    assert np.max(np.abs(g.zdi - s.zdi)) < 1e-9 * scale
    assert np.max(np.abs(g.zddi - s.zddi)) < 1e-7 * (1.0 + np.max(np.abs(s.zddi)))
    # relative coordinates recomputed from the natural coordinates (revolute/prismatic)
    ok = ~np.isnan(g.z[0])
    assert ok.sum() >= cm.d
    assert np.max(np.abs(g.z[:, ok] - s.z[:, ok])) < 1e-9 * (1.0 + np.max(np.abs(s.z)))
    # constraints of the natural-coordinate model hold to the position tolerance (1e-12)
    assert g.max_constraint_violation < 1e-11
    if cm.conservative:
        # same discrete solution, so the same energy history (to 1e-9 of the energy scale)
        assert np.max(np.abs(g.energy - s.energy)) < 1e-9 * (1.0 + np.max(np.abs(s.energy)))


def test_random_closed_mechanism_trajectory():
    cm = random_closed().compile()
    g = simulate(cm, 0.2, 1e-3, formulation="global")
    s = simulate(cm, 0.2, 1e-3, formulation="sr-com")
    # same discrete equations, Newton tolerance 1e-10 relative (see above)
    assert np.max(np.abs(g.zi - s.zi)) < 1e-9 * (1.0 + np.max(np.abs(s.zdi)))
    assert np.max(np.abs(g.zdi - s.zdi)) < 1e-8 * (1.0 + np.max(np.abs(s.zdi)))


@pytest.mark.parametrize("model", ["five-bar", "random-closed"])
def test_global_step_jacobians_match_differences_of_the_residual(model):
    if model == "five-bar":
        cm = catalog.load("five-bar").compile()
        names = ["Ls1", "Ls2", "mA1", "xA1G", "LA1"]
        objs = [O.point_acceleration("a", "bar_12.2", components="xy"),
                O.point_velocity("v", "bar_12.2", components="xy"),
                O.coordinate("q", "j1", level=1)]
    else:
        cm = random_closed().compile()
        names = ["Lrod", "k"]
        objs = [O.point_acceleration("a", "b4.p1"), O.point_position("x", "b2.p0"),
                O.coordinate("q", "j2", level=2), O.angular_velocity("wb", "b4"),
                O.angular_velocity("wg", "b2", frame="global")]
    ma = cm.arrays
    ga = global_model(cm)[0]
    Gm = np.ascontiguousarray(cm.G[:, [cm.param_names.index(n) for n in names]])
    co = O.compile_objectives(cm, objs)
    sim = simulate(cm, 0.05, 1e-3, formulation="global")
    Qh, AREF = sim.natural
    t, zi, zdi, a, q, ar = sim.t[-1], sim.zi[-1], sim.zdi[-1], sim.zddi[-1], Qh[-1], AREF[-1]
    d, nm_, npar = cm.d, co.n_measures, len(names)
    Jr, Mb = np.zeros((d, 2 * d + npar)), np.zeros((d, d))
    Jm, mv = np.zeros((nm_, 3 * d + npar)), np.zeros(nm_)
    st = GS.step_jacobians_g(ga, ma, ma.p, t, zi, zdi, a, q.copy(), ar.copy(), Gm,
                             co.ms_type, co.ms_a, co.ms_c, Jr, Mb, Jm, mv)
    assert st == MR.OK

    def F(zi_, zdi_, a_, p_):
        st, r, m = GS.evaluate_g(ga, ma, p_, t, zi_, zdi_, a_, q, ar, co.ms_type, co.ms_a,
                                 co.ms_c, 1e-14, 50)
        assert st == MR.OK
        return r, m

    eps = 1e-6
    JrF, MbF, JmF = np.zeros_like(Jr), np.zeros_like(Mb), np.zeros_like(Jm)
    for c in range(3 * d + npar):
        out = []
        for s in (eps, -eps):
            zi_, zdi_, a_, p_ = zi.copy(), zdi.copy(), a.copy(), ma.p.copy()
            if c < d:
                zi_[c] += s
            elif c < 2 * d:
                zdi_[c - d] += s
            elif c < 3 * d:
                a_[c - 2 * d] += s
            else:
                p_ = p_ + s * Gm[:, c - 3 * d]
            out.append(F(zi_, zdi_, a_, p_))
        jr = (out[0][0] - out[1][0]) / (2 * eps)
        JmF[:, c] = (out[0][1] - out[1][1]) / (2 * eps)
        if c < 2 * d:
            JrF[:, c] = jr
        elif c < 3 * d:
            MbF[:, c - 2 * d] = jr
        else:
            JrF[:, c - d] = jr
    # 1e-6: central differences with eps = 1e-6 of a residual solved to 1e-14
    assert _rel_err(Jr, JrF) < 1e-6
    assert _rel_err(Mb, MbF) < 1e-6
    assert _rel_err(Jm, JmF) < 1e-6


def test_five_bar_global_gradients_equal_semi_recursive_and_differences():
    kw = dict(t_end=0.2, dt=1e-3)
    Dg = sensitivity("five-bar", method="direct", formulation="global", **kw)
    Ag = sensitivity("five-bar", method="adjoint", formulation="global",
                     simulation=Dg.simulation, **kw)
    Acg = sensitivity("five-bar", method="adjoint", variant="continuous",
                      formulation="global", simulation=Dg.simulation, **kw)
    Ds = sensitivity("five-bar", method="direct", formulation="sr-com", **kw)
    Acs = sensitivity("five-bar", method="adjoint", variant="continuous",
                      formulation="sr-com", simulation=Ds.simulation, **kw)
    F = sensitivity("five-bar", method="fd", formulation="global", **kw)
    # discrete direct and adjoint are the same derivative: rounding only
    assert _rel_err(Ag.gradient, Dg.gradient) < 1e-9
    # issue 6 check: global = semi-recursive to 1e-6 relative, entry by entry
    assert np.max(np.abs(Dg.gradient - Ds.gradient) / np.abs(Ds.gradient)) < 1e-6
    assert np.max(np.abs(Acg.gradient - Acs.gradient) / np.abs(Acs.gradient)) < 1e-6
    # central differences (relative step 1e-5, Newton tol 1e-13): ~1e-7 accuracy
    assert _rel_err(F.gradient, Dg.gradient) < 1e-5


MULTI_AXIS = {"cyl-univ": ["cylindrical", "universal", "revolute", "universal", "cylindrical"],
              "float-sph": ["floating", "spherical", "universal", "cylindrical"]}


def random_multi_axis(kind, seed=7):
    """Random spatial tree with cylindrical/universal (and spherical/floating) tree joints,
    a spring-damper, a joint spring, a force and a torque; parameters k (spring) and mb
    (mass of body b2)."""
    m = random_tree(seed, joint_types=MULTI_AXIS[kind], forces=True, name=kind)
    m.parameter("k", 40.0, "N/m", provenance="test")
    m.springs["spring"].k = "k"
    m.parameter("mb", float(m.bodies["b2"].mass), "kg", provenance="test")
    m.bodies["b2"].mass = "mb"
    return m


@pytest.mark.parametrize("kind", sorted(MULTI_AXIS))
def test_multi_axis_tree_joints_trajectories_and_gradients(kind):
    cm = random_multi_axis(kind).compile()
    g = simulate(cm, 0.2, 1e-3, formulation="global")
    s = simulate(cm, 0.2, 1e-3, formulation="sr-com")
    # same discrete equations, Newton tolerance 1e-10 relative (see above)
    scale = 1.0 + np.max(np.abs(s.zdi))
    assert np.max(np.abs(g.zi - s.zi)) < 1e-9 * scale
    assert np.max(np.abs(g.zdi - s.zdi)) < 1e-8 * scale
    # every relative coordinate (also .a1/.a2, .s/.phi and the z-y-x angles) is recomputed
    # from the natural coordinates
    assert not np.isnan(g.z).any()
    assert np.max(np.abs(g.z - s.z)) < 1e-9 * (1.0 + np.max(np.abs(s.z)))
    assert g.max_constraint_violation < 1e-11
    objs = [O.point_acceleration("a", "b3.p1"), O.point_velocity("v", "b1.p0"),
            O.coordinate("q", "j1.a2" if kind == "cyl-univ" else "j3.s", level=1),
            O.angular_velocity("roll", "b2", components="x"),
            O.angular_velocity("w", "b3", components="yz", frame="global")]
    kw = dict(objectives=objs, parameters=["k", "mb"], t_end=0.1, dt=1e-3)
    Dg = sensitivity(cm, method="direct", formulation="global", **kw)
    Ag = sensitivity(cm, method="adjoint", formulation="global", simulation=Dg.simulation,
                     **kw)
    Ds = sensitivity(cm, method="direct", formulation="sr-com", **kw)
    # discrete direct and adjoint are the same derivative: rounding only
    assert _rel_err(Ag.gradient, Dg.gradient) < 1e-9
    # same objective values (angular velocities included): states agree to ~1e-10
    assert np.max(np.abs(Dg.psi - Ds.psi) / np.abs(Ds.psi)) < 1e-8
    # issue 6: global = semi-recursive to 1e-6 relative (same discrete equations)
    assert _rel_err(Dg.gradient, Ds.gradient) < 1e-6


def test_universal_joint_with_parallel_axes_is_a_typed_error():
    m = random_tree(2, joint_types=["revolute", "universal"], name="u")
    m.joints["j1"].axis2 = list(m.joints["j1"].axis)
    m.joints["j1"].orientation = None
    with pytest.raises(ModelError, match="j1.*parallel"):
        simulate(m.compile(), 0.01, 1e-3, formulation="global")


def test_buggy_step_global_tires_trajectory_and_gradients():
    from workbench.apps import vehicle

    # the front axle starts 0.25 m before the step centre (5.5 m): at 3 m/s the front tires
    # run over the smoothed edge (5.4 .. 5.6 m) between 0.05 and 0.12 s
    cm = vehicle.prepare("buggy-step", parameters={"x0": 5.25}).compile()
    kw = dict(parameters=["kf", "cf", "kr", "cr", "mc"], t_end=0.15)
    Dg = sensitivity(cm, method="direct", formulation="global", **kw)
    Ag = sensitivity(cm, method="adjoint", formulation="global", simulation=Dg.simulation,
                     **kw)
    Ds = sensitivity(cm, method="direct", formulation="sr-com", **kw)
    g, s = Dg.simulation, Ds.simulation
    x = s.coordinate("chassis.x")
    assert x[0] < 5.4 - 0.1 and x[-1] > 5.6                      # front tires cross the edge
    # same discrete equations, Newton tolerance 1e-10 relative (see above)
    scale = 1.0 + np.max(np.abs(s.zdi))
    assert np.max(np.abs(g.zi - s.zi)) < 1e-9 * scale
    assert np.max(np.abs(g.zdi - s.zdi)) < 1e-8 * scale
    assert np.max(np.abs(Dg.psi - Ds.psi) / np.abs(Ds.psi)) < 1e-8
    # discrete direct and adjoint are the same derivative: rounding only
    assert _rel_err(Ag.gradient, Dg.gradient) < 1e-9
    # issue 6: global = semi-recursive to 1e-6 relative, entry by entry
    assert np.max(np.abs(Dg.gradient - Ds.gradient) / np.abs(Ds.gradient)) < 1e-6


def test_cli_simulate_buggy_step_global(tmp_path):
    import json

    from workbench.apps.cli import main
    assert main(["simulate", "buggy-step", "--formulation", "global", "--t-end", "0.02",
                 "--no-plot", "--out", str(tmp_path)]) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["formulation"] == "global" and summary["steps"] == 20
    # the position problem is solved to 1e-12 (default tolerance)
    assert summary["max_constraint_violation"] < 1e-11
