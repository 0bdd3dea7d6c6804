"""RCR for closed loops (seed 004 eqs 23-102, workbench/formulations/rcr/loops.py) against
two independent references:

* the **null-space solve** of the same model (random spatial R/P loops, the planar loop in
  3-D): ``M`` and ``tau0 = -Q`` of the open tree (SR-II,
  :func:`~workbench.formulations.semirecursive.matrixr.full_dynamics_terms`), the closure
  Jacobian ``Phi_z`` and accelerations ``kappa`` at ``zdd = 0`` of the kernels, then
  ``zdd = zp + N y`` with ``Phi_z zp = -kappa`` (least squares: redundant rows are
  allowed), ``N`` an SVD null-space basis and ``(N^T M N) y = -N^T (tau0 + M zp)``;
* the **Matrix-R** solution ``zdd_b + R a`` of
  :func:`~workbench.formulations.semirecursive.matrixr.evaluate_state` (N-four-bar,
  five-bar), which also solves the position and velocity problems that give the state.

Tolerances.  Both sides are backward stable solves of the same equations, so their
difference is bounded by the condition of the reduced problem times the rounding of
O(n) 6 x 6 passes.  The models below have ``cond(N^T M N)`` below about 1e4 (asserted where
it is computed), so 1e-10 relative leaves a margin of about 100.  The acceleration closure
``Phi_z zdd + kappa`` is checked relative to ``|Phi_z| |zdd| + |kappa|`` at 1e-12 (it is
enforced by the dependent elimination, exactly up to rounding).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import inertia_tuple, random_inertia, random_rotation, random_unit

import workbench as wb
from workbench.errors import OptionError, SingularConfigurationError
from workbench.formulations.rcr import LoopSolver, loop_accelerations
from workbench.formulations.rcr.models import FIVE_BAR_Q0, five_bar
from workbench.formulations.rcr.topology import describe
from workbench.formulations.semirecursive import matrixr as MR
from workbench.kernels import tree as K
from workbench.model import catalog
from workbench.model.builder import Model
from workbench.model.elements import GROUND

#: relative difference allowed against the references (see the module docstring)
TOL = 1e-10
#: relative residual of the acceleration closure
CLOSURE_TOL = 1e-12


def _kinematics(cm, z, zd=None):
    ma = cm.arrays
    n = cm.n
    ws = MR.make_workspace(ma, n)
    K.frame_positions(ma, ma.p, z, ws.A, ws.r, ws.u)
    K.joint_columns(ma, ws.r, ws.u, ws.bcol)
    if zd is not None:
        K.frame_velocities(ma, zd, ws.bcol, ws.Z)
        K.frame_accelerations(ma, zd, np.zeros(n), ws.r, ws.u, ws.bcol, ws.Z, ws.Zd)
    return ws


def closure_terms(cm, t, z, zd):
    """``Phi_z`` and the closure accelerations ``kappa`` at ``zdd = 0``."""
    ma = cm.arrays
    ws = _kinematics(cm, z, zd)
    m = ma.c_type.shape[0]
    Jc = np.zeros((m, cm.n))
    K.constraint_jacobian(ma, ma.p, ws.A, ws.r, ws.bcol, cm.n, Jc)
    kappa = np.zeros(m)
    K.constraints(ma, ma.p, t, z, zd, np.zeros(cm.n), ws.A, ws.r, ws.Z, ws.Zd, 2, kappa)
    return Jc, kappa


def null_basis(Jc, tol=1e-9):
    _, s, Vt = np.linalg.svd(Jc)
    rank = int((s > tol * s.max()).sum())
    return Vt[rank:].T, rank


def null_space_reference(cm, t, z, zd):
    """``(zdd, cond)``: the constrained accelerations by the null-space method."""
    ma = cm.arrays
    M, tau0 = MR.full_dynamics_terms(ma, ma.p, 1, t, z, zd, np.zeros(cm.n))
    Jc, kappa = closure_terms(cm, t, z, zd)
    zp = np.linalg.lstsq(Jc, -kappa, rcond=None)[0]
    N, _ = null_basis(Jc)
    Mr = N.T @ M @ N
    y = np.linalg.solve(Mr, -N.T @ (tau0 + M @ zp))
    return zp + N @ y, np.linalg.cond(Mr)


def check_closure(cm, t, z, zd, zdd):
    Jc, kappa = closure_terms(cm, t, z, zd)
    res = np.abs(Jc @ zdd + kappa).max()
    scale = np.abs(Jc).max() * np.abs(zdd).max() + np.abs(kappa).max()
    assert res < CLOSURE_TOL * scale, f"acceleration closure residual {res / scale:.2e}"


def random_parts(m, rng):
    """``body(name)`` and ``joint(name, parent, child, kind=None)``, adding to ``m`` a body
    of random mass, centre of mass and full inertia, and a joint (random R/P when ``kind`` is
    None) at random places with a random axis, orientation and initial value."""
    def body(name):
        m.body(name, mass=float(rng.uniform(0.5, 2.0)), com=tuple(rng.uniform(-0.4, 0.4, 3)),
               inertia=inertia_tuple(random_inertia(rng)))

    def joint(name, parent, child, kind=None):
        kind = kind or ("prismatic" if rng.uniform() < 0.3 else "revolute")
        m.joint(name, kind, parent, child, parent_point=tuple(rng.uniform(-0.5, 0.5, 3)),
                child_point=tuple(rng.uniform(-0.3, 0.3, 3)), axis=tuple(random_unit(rng)),
                orientation=random_rotation(rng), q0=float(rng.uniform(-0.8, 0.8)))

    return body, joint


def close_where_they_meet(m, rng, cuts, axes=True):
    """Add to ``m`` the cut joints ``(name, body1, body2, type)``, each at a random point of
    ``body1`` where ``body2`` is at the model's initial guess (with ``axes``, about a random
    axis, the same in both bodies there); returns that guess, a consistent configuration."""
    cm0 = m.compile()
    ws = _kinematics(cm0, np.asarray(cm0.z_guess, dtype=float))
    ma = cm0.arrays

    def pose(b):
        if b == GROUND:
            return np.eye(3), np.zeros(3)
        bi = cm0.body_names.index(b)
        f = ma.b_frame[bi]
        return ws.A[f], ws.r[f] + ws.A[f] @ ma.p[ma.b_org[bi]:ma.b_org[bi] + 3]

    for name, b1, b2, kind in cuts:
        A1, o1 = pose(b1)
        A2, o2 = pose(b2)
        p1 = rng.uniform(-0.5, 0.5, 3)
        x = o1 + A1 @ p1
        if axes:
            a1 = random_unit(rng)
            m.cut(name, kind, b1, b2, point1=tuple(p1), point2=tuple(A2.T @ (x - o2)),
                  axis1=tuple(a1), axis2=tuple(A2.T @ (A1 @ a1)))
        else:
            m.cut(name, kind, b1, b2, point1=tuple(p1), point2=tuple(A2.T @ (x - o2)))
    return np.asarray(cm0.z_guess, dtype=float)


def random_loop(seed, cut="revolute", nA=5, nB=0, moving_base=False, side=False):
    """A random spatial loop of revolute and prismatic joints (``(model, z)`` with ``z`` a
    consistent configuration): branch A of ``nA`` bodies and branch B of ``nB`` bodies
    from the base (ground, or with ``moving_base`` a body on a revolute joint), closed by a
    cut joint of type ``cut`` between the last body of A and the last of B (or the base),
    placed where the two meet at the random configuration.  ``side``: extra bodies hanging
    from a loop body and from the base (tree branches off the loop).  Random axes, joint
    places, orientations, masses, centres of mass, full inertia tensors, gravity, a joint
    spring-damper and an applied force."""
    rng = np.random.default_rng(seed)
    m = Model(f"loop-{seed}", gravity=tuple(9.81 * random_unit(rng)))

    def body(name):
        m.body(name, mass=float(rng.uniform(0.5, 2.0)), com=tuple(rng.uniform(-0.4, 0.4, 3)),
               inertia=inertia_tuple(random_inertia(rng)),
               points={"tip": tuple(rng.uniform(-0.5, 0.5, 3))})

    def joint(name, parent, child, kind=None):
        kind = kind or ("prismatic" if rng.uniform() < 0.3 else "revolute")
        m.joint(name, kind, parent, child,
                parent_point=tuple(rng.uniform(-0.5, 0.5, 3)) if parent != GROUND
                else (0.0, 0.0, 0.0), child_point=tuple(rng.uniform(-0.3, 0.3, 3)),
                axis=tuple(random_unit(rng)), orientation=random_rotation(rng),
                q0=float(rng.uniform(-0.8, 0.8)), qd0=0.0)

    root = GROUND
    if moving_base:
        body("base")
        joint("jbase", GROUND, "base", "revolute")
        root = "base"
    ends = []
    for br, nb in (("a", nA), ("b", nB)):
        parent = root
        for i in range(nb):
            body(f"{br}{i}")
            joint(f"j{br}{i}", parent, f"{br}{i}", "revolute" if i == 0 else None)
            parent = f"{br}{i}"
        ends.append(parent)
    if side:
        body("s0")
        joint("js0", "a1", "s0")
        body("s1")
        joint("js1", root, "s1")
    m.joint_spring("spr", "ja1", k=12.0, c=0.5, q0=0.1)
    m.force("push", "a2", "tip", (0.5, -1.0, 0.3), 2.0)
    # place the cut where the two sides meet at the initial configuration
    return m, close_where_they_meet(m, rng, [("cut", ends[0], ends[1], cut)])


def consistent_state(cm, z, seed):
    """Random velocities in the null space of ``Phi_z`` (a consistent state)."""
    Jc, _ = closure_terms(cm, 0.0, z, np.zeros(cm.n))
    N, _ = null_basis(Jc)
    rng = np.random.default_rng(seed)
    return N @ rng.uniform(-1.0, 1.0, N.shape[1])


def check_loop(model, z, seed, dependents=None, t=0.3):
    cm = model.compile()
    zd = consistent_state(cm, z, seed)
    ref, cond = null_space_reference(cm, t, z, zd)
    assert cond < 1e5, f"cond(N^T M N) = {cond:.1e}: tolerance not justified"
    solver = LoopSolver(cm, dependents, z0=z)
    zdd = solver.accelerations(t, z, zd)
    err = np.abs(zdd - ref).max() / np.abs(ref).max()
    assert err < TOL, f"{cm.name}: relative difference {err:.2e} (cond {cond:.1e})"
    check_closure(cm, t, z, zd, zdd)
    return cm, solver, zdd


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_spatial_chain_closed_to_ground(seed):
    # a serial R/P chain of 8 joints closed to the ground by a revolute cut: 5 rows, m = 5,
    # 3 degrees of freedom; the trailing 5 coordinates are the dependents (plain RCR)
    model, z = random_loop(seed, "revolute", nA=8)
    cm, solver, _ = check_loop(model, z, seed)
    (g,) = describe(cm, solver.structure)
    assert g["base"] == -1 and len(g["chain"]) == 3 and g["outboard"] == []
    assert g["dependents"] == [list(cm.coord_names[3:8])]


@pytest.mark.parametrize("seed", [4, 5])
def test_random_two_branch_loop_with_moving_base_and_side_branches(seed):
    # branches of 4 and 3 bodies from a body on a revolute joint (the base moves: the loop
    # merges into the tree recursion at its base), a spherical cut (m = 3), tree branches
    # hanging from a loop body and from the base
    model, z = random_loop(seed, "spherical", nA=4, nB=3, moving_base=True, side=True)
    cm, solver, _ = check_loop(model, z, seed)
    (g,) = describe(cm, solver.structure)
    assert g["base"] >= 0 and len(g["chain"]) >= 1


@pytest.mark.parametrize("seed", [6, 7])
def test_random_loop_with_a_weld_cut(seed):
    # 6 independent closure rows (m = 6) on a two-branch loop of 9 coordinates
    model, z = random_loop(seed, "fixed", nA=5, nB=4)
    check_loop(model, z, seed)


def test_acs_every_dependent_choice_gives_the_same_accelerations():
    # the accelerations are unique: trailing (plain RCR) and interleaved dependent sets
    # (ACS, outboard independents solved densely) must agree to rounding
    model, z = random_loop(11, "revolute", nA=9)
    cm = model.compile()
    names = cm.coord_names
    zd = consistent_state(cm, z, 11)
    ref, cond = null_space_reference(cm, 0.1, z, zd)
    assert cond < 1e5
    choices = [None, [1, 3, 5, 6, 8], [0, 1, 2, 3, 8], [2, 4, 5, 7, 8], [1, 2, 4, 6, 8]]
    for deps in choices:
        dn = None if deps is None else [names[i] for i in deps]
        solver = LoopSolver(cm, dn, z0=z)
        zdd = solver.accelerations(0.1, z, zd)
        err = np.abs(zdd - ref).max() / np.abs(ref).max()
        assert err < TOL, f"dependents {dn}: relative difference {err:.2e}"
        (g,) = describe(cm, solver.structure)
        if deps is not None:
            assert sorted(g["dependents"][0]) == sorted(dn)
        pivot, _ = solver.min_pivot
        assert 0.0 < pivot <= 1.0


def test_planar_loop_in_3d_has_redundant_closure_rows():
    # a planar four-bar (axes along z) in a spatial model closed by a revolute cut: 5 rows
    # of rank 2 (the rotation rows are implied); RCR picks m = 2 dependents by the rank
    m = Model("planar-four-bar-3d", gravity=(0.0, -9.81, 0.0))
    rng = np.random.default_rng(3)
    L = (0.4, 1.0, 0.8)
    for i, name in enumerate(("crank", "coupler", "rocker")):
        m.body(name, mass=1.0 + i, com=(0.5 * L[i], 0.05, 0.02),
               inertia=inertia_tuple(random_inertia(rng)), points={"tip": (L[i], 0, 0)})
    q = (1.2, -0.9, -1.4)
    m.revolute("j1", GROUND, "crank", axis=(0, 0, 1), q0=q[0])
    m.revolute("j2", "crank", "coupler", parent_point="tip", axis=(0, 0, 1), q0=q[1])
    m.revolute("j3", "coupler", "rocker", parent_point="tip", axis=(0, 0, 1), q0=q[2])
    a = np.cumsum(q)
    tip = sum(Li * np.array([np.cos(ai), np.sin(ai), 0.0]) for Li, ai in zip(L, a))
    m.cut("ground-pivot", "revolute", "rocker", GROUND, point1="tip",
          point2=tuple(float(v) for v in tip), axis1=(0, 0, 1))
    cm = m.compile()
    assert cm.arrays.c_type.shape[0] == 5
    z = np.array(q)
    cm, solver, _ = check_loop(m, z, 3)
    (g,) = describe(cm, solver.structure)
    assert g["dependents"] == [["j2", "j3"]] and g["chain"] == ["j1"]


def matrix_r_reference(cm, zi, zdi, t=0.0):
    ma = cm.arrays
    z = np.asarray(cm.z_guess, dtype=float).copy()
    ev = MR.evaluate_state(ma, ma.p, 1, t, np.asarray(zi, float), np.asarray(zdi, float), z,
                           1e-13, 50)
    assert ev.status == 0
    a = np.linalg.solve(ev.Mbar, ev.Qbar)
    return ev.z, ev.zd, ev.zddb + ev.R @ a, np.linalg.cond(ev.Mbar)


@pytest.mark.parametrize("N", [3, 40])
def test_n_four_bar_matches_matrix_r(N):
    # coupled loops sharing the cranks, one group with base ground, eliminated loop after
    # loop; 1 degree of freedom (the chain: pivot0)
    cm = catalog.load("n-four-bar", N=N).compile()
    z, zd, ref, cond = matrix_r_reference(cm, [0.4], [1.3])
    assert cond < 1e5
    solver = LoopSolver(cm)
    zdd = solver.accelerations(0.0, z, zd)
    err = np.abs(zdd - ref).max() / np.abs(ref).max()
    assert err < TOL, f"N = {N}: relative difference {err:.2e}"
    (g,) = describe(cm, solver.structure)
    assert g["chain"] == ["pivot0"] and len(g["dependents"]) == N
    check_closure(cm, 0.0, z, zd, zdd)


def test_five_bar_trailing_dependents_fail_and_acs_matches_matrix_r():
    cm = five_bar().compile()
    assert cm.coord_names == ("q1", "q2", "q3", "q4", "q5")
    z0 = np.array(FIVE_BAR_Q0)
    Jc, _ = closure_terms(cm, 0.0, z0, np.zeros(5))
    assert np.abs(Jc @ np.zeros(5)).max() == 0.0 and np.linalg.matrix_rank(Jc) == 3
    # plain RCR, trailing dependents (q3, q4, q5): q4 and q5 slide along the same axis, the
    # pivot of q4 (after q5 is eliminated) vanishes: a typed error naming it
    with pytest.raises(SingularConfigurationError, match="q4") as info:
        loop_accelerations(cm, 0.0, z0, np.zeros(5))
    assert info.value.joints == ["q4"]
    # ACS, dependents (q2, q3, q5), independents q1 (the chain) and q4 (outboard)
    z, zd, ref, cond = matrix_r_reference(cm, FIVE_BAR_Q0[0:1] + FIVE_BAR_Q0[3:4], [0.0, 0.0])
    assert np.abs(z - z0).max() < 1e-12 and np.abs(zd).max() == 0.0
    solver = LoopSolver(cm, ["q2", "q3", "q5"], z0=z)
    zdd = solver.accelerations(0.0, z, zd)
    err = np.abs(zdd - ref).max() / np.abs(ref).max()
    assert err < TOL, f"five-bar ACS: relative difference {err:.2e} (cond {cond:.1e})"
    (g,) = describe(cm, solver.structure)
    assert g["chain"] == ["q1"] and g["outboard"] == ["q4"]
    # at a moving state too
    z, zd, ref, _ = matrix_r_reference(cm, [0.9, 0.2], [1.1, -0.7])
    zdd = solver.accelerations(0.0, z, zd)
    assert np.abs(zdd - ref).max() / np.abs(ref).max() < TOL


def test_a_wrong_number_of_dependents_is_an_option_error():
    cm = five_bar().compile()
    with pytest.raises(OptionError, match="needs 3 dependent"):
        LoopSolver(cm, ["q2", "q3"])


def test_bench_scaling_cli_writes_csv_and_plot(tmp_path, capsys):
    # a small run of `workbench bench scaling` (the study itself is a measurement, see
    # docs/rcr.md): the table, the fits, the crossover line and both files
    import csv

    from workbench.apps.cli import main

    rc = main(["bench", "scaling", "--families", "n-four-bar", "--sizes", "2,4,8",
               "--repeat", "1", "--out", str(tmp_path)])
    assert rc == 0
    text = capsys.readouterr().out
    assert "fitted exponents in n" in text and "crossover" in text
    with open(tmp_path / "scaling.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert [int(r["n"]) for r in rows] == [5, 9, 17]
    assert all(float(r["rel_diff"]) < 1e-12 for r in rows)
    assert (tmp_path / "scaling.png").stat().st_size > 1000
    assert main(["bench", "scaling", "--sizes", "4"]) != 0


# ----------------------------------------------------------------------------------------
# position and velocity problems in RCR form, and RK4 through them
# ----------------------------------------------------------------------------------------

#: absolute agreement of positions and velocities with Matrix-R: both Newton iterations stop
#: below 1e-12 (POS_TOL) on the closure residual of well-conditioned loops
STATE_TOL = 1e-10


@pytest.mark.parametrize("case", ["n-four-bar-5", "n-four-bar-40", "five-bar"])
def test_position_and_velocity_problems_match_matrix_r(case):
    if case == "five-bar":
        cm, deps, zi, zdi = five_bar().compile(), ["q2", "q3", "q5"], [0.9, 0.2], [1.1, -0.7]
    else:
        N = int(case.rsplit("-", 1)[1])
        cm, deps, zi, zdi = catalog.load("n-four-bar", N=N).compile(), None, [0.4], [1.3]
    z, zd, ref, _ = matrix_r_reference(cm, zi, zdi)
    solver = LoopSolver(cm, deps)
    assert [cm.coord_names[c] for c in solver.independent] == list(cm.dof_names)
    # the dependents start 0.05 off (the Newton guess), their rates at zero
    rng = np.random.default_rng(5)
    zg = z.copy()
    zg[solver.dependent] += 0.05 * rng.uniform(-1.0, 1.0, solver.dependent.size)
    zdg = zd.copy()
    zdg[solver.dependent] = 0.0
    z2, zd2, zdd2 = solver.solve(0.0, zg, zdg)
    assert np.array_equal(z2[solver.independent], z[solver.independent])
    assert np.abs(z2 - z).max() < STATE_TOL
    assert np.abs(zd2 - zd).max() < STATE_TOL * max(1.0, np.abs(zd).max())
    assert np.abs(zdd2 - ref).max() / np.abs(ref).max() < TOL


@pytest.mark.parametrize("seed", [1, 4, 6])
def test_position_problem_closes_random_spatial_loops(seed):
    kw = {1: dict(cut="revolute", nA=8), 4: dict(cut="spherical", nA=4, nB=3,
                                                   moving_base=True, side=True),
          6: dict(cut="fixed", nA=5, nB=4)}[seed]
    model, z = random_loop(seed, **kw)
    cm = model.compile()
    solver = LoopSolver(cm, z0=z)
    rng = np.random.default_rng(seed)
    zg = z.copy()
    zg[solver.dependent] += 0.02 * rng.uniform(-1.0, 1.0, solver.dependent.size)
    zdg = rng.uniform(-1.0, 1.0, cm.n)
    z2, zd2, zdd2 = solver.solve(0.2, zg, zdg)
    Jc, _ = closure_terms(cm, 0.2, z2, zd2)
    ws = _kinematics(cm, z2)
    phi = np.zeros(Jc.shape[0])
    K.constraints(cm.arrays, cm.arrays.p, 0.2, z2, zd2, zd2, ws.A, ws.r, ws.Z, ws.Zd, 0, phi)
    assert np.abs(phi).max() < 1e-12                      # POS_TOL
    assert np.abs(Jc @ zd2).max() < 1e-13 * np.abs(Jc).max() * np.abs(zd2).max()
    assert np.array_equal(zd2[solver.independent], zdg[solver.independent])
    ref, cond = null_space_reference(cm, 0.2, z2, zd2)
    assert cond < 1e5
    assert np.abs(zdd2 - ref).max() / np.abs(ref).max() < TOL


def test_singular_dependents_in_the_position_problem_are_named():
    cm = five_bar().compile()
    z = np.array(FIVE_BAR_Q0)
    z[[2, 3, 4]] += 0.01                                   # off the closure: Newton iterates
    with pytest.raises(SingularConfigurationError, match="q5"):
        LoopSolver(cm).solve(0.0, z, np.zeros(5))


@pytest.mark.parametrize("case", ["n-four-bar-5", "five-bar"])
def test_rk4_through_rcr_matches_rk4_through_matrix_r(case):
    # both integrate the same independent coordinates (the model's degrees of freedom) with
    # the same explicit RK4 and step: the trajectories differ only by the accumulated
    # differences of the evaluations (position tolerance 1e-12, rounding), 1e-8 allows
    # 500 steps of it with margin
    from workbench.integrators.simulation import simulate

    if case == "five-bar":
        cm, deps = five_bar().compile(), ["q2", "q3", "q5"]
    else:
        cm, deps = catalog.load("n-four-bar", N=5).compile(), None
    solver = LoopSolver(cm, deps)
    out = solver.simulate_rk4(0.5, 1e-3)
    ref = simulate(cm, 0.5, 1e-3, "sr-origin", integrator="rk4")
    assert out["z"].shape == ref.z.shape
    assert np.abs(out["z"] - ref.z).max() < 1e-8
    assert np.abs(out["zd"] - ref.zd).max() < 1e-8
    assert np.abs(out["zdd"] - ref.zdd).max() < 1e-8 * np.abs(ref.zdd).max()
    # the motion is not trivial: the independents travel
    assert np.ptp(out["z"][:, solver.independent], axis=0).min() > 1e-3


def test_automatic_dependents_recover_the_seeds_acs_set():
    # "auto": from the end of the loop, q5 is kept, q4 (the same column) is skipped, then
    # q3 and q2: the seed's ACS set; on the N-four-bar the trailing sets are valid and kept
    cm = five_bar().compile()
    solver = LoopSolver(cm, "auto")
    assert describe(cm, solver.structure)[0]["dependents"] == [["q2", "q3", "q5"]]
    cm4 = catalog.load("n-four-bar", N=4).compile()
    assert (describe(cm4, LoopSolver(cm4, "auto").structure)
            == describe(cm4, LoopSolver(cm4).structure))


def nested_loops(seed, inner_base):
    """A spatial loop (a chain of 6 R/P joints closed to the ground by a revolute cut) with a
    second loop hanging from its body ``inner_base`` (two branches of 2 bodies joined by a
    spherical cut): two groups, the inner one based on a frame of the outer one (a chain
    frame for ``"a0"``, a lumped frame for ``"a3"``, a tree frame below a loop frame for
    ``"t"``).  Returns ``(model, z)`` with ``z`` consistent."""
    rng = np.random.default_rng(seed)
    m = Model(f"nested-{seed}-{inner_base}", gravity=tuple(9.81 * random_unit(rng)))
    body, joint = random_parts(m, rng)
    parent = GROUND
    for i in range(6):
        body(f"a{i}")
        joint(f"ja{i}", parent, f"a{i}", "revolute" if i == 0 else None)
        parent = f"a{i}"
    body("t")
    joint("jt", "a2", "t", "revolute")
    for br in ("c", "d"):
        par = inner_base
        for i in range(2):
            body(f"{br}{i}")
            joint(f"j{br}{i}", par, f"{br}{i}", "revolute")
            par = f"{br}{i}"
    return m, close_where_they_meet(m, rng, [("outer", "a5", GROUND, "revolute"),
                                             ("inner", "c1", "d1", "spherical")])


@pytest.mark.parametrize("inner_base", ["a0", "a3", "t"])
def test_nested_loops_merge_at_a_moving_base(inner_base):
    # the inner group is processed at its base inside the outer group's recursion (inward)
    # and from the base's acceleration (outward); its positions are solved after the outer
    # loop has moved its base
    model, z = nested_loops(13, inner_base)
    cm, solver, _ = check_loop(model, z, 13)
    groups = describe(cm, solver.structure)
    assert len(groups) == 2 and groups[1]["base"] >= 0
    rng = np.random.default_rng(13)
    zg = z.copy()
    zg[solver.dependent] += 0.02 * rng.uniform(-1.0, 1.0, solver.dependent.size)
    z2, zd2, zdd2 = solver.solve(0.1, zg, rng.uniform(-1.0, 1.0, cm.n))
    Jc, kappa = closure_terms(cm, 0.1, z2, zd2)
    assert np.abs(Jc @ zd2).max() < 1e-12 * np.abs(Jc).max() * np.abs(zd2).max()
    ref, cond = null_space_reference(cm, 0.1, z2, zd2)
    assert cond < 1e5
    assert np.abs(zdd2 - ref).max() / np.abs(ref).max() < TOL


# ----------------------------------------------------------------------------------------
# the formulation "rcr" behind the seam
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name, options", [("five-bar", {}), ("spatial-four-bar", {}),
                                           ("n-four-bar", {"N": 5})])
def test_formulation_rcr_equals_matrix_r_with_the_same_rk4_rule(name, options):
    """``simulate(..., formulation="rcr", integrator="rk4")`` integrates the model's own DOF
    with RK4 through the O(n + m) evaluation: the same discrete map as Matrix-R with
    ``integrator="rk4"``, so the runs agree to the position tolerance amplified over 1 s
    (measured: 8e-13 on the five-bar, 4e-13 on the spatial four-bar, 1.0e-9 on the N = 5
    N-four-bar, which starts at its aligned position; asserted 1e-8)."""
    model = wb.catalog.load(name, **options)
    a = wb.simulate(model, 1.0, 1e-3, formulation="rcr", integrator="rk4")
    b = wb.simulate(model, 1.0, 1e-3, formulation="sr-origin", integrator="rk4")
    assert a.integrator == "rk4" and a.formulation == "rcr"
    assert a.dof_names == b.dof_names
    assert np.abs(a.z - b.z).max() < 1e-8
    assert np.abs(a.zi - b.zi).max() < 1e-8
    if name != "n-four-bar":
        # the N-four-bar starts at (and crosses) its aligned position, a bifurcation of the
        # closures where both methods' accelerations are dominated by rounding (1e-5 there,
        # docs/limitations.md); elsewhere they agree to the position tolerance
        assert np.abs(a.zdd - b.zdd).max() < 1e-7 * max(1.0, np.abs(b.zdd).max())
    assert a.max_constraint_violation < 1e-11
    if b.energy is not None:
        assert np.abs(a.energy - b.energy).max() < 1e-8 * max(1.0, np.abs(b.energy).max())


@pytest.mark.parametrize("name, options", [("five-bar", {}), ("spatial-four-bar", {}),
                                           ("n-four-bar", {"N": 10}), ("slider-crank", {})])
def test_formulation_rcr_trapezoidal_is_the_matrix_r_discrete_solution(name, options):
    """The default rule: each trapezoidal step solves ``a = f(z^i(a), zd^i(a))`` with the
    RCR accelerations by fixed-point iteration, the discrete solution of Matrix-R's
    ``R^T tau = 0`` (``R^T tau = Mbar (a - f)``): the runs agree to the Newton tolerance
    amplified over 1 s (measured 2e-11 five-bar, 4e-11 spatial four-bar, 1.2e-9
    N-four-bar through its aligned position, 1.3e-9 slider-crank)."""
    model = wb.catalog.load(name, **options)
    a = wb.simulate(model, 1.0, 1e-3, formulation="rcr")
    b = wb.simulate(model, 1.0, 1e-3, formulation="sr-origin")
    assert a.integrator == "trapezoidal" == b.integrator
    assert np.abs(a.zi - b.zi).max() < 1e-8
    assert a.max_constraint_violation < 1e-11
    assert np.all(a.newton_iterations[1:] >= 1)


def test_gradients_through_rcr_trajectories_are_exact(tmp_path):
    """Issue 27 item 5: the sensitivity sweeps of the semi-recursive family at the states of
    an RCR trajectory (the same discrete map, see above): direct = adjoint to rounding,
    = central differences of RCR runs (the Newton tolerance in the differences), =
    Matrix-R's gradient (measured over 0.5 s: 1.5e-15, 8e-9, 2e-11); five-bar, 5
    parameters with 3 geometric ones, 0.3 s."""
    import json

    from workbench.apps.cli import main
    from workbench.errors import SensitivityError

    g = {m: wb.sensitivity("five-bar", method=m, formulation="rcr", t_end=0.3,
                           dt=1e-3).gradient for m in ("direct", "adjoint", "fd")}
    gs = wb.sensitivity("five-bar", method="adjoint", formulation="sr-origin", t_end=0.3,
                        dt=1e-3).gradient
    scale = np.abs(g["fd"]).max(axis=1, keepdims=True)
    assert (np.abs(g["direct"] - g["adjoint"]) / scale).max() < 1e-12
    assert (np.abs(g["direct"] - g["fd"]) / scale).max() < 1e-6
    assert (np.abs(g["adjoint"] - gs) / scale).max() < 1e-8
    # an RK4 run is not the differentiated map: refused by name
    sim = wb.simulate("five-bar", 0.05, 1e-3, formulation="rcr", integrator="rk4")
    with pytest.raises(SensitivityError, match="rk4"):
        wb.sensitivity("five-bar", formulation="rcr", simulation=sim)
    out = tmp_path / "run"
    assert main(["simulate", "five-bar", "--formulation", "rcr", "--t-end", "0.05",
                 "--out", str(out), "--no-plot"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["integrator"] == "trapezoidal" and summary["formulation"] == "rcr"
    assert summary["max_constraint_violation"] < 1e-11


# ----------------------------------------------------------------------------------------
# the rcr trapezoidal steps through singular configurations (N-four-bar, N = 40)
# ----------------------------------------------------------------------------------------


def _merged_rows(res):
    return np.flatnonzero(res.step_kind[:, 0] > 1).tolist()


def test_rcr_steps_cross_the_n_four_bar_40_aligned_position_as_matrix_r():
    """N-four-bar, N = 40, 1 s at 1 ms: the rcr steps pass the aligned position at 0.72 s
    (where they used to stop with a NewtonConvergenceError), merge the step over the
    singular node exactly where Matrix-R's loop does (the row reached is 723) and stay on
    Matrix-R's discrete solution.  Measured max |z_rcr - z_MR| 3.2e-11 up to 0.72 s and
    1.2e-10 over 1 s (both solves stop at the position tolerance 1e-12 and the Newton
    tolerance 1e-10, amplified by the near-singular closures: Matrix-R's sr-com against
    its sr-origin differ by 1.4e-12 and 1.6e-10 at the same times).  Asserted 1e-10 and
    1e-9.  Newton and fixed-point steps both converge here (fixed point: 1909
    evaluations, Newton 1903); the fixed point fails later in the run (18.93 s, see the
    slow test), which the Newton steps pass."""
    from workbench.integrators.simulation import RCR_STEP

    model = wb.catalog.load("n-four-bar", N=40)
    a = wb.simulate(model, 1.0, 1e-3, formulation="rcr")
    b = wb.simulate(model, 1.0, 1e-3, formulation="sr-origin")
    assert _merged_rows(a) == _merged_rows(b) == [723]
    assert a.step_kind[722].tolist() == [0, 0]
    dz = np.abs(a.z - b.z).max(axis=1)
    assert dz[:721].max() < 1e-10
    assert dz.max() < 1e-9
    assert a.max_constraint_violation < 1e-11
    # at most one iteration matrix per few hundred steps, about 2 evaluations per step
    assert a.rcr_stats["matrices"] < 10 and a.rcr_stats["evaluations"] < 2.2 * 1000
    tok = RCR_STEP.set({"newton": False})
    try:
        c = wb.simulate(model, 1.0, 1e-3, formulation="rcr")
    finally:
        RCR_STEP.reset(tok)
    assert c.rcr_stats["matrices"] == 0
    assert np.abs(c.z - b.z).max() < 1e-9


@pytest.mark.slow
def test_rcr_equals_matrix_r_over_20_s_of_the_n_four_bar_40_to_its_conditioning():
    """The CLI's reproduction case (``workbench reproduce``: N-four-bar, N = 40, 20 s at
    1 ms; about 12 s for the rcr run, 15 s for Matrix-R): the rcr run (Newton steps)
    completes, merges its steps over the 15 singular nodes Matrix-R's loop merges, and
    equals Matrix-R's trajectory to the conditioning of the problem, not to 1e-10.  Each
    crossing of the aligned position amplifies the differences left by the tolerances
    (position 1e-12, Newton 1e-10): measured max |z_rcr - z_MR| 3.2e-11 up to 0.72 s, 2.7e-9
    at 2 s, 5.0e-8 at 5 s, 9.1e-7 over 20 s; Matrix-R against itself differs as much
    (sr-com against sr-origin 1.1e-6, sr-origin with newton_tol 1e-12 against 1e-10
    8.1e-7), and tightening both Newton tolerances to 1e-12 leaves rcr against Matrix-R at
    7.5e-7.  Asserted: 1e-10 before the first crossing, 1e-5 over 20 s (10 times the
    measured floor)."""
    model = wb.catalog.load("n-four-bar", N=40)
    a = wb.simulate(model, 20.0, 1e-3, formulation="rcr")
    b = wb.simulate(model, 20.0, 1e-3, formulation="sr-origin")
    assert _merged_rows(a) == _merged_rows(b)
    assert len(_merged_rows(a)) == 15
    dz = np.abs(a.z - b.z).max(axis=1)
    assert dz[:721].max() < 1e-10
    assert dz.max() < 1e-5
    assert a.max_constraint_violation < 1e-11


def test_dependents_are_selected_again_when_a_pivot_degrades_during_a_run():
    """Five-bar reconstruction, RK4 through RCR on the RCR independents, 0.65 s at 1 ms.
    The dependent set (q1, q3, q5) is valid at the release (smallest relative pivot 0.03)
    and degenerates during the fall (1.6e-6 at 0.58 s): without re-selection the run stops
    with a typed error naming q1 (the position problem at the default pivot tolerance, the
    pivot at 1e-5).  With ``reselect=1e-3`` the run selects (q1, q2, q4) by pivoted
    Gram-Schmidt at 0.467 s, where the pivot passes 1e-3, and continues from that row's
    state: it equals Matrix-R's RK4 (which integrates the DOF q1, q4 throughout) to
    4.4e-10 in positions, 1.3e-8 in rates (the RK4 truncation errors of two choices of
    integrated coordinates near the singular configuration Matrix-R meets at 0.71 s; the
    set that integrates the same q1, q4, (q2, q3, q5), agrees to 1.2e-12).  Asserted 1e-8
    and 1e-7."""
    from workbench.errors import AssemblyError

    cm = five_bar().compile()
    ref = wb.simulate(cm, 0.65, 1e-3, formulation="sr-origin", integrator="rk4")
    with pytest.raises(AssemblyError, match="q1"):
        LoopSolver(cm, ["q1", "q3", "q5"]).simulate_rk4(0.65, 1e-3)
    with pytest.raises(SingularConfigurationError, match="q1"):
        LoopSolver(cm, ["q1", "q3", "q5"], pivot_tol=1e-5).simulate_rk4(0.65, 1e-3)
    solver = LoopSolver(cm, ["q1", "q3", "q5"])
    out = solver.simulate_rk4(0.65, 1e-3, reselect=1e-3)
    (change,) = out["reselections"]
    assert change["from"] == ["q1", "q3", "q5"] and change["to"] == ["q1", "q2", "q4"]
    assert 0.4 < change["time"] < 0.5 and change["pivot"] < 1e-3
    assert [cm.coord_names[c] for c in solver.dependent] == ["q1", "q2", "q4"]
    assert np.abs(out["z"] - ref.z).max() < 1e-8
    assert np.abs(out["zd"] - ref.zd).max() < 1e-7
    # the new set's pivot stays well above the threshold's neighbourhood to the end
    solver.accelerations(out["t"][-1], out["z"][-1], out["zd"][-1])
    assert solver.min_pivot[0] > 1e-4


def two_branch_parallel_slides(seed):
    """A spatial loop whose plain RCR set is singular but which is valid walked the other
    way: branch A (side A of the cut) three revolute bodies from the ground, branch B two
    bodies on prismatic joints along the same axis (identical columns), joined by a
    spherical cut (3 rows).  The loop list runs a0, a1, a2 outwards, b1, b0 inwards: the
    trailing (a2, b1, b0) contains both slides; reversed it runs b0, b1, a2, a1, a0 with the
    valid trailing set (a0, a1, a2).  Returns ``(model, z)`` with ``z`` consistent."""
    rng = np.random.default_rng(seed)
    m = Model(f"slides-{seed}", gravity=tuple(9.81 * random_unit(rng)))

    def body(name):
        m.body(name, mass=float(rng.uniform(0.5, 2.0)), com=tuple(rng.uniform(-0.4, 0.4, 3)),
               inertia=inertia_tuple(random_inertia(rng)))

    parent = GROUND
    for i in range(3):
        body(f"a{i}")
        m.joint(f"ja{i}", "revolute", parent, f"a{i}",
                parent_point=tuple(rng.uniform(-0.5, 0.5, 3)),
                child_point=tuple(rng.uniform(-0.3, 0.3, 3)), axis=tuple(random_unit(rng)),
                orientation=random_rotation(rng), q0=float(rng.uniform(-0.8, 0.8)))
        parent = f"a{i}"
    axis = tuple(random_unit(rng))
    parent = GROUND
    for i in range(2):
        body(f"b{i}")
        m.joint(f"jb{i}", "prismatic", parent, f"b{i}",
                parent_point=(0.3, 0.2 * i, 0.1) if i == 0 else (0.0, 0.0, 0.0),
                child_point=(0.0, 0.0, 0.0), axis=axis, q0=float(rng.uniform(-0.3, 0.3)))
        parent = f"b{i}"
    m.joint_spring("spr", "ja1", k=12.0, c=0.5, q0=0.1)
    return m, close_where_they_meet(m, rng, [("ball", "a2", "b1", "spherical")], axes=False)


@pytest.mark.parametrize("seed", [21, 22])
def test_loop_reversal_fallback_runs_a_loop_whose_trailing_set_is_singular(seed):
    """GCL's first fallback (seed 004, "work the loop in the opposite direction"): plain
    RCR stops with the typed error naming a slide; ``dependents="reverse"`` walks the loop
    from branch B, takes (a0, a1, a2) as dependents and the two slides as the recursive
    chain (no dense ACS solve), and equals the null-space solve (accelerations) and closes
    the loop (position problem) as well as the other methods; ``"auto"`` needs ACS with an
    outboard independent for the same loop."""
    model, z = two_branch_parallel_slides(seed)
    cm = model.compile()
    zd = consistent_state(cm, z, seed)
    with pytest.raises(SingularConfigurationError, match="jb"):
        loop_accelerations(cm, 0.3, z, zd)
    cm, solver, zdd = check_loop(model, z, seed, dependents="reverse")
    (g,) = describe(cm, solver.structure)
    assert g["dependents"] == [["ja2", "ja1", "ja0"]]
    assert g["chain"] == ["jb0", "jb1"] and g["outboard"] == []
    (ga,) = describe(cm, LoopSolver(cm, "auto", z0=z).structure)
    assert ga["outboard"] != []
    # a loop closing onto its own base (the five-bar, welded to the ground) cannot be
    # reversed without re-rooting the tree: refused, naming the trailing dependents
    with pytest.raises(OptionError, match=r"\[.q3., .q4., .q5.\].*cannot be reversed"):
        LoopSolver(five_bar().compile(), "reverse")
    # the position problem of the reversed loop closes it from a perturbed guess
    rng = np.random.default_rng(seed)
    zg = z.copy()
    zg[solver.dependent] += 0.02 * rng.uniform(-1.0, 1.0, solver.dependent.size)
    z2, zd2, zdd2 = solver.solve(0.3, zg, zd)
    assert np.abs(z2 - z).max() < 1e-10
    ref, cond = null_space_reference(cm, 0.3, z2, zd2)
    assert cond < 1e5
    assert np.abs(zdd2 - ref).max() / np.abs(ref).max() < TOL


def test_trapezoidal_steps_select_dependents_again_when_a_pivot_degrades():
    """The trapezoidal rule (Newton steps) on the RCR independents of a LoopSolver
    (``trapezoidal_rcr.simulate_loops``), five-bar with dependents (q1, q3, q5), 0.65 s.
    Without re-selection the steps stop at 0.575 s (NewtonConvergenceError: the set
    degenerates, pivot 1.6e-6 at 0.58 s).  With ``reselect=1e-3`` the set becomes
    (q1, q2, q4) at 0.467 s and the run completes.  Up to the switch it is the discrete
    solution of Matrix-R with the DOF (q2, q4) (the same coordinates integrated; measured
    3.5e-11 at 1 ms, asserted 1e-9); afterwards it integrates (q3, q5), and its distance to
    Matrix-R with the DOF (q1, q4) is the truncation error of the choice of integrated
    coordinates: 2.23e-5 at 1 ms, 5.58e-6 at 0.5 ms (ratio 4.0, second order: the same
    solution of the equations of motion).  Asserted: ratio between 3.5 and 4.5."""
    from workbench.errors import NewtonConvergenceError
    from workbench.integrators.trapezoidal_rcr import simulate_loops

    cm = five_bar().compile()
    with pytest.raises(NewtonConvergenceError):
        simulate_loops(LoopSolver(cm, ["q1", "q3", "q5"]), 0.65, 1e-3)
    m2 = five_bar()
    m2.dof("q2", "q4")
    cm2 = m2.compile()
    diffs = []
    for dt in (1e-3, 5e-4):
        out = simulate_loops(LoopSolver(cm, ["q1", "q3", "q5"]), 0.65, dt, reselect=1e-3)
        (change,) = out["reselections"]
        assert change["to"] == ["q1", "q2", "q4"] and abs(change["time"] - 0.467) < 1e-3
        k = change["step"]
        pre = wb.simulate(cm2, k * dt, dt, formulation="sr-origin")
        assert np.abs(out["z"][:k + 1] - pre.z).max() < 1e-9
        ref = wb.simulate(cm, 0.65, dt, formulation="sr-origin")
        diffs.append(np.abs(out["z"] - ref.z).max())
    assert diffs[0] < 1e-4
    assert 3.5 < diffs[0] / diffs[1] < 4.5
