"""Rod elements (seed 002): a uniform slender bar between two body points, removed from the
tree and replaced by one distance constraint, its inertia and weight transferred exactly
to the two bodies; the exact, extrapolated and partitioned treatments; the explicit RK4
integrator.

Independent references: the resultant inertia force and moment of a uniform slender bar
(Newton-Euler about its centre of mass, ``I_G = m L^2/12 (I - e e^T)``); the same
mechanism with the bar modelled as a body on a universal joint and a spherical cut joint;
central differences of the same discrete computation; the orders of Lagrange extrapolation
(O(h), O(h^2), O(h^3)) and of RK4 (O(h^4)).
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

import workbench as wb
import workbench.objectives as O
from workbench.errors import ModelError, OptionError
from workbench.kernels import tree as K
from workbench.model import catalog
from workbench.model.files import model_from_dict
from workbench.model.serialize import model_to_dict
from workbench.sensitivities.driver import sensitivity

# the spatial four-bar's rod (crank.B to follower.C, 4 m): the bar of the shipped model is
# a body on a universal joint with slender-bar inertia (zero about its axis); its axis at
# the initial configuration (rod.C - rod.B in the file, global axes)
E0 = np.array([3.475, -1.5, 1.2939764294607534]) / 4.0


def _as_body(m_rod: float, k_spring: float = 0.0):
    """The shipped spatial four-bar with rod mass ``m_rod`` (slender-bar inertia
    ``m L^2/12 (I - e e^T)``, L = 4 m) and a joint spring-damper on the follower."""
    m = catalog.load("spatial-four-bar")
    m.parameters["m_rod"].value = m_rod
    I = m_rod * 16.0 / 12.0 * (np.eye(3) - np.outer(E0, E0))
    m.bodies["rod"].inertia = [I[0, 0], I[1, 1], I[2, 2], I[0, 1], I[0, 2], I[1, 2]]
    if k_spring:
        m.joint_spring("fs", "follower", k_spring, 3.0, 0.7)
    return m


def _as_rod(m_rod: float, k_spring: float = 0.0, params: bool = False):
    """The same mechanism with the bar as a rod element."""
    m = _as_body(m_rod, k_spring)
    del m.bodies["rod"], m.joints["rod"], m.cuts["closure"]
    length = 4.0
    if params:
        m.parameter("L_rod", 4.0, "m", provenance="test")
        m.parameter("c_x", -2.0, "m", provenance="test")
        m.bodies["follower"].points["C"] = ["c_x", 0.0, 0.0]
        length = "L_rod"
    m.rod("rod", "crank", "B", "follower", "C", "m_rod", length)
    return m


def test_rod_loads_are_the_inertia_force_and_moment_of_a_uniform_slender_bar():
    """At states of a run, the loads the rod puts on its two bodies have the resultant
    ``m (g - a_G)`` and, about the bar's centre, the moment ``-(I_G alpha + w x I_G w)``
    of a uniform slender bar (``w``, ``alpha`` its angular velocity and acceleration
    across its axis, from the end points' velocities and accelerations)."""
    res = wb.simulate(_as_rod(2.5, k_spring=40.0), 1.0, 0.01, formulation="sr-origin")
    cm = res.compiled
    ma = cm.arrays
    nf = ma.fr_parent.shape[0]
    nb = ma.b_frame.shape[0]
    m, L, grav = 2.5, 4.0, np.array(ma.gravity)
    checked = 0
    for k in (10, 37, 64, 99):
        A, r, u = np.zeros((nf, 3, 3)), np.zeros((nf, 3)), np.zeros((nf, 3))
        bcol, Z, Zd = np.zeros((nf, 6)), np.zeros((nf, 6)), np.zeros((nf, 6))
        K.frame_kinematics(ma, ma.p, res.z[k], res.zd[k], res.zdd[k], A, r, u, bcol, Z, Zd)
        fb, nb_ = np.zeros((nb, 3)), np.zeros((nb, 3))
        K.rod_forces(ma, ma.p, A, r, Z, Zd, Zd, K.ROD_EXACT, fb, nb_)
        xj, vj, aj = (res.point_kinematics("crank.B")[i][k] for i in range(3))
        xk, vk, ak = (res.point_kinematics("follower.C")[i][k] for i in range(3))
        e = (xk - xj) / L
        G = 0.5 * (xj + xk)
        w = np.cross(e, vk - vj) / L                                  # across the axis
        alpha = np.cross(e, ak - aj - L * np.cross(w, np.cross(w, e))) / L
        IG = m * L ** 2 / 12.0 * (np.eye(3) - np.outer(e, e))
        F = fb.sum(axis=0)
        MG = nb_.sum(axis=0) - np.cross(G, F)
        scale_f = m * max(np.linalg.norm(grav), np.linalg.norm(0.5 * (aj + ak)))
        # rounding of a few products of O(1) numbers: 1e-12 relative
        assert np.linalg.norm(F - m * (grav - 0.5 * (aj + ak))) < 1e-12 * scale_f
        M_ref = -(IG @ alpha + np.cross(w, IG @ w))
        assert np.linalg.norm(MG - M_ref) < 1e-11 * max(1.0, np.linalg.norm(M_ref))
        checked += 1
    assert checked == 4


@pytest.mark.parametrize("form", ["sr-origin", "sr-com"])
def test_exact_rod_equals_the_bar_modelled_as_a_body(form):
    """The exact rod (eq 24) and a body on a universal joint with slender-bar inertia give
    the same motion: same independent coordinate, same trapezoidal rule, so the discrete
    trajectories agree to the Newton tolerance (1e-10 relative on the accelerations)."""
    a = wb.simulate(_as_body(2.5, k_spring=40.0), 1.0, 0.01, formulation=form)
    b = wb.simulate(_as_rod(2.5, k_spring=40.0), 1.0, 0.01, formulation=form)
    ia, ib = a.coord_names.index("crank"), b.coord_names.index("crank")
    assert np.abs(a.z[:, ia] - b.z[:, ib]).max() < 1e-10
    assert np.abs(a.zdd[:, ia] - b.zdd[:, ib]).max() < 1e-9 * np.abs(a.zdd[:, ia]).max()
    # the rod's kinetic and potential energy are counted (the system is conservative
    # without the joint spring's damper: here both lose the same energy)
    assert b.energy is None and a.energy is None
    c = wb.simulate(_as_rod(2.5), 1.0, 0.01, formulation=form)
    d = wb.simulate(_as_body(2.5), 1.0, 0.01, formulation=form)
    assert np.abs(c.energy - d.energy).max() < 1e-9 * np.abs(d.energy).max()


def test_rod_gradients_direct_equal_adjoint_and_central_differences():
    """Exact discrete gradients through the trapezoidal rule with a rod in exact mode:
    the rod's mass, its length and the coordinate of one end point as parameters."""
    model = _as_rod(2.5, k_spring=40.0, params=True)
    obj = [O.point_position("pC", "follower.C", "z", relative=True),
           O.point_acceleration("acc", "crank.B", "y")]
    pars = ["m_rod", "L_rod", "c_x", "m_crank"]
    g = {meth: sensitivity(model, obj, pars, method=meth, formulation="sr-origin",
                           t_end=0.3, dt=0.01, fd_step=1e-5).gradient
         for meth in ("direct", "adjoint", "fd")}
    scale = np.abs(g["fd"]).max(axis=1, keepdims=True)
    # transposes of one linear recursion: rounding (measured 3e-15)
    assert (np.abs(g["direct"] - g["adjoint"]) / scale).max() < 1e-12
    # central differences at 1e-5 relative: truncation and the Newton tolerance (measured
    # 1.6e-9 over 0.5 s)
    assert (np.abs(g["direct"] - g["fd"]) / scale).max() < 1e-7
    assert np.all(np.abs(g["direct"][:, 0]) > 0)      # the rod mass matters


def _rk4(model, h, t_end=0.5, **rods):
    return wb.simulate(model, t_end, h, formulation="sr-origin", integrator="rk4",
                       rods=rods or None)


def test_extrapolation_orders_and_the_partitioned_mode_below_the_extrapolated():
    """Error of the accelerations against the exact rods (same RK4 step): halving h
    divides it by 2, 4, 8 for point, linear, quadratic extrapolation (seed 002 eqs
    33-40); the partitioned mode (eqs 47-51: only the coupling blocks lagged) is more
    accurate than the fully extrapolated one at the same cost.  A light rod (0.1 kg on
    bars of 1.5 and 2 kg): a lagged inertia is stable only while it is small, see
    docs/rods.md."""
    model = _as_rod(0.1)
    errs = {}
    for mode in ("extrapolated", "partitioned"):
        for ext in ("point", "linear", "quadratic"):
            e = []
            for h in (1e-3, 5e-4):
                ref = _rk4(model, h)
                app = _rk4(model, h, mode=mode, extrapolation=ext)
                assert app.rods["extrapolated_rows"] > 0
                e.append(np.abs(app.zdd - ref.zdd).max())
            errs[mode, ext] = e
    for ext, ratio in (("point", 2.0), ("linear", 4.0), ("quadratic", 8.0)):
        for mode in ("extrapolated", "partitioned"):
            e = errs[mode, ext]
            # measured 1.999, 3.999, 7.99: within 10 % of the order's ratio
            assert abs(e[0] / e[1] / ratio - 1.0) < 0.1, (mode, ext, e)
            assert e[1] > 0.0
        assert errs["partitioned", ext][0] < 0.5 * errs["extrapolated", ext][0]


def test_zero_rod_mass_makes_every_mode_exact():
    """Table 5's scale 0: with massless rods the approximations vanish identically, so the
    trajectories are the exact mode's bit for bit."""
    model = _as_rod(0.0)
    ref = _rk4(model, 1e-3, t_end=0.2)
    for mode in ("extrapolated", "partitioned"):
        for ext in ("point", "quadratic"):
            app = _rk4(model, 1e-3, t_end=0.2, mode=mode, extrapolation=ext)
            assert app.rods["extrapolated_rows"] > 0
            assert np.array_equal(app.zdd, ref.zdd)
            assert np.array_equal(app.z, ref.z)


def test_rk4_is_fourth_order_and_matches_the_trapezoidal_rule_in_the_limit():
    """Explicit RK4 on the independent coordinates: the state error against a run at
    h = 0.25 ms falls 16-fold per halving of h (10, 5, 2.5 ms: errors 9e-9 to 3.5e-11,
    well above rounding); the constraints hold to rounding (projected every evaluation);
    the trapezoidal rule converges to the same motion; energy is conserved."""
    model = _as_rod(2.5)
    ref = _rk4(model, 2.5e-4)
    err = []
    for h, stride in ((1e-2, 40), (5e-3, 20), (2.5e-3, 10)):
        r = _rk4(model, h)
        err.append(np.abs(r.zi - ref.zi[::stride]).max())
        assert r.max_constraint_violation < 1e-11
    # measured 16.08 and 16.05: fourth order (within 10 %)
    for e0, e1 in zip(err, err[1:]):
        assert 14.4 < e0 / e1 < 17.6, err
    tz = wb.simulate(model, 0.5, 2.5e-4, formulation="sr-origin")
    # second-order trapezoidal at 0.25 ms against RK4: measured 7e-8 rad
    assert np.abs(tz.zi - ref.zi).max() < 1e-6
    assert ref.integrator == "rk4" and tz.integrator == "trapezoidal"
    # conservative: secular energy drift of RK4 at 0.25 ms over 0.5 s, relative (measured
    # 9e-13 at 0.125 ms)
    assert abs(ref.energy_drift) < 1e-9 * np.abs(ref.energy).max()


def test_rod_options_and_refusals_are_typed_errors():
    model = _as_rod(1.0)
    with pytest.raises(OptionError, match="needs integrator='rk4'"):
        wb.simulate(model, 0.1, 0.01, rods={"mode": "partitioned"})
    with pytest.raises(OptionError, match="rods extrapolation"):
        wb.simulate(model, 0.1, 0.01, integrator="rk4", rods={"extrapolation": "cubic"})
    with pytest.raises(OptionError, match="unknown option"):
        wb.simulate(model, 0.1, 0.01, integrator="rk4", rods={"order": 2})
    with pytest.raises(OptionError, match="semi-recursive"):
        wb.simulate(model, 0.1, 0.01, formulation="penalty", integrator="rk4")
    with pytest.raises(OptionError, match="integrator"):
        wb.simulate(model, 0.1, 0.01, integrator="euler")
    with pytest.raises(ModelError, match="rod 'rod'.*global"):
        wb.simulate(model, 0.1, 0.01, formulation="global")
    bad = copy.deepcopy(model)
    with pytest.raises(ModelError, match="both ends"):
        bad.rod("r2", "crank", "A", "crank", "B", 1.0, 1.5)
    with pytest.raises(ModelError, match="negative"):
        bad.rod("r3", "crank", "A", "follower", "D", -1.0, 5.0)
    with pytest.raises(ModelError, match="rod_mode"):
        bad.rod_options(mode="lagged")
    # a model whose own mode is approximate runs exact rods with the trapezoidal rule
    # and says so
    model.rod_options("partitioned", "linear")
    res = wb.simulate(model, 0.05, 0.01)
    assert res.rods == {"mode": "exact", "extrapolation": "linear"}
    assert _rk4(model, 0.01, t_end=0.05).rods["mode"] == "partitioned"


def test_rods_and_their_options_round_trip_through_the_file_format():
    model = _as_rod(1.5, params=True)
    model.rod_options("partitioned", "point")
    doc = model_to_dict(model)
    assert [r["name"] for r in doc["rods"]] == ["rod"] and "distances" not in doc
    back = model_from_dict(doc)
    assert back.rod_mode == "partitioned" and back.rod_extrapolation == "point"
    a, b = model.compile(), back.compile()
    assert np.array_equal(a.arrays.rd_pt, b.arrays.rd_pt)
    assert np.array_equal(a.arrays.p, b.arrays.p)
    with pytest.raises(ModelError, match="rods"):
        model_from_dict({**doc, "rods": [{**doc["rods"][0], "mass": "nope"}]})


def test_cli_simulate_with_rk4_and_rod_options(tmp_path, capsys):
    import json

    from workbench.apps.cli import main
    from workbench.model.serialize import save_json

    path = save_json(_as_rod(0.1), tmp_path / "rod-four-bar.json")
    out = tmp_path / "run"
    assert main(["simulate", str(path), "--integrator", "rk4", "--formulation", "sr-origin",
                 "--rods", "mode=partitioned", "--rods", "extrapolation=linear",
                 "--t-end", "0.05", "--dt", "0.01", "--out", str(out), "--no-plot"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["integrator"] == "rk4"
    assert summary["rods"]["mode"] == "partitioned"
    assert summary["rods"]["extrapolation"] == "linear"
    assert summary["rods"]["extrapolated_rows"] == 4     # rows 2..5: two stored first
    capsys.readouterr()
    assert main(["simulate", str(path), "--rods", "mode=partitioned", "--t-end", "0.05",
                 "--dt", "0.01", "--out", str(tmp_path / "run2"), "--no-plot"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("error:") and "rk4" in err


def _rod_pendulum(M=2.0, m=0.9, L=1.3, th0=0.5):
    """A bob of mass M on two prismatic joints (x, then z), held at distance L from a
    ground point by a rod of mass m: a pendulum whose angle obeys ``(M + m/3) L th'' =
    -(M + m/2) g sin th``."""
    mod = wb.Model("rod pendulum", gravity=(0.0, 0.0, -9.81))
    mod.body("slide", 0.0)
    mod.body("bob", M, points={"P": (0.0, 0.0, 0.0)})
    mod.point("ground", "O", (0.0, 0.0, 0.0))
    mod.joint("x", "prismatic", "ground", "slide", axis=(1, 0, 0), q0=L * np.sin(th0))
    mod.joint("z", "prismatic", "slide", "bob", axis=(0, 0, 1), q0=-L * np.cos(th0))
    mod.rod("bar", "ground", "O", "bob", "P", m, L)
    mod.dof("x")
    return mod


@pytest.mark.parametrize("form", ["sr-com", "sr-origin", "multipliers-origin", "penalty"])
def test_rod_pendulum_starts_with_the_analytic_acceleration(form):
    """The rod with one end on the ground, in every formulation that takes rods: the
    initial angular acceleration of the rod pendulum released from rest is the textbook
    ``-(M + m/2) g sin th / ((M + m/3) L)``; x'' = L cos th th''."""
    M, m, L, th = 2.0, 0.9, 1.3, 0.5
    res = wb.simulate(_rod_pendulum(M, m, L, th), 0.01, 0.01, formulation=form)
    thdd = -(M + m / 2) * 9.81 * np.sin(th) / ((M + m / 3) * L)
    ix = res.coord_names.index("x")
    # rounding: measured 4e-16 (semi-recursive), 4e-15 (multipliers), 0 (penalty: the
    # consistent start solves the augmented system)
    assert abs(res.zdd[0, ix] - L * np.cos(th) * thdd) < 1e-13 * abs(L * np.cos(th) * thdd)


def test_rods_report_metric_mass_scaling_and_order_fit():
    """The report's building blocks: the error metric (max over all entries; max over
    rows of the row norm), the rod-mass scaling of Table 5 (only the rods' mass fields
    change) and the least-squares order fit (exact on synthetic power laws)."""
    from types import SimpleNamespace

    from workbench.apps import rods_report as RR

    ref = SimpleNamespace(zdd=np.zeros((3, 2)))
    app = SimpleNamespace(zdd=np.array([[0.0, 0.0], [3.0, -4.0], [0.0, 4.5]]))
    assert RR.acceleration_errors(app, ref) == (4.5, 5.0)
    cm = _as_rod(1.5).compile()
    sc = RR.scaled_rod_masses(cm, 2.0)
    p0, p1 = np.asarray(cm.arrays.p), np.asarray(sc.arrays.p)
    rd = np.asarray(cm.arrays.rd_m)
    assert np.all(p1[rd] == 2.0 * p0[rd]) and p0[rd][0] == 1.5
    assert np.array_equal(np.delete(p1, rd), np.delete(p0, rd))
    rows = [{"h_s": h, "mode": "extrapolated", "extrapolation": ext,
             "max": 3.0 * h ** (k + 1), "norm": 5.0 * h ** (k + 1)}
            for k, ext in enumerate(RR.EXTRAPOLATIONS) for h in RR.T4_STEPS]
    fit = {r["extrapolation"]: r for r in RR._orders(rows)}
    for k, ext in enumerate(RR.EXTRAPOLATIONS):
        assert abs(fit[ext]["order_max"] - (k + 1)) < 1e-9
        assert abs(fit[ext]["order_norm"] - (k + 1)) < 1e-9
