"""Unit tests of the recursive kinematics (SR-II origin-point recursion, SR-I centre-of-mass
recursion) and of the constraint Jacobian, against an independent forward kinematics and
finite differences of positions along smooth trajectories.

The finite-difference reference never uses a velocity or acceleration computed by the
code under test: only positions ``x(z(s))`` along ``z(s) = z0 + zd s + zdd s^2/2 +
jerk s^3/6`` are evaluated, so ``dx/ds`` and ``d2x/ds2`` at ``s = 0`` are the velocity and
the (material) acceleration for the state ``(z0, zd, zdd)``.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import (ALL_JOINT_TYPES, frame_state, random_rotation, random_state, random_tree,
                      random_unit, ref_body_poses, ref_point, vee)

from workbench import Model
from workbench.compiled.dof import constraint_jacobian_at
from workbench.kernels import tree as K
from workbench.model.elements import GROUND

SEEDS = [11, 12, 13]
H = 1e-3  # step of the 5-point stencils below (truncation O(h^4) ~ 1e-12)


def d1(f, h=H):
    """5-point central first derivative at 0 of ``f(s)`` (array valued)."""
    return (-f(2 * h) + 8 * f(h) - 8 * f(-h) + f(-2 * h)) / (12 * h)


def d2(f, h=H):
    """5-point central second derivative at 0 of ``f(s)``."""
    return (-f(2 * h) + 16 * f(h) - 30 * f(0.0) + 16 * f(-h) - f(-2 * h)) / (12 * h * h)


def trajectory(z, zd, zdd, jerk):
    return lambda s: z + zd * s + 0.5 * zdd * s * s + jerk * s ** 3 / 6.0


# ----------------------------------------------------------------------------------------
# position level: kernels vs an independent numpy forward kinematics
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
def test_frame_positions_match_independent_forward_kinematics(seed):
    model = random_tree(seed, ALL_JOINT_TYPES * 2, shuffle=True)
    cm = model.compile()
    z, _, _ = random_state(cm, seed)
    A, r, *_ = frame_state(cm, z)
    ma = cm.arrays
    poses = ref_body_poses(model, cm, z)
    for bi, name in enumerate(cm.body_names):
        f = ma.b_frame[bi]
        # rotation of the body frame; 1e-12: a few roundings of products of rotations
        np.testing.assert_allclose(A[f], poses[name][1], atol=1e-12)
        for pn in ("p0", "p1"):
            x = np.zeros(3)
            K.point_position(ma, ma.p, A, r, cm.point(f"{name}.{pn}"), x)
            # 1e-12 m: rounding of a chain of <= 14 rigid transforms of O(1) lengths
            np.testing.assert_allclose(x, ref_point(model, cm, z, name, pn), atol=1e-12,
                                       err_msg=f"point {name}.{pn}")


# ----------------------------------------------------------------------------------------
# velocity / acceleration level: SR-II recursion (material convention) vs differences
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
def test_point_velocities_and_accelerations_match_differences(seed):
    model = random_tree(seed, ALL_JOINT_TYPES * 2, shuffle=True)
    cm = model.compile()
    ma = cm.arrays
    z, zd, zdd = random_state(cm, seed)
    jerk = np.random.default_rng(seed + 100).uniform(-1, 1, cm.n)
    zs = trajectory(z, zd, zdd, jerk)
    A, r, u, bcol, Z, Zd = frame_state(cm, z, zd, zdd)
    checked = 0
    for name in cm.body_names:
        for pn in ("p0", "p1"):
            k = cm.point(f"{name}.{pn}")

            def pos(s, k=k):
                As, rs, *_ = frame_state(cm, zs(s))
                x = np.zeros(3)
                K.point_position(ma, ma.p, As, rs, k, x)
                return x

            x, v, a = np.zeros(3), np.zeros(3), np.zeros(3)
            K.point_kinematics(ma, ma.p, A, r, Z, Zd, k, x, v, a)
            # 1e-9: 5-point stencil, roundoff ~ eps |x| / h = 2e-13, truncation ~ 1e-12
            np.testing.assert_allclose(v, d1(pos), rtol=1e-9, atol=1e-9,
                                       err_msg=f"velocity of {name}.{pn}")
            # 1e-7: second-difference roundoff ~ 6 eps |x| / h^2 ~ 1e-9 plus truncation
            np.testing.assert_allclose(a, d2(pos), rtol=1e-7, atol=1e-7,
                                       err_msg=f"acceleration of {name}.{pn}")
            checked += 1
    assert checked == 2 * len(cm.body_names)


@pytest.mark.parametrize("seed", SEEDS)
def test_body_angular_velocity_and_acceleration_match_differences(seed):
    """omega = vee(dA/dt A^T) and its time derivative, from rotation matrices only."""
    model = random_tree(seed, ALL_JOINT_TYPES * 2, shuffle=True)
    cm = model.compile()
    ma = cm.arrays
    z, zd, zdd = random_state(cm, seed)
    zs = trajectory(z, zd, zdd, np.zeros(cm.n))
    A, r, u, bcol, Z, Zd = frame_state(cm, z, zd, zdd)

    for bi, name in enumerate(cm.body_names):
        f = ma.b_frame[bi]

        def omega(s, f=f):
            # angular velocity along the trajectory from a 5-point difference of A
            def Ast(e):
                return frame_state(cm, zs(s + e))[0][f]
            return vee(d1(Ast) @ Ast(0.0).T)

        w_fd = omega(0.0)
        # 1e-9: 5-point first difference of O(1) rotation entries
        np.testing.assert_allclose(Z[f, 3:6], w_fd, rtol=1e-9, atol=1e-9, err_msg=name)
        # 1e-6: nested 5-point differences (roundoff ~ eps / h^2 ~ 1e-10, truncation)
        np.testing.assert_allclose(Zd[f, 3:6], d1(omega, h=1e-2), rtol=1e-6, atol=1e-6,
                                   err_msg=name)


@pytest.mark.parametrize("seed", SEEDS)
def test_com_recursion_sr1_matches_differences(seed):
    """SR-I kinematics: velocity and acceleration of each body's centre of mass."""
    model = random_tree(seed, ALL_JOINT_TYPES * 2, shuffle=True)
    cm = model.compile()
    ma = cm.arrays
    nf = ma.fr_parent.shape[0]
    z, zd, zdd = random_state(cm, seed)
    zs = trajectory(z, zd, zdd, np.zeros(cm.n))
    A, r, u, bcol, Z, Zd = frame_state(cm, z)
    P = np.zeros((nf, 3))
    bv = np.zeros((nf, 6))
    V = np.zeros((nf, 6))
    Vd = np.zeros((nf, 6))
    K.reference_points(ma, ma.p, A, r, P)
    K.com_columns(ma, r, u, P, bv)
    K.com_kinematics(ma, zd, zdd, r, u, P, bv, V, Vd)
    for bi, name in enumerate(cm.body_names):
        f = ma.b_frame[bi]
        body = model.bodies[name]

        def g(s, name=name, body=body):
            return ref_point(model, cm, zs(s), name, body.com)

        # the reference point of a body frame is its centre of mass
        np.testing.assert_allclose(P[f], g(0.0), atol=1e-12)  # rounding of the chain
        # same stencil tolerances as for the SR-II point kinematics (reasons above)
        np.testing.assert_allclose(V[f, 0:3], d1(g), rtol=1e-9, atol=1e-9, err_msg=name)
        np.testing.assert_allclose(Vd[f, 0:3], d2(g), rtol=1e-7, atol=1e-7, err_msg=name)


# ----------------------------------------------------------------------------------------
# constraints: Jacobian and velocity/acceleration-level residuals
# ----------------------------------------------------------------------------------------

CUT_CASES = [("spherical", False), ("revolute", False), ("universal", False),
             ("prismatic", False), ("cylindrical", False), ("fixed", False),
             ("distance", False), ("drive", False),
             ("spherical", True), ("revolute", True), ("prismatic", True), ("fixed", True)]


def closed_model(kind, planar, seed=5):
    """Two branches hanging from ground (all joint types used), closed between their
    last bodies by one constraint of the requested kind.  The constraint is *not*
    satisfied at the test state: the Jacobian identity holds everywhere."""
    rng = np.random.default_rng(seed)
    m = Model(f"closed-{kind}", planar=planar)
    branches = [("revolute", "universal", "cylindrical"), ("prismatic", "spherical", "floating")]
    if planar:
        # a planar model keeps its tree in the plane (checked at compile): revolute axes
        # along z, prismatic axes in the plane, frames rotated about z
        branches = [("revolute", "prismatic", "revolute"), ("prismatic", "revolute", "revolute")]
    last = []
    for bi, types in enumerate(branches):
        parent = GROUND
        for k, jt in enumerate(types):
            b = f"br{bi}_{k}"
            m.body(b, mass=1.0, com=tuple(rng.uniform(-0.3, 0.3, 3)), inertia=(0.1, 0.2, 0.3),
                   points={"c": tuple(rng.uniform(-0.5, 0.5, 3))})
            axis, orient = tuple(random_unit(rng)), random_rotation(rng)
            if planar:
                axis = (0.0, 0.0, 1.0) if jt == "revolute" else \
                    tuple(np.r_[random_unit(rng)[:2], 0.0])
                ang = rng.uniform(0.0, 6.0)
                c, s_ = np.cos(ang), np.sin(ang)
                orient = np.array([[c, -s_, 0.0], [s_, c, 0.0], [0.0, 0.0, 1.0]])
            m.joint(f"j{bi}{k}", jt, parent, b, parent_point=tuple(rng.uniform(-0.5, 0.5, 3)),
                    axis=axis, axis2=tuple(random_unit(rng)), orientation=orient)
            parent = b
        last.append(parent)
    if kind == "distance":
        m.distance("rod", last[0], "c", last[1], "c", length=0.7)
    elif kind == "drive":
        m.drive("motor", "j11", {"type": "sine", "amplitude": 0.4, "omega": 2.5,
                                 "phase": 0.3, "offset": 0.1})
        m.distance("rod", last[0], "c", GROUND, (0.2, 0.1, 0.3), length=0.7)
    else:
        if planar:
            a1 = (0.0, 0.0, 1.0) if kind in ("revolute", "spherical") else \
                tuple(np.r_[random_unit(rng)[:2], 0.0])
            a2 = (0.0, 0.0, 1.0) if kind in ("revolute", "spherical") else \
                tuple(np.r_[random_unit(rng)[:2], 0.0])
        else:
            a1, a2 = tuple(random_unit(rng)), tuple(random_unit(rng))
        m.cut("cut", kind, last[0], last[1], point1="c", point2="c", axis1=a1, axis2=a2)
    return m


def _residual(cm, t, z, zd=None, zdd=None, level=0):
    ma = cm.arrays
    A, r, u, bcol, Z, Zd = frame_state(cm, z, np.zeros(cm.n) if zd is None else zd, zdd)
    out = np.zeros(cm.m)
    K.constraints(ma, ma.p, t, z, np.zeros(cm.n) if zd is None else zd,
                  np.zeros(cm.n) if zdd is None else zdd, A, r, Z, Zd, level, out)
    return out


@pytest.mark.parametrize("kind,planar", CUT_CASES,
                         ids=[f"{k}{'-planar' if p else ''}" for k, p in CUT_CASES])
def test_constraint_jacobian_matches_central_differences(kind, planar):
    cm = closed_model(kind, planar).compile()
    z, _, _ = random_state(cm, 3)
    t = 0.37
    Jc, _, _ = constraint_jacobian_at(cm.arrays, z)
    assert Jc.shape == (cm.m, cm.n) and cm.m > 0
    Jfd = np.zeros_like(Jc)
    for k in range(cm.n):
        e = np.zeros(cm.n)
        e[k] = 1.0
        Jfd[:, k] = d1(lambda s: _residual(cm, t, z + s * e))
    # 1e-9: 5-point difference of O(1) residuals (roundoff 2e-13, truncation ~1e-12)
    np.testing.assert_allclose(Jc, Jfd, rtol=1e-9, atol=1e-9)
    assert np.abs(Jc).max() > 0.1  # the check is not vacuous


@pytest.mark.parametrize("kind,planar", CUT_CASES,
                         ids=[f"{k}{'-planar' if p else ''}" for k, p in CUT_CASES])
def test_constraint_velocity_and_acceleration_residuals_match_differences(kind, planar):
    """Level 1 = d/dt Phi(z(t), t) and level 2 = d2/dt2 Phi(z(t), t) along a trajectory,
    which checks the bias term dPhi_z/dt zd (and Phi_t, Phi_tt for the drive)."""
    cm = closed_model(kind, planar).compile()
    z, zd, zdd = random_state(cm, 4)
    t = 0.37
    zs = trajectory(z, zd, zdd, np.zeros(cm.n))

    def phi(s):
        return _residual(cm, t + s, zs(s))

    lvl1 = _residual(cm, t, z, zd, zdd, level=1)
    lvl2 = _residual(cm, t, z, zd, zdd, level=2)
    # velocity level: same tolerance as the Jacobian (5-point first difference)
    np.testing.assert_allclose(lvl1, d1(phi), rtol=1e-9, atol=1e-9)
    # acceleration level: 5-point second difference, roundoff ~ 6 eps / h^2 ~ 1e-9
    np.testing.assert_allclose(lvl2, d2(phi), rtol=1e-7, atol=1e-7)
    # and level 1 is Phi_z zd (+ Phi_t for the drive)
    Jc, _, _ = constraint_jacobian_at(cm.arrays, z)
    phit = d1(lambda s: _residual(cm, t + s, z))   # explicit time dependence
    np.testing.assert_allclose(lvl1, Jc @ zd + phit, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("kind,planar", CUT_CASES,
                         ids=[f"{k}{'-planar' if p else ''}" for k, p in CUT_CASES])
def test_derivative_of_theta_along_a_direction_matches_differences(kind, planar):
    """``mu^T dTheta R_j`` of the step Jacobians (the derivative of ``R^Phi``, seed 001
    eqs 56-57), computed in reverse mode over the frame twists by ``workbench.formulations.semirecursive.step_jacobians.dtheta_mu``,
    against central differences of ``mu^T Theta_z(z + s dz, p + s dp) R`` for arbitrary
    ``mu`` and ``R`` and a direction that moves both the coordinates and every field."""
    from workbench.formulations.semirecursive import step_jacobians as S
    from workbench.kernels import tangents as T
    cm = closed_model(kind, planar).compile()
    ma = cm.arrays
    n, m, d, nf = cm.n, cm.m, cm.d, ma.fr_parent.shape[0]
    rng = np.random.default_rng(17)
    z, _, _ = random_state(cm, 6)
    dz = rng.normal(size=n)
    dp = 0.1 * rng.normal(size=ma.p.shape[0])
    mu = rng.normal(size=m + d)
    R = rng.normal(size=(n, d))

    def kinematics(p, zz):
        A, r, u = np.zeros((nf, 3, 3)), np.zeros((nf, 3)), np.zeros((nf, 3))
        bcol = np.zeros((nf, 6))
        K.frame_positions(ma, p, zz, A, r, u)
        K.joint_columns(ma, r, u, bcol)
        return A, r, u, bcol

    def theta_form(s):
        p = ma.p + s * dp
        A, r, _, bcol = kinematics(p, z + s * dz)
        Th = np.zeros((m + d, n))
        K.constraint_jacobian(ma, p, A, r, bcol, n, Th[:m])
        K.dof_jacobian(ma, p, A, r, bcol, n, Th[m:])
        return mu @ Th @ R

    A, r, u, bcol = kinematics(ma.p, z)
    th, dr, du = np.zeros((nf, 3)), np.zeros((nf, 3)), np.zeros((nf, 3))
    every = np.ones(nf + 1, dtype=np.int64)
    db = np.zeros((nf, 6))
    T.frame_positions_t(ma, ma.p, dp, z, dz, A, r, u, th, dr, du, every)
    T.joint_columns_t(ma, r, u, dr, du, db, every)
    sub = np.zeros(d)
    S.dtheta_mu(ma, ma.p, dp, A, r, th, dr, db, bcol, R, mu, np.zeros((3, 2, 3)),
                np.zeros((nf, 6)), np.zeros((nf, 6)), np.zeros(n), sub)
    ref = d1(theta_form)
    assert np.abs(ref).max() > 1e-2          # the check is not vacuous
    # 1e-8: 5-point difference (truncation ~1e-12) of sums of O(10) products
    np.testing.assert_allclose(sub, ref, rtol=1e-8, atol=1e-8 * np.abs(ref).max())


@pytest.mark.parametrize("kind", ["revolute", "distance", "prismatic"])
def test_explicit_columns_of_theta_inverse(kind):
    """The step Jacobians' tangent solves ``x = S a + R^Phi b`` (``workbench.formulations.semirecursive.step_jacobians.theta_columns``,
    ``theta_apply``) against the QR solve they replace: ``Theta_z [S R^Phi] = I`` and
    equal solutions, with and without a zero DOF block."""
    from workbench.formulations.semirecursive import matrixr as MR
    from workbench.formulations.semirecursive import step_jacobians as S
    cm = closed_model(kind, False).compile()
    ma = cm.arrays
    n, m, d = cm.n, cm.m, cm.d
    z, _, _ = random_state(cm, 9)
    ws = MR.make_workspace(ma, n)
    Rphi = np.zeros((n, d))
    K.frame_positions(ma, ma.p, z, ws.A, ws.r, ws.u)
    st, _ = MR.factor_r(ma, ma.p, z, Rphi, ws)
    assert st == MR.OK and m > 0
    Sm = np.zeros((n, m))
    S.theta_columns(ws.V, ws.beta, ws.Rm, m, Sm)
    Th = ws.Th[:m + d]
    # 1e-9: products of a well-conditioned QR inverse with O(1) entries
    np.testing.assert_allclose(Th @ np.hstack([Sm, Rphi]), np.eye(m + d), atol=1e-9)
    rng = np.random.default_rng(2)
    for zero_dof in (False, True):
        b = rng.normal(size=m + d)
        if zero_dof:
            b[m:] = 0.0
        x, xq = np.zeros(n), np.zeros(n)
        S.theta_apply(Sm, Rphi, b, x)
        MR.qr_solve(ws.V, ws.beta, ws.Rm, b, xq)
        np.testing.assert_allclose(x, xq, rtol=1e-9, atol=1e-9 * np.abs(xq).max())


def test_planar_cut_produces_only_in_plane_equations():
    """A planar revolute cut gives 2 equations, a spatial one 5 (seed 002 Table 1)."""
    planar = closed_model("revolute", True).compile()
    spatial = closed_model("revolute", False).compile()
    assert planar.m == 2
    assert spatial.m == 5
