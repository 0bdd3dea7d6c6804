"""The cam-follower of seed 000 (App. B.2, Fig. B.10; reconstruction: the seed gives the
construction only), closed by the cam relation ``rho = s(u)`` (a Fourier pitch curve).

Independent references: the seed's construction (the cam on a ground revolute, the pitch
point at polar angle and radius, the follower's own angle: 4 coordinates, 1 degree of
freedom with the relation and the guide), the lift law of an in-line translating follower
(``y_P = s(pi/2 - theta)`` for the shipped two-harmonic profile; the intersection of the
follower's line with an eccentric circle for a circular cam given as a fitted Fourier
series), the one-degree-of-freedom Lagrange equation of the cam integrated by scipy,
energy conservation, central differences of the constraint kernels (value, Jacobian,
velocity/acceleration levels, tangents, the derivative of ``Theta_z``), and for the design
sensitivities direct = adjoint = central differences of the simulation.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import frame_state

import workbench as wb
from workbench.errors import ModelError, UnknownNameError
from workbench.kernels import tangents as T
from workbench.kernels import tree as K
from workbench.model.files import model_from_dict
from workbench.model.serialize import model_to_dict

T_END, DT = 0.6, 1e-3
H = 1e-4        # step of the 5-point stencils (truncation ~1e-14 on these O(1) functions)


def d1(f, h=H):
    return (-f(2 * h) + 8 * f(h) - 8 * f(-h) + f(-2 * h)) / (12 * h)


def d2(f, h=1e-3):
    return (-f(2 * h) + 16 * f(h) - 30 * f(0.0) + 16 * f(-h) - f(-2 * h)) / (12 * h * h)


def _p(cm, name):
    return float(cm.param_values[cm.param_names.index(name)])


def profile(cm):
    """``s, s', s''`` of the shipped pitch curve ``a0 + a1 cos u + b2 sin 2u`` (numpy)."""
    a0, a1, b2 = (_p(cm, k) for k in ("a0", "a1", "b2"))
    return (lambda u: a0 + a1 * np.cos(u) + b2 * np.sin(2 * u),
            lambda u: -a1 * np.sin(u) + 2 * b2 * np.cos(2 * u),
            lambda u: -a1 * np.cos(u) - 4 * b2 * np.sin(2 * u))


@pytest.fixture(scope="module")
def cm():
    return wb.catalog.load("cam-follower").compile()


@pytest.fixture(scope="module")
def runs(cm):
    return {f: wb.simulate(cm, T_END, DT, f) for f in ("sr-com", "sr-origin", "multipliers")}


# ----------------------------------------------------------------------------------------
# construction and kinematics
# ----------------------------------------------------------------------------------------


def test_construction_is_the_seeds(cm):
    # cam angle z_2, polar angle z_1, radius s_1(z_1), follower angle z_3 (seed eq B.4 plus
    # the radius): the relation and the guide's two planar rows leave one freedom
    assert cm.coord_names == ("cam", "cf.u", "cf.rho", "cf.phi")
    assert (cm.n, cm.m, cm.d) == (4, 3, 1)
    assert cm.constraint_names == ("guide", "guide", "cf")
    assert list(cm.dof_names) == ["cam"]
    m = cm.model
    assert m.bodies["cf.arm"].mass == 0.0 and m.bodies["cf.pin"].mass == 0.0
    assert "cam-follower" in wb.catalog.names()


def test_lift_is_the_pitch_curve_along_the_motion(cm, runs):
    """In-line translating follower: the pin P is on the follower's line x = 0, at the
    cam's polar angle pi/2 - theta, so y_P = s(pi/2 - theta) and rho = s(u) everywhere."""
    res = runs["sr-com"]
    s, _, _ = profile(cm)
    th = res.coordinate("cam")
    P = res.point_position("follower.P")
    assert np.ptp(th) > 2 * np.pi               # a full turn is covered
    # the position problem's Newton iterations stop at 1e-10 on the constraints and end
    # far below (measured 1e-17 in x, 1e-12 in y)
    np.testing.assert_allclose(P[:, 0], 0.0, atol=1e-11)
    np.testing.assert_allclose(P[:, 1], s(np.pi / 2 - th), atol=1e-11)
    np.testing.assert_allclose(res.coordinate("cf.rho"), s(res.coordinate("cf.u")), atol=1e-11)


def eccentric_cam(Rc=0.05, e=0.01, u0=0.3, N=12):
    """A circular cam (pitch circle of radius Rc, centre at distance e from the pivot, at
    the polar angle u0 of the cam frame), its pitch curve given as the Fourier series of
    rho(u) = e cos(u - u0) + sqrt(Rc^2 - e^2 sin^2(u - u0)) (FFT of 64 samples, N
    harmonics), on the shipped follower."""
    uu = 2 * np.pi * np.arange(64) / 64
    rho = e * np.cos(uu - u0) + np.sqrt(Rc ** 2 - e ** 2 * np.sin(uu - u0) ** 2)
    F = np.fft.rfft(rho) / 64
    a0, ak, bk = F[0].real, 2 * F[1:N + 1].real, -2 * F[1:N + 1].imag
    mod = wb.catalog.load("cam-follower")
    cf = mod.cams["cf"]
    cf.a0, cf.cos, cf.sin = float(a0), [float(x) for x in ak], [float(x) for x in bk]
    mod.joints["cf.rho"].q0 = [float(rho[16])]        # u = pi/2
    return mod, (a0, ak, bk)


def test_eccentric_circle_cam_lift_matches_the_circle_geometry():
    """The lift of the in-line follower on a circular cam: the follower's line x = 0 meets
    the pitch circle (centre e (cos(theta + u0), sin(theta + u0))) at y = C_y +
    sqrt(Rc^2 - C_x^2): plane geometry, not the polar formula the series was fitted to."""
    Rc, e, u0 = 0.05, 0.01, 0.3
    mod, (a0, ak, bk) = eccentric_cam(Rc, e, u0)
    # the fit's truncation error (the harmonics decay geometrically): below 1e-13 m
    # (measured 3e-17)
    u = np.linspace(0, 2 * np.pi, 2001)
    k = np.arange(1, len(ak) + 1)[:, None]
    fit = a0 + ak @ np.cos(k * u) + bk @ np.sin(k * u)
    exact = e * np.cos(u - u0) + np.sqrt(Rc ** 2 - e ** 2 * np.sin(u - u0) ** 2)
    assert np.abs(fit - exact).max() < 1e-13
    res = wb.simulate(mod, 0.6, DT)
    th = res.coordinate("cam")
    assert np.ptp(th) > 2 * np.pi
    C = e * np.c_[np.cos(th + u0), np.sin(th + u0)]
    y = C[:, 1] + np.sqrt(Rc ** 2 - C[:, 0] ** 2)
    # fit (< 1e-13) + the position problem's residual (measured 1e-12 in all): 1e-11
    np.testing.assert_allclose(res.point_position("follower.P")[:, 1], y, atol=1e-11)


# ----------------------------------------------------------------------------------------
# dynamics
# ----------------------------------------------------------------------------------------


def lagrange_reference(cm, t):
    """The cam's one-degree-of-freedom Lagrange equation: with the lift y(theta) =
    s(pi/2 - theta) (y' = -s', y'' = s''), the follower translating (its rotation is
    locked), the arm and pin massless, M(theta) = J + m y'^2 and
    M theta'' + m y' y'' theta'^2 + V_y y' = 0, V = m g (y + x_G) + k/2 (0.1 - y - L0)^2
    (the spring from S = (0, 0.2) to the follower's top T = P + (0, 0.1))."""
    from scipy.integrate import solve_ivp
    J, m, k, L0, g, w0 = (_p(cm, n) for n in ("Jc", "mf", "k", "L0", "g", "omega0"))
    s, s1, s2 = profile(cm)

    def rhs(_, x):
        th, w = x
        y, y1, y2 = s(np.pi / 2 - th), -s1(np.pi / 2 - th), s2(np.pi / 2 - th)
        Vy = m * g - k * ((0.2 - (y + 0.1)) - L0)
        return [w, -(m * y1 * y2 * w * w + Vy * y1) / (J + m * y1 * y1)]

    sol = solve_ivp(rhs, (0, t[-1]), [0.0, w0], t_eval=t, rtol=1e-12, atol=1e-12,
                    method="DOP853")
    return sol.y[0]


def test_motion_matches_the_lagrange_equation_of_the_cam(cm):
    """The cam angle of the simulation converges to the scipy solution of the Lagrange
    equation at second order (the trapezoidal rule)."""
    err = []
    for dt in (1e-3, 5e-4):
        res = wb.simulate(cm, T_END, dt)
        err.append(np.abs(res.coordinate("cam") - lagrange_reference(cm, res.t)).max())
    # measured 4.0e-6 and 1.0e-6 rad: second order (ratio 4.0; 3.5 asserted) and small
    assert err[1] < err[0] / 3.5, err
    assert err[1] < 2e-6, err


def test_every_formulation_of_the_family_gives_the_same_conservative_motion(runs):
    r = runs
    # the two reference points solve the same discrete equations: rounding only
    np.testing.assert_allclose(r["sr-origin"].z, r["sr-com"].z, rtol=0, atol=1e-10)
    for f in ("sr-com", "sr-origin"):
        assert r[f].max_constraint_violation < 1e-10
        # conservative: no secular drift beyond 1e-4 J of a kinetic energy of ~4 J
        # (measured 4e-6 J)
        assert abs(r[f].energy_drift) < 1e-4
    # multipliers: Baumgarte keeps the drift bounded (measured 5e-7 m), and the motion is
    # the same up to the integrators' difference (measured 1.5e-6 rad)
    assert r["multipliers"].max_constraint_violation < 5e-6
    np.testing.assert_allclose(r["multipliers"].zi, r["sr-com"].zi, atol=1e-5)


def test_contact_force_is_newtons_and_compressive(cm, runs):
    """The relation's reaction on the radius rho is -lambda (Phi_z has +1 there): the force
    of the massless pin on the follower along the radius, which at P (on the vertical
    above the pivot) is vertical.  Newton's law for the translating follower gives it
    independently: -lambda = m (a_P,y + g) - k (L - L0) (spring length L = 0.1 - y_P, its
    tension pulls the follower up).  The preload keeps it pushing the follower up (the
    contact stays compressive: the bilateral relation is never in tension)."""
    res = runs["sr-com"]
    lam = res.constraint_forces()[:, cm.constraint_names.index("cf")]
    m, k, L0, g = (_p(cm, n) for n in ("mf", "k", "L0", "g"))
    y = res.point_position("follower.P")[:, 1]
    ay = res.point_acceleration("follower.P")[:, 1]
    # multipliers recovered at each stored state: rounding of forces of ~30 N (measured
    # 6e-14 N)
    np.testing.assert_allclose(-lam, m * (ay + g) - k * ((0.1 - y) - L0), atol=1e-9)
    # preload 18-30 N against an inertia force of a few N: at least 10 N upwards
    # (measured 25-33 N)
    assert (-lam).min() > 10.0, (-lam).min()


def test_the_global_formulation_refuses_the_cam_relation_by_name(cm):
    with pytest.raises(ModelError, match="cam relation 'cf'.*global"):
        wb.simulate(cm, 0.01, DT, "global")


# ----------------------------------------------------------------------------------------
# the constraint kernels against central differences of the same kernels
# ----------------------------------------------------------------------------------------


def _state(cm, seed=5):
    rng = np.random.default_rng(seed)
    z = np.array([0.4, 1.1, 0.063, -0.2]) + 0.1 * rng.normal(size=4)
    return z, rng.normal(size=4), rng.normal(size=4), rng


def _phi(cm, p, z, zd, zdd, level):
    ma = cm.arrays
    nf = ma.fr_parent.shape[0]
    A, r, u = np.zeros((nf, 3, 3)), np.zeros((nf, 3)), np.zeros((nf, 3))
    bcol, Z, Zd = np.zeros((nf, 6)), np.zeros((nf, 6)), np.zeros((nf, 6))
    K.frame_kinematics(ma, p, z, zd, zdd, A, r, u, bcol, Z, Zd)
    out = np.zeros(cm.m)
    K.constraints(ma, p, 0.0, z, zd, zdd, A, r, Z, Zd, level, out)
    return out


def test_cam_row_jacobian_and_levels_match_central_differences(cm):
    ma = cm.arrays
    z, zd, zdd, _ = _state(cm)
    k = cm.constraint_names.index("cf")
    A, r, _, bcol, _, _ = frame_state(cm, z)
    Jc = np.zeros((cm.m, cm.n))
    K.constraint_jacobian(ma, ma.p, A, r, bcol, cm.n, Jc)
    Jfd = np.column_stack([d1(lambda s: _phi(cm, ma.p, z + s * e, zd * 0, zdd * 0, 0))
                           for e in np.eye(cm.n)])
    # 1e-10: 5-point difference (truncation ~1e-14, rounding ~1e-12 / H) of O(0.1) rows
    np.testing.assert_allclose(Jc, Jfd, atol=1e-10)
    assert Jc[k, 2] == 1.0 and abs(Jc[k, 1]) > 1e-3        # +1 on rho, -s'(u) on u
    path = lambda s: z + zd * s + 0.5 * zdd * s * s      # noqa: E731
    lvl1 = _phi(cm, ma.p, z, zd, zdd, 1)
    lvl2 = _phi(cm, ma.p, z, zd, zdd, 2)
    np.testing.assert_allclose(lvl1, Jc @ zd, atol=1e-12)
    # second difference with h = 1e-3: truncation ~1e-7 * |Phi''''|, rounding ~1e-10
    np.testing.assert_allclose(lvl2, d2(lambda s: _phi(cm, ma.p, path(s), zd * 0, zdd * 0, 0)),
                               atol=1e-6)
    assert abs(lvl2[k]) > 1e-3


@pytest.mark.parametrize("level", [0, 1, 2])
def test_cam_row_tangents_match_central_differences(cm, level):
    """``constraints_t`` along a direction of the coordinates, rates, accelerations and of
    every field (the Fourier coefficients included: ds/da_k = cos(k u), ...)."""
    ma = cm.arrays
    z, zd, zdd, rng = _state(cm, 7)
    dz, dzd, dzdd = rng.normal(size=(3, cm.n))
    dp = 0.01 * rng.normal(size=ma.p.shape[0])
    nf = ma.fr_parent.shape[0]
    A, r, u, bcol, Z, Zd = frame_state(cm, z, zd, zdd)
    th, dr, du = np.zeros((nf, 3)), np.zeros((nf, 3)), np.zeros((nf, 3))
    every = np.ones(nf + 1, dtype=np.int64)
    db, dZ, dZd = np.zeros((nf, 6)), np.zeros((nf, 6)), np.zeros((nf, 6))
    T.frame_positions_t(ma, ma.p, dp, z, dz, A, r, u, th, dr, du, every)
    T.joint_columns_t(ma, r, u, dr, du, db, every)
    T.frame_velocities_t(ma, zd, dzd, bcol, db, dZ, every)
    T.frame_accelerations_t(ma, zd, zdd, dzd, dzdd, r, u, bcol, Z, dr, du, db, dZ, dZd,
                            np.ones(nf + 1, dtype=np.int64))
    out = np.zeros(cm.m)
    T.constraints_t(ma, ma.p, dp, 0.0, z, zd, zdd, dz, dzd, dzdd, A, r, Z, Zd, th, dr, dZ, dZd,
                    level, out)
    ref = d1(lambda s: _phi(cm, ma.p + s * dp, z + s * dz, zd + s * dzd, zdd + s * dzdd,
                            level))
    k = cm.constraint_names.index("cf")
    assert abs(ref[k]) > 1e-3
    # 5-point difference with h = 1e-4: 1e-9 relative to the row scale
    np.testing.assert_allclose(out, ref, rtol=1e-8, atol=1e-9 * np.abs(ref).max())


def test_derivative_of_theta_through_the_cam_row_matches_differences(cm):
    """``mu^T dTheta R_j`` (step_jacobians.dtheta_mu; the cam row's part -mu (s'' dz_u +
    ds') R_j[u], with cos u, sin u from the frame rotations and dz_u from the rotation
    tangents) against central differences of ``mu^T Theta_z(z + s dz, p + s dp) R``."""
    from workbench.formulations.semirecursive import step_jacobians as S
    ma = cm.arrays
    n, m, d, nf = cm.n, cm.m, cm.d, ma.fr_parent.shape[0]
    z, _, _, rng = _state(cm, 9)
    dz = rng.normal(size=n)
    dp = 0.01 * rng.normal(size=ma.p.shape[0])
    mu = rng.normal(size=m + d)
    R = rng.normal(size=(n, d))

    def theta_form(s):
        p = ma.p + s * dp
        A, r, u = np.zeros((nf, 3, 3)), np.zeros((nf, 3)), np.zeros((nf, 3))
        bcol = np.zeros((nf, 6))
        K.frame_positions(ma, p, z + s * dz, A, r, u)
        K.joint_columns(ma, r, u, bcol)
        Th = np.zeros((m + d, n))
        K.constraint_jacobian(ma, p, A, r, bcol, n, Th[:m])
        K.dof_jacobian(ma, p, A, r, bcol, n, Th[m:])
        return mu @ Th @ R

    A, r, u, bcol, _, _ = frame_state(cm, z)
    th, dr, du = np.zeros((nf, 3)), np.zeros((nf, 3)), np.zeros((nf, 3))
    every = np.ones(nf + 1, dtype=np.int64)
    db = np.zeros((nf, 6))
    T.frame_positions_t(ma, ma.p, dp, z, dz, A, r, u, th, dr, du, every)
    T.joint_columns_t(ma, r, u, dr, du, db, every)
    sub = np.zeros(d)
    S.dtheta_mu(ma, ma.p, dp, A, r, th, dr, db, bcol, R, mu, np.zeros((3, 2, 3)),
                np.zeros((nf, 6)), np.zeros((nf, 6)), np.zeros(n), sub)
    ref = d1(theta_form)
    assert np.abs(ref).max() > 1e-2
    # 5-point difference (h = 1e-4) of sums of O(1) products: 1e-8
    np.testing.assert_allclose(sub, ref, rtol=1e-8, atol=1e-8 * np.abs(ref).max())


# ----------------------------------------------------------------------------------------
# design sensitivities
# ----------------------------------------------------------------------------------------


def test_gradients_are_exact_through_the_cam(cm):
    """A Fourier coefficient of the pitch curve (a kinematic parameter: it moves the
    position problem, Theta_z and R) and the spring stiffness (a force parameter), with
    the model's two objectives (follower acceleration, cam speed)."""
    kw = dict(t_end=0.3, dt=DT, parameters=["a1", "b2", "k"])
    d = wb.sensitivity(cm, method="direct", **kw)
    a = wb.sensitivity(cm, method="adjoint", **kw)
    f = wb.sensitivity(cm, method="fd", **kw)
    assert np.all(np.abs(d.gradient) > 0)
    # direct and adjoint: the same discrete derivative, two orders of evaluation (measured
    # 2e-15 relative)
    np.testing.assert_allclose(a.gradient, d.gradient, rtol=1e-9, atol=0)
    # central differences of the simulation (Newton stops at 1e-10): 1e-6 relative
    # (measured 1.3e-9)
    np.testing.assert_allclose(d.gradient, f.gradient, rtol=1e-6)


# ----------------------------------------------------------------------------------------
# the builder and the model file
# ----------------------------------------------------------------------------------------


def test_model_file_round_trip_compiles_to_the_same_arrays(cm):
    doc = model_to_dict(cm.model)
    assert [c["name"] for c in doc["cam_relations"]] == ["cf"]
    again = model_from_dict(doc).compile()
    for a, b in zip(cm.arrays, again.arrays):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert again.coord_names == cm.coord_names


def test_bad_cam_relations_are_refused_by_name():
    mod = wb.catalog.load("cam-follower")
    with pytest.raises(ModelError, match="cam relation 'x'.*'cam' is a revolute joint"):
        mod.cam_relation("x", "cam", "cf.u", 0.05)
    with pytest.raises(UnknownNameError, match="nope"):
        mod.cam_relation("x", "cf.rho", "nope", 0.05)
    with pytest.raises(ModelError, match="already used"):
        mod.cam_relation("cf", "cf.rho", "cf.u", 0.05)
    # a refused cam follower leaves the model as it was
    before = (len(mod.bodies), len(mod.joints), len(mod.cams))
    with pytest.raises(ModelError, match="cam-follower 'cf2'.*already has tree joint"):
        mod.cam_follower("cf2", "cam", "follower", "O", 0.05)
    mod.body("other", mass=1.0)
    with pytest.raises(UnknownNameError, match="nope"):
        mod.cam_follower("cf2", "cam", "other", "O", "nope")
    assert (len(mod.bodies) - 1, len(mod.joints), len(mod.cams)) == before
