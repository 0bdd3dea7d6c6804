"""Dynamic terms of the semi-recursive formulations against independent references.

* SR-I (reference point: centre of mass, code 0 / "sr-com") and SR-II (global origin,
  code 1 / "sr-origin") must give the same ``M`` and ``tau = M zdd - Q`` to rounding.
* ``M`` is compared with a Cartesian reference computation written here
  (``sum_b m J_v^T J_v + J_w^T I_G J_w``, Jacobians by central differences of the body's
  centre of mass and rotation matrix from an independent numpy forward kinematics).
* ``tau`` is compared with Lagrange's equations ``d/dt dT/dzd - dT/dz - Q``.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import (ALL_JOINT_TYPES, frame_state, random_state, random_tree, ref_body_poses,
                      ref_kinetic_energy, ref_mass_matrix, ref_point, ref_tau_lagrange)

from workbench.compiled.dof import constraint_jacobian_at
from workbench.formulations.semirecursive import matrixr as MR
from workbench.formulations.semirecursive.state import state_terms
from workbench.kernels import tree as K
from workbench.model.elements import GROUND

SEEDS = [21, 22, 23]


def open_tree(seed):
    """Every joint type once, random order and shape, with all kinds of force elements."""
    model = random_tree(seed, ALL_JOINT_TYPES + ("revolute", "prismatic"), forces=True,
                        shuffle=True)
    return model, model.compile()


@pytest.mark.parametrize("seed", SEEDS)
def test_sr1_and_sr2_give_the_same_open_tree_terms(seed):
    model, cm = open_tree(seed)
    ma = cm.arrays
    z, zd, zdd = random_state(cm, seed)
    M0, tau0 = MR.full_dynamics_terms(ma, ma.p, MR.FORM_COM, 0.4, z, zd, zdd)
    M1, tau1 = MR.full_dynamics_terms(ma, ma.p, MR.FORM_ORIGIN, 0.4, z, zd, zdd)
    assert MR.FORM_COM == 0 and MR.FORM_ORIGIN == 1
    # 1e-12 relative: two exact recursions of the same quantities, differing by rounding
    np.testing.assert_allclose(M0, M1, rtol=0, atol=1e-12 * np.abs(M1).max())
    np.testing.assert_allclose(tau0, tau1, rtol=0, atol=1e-12 * max(1.0, np.abs(tau1).max()))


@pytest.mark.parametrize("seed", SEEDS)
def test_mass_matrix_matches_cartesian_reference(seed):
    model, cm = open_tree(seed)
    ma = cm.arrays
    z, zd, zdd = random_state(cm, seed)
    Mref = ref_mass_matrix(model, cm, z, method="central")
    for form in (MR.FORM_COM, MR.FORM_ORIGIN):
        M, _ = MR.full_dynamics_terms(ma, ma.p, form, 0.0, z, zd, zdd)
        # 1e-8 relative: central-difference Jacobians with step 1e-6 carry a relative
        # error ~ eps/h = 1e-10 (roundoff) + h^2 = 1e-12 (truncation), squared into M
        np.testing.assert_allclose(M, Mref, rtol=0, atol=1e-8 * np.abs(Mref).max(),
                                   err_msg=f"formulation {form}")
    # symmetric (1e-14 relative: both triangles are written from the same products) and
    # positive definite (a kinetic energy is positive)
    np.testing.assert_allclose(M, M.T, atol=1e-14 * np.abs(M).max())
    assert np.linalg.eigvalsh(Mref).min() > 0


@pytest.mark.parametrize("seed", SEEDS)
def test_tau_matches_lagrange_equations(seed):
    model, cm = open_tree(seed)
    ma = cm.arrays
    z, zd, zdd = random_state(cm, seed)
    t = 0.4
    tau_ref = ref_tau_lagrange(model, cm, t, z, zd, zdd)
    scale = max(1.0, np.abs(tau_ref).max())
    for form in (MR.FORM_COM, MR.FORM_ORIGIN):
        _, tau = MR.full_dynamics_terms(ma, ma.p, form, t, z, zd, zdd)
        # 1e-7 relative: d/dt(M zd) by a central difference of step 1e-5 (truncation
        # ~1e-10 x third derivative) and dT/dz with step 1e-6 (roundoff ~1e-10 T)
        np.testing.assert_allclose(tau, tau_ref, rtol=0, atol=1e-7 * scale,
                                   err_msg=f"formulation {form}")


@pytest.mark.parametrize("seed", SEEDS)
def test_velocity_terms_alone_match_lagrange(seed):
    """With zdd = 0 and no gravity/forces, tau is exactly the Coriolis/centrifugal vector."""
    model = random_tree(seed, ALL_JOINT_TYPES, gravity=(0.0, 0.0, 0.0), shuffle=True)
    cm = model.compile()
    z, zd, _ = random_state(cm, seed)
    zdd = np.zeros(cm.n)
    tau_ref = ref_tau_lagrange(model, cm, 0.0, z, zd, zdd)
    assert np.abs(tau_ref).max() > 0.1     # the velocity terms are not negligible here
    for form in (MR.FORM_COM, MR.FORM_ORIGIN):
        _, tau = MR.full_dynamics_terms(cm.arrays, cm.arrays.p, form, 0.0, z, zd, zdd)
        # same numerical-differentiation budget as test_tau_matches_lagrange_equations
        np.testing.assert_allclose(tau, tau_ref, rtol=0,
                                   atol=1e-7 * max(1.0, np.abs(tau_ref).max()))


@pytest.mark.parametrize("seed", SEEDS)
def test_kinetic_energy_body_sum_equals_quadratic_form(seed):
    model, cm = open_tree(seed)
    ma = cm.arrays
    z, zd, zdd = random_state(cm, seed)
    M, _ = MR.full_dynamics_terms(ma, ma.p, MR.FORM_ORIGIN, 0.0, z, zd, zdd)
    T_quad = 0.5 * zd @ M @ zd
    T_ref = ref_kinetic_energy(model, cm, z, zd)            # complex-step Jacobians
    A, r, u, bcol, Z, Zd = frame_state(cm, z, zd, zdd)
    T_kernel = K.kinetic_energy(ma, ma.p, A, r, Z)
    # 1e-12 relative: exact identities evaluated with different rounding
    assert T_quad == pytest.approx(T_ref, rel=1e-12)
    assert T_kernel == pytest.approx(T_ref, rel=1e-12)


# ----------------------------------------------------------------------------------------
# closed mechanism: projected terms
# ----------------------------------------------------------------------------------------


def random_closed_mechanism(seed):
    """A random spatial tree closed, at a random configuration, by a cut spherical joint
    to ground, a cut revolute joint between two bodies and a distance constraint.  The
    cut data are chosen (with the independent forward kinematics) so that the constraints
    hold exactly at the random initial coordinates: the mechanism assembles."""
    types = ("revolute", "spherical", "universal", "prismatic", "revolute", "cylindrical",
             "spherical", "revolute")
    rng = np.random.default_rng(seed)
    base = random_tree(seed, types, forces=True)
    cm0 = base.compile()
    z0 = rng.uniform(-0.6, 0.6, cm0.n)
    zd0 = rng.uniform(-1.0, 1.0, cm0.n)
    for j in base.joints.values():
        ks = [k for k, jn in enumerate(cm0.coord_joint) if jn == j.name]
        j.q0 = [float(z0[k]) for k in ks]
        j.qd0 = [float(zd0[k]) for k in ks]
    poses = ref_body_poses(base, cm0, z0)
    # spherical cut: point p0 of b7 pinned to where it is now
    x = ref_point(base, cm0, z0, "b7", "p0")
    base.cut("pin", "spherical", "b7", GROUND, point1="p0", point2=tuple(x))
    # revolute cut between b3 and b5 at b3.p1, with consistent axes
    xb = ref_point(base, cm0, z0, "b3", "p1")
    r5, A5 = poses["b5"]
    a_glob = np.array([0.3, -0.5, 0.8]) / np.linalg.norm([0.3, -0.5, 0.8])
    r3, A3 = poses["b3"]
    base.point("b5", "hinge", tuple(A5.T @ (xb - r5)))
    base.cut("hinge", "revolute", "b3", "b5", point1="p1", point2="hinge",
             axis1=tuple(A3.T @ a_glob), axis2=tuple(A5.T @ a_glob))
    # distance constraint between b1.p1 and b6.p1 at their current distance
    L = np.linalg.norm(ref_point(base, cm0, z0, "b1", "p1") - ref_point(base, cm0, z0, "b6", "p1"))
    base.distance("rod", "b1", "p1", "b6", "p1", length=float(L))
    return base


@pytest.mark.parametrize("seed", [31, 32])
def test_sr1_and_sr2_projected_terms_agree_on_closed_mechanism(seed):
    model = random_closed_mechanism(seed)
    cm = model.compile()
    assert cm.m > 0 and 0 < cm.d < cm.n
    st0 = state_terms(cm, 0.2, formulation="sr-com")
    st1 = state_terms(cm, 0.2, formulation="sr-origin")
    np.testing.assert_array_equal(st0.z, st1.z)   # the kinematics does not depend on it
    # 1e-11 relative: identical projections of terms that agree to rounding
    np.testing.assert_allclose(st0.M_bar, st1.M_bar, rtol=0,
                               atol=1e-11 * np.abs(st1.M_bar).max())
    np.testing.assert_allclose(st0.Q_bar, st1.Q_bar, rtol=0,
                               atol=1e-11 * max(1.0, np.abs(st1.Q_bar).max()))


@pytest.mark.parametrize("seed", [31, 32])
def test_projected_terms_match_independent_reference(seed):
    """Mbar = R^T M_ref R and Qbar = -R^T tau_ref(z, zd, zdd_b), where R and zdd_b are
    first checked against their defining properties (Phi_z R = 0, B R = I; zdd_b
    satisfies the acceleration constraints with zero independent accelerations)."""
    model = random_closed_mechanism(seed)
    cm = model.compile()
    st = state_terms(cm, 0.2, formulation="sr-com")
    Jc, _, _ = constraint_jacobian_at(cm.arrays, st.z)
    dof_cols = [cm.coordinate(nm) for nm in cm.dof_names]
    B = np.zeros((cm.d, cm.n))
    B[np.arange(cm.d), dof_cols] = 1.0
    # 1e-10: least-squares solutions of well-conditioned systems of O(1) entries
    np.testing.assert_allclose(Jc @ st.R, 0.0, atol=1e-10)
    np.testing.assert_allclose(B @ st.R, np.eye(cm.d), atol=1e-10)
    # acceleration constraints with zdd = zdd_b (second derivative of Phi along z(s))
    z, zd, zb = st.z, st.zd, st.zdd_bias

    def phi(s):
        zs = z + zd * s + 0.5 * zb * s * s
        A, r, *_ = frame_state(cm, zs)
        out = np.zeros(cm.m)
        zero = np.zeros(cm.n)
        nf = cm.arrays.fr_parent.shape[0]
        K.constraints(cm.arrays, cm.arrays.p, 0.2, zs, zero, zero, A, r, np.zeros((nf, 6)),
                      np.zeros((nf, 6)), 0, out)
        return out

    h = 1e-3
    acc = (-phi(2 * h) + 16 * phi(h) - 30 * phi(0.0) + 16 * phi(-h) - phi(-2 * h)) / (12 * h * h)
    # 1e-7: 5-point second difference (roundoff ~ 6 eps / h^2 ~ 1e-9)
    np.testing.assert_allclose(acc, 0.0, atol=1e-7)
    np.testing.assert_allclose(B @ zb, 0.0, atol=1e-12)  # exact zeros up to rounding
    # the velocity satisfies the velocity constraints and reproduces the DOF rates
    np.testing.assert_allclose(Jc @ zd, 0.0, atol=1e-10)  # least-squares rounding
    np.testing.assert_allclose(B @ zd, cm.zdi0, atol=1e-12)  # unit rows of B: rounding
    # projected mass matrix and forces against the independent references
    Mref = ref_mass_matrix(model, cm, z, method="complex")
    # 1e-11 relative: complex-step Jacobians are exact to rounding; R^T M R sums ~n^2
    # products of O(1) entries
    np.testing.assert_allclose(st.M_bar, st.R.T @ Mref @ st.R, rtol=0,
                               atol=1e-11 * np.abs(Mref).max())
    tau_ref = ref_tau_lagrange(model, cm, 0.2, z, zd, zb)
    Qbar_ref = -st.R.T @ tau_ref
    # 1e-7 relative: Lagrange reference budget (see test_tau_matches_lagrange_equations)
    np.testing.assert_allclose(st.Q_bar, Qbar_ref, rtol=0,
                               atol=1e-7 * max(1.0, np.abs(tau_ref).max()))
