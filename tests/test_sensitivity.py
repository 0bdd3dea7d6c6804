"""Exact design sensitivities: step Jacobians against differences of the same discrete
computation, direct = adjoint, both = central differences of the simulation, continuous
adjoint -> discrete as h -> 0, per parameter kind, open and closed, constant and
non-constant B, both reference points."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import bind, random_tree, set_item

from workbench import Model
from workbench import objectives as O
from workbench.errors import ModelError, UnknownNameError
from workbench.formulations.semirecursive import matrixr as MR
from workbench.formulations.semirecursive import step_jacobians as S
from workbench.integrators.simulation import simulate
from workbench.kernels import tree as K
from workbench.model import catalog
from workbench.model.elements import GROUND
from workbench.sensitivities.driver import sensitivity

# ----------------------------------------------------------------------------------------
# models with parameters of every kind
# ----------------------------------------------------------------------------------------


def parametrized_tree(seed=3, closed=False):
    """Spatial tree with every joint type, a spring-damper, a joint spring-damper, an
    applied force and torque; parameters bound to a mass, a centre-of-mass coordinate, an
    inertia, spring k, c and natural length, a point coordinate, a joint location and a
    joint spring.  ``closed`` adds a distance constraint (a rigid rod) closing a loop,
    whose length is a parameter too."""
    m = random_tree(seed, forces=True, shuffle=False, name="param-tree")
    b = m.bodies
    last = list(b)[-1]

    bind(m, "m1", float(b["b1"].mass), "kg", lambda nm: setattr(b["b1"], "mass", nm))
    bind(m, "xg2", float(b["b2"].com[0]), "m", set_item(b["b2"], "com", 0))
    bind(m, "I3", float(b["b3"].inertia[0]), "kg*m^2", set_item(b["b3"], "inertia", 0))
    sp = m.springs["spring"]
    bind(m, "k", 40.0, "N/m", lambda nm: setattr(sp, "k", nm))
    bind(m, "c", 3.0, "N*s/m", lambda nm: setattr(sp, "c", nm))
    bind(m, "L0", 0.2, "m", lambda nm: setattr(sp, "length", nm))
    p0 = list(b[last].points["p0"])
    bind(m, "py", float(p0[1]), "m", lambda nm: b[last].points.__setitem__(
        "p0", (p0[0], nm, p0[2])))
    j2 = m.joints["j2"]
    bind(m, "jz", float(j2.parent_point[2]), "m", set_item(j2, "parent_point", 2))
    js = m.joint_springs["jspring"]
    bind(m, "kj", 7.0, "N*m/rad", lambda nm: setattr(js, "k", nm))
    names = ["m1", "xg2", "I3", "k", "c", "L0", "py", "jz", "kj"]
    if closed:
        cm = m.compile()
        x = _points(cm, ["b4.p1", "b1.p0"])
        L = float(np.linalg.norm(x[0] - x[1]))
        m.parameter("Lrod", L, "m", provenance="test: distance at the initial guess")
        m.distance("rod", "b4", "p1", "b1", "p0", "Lrod")
        names.append("Lrod")
    return m, names


def _points(cm, names):
    ma = cm.arrays
    nf = ma.fr_parent.shape[0]
    A, r, u = np.zeros((nf, 3, 3)), np.zeros((nf, 3)), np.zeros((nf, 3))
    K.frame_positions(ma, ma.p, cm.z_guess, A, r, u)
    out = []
    for nm in names:
        x = np.zeros(3)
        K.point_position(ma, ma.p, A, r, cm.point(nm), x)
        out.append(x)
    return out


TREE_OBJECTIVES = [
    O.point_velocity("v", "b6.p1"),
    O.angular_velocity("w", "b4", components="xz", frame="body"),
    O.point_position("x", "b2.p0", components="yz", power=1),
    O.coordinate("q", "j0", level=1),
]


def _rel_err(a, b):
    return np.max(np.abs(a - b)) / np.max(np.abs(b))


# ----------------------------------------------------------------------------------------
# the step Jacobians against central differences of the same discrete residual
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("closed", [False, True])
@pytest.mark.parametrize("form", [0, 1])
def test_step_jacobians_match_differences_of_the_residual(closed, form):
    model, names = parametrized_tree(closed=closed)
    cm = model.compile()
    ma = cm.arrays
    cols = [cm.param_names.index(nm) for nm in names]
    Gm = np.ascontiguousarray(cm.G[:, cols])
    co = O.compile_objectives(cm, TREE_OBJECTIVES)
    from workbench.integrators.simulation import simulate
    sim = simulate(cm, 0.05, 1e-3)
    t, zi, zdi, a, z = sim.t[-1], sim.zi[-1], sim.zdi[-1], sim.zddi[-1], sim.z[-1]
    d, nm_, npar = cm.d, co.n_measures, len(names)
    Jr, Mb = np.zeros((d, 2 * d + npar)), np.zeros((d, d))
    Jm, mv = np.zeros((nm_, 3 * d + npar)), np.zeros(nm_)
    from workbench.compiled.parameters import kinematic_parameters
    pkin = kinematic_parameters(cm, Gm)
    # the tree's parameters include both kinds (the skipped tangents are checked too)
    assert 0 < pkin.sum() < len(names)
    Rst, zdst, zddst = np.zeros((cm.n, d)), np.zeros(cm.n), np.zeros(cm.n)
    st = S.step_jacobians(ma, ma.p, form, t, zi, zdi, a, z.copy(), Gm, pkin,
                          np.zeros(npar, dtype=np.int64), co.ms_type, co.ms_a, co.ms_c, Jr, Mb,
                          Jm, mv, Rst, zdst, zddst)
    assert st == MR.OK
    # reverse mode for the static parameters: lambda^T dr/drho = (R lambda)^T dtau/drho
    from workbench.compiled.parameters import reverse_parameters
    pskip = reverse_parameters(cm, Gm)
    assert 0 < pskip.sum() <= (pkin == 0).sum()
    lam = np.random.default_rng(3).normal(size=d)
    gf = np.zeros(ma.p.shape[0])
    S.virtual_power_gradient(ma, ma.p, z, zdst, zddst, Rst @ lam, gf)
    q = np.flatnonzero(pskip)
    # 1e-10: two exact evaluations of the same derivative (forward tangent vs virtual power)
    np.testing.assert_allclose((gf @ Gm)[q], lam @ Jr[:, 2 * d + q], rtol=1e-10,
                               atol=1e-10 * np.abs(lam @ Jr[:, 2 * d:]).max())
    # the step Jacobians' own reverse-mode columns (the d unit cotangents; the bodies and
    # springs none of whose fields these parameters read are skipped) = the forward ones
    nb, ns, njs = ma.b_frame.shape[0], ma.sp_pt.shape[0], ma.js_coord.shape[0]
    need = S.fields_read(S.sparse_columns(Gm, pskip)[2], ma.p.shape[0])
    fields = ([[ma.b_mass[b], *range(ma.b_com[b], ma.b_com[b] + 3),
                *range(ma.b_inr[b], ma.b_inr[b] + 6)] for b in range(nb)]
              + [[ma.sp_k[s], ma.sp_c[s], ma.sp_L0[s]] for s in range(ns)]
              + [[ma.js_k[s], ma.js_c[s], ma.js_z0[s]] for s in range(njs)])
    read = sum(1 for f in fields if need[f].any())
    assert 0 < read < nb + ns + njs            # some elements are skipped, some are not
    Jr2 = np.zeros_like(Jr)
    st = S.step_jacobians(ma, ma.p, form, t, zi, zdi, a, z.copy(), Gm, pkin, pskip,
                          co.ms_type, co.ms_a, co.ms_c, Jr2, Mb, Jm, mv, Rst, zdst, zddst)
    assert st == MR.OK
    # 1e-10: forward tangent vs virtual power, two exact evaluations
    np.testing.assert_allclose(Jr2[:, 2 * d + q], Jr[:, 2 * d + q], rtol=1e-10,
                               atol=1e-10 * np.abs(Jr[:, 2 * d:]).max())

    def F(zi_, zdi_, a_, p_):
        st, err, bad, zz, zd, zddb, R, Md, tau, Mbar, Qb = MR.evaluate_state(
            ma, p_, form, t, zi_, zdi_, z.copy(), 1e-14, 50)
        assert st == MR.OK
        zdd = zddb + R @ a_
        ws = MR.make_workspace(ma, cm.n)
        K.frame_positions(ma, p_, zz, ws.A, ws.r, ws.u)
        K.joint_columns(ma, ws.r, ws.u, ws.bcol)
        K.frame_velocities(ma, zd, ws.bcol, ws.Z)
        K.frame_accelerations(ma, zd, zdd, ws.r, ws.u, ws.bcol, ws.Z, ws.Zd)
        mvals = np.zeros(nm_)
        S.measures(ma, p_, ws.A, ws.r, ws.Z, ws.Zd, zz, zd, zdd, co.ms_type, co.ms_a,
                   co.ms_c, mvals)
        return Mbar @ a_ - Qb, mvals

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


# ----------------------------------------------------------------------------------------
# gradients of whole simulations
# ----------------------------------------------------------------------------------------


def _all_methods(model, objectives, names, t_end, dt, formulation="sr-com"):
    kw = dict(objectives=objectives, parameters=names, t_end=t_end, dt=dt,
              formulation=formulation)
    D = sensitivity(model, method="direct", **kw)
    A = sensitivity(model, method="adjoint", simulation=D.simulation, **kw)
    F = sensitivity(model, method="fd", **kw)
    return D, A, F


@pytest.mark.parametrize("closed", [False, True])
def test_tree_gradients_direct_adjoint_and_differences_agree(closed):
    model, names = parametrized_tree(closed=closed)
    D, A, F = _all_methods(model, TREE_OBJECTIVES, names, 0.2, 1e-3)
    np.testing.assert_allclose(D.psi, F.psi, rtol=1e-12)
    # 1e-9: the same linear recursion run forward and transposed backward
    assert _rel_err(A.gradient, D.gradient) < 1e-9
    # per objective, relative to its largest entry; 2e-5: central differences with a
    # relative step of 1e-5 of simulations whose Newton iterations stop at 1e-13
    for k in range(len(D.objectives)):
        scale = np.max(np.abs(D.gradient[k]))
        np.testing.assert_allclose(D.gradient[k], F.gradient[k], rtol=0, atol=2e-5 * scale)


def test_a_point_only_forces_and_measures_use_is_not_a_kinematic_parameter():
    """The spring's mounting point ``p0`` of the last body (coordinate ``py``) moves no
    constraint: its direction skips the position, velocity and acceleration problems but
    carries ``dp`` into the spring force and into measures of that very point, whose
    gradients must still be exact; a joint location (``jz``) and a rod length stay
    kinematic."""
    from workbench.compiled.parameters import kinematic_parameters
    model, names = parametrized_tree(closed=True)
    cm = model.compile()
    last = cm.body_names[-1]
    cols = [cm.param_names.index(nm) for nm in names]
    pkin = dict(zip(names, kinematic_parameters(cm, cm.G[:, cols])))
    assert pkin["py"] == 0 and pkin["jz"] == 1 and pkin["Lrod"] == 1
    objs = [O.point_position("x", f"{last}.p0", components="y", power=1),
            O.point_velocity("v", f"{last}.p0"), O.point_acceleration("a", f"{last}.p0")]
    P = ["py", "jz", "k"]
    D, A, F = _all_methods(model, objs, P, 0.2, 1e-3)
    assert np.all(np.abs(D.gradient[:, 0]) > 0)       # py reaches every objective
    # 1e-9: the same linear recursion forward and transposed; 2e-5 of each objective's
    # largest entry: central differences (relative step 1e-5, Newton tolerance 1e-13)
    assert _rel_err(A.gradient, D.gradient) < 1e-9
    for k in range(len(objs)):
        scale = np.max(np.abs(D.gradient[k]))
        np.testing.assert_allclose(D.gradient[k], F.gradient[k], rtol=0, atol=2e-5 * scale)


def test_five_bar_both_reference_points_and_all_methods_agree():
    kw = dict(t_end=0.5, dt=1e-3)
    D1, A1, F = _all_methods("five-bar", None, None, 0.5, 1e-3, "sr-com")
    D2 = sensitivity("five-bar", method="direct", formulation="sr-origin", **kw)
    assert D1.objectives == ("psi1", "psi2", "psi3")
    assert D1.parameters == ("Ls1", "Ls2", "mA1", "xA1G", "LA1")
    # 1e-10: SR-I and SR-II give the same projected equations to rounding
    assert _rel_err(D2.gradient, D1.gradient) < 1e-10
    assert _rel_err(A1.gradient, D1.gradient) < 1e-10
    for k in range(3):
        scale = np.max(np.abs(D1.gradient[k]))
        # 1e-6: see test_tree_gradients... (the five-bar is smoother)
        np.testing.assert_allclose(D1.gradient[k], F.gradient[k], rtol=0, atol=1e-6 * scale)
    # the running gradients end (direct) / start (adjoint) at the gradient (Fig. 2)
    np.testing.assert_allclose(D1.running[-1], D1.gradient, rtol=1e-12)
    np.testing.assert_allclose(A1.running[0], A1.gradient, rtol=1e-12)
    assert np.all(D1.running[0] == 0.0)


def test_point_coordinate_dof_and_geometric_parameter_initial_condition_terms():
    """Non-constant B: the degrees of freedom are the x and y coordinates of point 2; their
    initial values come from the initial configuration and so depend on LA1 (eqs 32, 37
    and the initial term of eq 69a)."""
    model = catalog.load("five-bar")
    model.dof({"point": "bar_12.2", "axis": "x"}, {"point": "bar_12.2", "axis": "y"})
    D, A, F = _all_methods(model, None, ["LA1", "xA1G", "Ls2"], 0.3, 1e-3)
    assert _rel_err(A.gradient, D.gradient) < 1e-9
    for k in range(3):
        scale = np.max(np.abs(D.gradient[k]))
        np.testing.assert_allclose(D.gradient[k], F.gradient[k], rtol=0, atol=2e-6 * scale)
    # the initial-condition term is really exercised: dz^i(0)/dLA1 != 0
    from workbench.compiled.parameters import initial_sensitivities, parameter_columns
    cm = model.compile()
    _, Gm, _ = parameter_columns(cm, ["LA1"])
    SZ0, _ = initial_sensitivities(cm, Gm)
    assert np.max(np.abs(SZ0)) > 0.1


def test_continuous_adjoint_converges_to_the_discrete_gradient_at_second_order():
    errs = []
    for dt in (2e-3, 1e-3):
        D = sensitivity("five-bar", method="direct", t_end=0.5, dt=dt)
        C = sensitivity("five-bar", method="adjoint", variant="continuous", t_end=0.5, dt=dt,
                        simulation=D.simulation)
        errs.append(_rel_err(C.gradient, D.gradient))
    assert errs[1] < 1e-3
    # second order: halving h divides the difference by ~4
    assert 3.0 < errs[0] / errs[1] < 5.0


def test_sparse_columns_of_the_parameter_map():
    """``workbench.formulations.semirecursive.step_jacobians.sparse_columns`` (the reverse-mode columns read ``Gm`` through it) holds
    exactly the nonzero entries of the flagged columns, rows in increasing order."""
    rng = np.random.default_rng(4)
    Gm = rng.normal(size=(30, 7)) * (rng.random((30, 7)) < 0.2)
    Gm[:, 3] = 0.0
    pskip = np.array([1, 0, 1, 1, 0, 1, 1], dtype=np.int64)
    gcol, gptr, gidx, gval = S.sparse_columns(Gm, pskip)
    assert gcol.tolist() == [0, 2, 3, 5, 6]
    dense = np.zeros_like(Gm)
    for e, q in enumerate(gcol):
        rows = gidx[gptr[e]:gptr[e + 1]]
        assert np.all(np.diff(rows) > 0)
        dense[rows, q] = gval[gptr[e]:gptr[e + 1]]
    expect = Gm * (pskip != 0)
    np.testing.assert_array_equal(dense, expect)
    assert gptr[-1] == np.count_nonzero(expect)


def test_parameter_errors_are_typed():
    with pytest.raises(UnknownNameError):
        sensitivity("five-bar", parameters=["nope"], t_end=0.01, dt=1e-3)
    with pytest.raises(ModelError, match="load-time"):
        sensitivity("five-bar", parameters=["th1_0"], t_end=0.01, dt=1e-3)
    with pytest.raises(UnknownNameError):
        sensitivity("five-bar", objectives=O.point_velocity("v", "bar_12.9"), t_end=0.01,
                    dt=1e-3)


def test_cli_reproduce_five_bar_and_sensitivity(tmp_path, capsys):
    import json

    import pandas as pd

    from workbench.apps.cli import main
    assert main(["reproduce", "five-bar", "--quick", "--out", str(tmp_path)]) == 0
    df = pd.read_csv(tmp_path / "five-bar" / "gradients.csv")
    assert list(df.columns[:3]) == ["objective", "parameter", "unit"]
    for col in ("direct_sr", "adjoint_sr", "direct_sr_cont", "adjoint_sr_cont", "fd",
                "published"):
        assert col in df.columns
    assert len(df) == 15
    # 1e-9: discrete direct and adjoint are the same recursion, forward and transposed
    assert _rel_err(df.adjoint_sr.values, df.direct_sr.values) < 1e-9
    for o, grp in df.groupby("objective"):
        scale = np.max(np.abs(grp.direct_sr))
        # 1e-6: central differences (relative step 1e-5, Newton tolerance 1e-13)
        assert np.max(np.abs(grp.fd - grp.direct_sr)) < 1e-6 * scale
    # issue 6: the global formulation gives the same gradients (1e-6 relative, entry-wise;
    # the same discrete equations, so round-off and Newton tolerance only)
    for col in ("direct_global", "adjoint_global"):
        assert np.max(np.abs(df[col] - df.direct_sr) / np.abs(df.direct_sr)) < 1e-6
    # the published column quotes seed 001 Table 1
    assert df.set_index(["objective", "parameter"]).loc[("psi3", "LA1"), "published"] == -2546.6
    timings = json.loads((tmp_path / "five-bar" / "timings.json").read_text())
    assert {"simulation_s", "direct_s", "adjoint_s", "fd_s"} <= set(timings)
    report = (tmp_path / "five-bar" / "report.md").read_text()
    assert "RECONSTRUCTION" in report
    assert (tmp_path / "five-bar" / "fig2_running_gradient.png").stat().st_size > 1000
    assert (tmp_path / "five-bar" / "fig4_cpu_sr_vs_global.png").stat().st_size > 1000
    assert "semi-recursive saving" in report
    assert {"simulation_global_s", "direct_global_s", "adjoint_global_s"} <= set(timings)
    out = tmp_path / "g.csv"
    assert main(["sensitivity", "five-bar", "--t-end", "0.1", "--method", "direct",
                 "--params", "Ls1,mA1", "--out", str(out)]) == 0
    g = pd.read_csv(out)
    assert list(g.parameter.unique()) == ["Ls1", "mA1"]
    assert main(["sensitivity", "five-bar", "--params", "nope", "--t-end", "0.1"]) == 2
    assert "unknown parameter 'nope'" in capsys.readouterr().err


def test_report_timings_are_the_median_run_after_a_discarded_warm_up():
    from types import SimpleNamespace

    from workbench.apps.reports import median_run
    totals = iter([9.0, 0.3, 0.1, 0.2])     # the first (warm-up) call is the slowest
    calls = []

    def run():
        calls.append(1)
        return SimpleNamespace(timings={"total_s": next(totals)})

    r = median_run(run, repeat=3)
    assert len(calls) == 4
    assert r.timings["total_s"] == 0.2


def test_resumed_segment_reproduces_the_stored_rows_bit_for_bit():
    """Checkpointing rests on this: a run resumed from a stored row (with that row's
    acceleration and the predictor state: the previous rows' accelerations, newest first)
    repeats the original rows exactly."""
    from workbench.formulations import formulation_code
    from workbench.integrators.simulation import integrate_steps
    from workbench.integrators.trapezoidal import PRED_HIST
    cm = catalog.load("five-bar").compile()
    full = simulate(cm, 0.3, 1e-3)
    k = 137
    part = integrate_steps(cm, "sr-com", formulation_code("sr-com"), 0.0, 1e-3, 300 - k, full.zi[k],
                full.zdi[k], full.z[k],
                resume=(full.zddi[k], full.zddi[k - 1:k - 1 - PRED_HIST:-1], PRED_HIST),
                kofs=k)
    for name in ("t", "z", "zd", "zdd", "zi", "zdi", "zddi"):
        np.testing.assert_array_equal(getattr(part, name), getattr(full, name)[k:], name)


@pytest.mark.parametrize("variant", ["discrete", "continuous"])
def test_checkpointed_adjoint_equals_full_storage(variant):
    """Segments of 7 steps (not a divisor of the run), a relative objective (psi1: its
    initial-value cotangent) and a geometric parameter (LA1: initial-condition terms)."""
    cm = catalog.load("five-bar").compile()
    kw = dict(parameters=["Ls1", "mA1", "LA1"], method="adjoint", variant=variant,
              t_end=0.2, dt=1e-3)
    full = sensitivity(cm, **kw)
    ck = sensitivity(cm, **kw, checkpoint_steps=7)
    ck1 = sensitivity(cm, **kw, checkpoint_steps=1)      # segments of one step
    np.testing.assert_allclose(ck1.gradient, full.gradient, rtol=1e-12, atol=0)
    assert ck.timings["segments"] == 29 and ck.simulation is None
    # 1e-12: the same arithmetic on bit-identical rows, summed in another order
    np.testing.assert_allclose(ck.gradient, full.gradient, rtol=1e-12, atol=0)
    np.testing.assert_allclose(ck.psi, full.psi, rtol=1e-12, atol=0)
    # the running gradient at the checkpoints is the full one sampled there
    rows = np.searchsorted(full.t, ck.t - 1e-12)
    np.testing.assert_allclose(ck.running, full.running[rows], rtol=1e-10,
                               atol=1e-12 * np.abs(full.gradient).max())
    # an automatic choice when the memory budget is tiny: ceil(sqrt(201)) = 15 steps
    auto = sensitivity(cm, **kw, memory_limit_mb=1e-3)
    assert auto.timings["checkpoint_steps"] == 15
    np.testing.assert_allclose(auto.gradient, full.gradient, rtol=1e-12, atol=0)


def test_kept_states_equal_a_re_evaluation():
    """The integrator keeps each plain row's state at the accepted Newton iterate and the
    sweeps read it instead of re-evaluating it: the kept state must be the state
    re-evaluated from the row's stored coordinates (the initial row is not kept).  The
    five-bar's DOF are joint coordinates: after a step by the coordinate partition's LU
    the row's QR factors of Theta_z are not formed (the step Jacobians take Theta_z^+
    from the partition), so they are left out of the comparison."""
    cm = catalog.load("five-bar").compile()
    ma, n, d = cm.arrays, cm.n, cm.d
    m = ma.c_type.shape[0]
    sim = simulate(cm, 0.06, 1e-3, keep_states=True)
    L = MR.state_record_size(ma, n)
    assert sim.states.shape == (len(sim.t), L)
    assert sim.states[0, 0] == 0.0 and np.all(sim.states[1:, 0] == 1.0)
    assert simulate(cm, 0.06, 1e-3).states is None
    PL = (np.zeros(m, dtype=np.int64), np.zeros((m, m)), np.zeros(m, dtype=np.int64))
    assert MR.partition_setup(ma, n, PL[0])
    # the places of the QR factors in a row: those a change of them moves
    ws = MR.make_workspace(ma, n)
    v, Rz = np.zeros(n), np.zeros((n, d))
    rows = []
    for x in (1.0, 2.0):
        ws.V[:], ws.beta[:], ws.Rm[:] = x, x, x
        rows.append(np.zeros(L))
        MR.store_state(ws, v, v, v, Rz, rows[-1])
    qr_slots = rows[0] != rows[1]
    assert qr_slots.sum() == n * (m + d) + n + n * n
    for k in (1, 23, 60):
        ws = MR.make_workspace(ma, n)
        zd, zdd, tau, zddb = np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n)
        R, Md = np.zeros((n, d)), np.zeros((n, n))
        st = S._state(ma, ma.p, 0, sim.t[k], sim.zi[k], sim.zdi[k], sim.zddi[k],
                      sim.z[k].copy(), ws, zd, zdd, R, tau, Md, zddb, np.zeros(0), PL, True)
        assert st == MR.OK
        row = np.zeros(L)
        MR.store_state(ws, zd, zdd, tau, R, row)
        # 1e-13: the same kernels on the same floats (the integrator may reuse a
        # factorisation of Theta_z made at the same position)
        np.testing.assert_allclose(row[~qr_slots], sim.states[k][~qr_slots], rtol=1e-13,
                                   atol=1e-13)
        # and a kept row restores every array the step Jacobians read (but the QR)
        ws2 = MR.make_workspace(ma, n)
        zd2, zdd2, tau2, R2 = np.zeros(n), np.zeros(n), np.zeros(n), np.zeros((n, d))
        assert MR.load_state(sim.states[k], ws2, zd2, zdd2, tau2, R2)
        for i in (0, 1, 2, 3, 4, 5, 14, 15, 16, 22, 23, 24, 25):
            np.testing.assert_allclose(ws2[i], ws[i], rtol=1e-13, atol=1e-13)
        np.testing.assert_allclose(R2, R, rtol=1e-13, atol=1e-13)
    assert not MR.load_state(np.zeros(0), ws2, zd2, zdd2, tau2, R2)


def test_sweeps_by_blocks_and_threads_give_the_same_gradient(monkeypatch):
    """The step Jacobians are evaluated by blocks of rows, the rows of a block split among
    threads; the recursions run sequentially over the blocks.  Blocks of 7 rows (not a
    divisor of the run) on one and two threads give the gradient of the default blocks
    exactly (each row's Jacobians depend on that row only, never on the rows evaluated
    before it in the same work arrays); a simulation that kept no states gives it too."""
    import numba
    cm = catalog.load("five-bar").compile()
    kw = dict(parameters=["Ls1", "mA1", "LA1"], t_end=0.1, dt=1e-3)
    for method in ("direct", "adjoint"):
        ref = sensitivity(cm, method=method, threads=1, **kw)
        assert not ref.timings["pipelined"]
        monkeypatch.setattr(S, "BLOCK", 7)
        for threads in (1, 2):
            r = sensitivity(cm, method=method, threads=threads, **kw)
            # more than one thread: pipelined with the simulation (when numba has them)
            assert r.timings["pipelined"] == (threads > 1 and numba.config.NUMBA_NUM_THREADS > 1)
            np.testing.assert_array_equal(r.gradient, ref.gradient)
            np.testing.assert_array_equal(r.running, ref.running)
            # given a simulation (kept states): blocks on the threads, not pipelined
            g = sensitivity(cm, method=method, threads=threads, simulation=r.simulation, **kw)
            assert not g.timings["pipelined"]
            np.testing.assert_array_equal(g.gradient, ref.gradient)
        monkeypatch.setattr(S, "BLOCK", 256)
        sim = simulate(cm, 0.1, 1e-3)
        r0 = sensitivity(cm, method=method, simulation=sim, **kw)
        # 1e-13: the kept state is the re-evaluated one (see the test above)
        np.testing.assert_allclose(r0.gradient, ref.gradient, rtol=1e-13, atol=0)
    with pytest.raises(ValueError, match="threads"):
        sensitivity(cm, method="direct", threads=0, **kw)
    # a bad grid is a ValueError before any work, on every path
    for method in ("direct", "adjoint", "fd"):
        with pytest.raises(ValueError, match="time step"):
            sensitivity(cm, method=method, t_end=0.1, dt=0.0)


@pytest.mark.parametrize("method", ["direct", "adjoint"])
def test_a_failing_forward_run_raises_its_typed_error_on_every_path(method):
    """k = 1e8 N/m with h = 0.1 s: the simulation cannot resolve the spring.  The pipelined
    sensitivity (simulation on a second thread) and the sequential one both raise the
    simulation's NewtonConvergenceError, with its time."""
    from workbench.errors import NewtonConvergenceError
    m = Model("stiff", gravity=(0.0, -9.81, 0.0), planar=True)
    k = m.parameter("k", 1e8, "N/m", "test value")
    for name in ("link1", "link2"):
        m.body(name, 1.0, com=(0.5, 0, 0), inertia=(0, 0, 0.1), points={"tip": (1.0, 0, 0)})
    m.revolute("j1", GROUND, "link1", q0=0.3, qd0=2.0)
    m.revolute("j2", "link1", "link2", parent_point="tip", q0=0.5)
    m.spring("stiff", GROUND, (1.5, -0.5, 0.0), "link2", "tip", k=k, length=1.52)
    for threads in (1, 2):
        with pytest.raises(NewtonConvergenceError) as exc:
            sensitivity(m, objectives=[O.coordinate("q1", "j1")], parameters=["k"],
                        method=method, t_end=1.0, dt=0.1, threads=threads)
        assert 0.0 < exc.value.time <= 0.1 and "'stiff'" in str(exc.value)


def test_a_non_finite_given_simulation_raises_a_typed_error():
    """A simulation passed in with a NaN (edited, or made elsewhere) is refused before any
    sweep, naming the array and the time of its first bad row, for both methods; the
    simulation is left as it was."""
    from workbench.errors import NonFiniteError
    cm = catalog.load("five-bar").compile()
    sim = simulate(cm, 0.3, 1e-3)
    sim.zdi[150, 1] = np.nan
    before = sim.zdi.copy()
    for method in ("direct", "adjoint"):
        with pytest.raises(NonFiniteError, match="'zdi' at output row 150") as exc:
            sensitivity(cm, method=method, simulation=sim, t_end=0.3, dt=1e-3)
        assert exc.value.time == pytest.approx(0.15)
    np.testing.assert_array_equal(sim.zdi, before)


def test_a_given_simulation_of_another_model_design_or_grid_is_refused():
    """``simulation=`` must be a run of this model, design, formulation and grid: each
    mismatch is a SensitivityError naming it (a wrong step used to give a silently wrong
    gradient, another model a SystemError from the kernels); t_end and dt default to the
    simulation's grid."""
    from workbench.errors import SensitivityError
    cm = catalog.load("five-bar").compile()
    sim = simulate(cm, 0.1, 1e-3)
    cases = [
        (dict(simulation=sim, t_end=0.1, dt=2e-3), "dt = 0.001 s, not 0.002 s"),
        (dict(simulation=sim, t_end=0.2, dt=1e-3), "101 output rows"),
        (dict(simulation=simulate(catalog.load("pendulum").compile(), 0.1, 1e-3)),
         "model 'pendulum'"),
        (dict(simulation=simulate(cm, 0.1, 1e-3, "sr-origin")), "formulation 'sr-origin'"),
        (dict(simulation=simulate(catalog.load("five-bar").compile({"k1": 2.0}), 0.1, 1e-3)),
         "parameter k1: 2 there, 150 here"),
    ]
    for kw, msg in cases:
        with pytest.raises(SensitivityError, match=msg):
            sensitivity(cm, method="adjoint", **kw)
    ref = sensitivity(cm, method="adjoint", t_end=0.1, dt=1e-3)
    r = sensitivity("five-bar", method="adjoint", simulation=sim)   # its grid, by name
    # 1e-13: a kept state against its re-evaluation (test_kept_states_equal_a_re_evaluation)
    np.testing.assert_allclose(r.gradient, ref.gradient, rtol=1e-13, atol=0)


def test_bad_sensitivity_arguments_are_refused():
    """A zero difference step gave a NaN gradient with only a RuntimeWarning, a negative
    memory budget and a repeated parameter were accepted: each is refused before any
    work."""
    cm = catalog.load("five-bar").compile()
    kw = dict(t_end=0.05, dt=1e-3)
    for bad in (0.0, -1e-5, float("nan")):
        with pytest.raises(ValueError, match="fd_step must be a positive number"):
            sensitivity(cm, method="fd", fd_step=bad, **kw)
    with pytest.raises(ValueError, match="memory_limit_mb must be a positive number"):
        sensitivity(cm, memory_limit_mb=-5, **kw)
    with pytest.raises(ModelError, match="parameter 'k1' is listed twice"):
        sensitivity(cm, parameters=["k1", "mA1", "k1"], **kw)


def test_bench_sensitivity_smoke(tmp_path):
    """`workbench bench sensitivity` on short runs: every row is measured (on all threads
    and on one) and written."""
    import json

    from workbench.apps.bench import bench_sensitivity
    lines = []
    rows = bench_sensitivity(t_end=0.05, chain_t_end=0.02, out=str(tmp_path),
                             echo=lines.append, repeat=1)
    assert [r.n_parameters for r in rows] == [5, 5, 50]
    for r in rows:
        assert r.direct_sweep_s > 0.0 and r.adjoint_sweep_s > 0.0
        assert r.simulation_s > 0.0 and r.fd_s > 0.0
        assert r.threads >= 1 and r.direct_1thread_s > 0.0 and r.adjoint_1thread_s > 0.0
    assert any("1 thread" in line for line in lines)
    data = json.loads((tmp_path / "bench.json").read_text())
    assert len(data["rows"]) == 3 and "adjoint_sweep" in data["rows"][0]["ratios"]
    assert any("five-bar simulation" in line for line in lines)
