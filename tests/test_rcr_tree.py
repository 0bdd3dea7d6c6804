"""The O(n) articulated-body recursion of the open tree (seed 004 eqs 7-22,
workbench/formulations/rcr/tree.py) against the dense semi-recursive solve of the same model.

Reference: ``M`` from :func:`workbench.formulations.semirecursive.matrixr.mass_matrix` and
``tau0 = M 0 - Q`` from :func:`~workbench.formulations.semirecursive.matrixr.residual_tau`
(both SR-II, :func:`~workbench.formulations.semirecursive.matrixr.full_dynamics_terms`),
``zdd_ref = solve(M, -tau0)``.  These share the kinematics and the applied forces with the
recursion but not the dynamics: composite inertias and one inverse dynamics pass against
articulated inertias, bias forces and scalar pivots.

Tolerances.  Both results are backward stable, so the residual ``M zdd + tau0`` of the
recursion is checked relative to ``|tau0| + |M| |zdd|`` (1e-13: a few hundred roundings of
O(n) passes on n <= 30); the forward difference of the two solutions is bounded by
``cond(M)`` times that, and is checked at 1e-10 relative on models whose ``cond(M)`` (asserted
below 1e5) leaves a margin of about 100 above the rounding expected.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import (ALL_JOINT_TYPES, inertia_tuple, pendulum, random_inertia, random_rotation,
                      random_state, random_tree, random_unit)

from workbench.errors import SingularConfigurationError
from workbench.formulations.rcr import tree as RT
from workbench.formulations.rcr import tree_accelerations
from workbench.formulations.semirecursive import matrixr as MR
from workbench.kernels import tree as K
from workbench.model import catalog
from workbench.model.builder import Model
from workbench.model.elements import GROUND

#: relative backward error (residual) allowed: rounding of the O(n) passes
RESIDUAL_TOL = 1e-13
#: relative forward difference allowed against the dense solve (cond(M) < COND_MAX)
FORWARD_TOL = 1e-10
COND_MAX = 1e5


def random_chain(seed):
    """A spatial serial chain of 6-10 bodies, revolute and prismatic joints in random
    order, random axes, joint locations and orientations, masses, centres of mass and
    full inertia tensors; random gravity, a joint spring-damper and an applied force."""
    rng = np.random.default_rng(seed)
    nb = int(rng.integers(6, 11))
    m = Model(f"chain-{seed}", gravity=tuple(9.81 * random_unit(rng)))
    parent = GROUND
    for i in range(nb):
        b = f"b{i}"
        m.body(b, mass=float(rng.uniform(0.5, 2.0)), com=tuple(rng.uniform(-0.4, 0.4, 3)),
               inertia=inertia_tuple(random_inertia(rng)),
               points={"tip": tuple(rng.uniform(-0.5, 0.5, 3))})
        kind = "prismatic" if rng.uniform() < 0.35 else "revolute"
        m.joint(f"j{i}", kind, parent, b, parent_point=tuple(rng.uniform(-0.5, 0.5, 3)),
                child_point=tuple(rng.uniform(-0.3, 0.3, 3)), axis=tuple(random_unit(rng)),
                orientation=random_rotation(rng))
        parent = b
    m.joint_spring("js", "j1", k=15.0, c=0.7, q0=0.2)
    m.force("push", parent, "tip", (0.5, -1.0, 0.3), 2.0)
    return m


def dense_reference(cm, t, z, zd):
    """``(M, tau0, zdd_ref)`` by the dense semi-recursive path (SR-II)."""
    ma = cm.arrays
    n = cm.n
    ws = MR.make_workspace(ma, n)
    K.frame_positions(ma, ma.p, z, ws.A, ws.r, ws.u)
    K.joint_columns(ma, ws.r, ws.u, ws.bcol)
    tau0 = np.zeros(n)
    MR.residual_tau(ma, ma.p, t, z, zd, np.zeros(n), ws, MR.FORM_ORIGIN, tau0)
    M = np.zeros((n, n))
    MR.mass_matrix(ma, ma.p, ws, MR.FORM_ORIGIN, n, M)
    return M, tau0, np.linalg.solve(M, -tau0)


def check_against_dense(cm, t, z, zd, cond_max=COND_MAX):
    M, tau0, ref = dense_reference(cm, t, z, zd)
    zdd = tree_accelerations(cm, t, z, zd)
    scale = np.abs(tau0).max() + np.abs(M).max() * np.abs(zdd).max()
    residual = np.abs(M @ zdd + tau0).max() / scale
    assert residual < RESIDUAL_TOL, f"{cm.name}: backward error {residual:.2e}"
    cond = np.linalg.cond(M)
    assert cond < cond_max, f"{cm.name}: cond(M) = {cond:.1e}, tolerance not justified"
    err = np.abs(zdd - ref).max() / np.abs(ref).max()
    assert err < FORWARD_TOL, f"{cm.name}: relative difference {err:.2e} (cond {cond:.1e})"
    return zdd, M


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_random_spatial_rp_chain_matches_the_dense_solve(seed):
    model = random_chain(seed)
    assert {j.type for j in model.joints.values()} == {"revolute", "prismatic"}
    cm = model.compile()
    assert 6 <= cm.n <= 10
    z, zd, _ = random_state(cm, seed, scale=1.0)
    check_against_dense(cm, 0.3, z, zd)


@pytest.mark.parametrize("seed", [21, 22, 23])
def test_branched_tree_with_every_joint_type_and_force_matches_the_dense_solve(seed):
    # every joint type (spherical, universal, floating, fixed: chains of massless frames and
    # frames without a coordinate), random branching, springs, loads
    model = random_tree(seed, ALL_JOINT_TYPES + ("revolute", "prismatic"), forces=True,
                        shuffle=True)
    cm = model.compile()
    ma = cm.arrays
    assert (ma.fr_coord < 0).any() and (ma.fr_body < 0).any()
    children = np.bincount(ma.fr_parent[ma.fr_parent >= 0], minlength=len(ma.fr_parent))
    assert children.max() >= 2 or (ma.fr_parent < 0).sum() >= 2  # branched
    z, zd, _ = random_state(cm, seed)
    check_against_dense(cm, 0.4, z, zd)


def test_pendulum_matches_the_dense_solve_and_the_closed_form():
    cm = catalog.load("pendulum").compile()
    for theta in (0.0, 0.7, -2.1):
        z = np.array([theta])
        zdd, _ = check_against_dense(cm, 0.0, z, np.array([1.3]))
        # point mass on a massless link: theta'' = -(g / L) cos(theta); rounding only
        assert zdd[0] == pytest.approx(-9.81 * np.cos(theta), rel=1e-13, abs=1e-13)
    # the conftest copy of the same model (built in Python, not from the catalog file)
    cm2 = pendulum(L=0.5, mass=3.0).compile()
    zdd = tree_accelerations(cm2, 0.0, np.array([0.4]), np.array([0.0]))
    assert zdd[0] == pytest.approx(-9.81 / 0.5 * np.cos(0.4), rel=1e-13)


def test_buggy_open_tree_matches_the_dense_solve():
    # floating chassis (six massless frames), suspension branches and wheels, tires; the
    # cut joints of the suspension loops are ignored: both sides solve the open tree
    cm = catalog.load("buggy-step").compile()
    assert cm.arrays.c_type.shape[0] > 0
    rng = np.random.default_rng(7)
    for _ in range(3):
        z = np.asarray(cm.z_guess, dtype=float) + 0.05 * rng.standard_normal(cm.n)
        zd = rng.standard_normal(cm.n)
        # cond(M) ~ 1e4 here (wheel spin inertia against chassis mass)
        check_against_dense(cm, 0.2, z, zd)


def test_inverse_mass_columns_and_frame_accelerations():
    cm = random_tree(31, ALL_JOINT_TYPES + ("revolute",), forces=True, shuffle=True).compile()
    ma = cm.arrays
    n = cm.n
    z, zd, _ = random_state(cm, 31)
    ws = MR.make_workspace(ma, n)
    aw = RT.make_aba_workspace(ma)
    zdd = np.zeros(n)
    assert RT.forward_dynamics(ma, ma.p, 0.1, z, zd, ws, aw, zdd) == -1
    M, _, _ = dense_reference(cm, 0.1, z, zd)
    # M^-1 column by column from the articulated inertias (O(n) each): M X = I to rounding
    X = np.zeros((n, n))
    e = np.zeros(n)
    col = np.zeros(n)
    for j in range(n):
        e[:] = 0.0
        e[j] = 1.0
        RT.apply_inverse_mass(ma, ws.bcol, aw, e, col)
        X[:, j] = col
    # backward error of each column relative to |M| |x|; the symmetry of M^-1 to cond eps
    assert np.abs(M @ X - np.eye(n)).max() / (np.abs(M).max() * np.abs(X).max()) < 1e-14
    assert np.abs(X - X.T).max() / np.abs(X).max() < 1e-11
    # ws.Zd is left at the frame accelerations of the solution (the plain recursion of
    # workbench.kernels.tree at zdd reproduces them; same operations up to summation order)
    Zd = np.zeros_like(ws.Zd)
    K.frame_accelerations(ma, zd, zdd, ws.r, ws.u, ws.bcol, ws.Z, Zd)
    assert np.abs(ws.Zd - Zd).max() < 1e-12 * np.abs(Zd).max()


def test_a_massless_leaf_joint_is_a_typed_error_naming_it():
    m = Model("massless-tip", gravity=(0.0, 0.0, -9.81))
    m.body("arm", mass=1.0, com=(0.5, 0, 0), inertia=(0.01, 0.1, 0.1))
    m.body("tip", mass=0.0, com=(0, 0, 0), inertia=(0.0, 0.0, 0.0))
    m.revolute("shoulder", GROUND, "arm", axis=(0, 1, 0))
    m.prismatic("slide", "arm", "tip", parent_point=(1.0, 0, 0), axis=(1, 0, 0))
    cm = m.compile()
    with pytest.raises(SingularConfigurationError, match="slide") as info:
        tree_accelerations(cm, 0.0, np.zeros(2), np.zeros(2))
    assert info.value.joints == ["slide"]
