"""General coupled loops (GCL, seed 004 eqs 103-111): loops that share frames but have
**different bases**, eliminated loop after loop in one group whose base is the topmost of
theirs (:func:`workbench.formulations.rcr.topology.loop_structure`), against the same two
independent references as ``test_rcr_loops.py``:

* the null-space solve (random spatial loops coupled on different bases);
* Matrix-R (the seed's five-bar re-topologised with a fictitious joint, ladders).

Tolerances are those of ``test_rcr_loops.py`` (its module docstring): 1e-10 relative on the
accelerations of models with ``cond(N^T M N) < 1e5`` (asserted), and for trajectories the
agreement of two solutions of the same discrete equations, each converged to the Newton
tolerance 1e-10 of the step: 1e-9 over the run, about ten times what was measured.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import random_unit
from test_rcr_loops import (TOL, check_closure, check_loop, close_where_they_meet, closure_terms,
                            matrix_r_reference, null_space_reference, random_parts)

import workbench as wb
from workbench.errors import OptionError
from workbench.formulations.rcr import LoopSolver
from workbench.formulations.rcr.models import FIVE_BAR_Q0, five_bar, five_bar_gcl, ladder
from workbench.formulations.rcr.topology import describe, loop_paths
from workbench.model.builder import Model
from workbench.model.elements import GROUND

#: trajectories of two solutions of the same discrete equations (module docstring)
TRAJ_TOL = 1e-9


def coupled_on_two_bases(seed, nc=4):
    """An outer spatial loop (a chain ``a0 .. a5`` of R/P joints closed to the ground by a
    revolute cut, base ground) and an inner loop from its body ``a1`` (a branch ``c0 ..
    c3`` closed by a spherical cut onto ``a4``): the inner loop's base is ``a1`` and it
    shares the frames ``a2 .. a4`` with the outer loop.  ``(model, z)``, ``z`` consistent."""
    rng = np.random.default_rng(seed)
    m = Model(f"coupled-{seed}", gravity=tuple(9.81 * random_unit(rng)))
    body, joint = random_parts(m, rng)
    parent = GROUND
    for i in range(6):
        body(f"a{i}")
        joint(f"ja{i}", parent, f"a{i}", "revolute" if i == 0 else None)
        parent = f"a{i}"
    parent = "a1"
    for i in range(nc):
        body(f"c{i}")
        joint(f"jc{i}", parent, f"c{i}", "revolute")
        parent = f"c{i}"
    m.joint_spring("spr", "jc1", k=12.0, c=0.5, q0=0.1)
    return m, close_where_they_meet(m, rng, [("outer", "a5", GROUND, "revolute"),
                                             ("inner", f"c{nc - 1}", "a4", "spherical")])


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("dependents", ["auto", "given"])
def test_coupled_loops_on_different_bases_match_the_null_space_solve(seed, dependents):
    model, z = coupled_on_two_bases(seed)
    given = [f"ja{i}" for i in range(1, 6)] + ["jc1", "jc2", "jc3"]
    cm, solver, _ = check_loop(model, z, seed, given if dependents == "given" else "auto")
    # one group (the loops share a2 .. a4) from the topmost base, the ground; the inner
    # loop's own paths start at its base a1 (frames a2 .. a4 and c0 .. c3 only)
    (g,) = describe(cm, solver.structure)
    assert g["base"] == -1 and g["chain"] == ["ja0"] and g["outboard"] == ["jc0"]
    assert g["dependents"] == [given[:5], given[5:]]
    # the position and velocity problems close both loops from a perturbed guess
    rng = np.random.default_rng(seed)
    zg = z.copy()
    zg[solver.dependent] += 0.02 * rng.uniform(-1.0, 1.0, solver.dependent.size)
    z2, zd2, zdd2 = solver.solve(0.1, zg, rng.uniform(-1.0, 1.0, cm.n))
    Jc, _ = closure_terms(cm, 0.1, z2, zd2)
    assert np.abs(Jc @ zd2).max() < 1e-12 * np.abs(Jc).max() * np.abs(zd2).max()
    ref, cond = null_space_reference(cm, 0.1, z2, zd2)
    assert cond < 1e5
    assert np.abs(zdd2 - ref).max() / np.abs(ref).max() < TOL


def test_coupled_loops_whose_trailing_sets_overlap_are_refused_by_name():
    # the default (trailing) dependents of the inner loop are the outer loop's: a typed
    # error naming the coordinate, not a wrong answer
    model, z = coupled_on_two_bases(1)
    with pytest.raises(OptionError, match="ja"):
        LoopSolver(model.compile(), None, z0=z)


def _five_bar_coords(cm):
    return [cm.coord_names.index(f"q{i}") for i in range(1, 6)]


def test_five_bar_gcl_splits_the_singular_pair_over_two_loops_on_different_bases():
    cm = five_bar_gcl().compile()
    assert cm.dof_names == ("q1", "q4")
    solver = LoopSolver(cm, [c for c in cm.coord_names if c not in cm.dof_names])
    (g,) = describe(cm, solver.structure)
    # loop "fict" (base rod 3) owns the fictitious joint, loop "weld" (base ground) the
    # seed's ACS set; q1 is the chain, q4 the fictitious loop's independent
    assert g["base"] == -1 and g["chain"] == ["q1"] and g["outboard"] == ["q4"]
    assert g["dependents"] == [["Fr", "Fy", "Fx"], ["q2", "q3", "q5"]]
    ptr, fr = loop_paths(cm, solver.structure)
    rod3 = cm.arrays.b_frame[cm.body_names.index("rod3")]
    fict = set(fr[ptr[0]:ptr[1]].tolist())
    assert rod3 not in fict       # the fictitious loop's paths start below its base, rod 3
    # the accelerations equal Matrix-R's on the plain five-bar, at rest and moving
    ref_cm = five_bar().compile()
    idx = _five_bar_coords(cm)
    for zi, zdi in (([FIVE_BAR_Q0[0], FIVE_BAR_Q0[3]], [0.0, 0.0]), ([0.9, 0.2], [1.1, -0.7])):
        z5, zd5, ref, cond = matrix_r_reference(ref_cm, zi, zdi)
        assert cond < 1e5
        zg = np.asarray(cm.z_guess, dtype=float)
        zg[idx] = z5
        zfull = zg.copy()
        zdfull = np.zeros(cm.n)
        zdfull[idx] = zd5
        z, zd, zdd = solver.solve(0.0, zfull, zdfull)
        assert np.abs(z[idx] - z5).max() < 1e-10 and np.abs(zd[idx] - zd5).max() < 1e-10
        err = np.abs(zdd[idx] - ref).max() / np.abs(ref).max()
        assert err < TOL, f"five-bar GCL: relative difference {err:.2e}"
        check_closure(cm, 0.0, z, zd, zdd)


def test_five_bar_gcl_run_equals_matrix_r():
    # the seed's "GCL run": formulation "rcr" on the re-topologised model against Matrix-R
    # on the plain five-bar, same trapezoidal rule and step (0.6 s: Matrix-R's DOF (q1, q4)
    # meet a singular Theta_z at 0.71 s)
    gcl = wb.simulate(five_bar_gcl(), 0.6, 1e-3, formulation="rcr")
    ref = wb.simulate(five_bar(), 0.6, 1e-3, formulation="sr-origin")
    idx = _five_bar_coords(five_bar_gcl().compile())
    assert np.abs(ref.z - ref.z[0]).max() > 0.5            # it moves
    assert np.abs(gcl.z[:, idx] - ref.z).max() < TRAJ_TOL
    # Matrix-R on the fictitious model: the same mechanism (X moves as rod 4)
    mr = wb.simulate(five_bar_gcl(), 0.6, 1e-3, formulation="sr-origin")
    assert np.abs(mr.z[:, idx] - ref.z).max() < 1e-12


@pytest.mark.parametrize("tree", ["rung", "ground"])
def test_ladder_runs_in_rcr_as_in_matrix_r(tree):
    N = 4
    cm = ladder(N, tree=tree).compile()
    solver = LoopSolver(cm, [c for c in cm.coord_names if c not in cm.dof_names])
    groups = describe(cm, solver.structure)
    if tree == "rung":
        # nested loops: one group per cell, based on the rung below, chain l(k), no dense
        # solve
        assert len(groups) == N
        assert [g["chain"] for g in groups] == [[f"l{k}"] for k in range(1, N + 1)]
        assert all(g["outboard"] == [] for g in groups)
    else:
        # fundamental loops through the ground: one group, every l(k) outboard
        (g,) = groups
        assert g["chain"] == [] and g["outboard"] == [f"l{k}" for k in range(1, N + 1)]
    a = wb.simulate(ladder(N, tree=tree), 0.5, 1e-3, formulation="rcr")
    b = wb.simulate(ladder(N, tree=tree), 0.5, 1e-3, formulation="sr-origin")
    assert np.abs(b.z - b.z[0]).max() > 0.05                # it sways
    assert np.abs(a.z - b.z).max() < TRAJ_TOL


def test_a_bad_ladder_tree_is_an_option_error():
    with pytest.raises(OptionError, match="tree"):
        ladder(3, tree="left")
    with pytest.raises(OptionError, match="cells"):
        ladder(0)


def test_bench_scaling_times_both_ladder_trees(tmp_path, capsys):
    # a small run of `workbench bench scaling --families ladder,ladder-ground` (the study is
    # a measurement, docs/rcr.md): both trees give Matrix-R's accelerations
    import csv

    from workbench.apps.cli import main

    rc = main(["bench", "scaling", "--families", "ladder,ladder-ground", "--sizes", "2,4",
               "--repeat", "1", "--out", str(tmp_path)])
    assert rc == 0
    assert "ladder-ground" in capsys.readouterr().out
    with open(tmp_path / "scaling.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["family"], int(r["n"]), int(r["m"]), int(r["d"])) for r in rows] == [
        ("ladder", 6, 4, 2), ("ladder", 12, 8, 4), ("ladder-ground", 6, 4, 2),
        ("ladder-ground", 12, 8, 4)]
    assert all(float(r["rel_diff"]) < 1e-12 and float(r["rel_diff_full"]) < 1e-10
               for r in rows)


def test_five_bar_gcl_stops_with_a_typed_error_at_its_singular_configuration():
    # past 1.5 s the five-bar reaches a configuration where the closures are singular for
    # the dependents (q2, q3, q5); the run stops with a SimulationError naming the time
    # (a regression: the merged-step branch raised an UnboundLocalError)
    from workbench.errors import SimulationError

    with pytest.raises(SimulationError) as info:
        wb.simulate(five_bar_gcl(), 2.0, 1e-3, formulation="rcr")
    assert info.value.time is not None and 0.7 < info.value.time < 2.0


@pytest.mark.parametrize("name, build", [("rcr-five-bar", five_bar),
                                         ("rcr-five-bar-gcl", five_bar_gcl)])
def test_the_catalog_five_bars_are_the_models_of_the_rcr_study(name, build):
    # the shipped files are written from workbench/formulations/rcr/models.py: same arrays
    from workbench.model import catalog

    a = catalog.load(name).compile()
    b = build().compile()
    assert a.coord_names == b.coord_names and a.dof_names == b.dof_names
    assert np.array_equal(a.arrays.p, b.arrays.p)
    assert np.array_equal(np.asarray(a.z_guess), np.asarray(b.z_guess))
    assert catalog.describe(name)["reconstruction"] is True


def test_reproduce_rcr_quick_writes_the_five_bar_and_n_four_bar_report(tmp_path, capsys):
    # `workbench reproduce rcr --quick` (the N-four-bar over 2 s): files, the seed's
    # breakdown named, ACS and GCL runs equal to Matrix-R (TRAJ_TOL, module docstring)
    import csv

    from workbench.apps.cli import main

    assert main(["reproduce", "rcr", "--quick", "--out", str(tmp_path)]) == 0
    d = tmp_path / "rcr"
    for f in ("five_bar.csv", "summary.csv", "fig7.png", "report.md"):
        assert (d / f).stat().st_size > 100
    with open(d / "summary.csv") as fh:
        diff = {r["case"]: float(r["max_abs_diff"]) for r in csv.DictReader(fh)}
    assert diff["five-bar ACS (rcr) vs Matrix-R"] < TRAJ_TOL
    assert diff["five-bar GCL (rcr, fictitious joint) vs Matrix-R"] < TRAJ_TOL
    assert diff["N-four-bar rcr vs sr-origin, before the first crossing"] < TRAJ_TOL
    text = (d / "report.md").read_text()
    assert "'q4'" in text and "RECONSTRUCTION" in text
