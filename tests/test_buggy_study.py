"""The buggy suspension study (issue 5): every design starts from its own static
equilibrium with the exact derivative of that start, static responses (ride height,
suspension travel) with exact gradients, the OpenMDAO components on the buggy against
OpenMDAO's own differences, and a shortened study end to end with both optimizers."""

from __future__ import annotations

import json

import numpy as np
import openmdao.api as om
import pytest
from openmdao.utils.assert_utils import assert_check_partials

from components import MultibodyResponse, StaticResponse, fd_partials_declared
from studies.builtin import TRAVEL_LIMIT, buggy_suspension, suspension_statics
from studies.core import constraint_bounds, run_study, violation
from workbench import equilibrium
from workbench.apps import vehicle
from workbench.errors import ModelError
from workbench.model import catalog
from workbench.objectives import point_velocity
from workbench.sensitivities.driver import sensitivity
from workbench.statics import static_responses

PARAMS = ["kf", "cf", "kr", "cr", "mc"]
# the front axle starts 0.9 m before the step (5.5 m); at 3 m/s the front wheels cross
# the smoothed edge at ~0.3 s, so 0.45 s holds the front impact (see test_buggy.py)
X0, T_STEP = 4.6, 0.45


def _rel(a, b):
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def test_each_design_starts_from_its_own_equilibrium_with_the_exact_gradient():
    cm = catalog.load("buggy-step", x0=X0).compile()
    assert cm.initial_state == "equilibrium"
    kw = dict(parameters=PARAMS, t_end=T_STEP)
    D = sensitivity(cm, method="direct", **kw)
    A = sensitivity(cm, method="adjoint", **kw)
    F = sensitivity(cm, method="fd", **kw)
    # the run starts at the equilibrium of this design, solved independently here
    soft = cm.with_parameters({"kf": 15000.0})
    for c, sim in ((cm, D.simulation), (soft, sensitivity(soft, method="direct",
                                                         **kw).simulation)):
        np.testing.assert_allclose(sim.zi[0], equilibrium(c).zi, rtol=0, atol=1e-12)
    assert D.psi[0] > 1e-3                                     # the step was felt
    # 1e-9: the same linear recursion forward and transposed backward (measured 1e-14)
    assert _rel(A.gradient, D.gradient) < 1e-9
    # 1e-5 per entry: central differences (relative step 1e-5, Newton and equilibrium
    # converged far below) of re-equilibrated designs; measured 2e-9 .. 7e-7
    np.testing.assert_allclose(F.gradient, D.gradient, rtol=1e-5, atol=0)
    # holding the nominal equilibrium fixed is the same psi but a different derivative:
    # the start's sensitivity is a first-order part of the gradient here
    fixed = sensitivity(vehicle.prepare("buggy-step", parameters={"x0": X0}).compile(),
                        method="adjoint", **kw)
    np.testing.assert_allclose(fixed.psi, D.psi, rtol=1e-8)
    assert _rel(fixed.gradient, D.gradient) > 1e-2


def test_checkpointed_adjoint_from_the_equilibrium_start():
    cm = catalog.load("buggy-step", x0=X0).compile()
    kw = dict(parameters=PARAMS, t_end=0.35)
    A = sensitivity(cm, method="adjoint", **kw)
    C = sensitivity(cm, method="adjoint", checkpoint_steps=60, **kw)
    assert C.timings["segments"] > 1
    # 1e-12: bit-identical segment re-runs, only the summation order differs
    assert _rel(C.gradient, A.gradient) < 1e-12


def test_static_responses_and_their_exact_gradient():
    resp = suspension_statics()
    cm = catalog.load("buggy-step").compile()
    E = static_responses(cm, resp, PARAMS)
    F = static_responses(cm, resp, PARAMS, method="fd")
    # the free lengths L0f, L0r were tuned (their provenance) so that the nominal
    # equilibrium has the arms at their design angle within 1e-5 rad: travel ~ 0 up to
    # the small chassis pitch/heave of the equilibrium seen in the global vertical (< 1 mm)
    assert abs(E.values[1]) < 1e-3 and abs(E.values[2]) < 1e-3
    # ride height: with the arms at design, the chassis centre of mass sits at h_G (design,
    # tires unloaded) minus the tires' static deflection W / (4 k_t) (5.6 mm); 0.5 mm
    # covers the uneven front/rear load and the pitch
    P = {k: v.si_value for k, v in catalog.load("buggy-step").parameters.items()}
    from workbench.statics import total_weight
    drop = total_weight(cm) / (4 * P["k_t"])
    assert abs(E.values[0] - (P["h_G"] - drop)) < 5e-4
    # 1e-6 of each response's largest entry: central differences with relative step 1e-6
    # of equilibria solved to 1e-10 x weight (measured 2e-9)
    scale = np.max(np.abs(F.gradient), axis=1, keepdims=True)
    assert np.all(np.abs(E.gradient - F.gradient) <= 1e-6 * scale)
    j = {p: k for k, p in enumerate(PARAMS)}
    # physics: a heavier chassis sits lower and compresses both suspensions; a stiffer
    # front spring compresses the front less; dampers do not act statically
    assert E.gradient[0, j["mc"]] < 0 and E.gradient[1, j["mc"]] > 0 \
        and E.gradient[2, j["mc"]] > 0
    assert E.gradient[1, j["kf"]] < 0
    assert E.gradient[0, j["cf"]] == 0.0 and E.gradient[0, j["cr"]] == 0.0
    with pytest.raises(ModelError, match="positions"):
        static_responses(cm, [point_velocity("v", "chassis.G", "z", power=1)], PARAMS)


@pytest.fixture(scope="module")
def buggy_problem():
    p = om.Problem(reports=False)
    p.model.add_subsystem("step", MultibodyResponse(
        model=catalog.load("buggy-step", x0=X0).compile(), parameters=PARAMS,
        t_end=T_STEP), promotes=["*"])
    p.model.add_subsystem("static", StaticResponse(
        model="buggy-step", responses=suspension_statics(), parameters=PARAMS),
        promotes=["*"])
    p.setup()
    p.run_model()
    return p


def test_buggy_components_partials_match_differences(buggy_problem):
    data = buggy_problem.check_partials(out_stream=None, method="fd", form="central",
                                        step=1e-6, step_calc="rel")
    # 1e-5 relative: OpenMDAO's central differences (relative step 1e-6) of a simulation
    # whose Newton iterations stop at 1e-10 and of equilibria solved to 1e-10 x weight;
    # 1e-12 absolute for the damper entries of the static responses (exactly zero)
    assert_check_partials(data, atol=1e-12, rtol=1e-5)
    assert fd_partials_declared(buggy_problem) == []


@pytest.mark.parametrize("optimizer", ["SLSQP", "L-BFGS-B"])
def test_shortened_buggy_study_end_to_end(tmp_path, optimizer):
    spec = buggy_suspension(t_end=T_STEP, x0=X0, dlc_t_end=2.7)
    s = run_study(spec, optimizer, out=tmp_path, maxiter=40,
                  compare_fd=False, echo=lambda *a: None)
    assert s["success"] is True and s["objective_final"] < s["objective_initial"]
    for nm, (lo, hi) in spec.bounds.items():
        assert lo - 1e-9 * abs(lo) <= s["design_final"][nm] <= hi + 1e-9 * abs(hi)
    cb = constraint_bounds(spec)
    assert cb["static_front_travel"] == (-TRAVEL_LIMIT, TRAVEL_LIMIT)
    if optimizer == "SLSQP":
        # SLSQP's own feasibility tolerance is ~1e-8 in scaled units (ref = |bound|)
        for r, b in cb.items():
            assert violation(b, s["responses_final"][r]) <= 1e-6 * max(
                abs(b[0] or 0), abs(b[1] or 0)), r
    d = tmp_path / "buggy-suspension"
    summary = json.loads((d / "summary.json").read_text())
    assert summary["success"] is True
    cases = om.CaseReader(str(d / "cases.db")).get_cases("driver", recurse=False)
    assert len(cases) >= 2
    if optimizer == "SLSQP":                           # recorded as a constraint
        assert "static_front_travel" in cases[-1].outputs
    text = (d / "report.md").read_text()
    assert "Gradient check" in text and "RECONSTRUCTION" in text
    # the gradient check at the optimum covers the dynamic and the static responses
    rows = {}
    for g in s["gradient_check"]:
        rows.setdefault(g["response"], []).append((g["analytic"], g["fd"]))
    assert {"step_psi", "dlc_psi", "static_ride_height"} <= set(rows)
    for r, pairs in rows.items():
        an, fd = np.array(pairs).T
        # 1e-4 of the row's largest entry: central differences of the simulation or
        # equilibrium (an interior optimum has near-zero entries, so not per entry)
        assert np.max(np.abs(an - fd)) <= 1e-4 * np.max(np.abs(fd)), r
