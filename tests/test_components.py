"""OpenMDAO components and studies: analytic partials against OpenMDAO's own differences,
totals of an assembled problem, analysis errors, no finite-difference partials in the
product, and the five-bar design study from its CLI entry."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import openmdao.api as om
import pytest
from openmdao.utils.assert_utils import assert_check_partials, assert_check_totals

from components import MultibodyResponse, MultibodyResponseMatrixFree, fd_partials_declared
from workbench.model import catalog

T_END = 0.3   # short runs: the derivative checks do not need the 5 s benchmark horizon


@pytest.fixture(scope="module", params=[MultibodyResponse, MultibodyResponseMatrixFree])
def problem(request):
    p = om.Problem(reports=False)
    p.model.add_subsystem("fb", request.param(model="five-bar", t_end=T_END, dt=1e-3),
                          promotes=["*"])
    p.model.add_subsystem("obj", om.ExecComp("J = psi1 + 0.1 * psi2 + 0.001 * psi3"),
                          promotes=["*"])
    for nm in ("Ls1", "Ls2", "mA1", "xA1G", "LA1"):
        p.model.add_design_var(nm)
    p.model.add_objective("J")
    p.setup()
    p.run_model()
    return p


def test_partials_match_differences_of_the_component(problem):
    data = problem.check_partials(out_stream=None, method="fd", form="central", step=1e-6,
                                  step_calc="rel")
    # 1e-6 relative: central differences with a relative step of 1e-6 of a simulation
    # converged to 1e-10 are accurate to ~1e-7 (measured agreement 1e-8 to 1e-10)
    assert_check_partials(data, atol=1e-6, rtol=1e-6)


def test_totals_of_an_assembled_problem(problem):
    data = problem.check_totals(out_stream=None, method="fd", form="central", step=1e-6,
                                step_calc="rel")
    # same reasoning as the partials: 1e-6 relative
    assert_check_totals(data, atol=1e-6, rtol=1e-6)


def test_no_finite_difference_partials_in_the_product(problem):
    assert fd_partials_declared(problem) == []
    src = Path(__file__).resolve().parents[1] / "components"
    for f in src.glob("*.py"):
        text = f.read_text()
        for bad in ("method='fd'", 'method="fd"', "method='cs'", 'method="cs"',
                    "approx_partials", "approx_totals"):
            assert bad not in text, f"{f.name} uses {bad}"


def test_method_auto_picks_adjoint_for_more_parameters_than_responses():
    comp = MultibodyResponse(model="five-bar", t_end=T_END)
    p = om.Problem(reports=False)
    p.model.add_subsystem("fb", comp)
    p.setup()
    assert comp._method() == "adjoint"            # 5 parameters, 3 responses
    comp2 = MultibodyResponse(model="five-bar", parameters=["Ls1"], t_end=T_END)
    p2 = om.Problem(reports=False)
    p2.model.add_subsystem("fb", comp2)
    p2.setup()
    assert comp2._method() == "direct"            # 1 parameter, 3 responses


def test_failed_simulation_is_an_analysis_error():
    p = om.Problem(reports=False)
    p.model.add_subsystem("fb", MultibodyResponse(model="five-bar", t_end=T_END),
                          promotes=["*"])
    p.setup()
    p.set_val("LA1", 40.0)          # bar A1 far too long: the loop cannot be assembled
    with pytest.raises(om.AnalysisError, match="fb"):
        p.run_model()


def test_with_parameters_keeps_the_other_overrides():
    cm = catalog.load("five-bar").compile({"mA1": 4.0})
    cm2 = cm.with_parameters({"Ls1": 2.5})
    vals = dict(zip(cm2.param_names, cm2.param_values))
    assert vals["mA1"] == 4.0 and vals["Ls1"] == 2.5


@pytest.mark.parametrize("optimizer", ["SLSQP", "L-BFGS-B"])
def test_five_bar_study_from_the_cli(tmp_path, optimizer):
    from workbench.apps.cli import main
    args = ["study", "five-bar-design", "--optimizer", optimizer, "--out", str(tmp_path),
            "--t-end", "0.5", "--maxiter", "15"]
    if optimizer == "L-BFGS-B":
        args.append("--no-fd-comparison")
    assert main(args) == 0
    d = tmp_path / "five-bar-design"
    s = json.loads((d / "summary.json").read_text())
    assert s["success"] is True and s["objective_final"] < s["objective_initial"]
    for k in ("optimizer", "iterations", "design_initial", "design_final", "wall_time_s"):
        assert k in s
    cr = om.CaseReader(str(d / "cases.db"))
    cases = cr.get_cases("driver", recurse=False)
    assert len(cases) >= 2
    if optimizer == "SLSQP":
        fd = s["fd_comparison"]
        # the analytic run needs fewer simulations (one per design, gradient included)
        assert fd["simulations"] > s["simulations"]
    # the report is regenerated from the recording alone
    (d / "report.md").unlink()
    assert main(["report", str(d / "cases.db")]) == 0
    text = (d / "report.md").read_text()
    assert "Gradient check" in text and "RECONSTRUCTION" in text
    assert (d / "report.html").stat().st_size > 0 and (d / "history.png").exists()


def test_multistart_on_a_local_dask_cluster(tmp_path):
    """Two Latin-hypercube starts on two local Dask worker processes, each with its own
    recording; the ranking is written."""
    from workbench.apps.cli import main
    assert main(["study", "five-bar-design", "--optimizer", "SLSQP", "--out", str(tmp_path),
                 "--t-end", "0.3", "--maxiter", "5", "--starts", "2", "--workers", "2"]) == 0
    d = tmp_path / "five-bar-design"
    ranked = json.loads((d / "starts.json").read_text())
    assert sorted(r["start"] for r in ranked) == [0, 1]
    finals = [r["objective_final"] for r in ranked if r["success"]]
    assert finals == sorted(finals)
    for k in (0, 1):
        assert len(om.CaseReader(str(d / f"start-{k}" / "cases.db")).get_cases("driver")) >= 1
    assert "| 1 |" in (d / "starts.md").read_text()


def test_global_formulation_component_equals_the_semi_recursive_one():
    """`formulation="global"` is selectable in the components (and so in `workbench study
    --formulation global`): same responses and same analytic partials as SR-I."""
    out = {}
    for form in ("sr-com", "global"):
        p = om.Problem(reports=False)
        p.model.add_subsystem("fb", MultibodyResponse(model="five-bar", t_end=0.1, dt=1e-3,
                                                      formulation=form), promotes=["*"])
        p.setup()
        p.run_model()
        J = p.compute_totals(of=["psi1", "psi3"], wrt=["Ls1", "LA1"], return_format="array")
        out[form] = (np.array([p.get_val("psi1")[0], p.get_val("psi3")[0]]), J)
        sims = [v[1] for v in p.model.fb._wb_sims.values()]
        assert sims and all(s.formulation == form for s in sims)
    # 1e-8: the two formulations solve the same discrete equations (Newton tolerance 1e-10)
    np.testing.assert_allclose(out["global"][0], out["sr-com"][0], rtol=1e-8)
    np.testing.assert_allclose(out["global"][1], out["sr-com"][1], rtol=1e-7, atol=1e-12)
