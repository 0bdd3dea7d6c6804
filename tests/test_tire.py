"""Tire-ground contact: the pure force law (workbench/workbench.forces.tire.py) and its analytic
Jacobian, the road profile, the wrench it puts on the wheel body inside the engine, its
stiffness/damping in the Newton matrix, the builder / file format and a wheel dropped
on the ground."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import frame_state, ref_body_poses, ref_jacobians, ref_point

from workbench import Model, ModelError, UnknownNameError, simulate
from workbench.forces import tire as T
from workbench.formulations.semirecursive import matrixr as MR
from workbench.model.elements import GROUND
from workbench.model.files import model_from_dict
from workbench.model.serialize import model_to_dict

# R, k, c, mu, v_eps, depth_ramp, force_ramp
TP = np.array([0.3, 1.2e5, 300.0, 0.8, 0.1, 1e-3, 10.0])
# base height 2 cm, a 1 cm step down centred at 5.5 m over 0.1 m, a 3 cm step up at 7 m
ROAD = np.array([0.02, 5.5, -0.01, 0.1, 7.0, 0.03, 0.5])


def force(X, nroad=len(ROAD)):
    F, P = np.zeros(3), np.zeros(3)
    T.tire_force(X[0:3], X[3:6], X[6:9], X[9:12], X[12:19], X[19:19 + nroad], F, P)
    return np.concatenate([F, P])


def jacobian(X):
    nX = len(X)
    F, P = np.zeros(3), np.zeros(3)
    JF, JP = np.zeros((3, nX)), np.zeros((3, nX))
    delta, N = T.tire_force_jacobian(X[0:3], X[3:6], X[6:9], X[9:12], X[12:19], X[19:],
                                     F, P, JF, JP)
    return F, P, np.vstack([JF, JP]), delta, N


def richardson(fun, X, rel=1e-5):
    """Central differences with Richardson extrapolation (error O(h^4) + rounding)."""
    cols = []
    for j in range(len(X)):
        h = rel * (abs(X[j]) if X[j] != 0 else 1.0)

        def cd(hh):
            Xp, Xm = X.copy(), X.copy()
            Xp[j] += hh
            Xm[j] -= hh
            return (fun(Xp) - fun(Xm)) / (2 * hh)
        cols.append((4 * cd(h / 2) - cd(h)) / 3)
    return np.array(cols).T


def state(x=2.0, height=0.295, axis=(0.05, 1.0, 0.08), vc=(3.0, 0.2, -0.1),
          w=(0.3, 9.5, -0.4), tp=TP, road=ROAD, delta=None):
    """A state of the law's inputs; with ``delta`` the centre height is set so that the
    lowest point of the disc lies ``delta`` below the road (vertically)."""
    a = np.asarray(axis, float)
    a = a / np.linalg.norm(a)
    if delta is not None:
        g = np.array([0.0, 0.0, 1.0]) - a[2] * a          # lowest point: -R g/|g|
        dx = -tp[0] * g[0] / np.linalg.norm(g)
        h = T.road_profile(road, x + dx)[0]
        height = h + tp[0] * math.sqrt(1.0 - a[2] ** 2) - delta
    return np.concatenate([[x, 0.4, height], vc, a, w, tp, road])


def ramp_margins(X):
    """Distances of the state from the breakpoints of the C1/C2 pieces of the law."""
    F, P, J, delta, N = jacobian(X)
    tp, road = X[12:19], X[19:]
    us = [(P[0] - road[1 + 3 * i]) / road[3 + 3 * i] + 0.5 for i in range((len(road) - 1) // 3)]
    return delta, N, min(min(abs(u), abs(u - 1)) for u in us), tp


# ----------------------------------------------------------------------------------------
# the force law
# ----------------------------------------------------------------------------------------

# states in each regime of the law, each well away from the breakpoints
REGIMES = {
    "flat, full contact": state(x=2.0, delta=0.006),
    "on the step ramp, full contact": state(x=5.47, delta=0.004),
    "contact onset (delta < depth_ramp)": state(x=2.0, delta=0.0006, vc=(3.0, 0.2, 0.02)),
    "force ramp (0 < N_raw < force_ramp)": state(x=2.0, delta=0.000145, vc=(3.0, 0.2, 0.0),
                                                 axis=(0.05, 1.0, 0.0), w=(0.0, 9.5, 0.0)),
    "large slip, tilted wheel": state(x=6.9, delta=0.008, axis=(0.3, 1.0, 0.25),
                                      w=(2.0, -4.0, 1.0)),
}


@pytest.mark.parametrize("regime", list(REGIMES))
def test_analytic_jacobian_matches_finite_differences(regime):
    X = REGIMES[regime]
    delta, N, road_margin, tp = ramp_margins(X)
    assert delta > 0 and N > 0                           # the state is in contact
    # and in the regime it is named after
    if "onset" in regime:
        assert 0.1 * tp[5] < delta < 0.9 * tp[5]
    if "force ramp" in regime:
        assert 0.1 * tp[6] < N < 0.9 * tp[6]
    else:
        assert N > 1.1 * tp[6]
    assert road_margin > 1e-2 or "ramp, full" in regime
    _, _, J, _, _ = jacobian(X)
    Jn = richardson(force, X)
    # 1e-7 relative to the largest entry: Richardson-extrapolated central differences
    # with relative steps 1e-5 have truncation ~1e-10 and rounding ~1e-11 relative; the
    # states are > 1e-4 (relative) away from every kink of the C1 ramps and road pieces
    np.testing.assert_allclose(J, Jn, rtol=0, atol=1e-7 * np.abs(J).max())
    # the value part of the Jacobian routine is the force law itself
    F, P = force(X)[:3], force(X)[3:]
    F2, P2, _, _, _ = jacobian(X)
    np.testing.assert_array_equal(F, F2)
    np.testing.assert_array_equal(P, P2)


def test_out_of_contact_the_force_and_its_jacobian_vanish():
    X = state(x=2.0, height=0.02 + 0.3 + 1e-4)              # 0.1 mm above the road
    F, P, J, delta, N = jacobian(X)
    assert delta < 0 and N == 0
    assert np.all(F == 0) and np.all(J[:3] == 0)
    # the application point is still the lowest point of the disc
    a = X[6:9]
    assert abs((P - X[:3]) @ a) < 1e-15 and abs(np.linalg.norm(P - X[:3]) - TP[0]) < 1e-15


def test_normal_force_is_never_negative_and_friction_is_bounded_and_dissipative():
    rng = np.random.default_rng(4)
    for _ in range(2000):
        X = state(x=rng.uniform(5.3, 5.7), height=0.01 + 0.3 + rng.uniform(-0.02, 0.005),
                  axis=rng.normal(size=3) * 0.3 + [0, 1, 0], vc=rng.normal(size=3) * 3,
                  w=rng.normal(size=3) * 10)
        F, P, J, delta, N = jacobian(X)
        assert N >= 0.0
        if delta <= 0:
            assert N == 0.0 and np.all(F == 0)
            continue
        h, h1, _, _ = T.road_profile(ROAD, P[0])
        n = np.array([-h1, 0.0, 1.0]) / math.hypot(1.0, h1)
        Fn = F @ n
        Ft = F - Fn * n
        assert Fn == pytest.approx(N, rel=1e-12, abs=1e-9)
        # |F_t| < mu N (1e-12: rounding of the projection)
        assert np.linalg.norm(Ft) <= TP[3] * N * (1 + 1e-12) + 1e-12
        # F_t opposes the slip velocity of the wheel's material point at P
        vP = X[3:6] + np.cross(X[9:12], P - X[:3])
        vt = vP - (vP @ n) * n
        assert Ft @ vt <= 1e-12 * max(1.0, N)


def test_static_penetration_is_load_over_stiffness():
    # at rest on flat ground N = k delta once delta >= depth_ramp (no shift from the ramps)
    for delta in (0.002, 0.0055, 0.02):
        X = state(x=2.0, height=0.02 + 0.3 - delta, axis=(0, 1, 0), vc=(0, 0, 0),
                  w=(0, 0, 0))
        F, P, J, d, N = jacobian(X)
        assert d == pytest.approx(delta, rel=1e-12)
        np.testing.assert_allclose(F, [0.0, 0.0, TP[1] * delta], rtol=1e-12, atol=1e-9)
        # the contact point is straight below the centre (axis horizontal)
        np.testing.assert_allclose(P, X[:3] - [0.0, 0.0, TP[0]], rtol=0, atol=1e-15)


def test_pure_rolling_gives_no_tangential_force():
    # disc rolling along +x (axis +y): w = v/R about +y makes the contact point still
    v = 3.0
    X = state(x=2.0, height=0.02 + 0.3 - 0.005, axis=(0, 1, 0), vc=(v, 0, 0),
              w=(0, v / TP[0], 0))
    F, P, J, delta, N = jacobian(X)
    np.testing.assert_allclose(F, [0.0, 0.0, N], rtol=0, atol=1e-9 * N)
    # braking the wheel (w = 0) gives a force against the motion, of nearly mu N
    X[9:12] = 0.0
    F, P, J, delta, N = jacobian(X)
    assert F[0] < 0 and -F[0] == pytest.approx(TP[3] * N * v / math.hypot(v, TP[4]),
                                               rel=1e-12)


@pytest.mark.parametrize("where", ["delta = 0", "delta = depth_ramp", "N_raw = force_ramp"])
def test_normal_force_is_c1_across_its_breakpoints(where):
    """One-sided difference quotients agree at each breakpoint of the C1 ramps."""
    R, k, c, mu, ve, d0, n0 = TP
    z_contact = 0.02 + R
    if where == "delta = 0":
        z_break = z_contact
    elif where == "delta = depth_ramp":
        z_break = z_contact - d0
    else:
        # at rest with delta < depth_ramp: N_raw = k S(delta) = n0, S = delta (2u - u^2)
        u = np.roots([-d0 * k, 2 * d0 * k, 0.0, -n0])
        u = float(min(r.real for r in u if abs(r.imag) < 1e-12 and 0 < r.real < 1))
        z_break = z_contact - u * d0

    def normal(z):
        return force(state(x=2.0, height=z, axis=(0, 1, 0), vc=(0, 0, 0), w=(0, 0, 0)))[2]

    for eps in (1e-7, 1e-8):
        left = (normal(z_break) - normal(z_break + eps)) / eps
        right = (normal(z_break - eps) - normal(z_break)) / eps
        # the slopes differ by O(eps * second derivative): second derivative of N in
        # delta is at most 2k/d0 (ramp S) or 2k^2/n0 (ramp pos), times eps
        bound = eps * max(2 * k / d0, 2 * k * k / n0) * 2
        assert abs(left - right) <= bound + 1e-6 * k


# ----------------------------------------------------------------------------------------
# road
# ----------------------------------------------------------------------------------------


def test_road_step_is_a_c2_quintic_with_the_documented_geometry():
    road = np.array([0.0, 5.5, -0.01, 0.1])
    # ends of the transition (x = 5.45 and 5.55, up to the rounding of (x - 5.5)/0.1):
    # height 0 and -1 cm, zero slope and zero curvature (C2 joints with the flat parts)
    for x, level in ((5.45, 0.0), (5.55, -0.01), (5.0, 0.0), (6.0, -0.01)):
        h, h1, h2, h3 = T.road_profile(road, x)
        assert h == pytest.approx(level, abs=1e-15)
        assert h1 == pytest.approx(0.0, abs=1e-12) and h2 == pytest.approx(0.0, abs=1e-9)
    h, h1, h2, _ = T.road_profile(road, 5.5)              # centre: half height, max slope
    assert h == pytest.approx(-0.005, abs=1e-17)
    assert h1 == pytest.approx(15 / 8 * -0.01 / 0.1, rel=1e-14)
    assert h2 == pytest.approx(0.0, abs=1e-12)
    # derivatives are the derivatives of the height (central differences, 1e-7 relative:
    # step 1e-6 of a degree-5 polynomial, truncation ~h^2 |h'''|, rounding 1e-16/h)
    for x in (5.46, 5.487, 5.52, 5.549):
        vals = [T.road_profile(road, x + s) for s in (-1e-6, 1e-6)]
        h, h1, h2, h3 = T.road_profile(road, x)
        for k_ in range(3):
            fd = (vals[1][k_] - vals[0][k_]) / 2e-6
            exact = (h1, h2, h3)[k_]
            assert fd == pytest.approx(exact, rel=1e-6, abs=1e-7 * abs((h1, h2, h3)[k_] if k_ else 1))
    # an empty road is the flat ground z = 0
    assert T.road_profile(np.zeros(0), 3.0) == (0.0, 0.0, 0.0, 0.0)


def test_road_parameter_gradient():
    x = 5.47
    g = [np.zeros(len(ROAD)) for _ in range(3)]
    T.road_profile_param_grad(ROAD, x, *g)

    def prof(rd):
        return np.array(T.road_profile(rd, x)[:3])
    Jn = richardson(prof, ROAD.copy())
    # 1e-8 relative: Richardson central differences of a polynomial (see above)
    np.testing.assert_allclose(np.array(g), Jn, rtol=0, atol=1e-8 * np.abs(Jn).max())


# ----------------------------------------------------------------------------------------
# in the engine
# ----------------------------------------------------------------------------------------


def free_wheel(with_tire=True, k=1.2e5, c=300.0):
    """A wheel on a floating joint (its frame: spin axis local y) plus a spin joint."""
    m = Model("free-wheel", gravity=(0.0, 0.0, -9.81))
    m.parameter("R", 0.3, "m", "test value")
    m.parameter("kt", k, "N/m", "test value")
    m.road(z0=0.0, steps=[{"x": 5.5, "height": -0.01, "length": 0.1}])
    m.body("hub", mass=2.0, inertia=(0.02, 0.03, 0.02), points={"C": (0.0, 0.0, 0.0)})
    m.body("wheel", mass=10.0, com=(0.0, 0.01, 0.0), inertia=(0.2, 0.35, 0.2),
           points={"C": (0.0, 0.01, 0.0)}, vectors={"spin": (0.0, 1.0, 0.0)})
    m.floating("free", GROUND, "hub", q0=[5.46, 0.3, 0.3, 0.1, 0.05, 0.08])
    m.revolute("spin", "hub", "wheel", axis=(0, 1, 0), child_point=(0, 0, 0))
    if with_tire:
        m.tire("tire", "wheel", "C", "spin", radius="R", k="kt", c=c, mu=0.8, v_eps=0.1)
    return m


def tire_state(cm):
    z = np.array([5.46, 0.3, 0.3 - 0.006, 0.1, 0.05, 0.08, 0.7])
    zd = np.array([3.0, 0.2, -0.1, 0.3, -0.2, 0.5, 9.0])
    return z, zd


def test_engine_wrench_is_the_contact_force_at_the_contact_point():
    """tau(no tire) - tau(tire) = J_m^T F with J_m the Jacobian of the wheel's material
    point at the contact point, all built from the independent reference kinematics."""
    model = free_wheel()
    cm, cm0 = model.compile(), free_wheel(with_tire=False).compile()
    z, zd = tire_state(cm)
    zdd = np.zeros(cm.n)
    # independent inputs of the tire law
    poses = ref_body_poses(model, cm, z)
    r, A = poses["wheel"]
    c = ref_point(model, cm, z, "wheel", "C")
    jac = ref_jacobians(model, cm, z, "complex")
    _, Jv, Jw, _, _ = jac["wheel"]
    Jc = np.zeros((3, cm.n))
    for k in range(cm.n):
        zc = z.astype(complex)
        zc[k] += 1e-30j
        Jc[:, k] = ref_point(model, cm, zc, "wheel", "C").imag / 1e-30
    a = A @ np.array([0.0, 1.0, 0.0])
    w = Jw @ zd
    F, P = np.zeros(3), np.zeros(3)
    delta, N, _, _ = T.tire_force(c, Jc @ zd, a, w, np.array([0.3, 1.2e5, 300.0, 0.8, 0.1,
                                                              1e-3, 10.0]),
                                  np.array([0.0, 5.5, -0.01, 0.1]), F, P)
    assert delta > 0 and N > 100                           # the state is in contact
    P_body = A.T @ (P - r)
    Jm = np.zeros((3, cm.n))
    for k in range(cm.n):
        zc = z.astype(complex)
        zc[k] += 1e-30j
        Jm[:, k] = ref_point(model, cm, zc, "wheel", tuple(P_body)).imag / 1e-30
    for form in (MR.FORM_COM, MR.FORM_ORIGIN):
        _, tau = MR.full_dynamics_terms(cm.arrays, cm.arrays.p, form, 0.0, z, zd, zdd)
        _, tau0 = MR.full_dynamics_terms(cm0.arrays, cm0.arrays.p, form, 0.0, z, zd, zdd)
        # 1e-10 relative: complex-step Jacobians are exact to rounding; the rest is the
        # rounding of two recursions
        np.testing.assert_allclose(tau0 - tau, Jm.T @ F, rtol=0,
                                   atol=1e-10 * np.abs(Jm.T @ F).max())


def test_newton_matrix_damping_of_the_tire_is_exact():
    """force_jacobians' tire damping equals -dQ/dzd (Q is linear in the velocity inputs
    of the law through J_c, J_w, so no term is omitted at the velocity level)."""
    model = free_wheel()
    cm, cm0 = model.compile(), free_wheel(with_tire=False).compile()
    ma, ma0 = cm.arrays, cm0.arrays
    z, zd = tire_state(cm)
    n = cm.n

    def Q(zdv):
        _, tau = MR.full_dynamics_terms(ma, ma.p, MR.FORM_COM, 0.0, z, zdv, np.zeros(n))
        _, tau0 = MR.full_dynamics_terms(ma0, ma0.p, MR.FORM_COM, 0.0, z, zdv, np.zeros(n))
        return tau0 - tau
    Cn = -richardson(Q, zd.copy())
    ws = MR.make_workspace(ma, n)
    A, r, u, bcol, Z, Zd = frame_state(cm, z, zd)
    for i, arr in enumerate((A, r, u, bcol, Z, Zd)):
        ws[i][...] = arr
    Kd, Cd = np.zeros((n, n)), np.zeros((n, n))
    MR.force_jacobians(ma, ma.p, 0.0, z, zd, ws, n, Kd, Cd)
    # 1e-7 relative: Richardson differences (see the force-law test)
    np.testing.assert_allclose(Cd, Cn, rtol=0, atol=1e-7 * np.abs(Cn).max())
    # the stiffness part is the tangent of the normal force: the vertical entry is the
    # tire stiffness k / q (road normal tilted by the step slope) up to the omitted terms
    assert Kd[2, 2] > 0.5 * 1.2e5


def test_wheel_dropped_on_the_ground_comes_to_rest_at_m_g_over_k():
    k, c, mass, g = 5e4, 707.0, 10.0, 9.81                 # damping ratio 0.5
    assert mass * g / k > 1e-3                             # beyond the 1 mm depth ramp
    m = Model("wheel-drop", gravity=(0.0, 0.0, -g))
    m.body("carrier", mass=0.0, inertia=(0.0, 0.0, 0.0))
    m.body("wheel", mass=mass, inertia=(0.2, 0.35, 0.2))
    m.prismatic("lift", GROUND, "carrier", axis=(0, 0, 1), q0=0.35)   # 5 cm above ground
    m.revolute("spin", "carrier", "wheel", axis=(0, 1, 0), qd0=4.0)
    m.tire("tire", "wheel", (0, 0, 0), (0, 1, 0), radius=0.3, k=k, c=c)
    res = simulate(m, 1.5, 1e-3)
    height = res.coordinate("lift")
    assert height.min() < 0.3                              # it did hit the ground
    # the static penetration is m g / k (the ramps are exact beyond 1 mm / 10 N);
    # 1e-8 m: transients decay as exp(-zeta w t) = exp(-53) and the Newton tolerance
    # leaves ~1e-10 relative errors in the accelerations
    assert 0.3 - height[-1] == pytest.approx(mass * g / k, abs=1e-8)
    assert abs(res.zd[-1, 0]) < 1e-8
    # a free spin decays to zero: friction acts on the slipping contact point
    assert abs(res.zd[-1, 1]) < 1e-6


# ----------------------------------------------------------------------------------------
# builder, file format, errors
# ----------------------------------------------------------------------------------------


def test_tire_and_road_round_trip_through_the_file_format():
    model = free_wheel()
    doc = model_to_dict(model)
    assert doc["tires"][0]["radius"] == "R" and doc["road"]["steps"][0]["x"] == 5.5
    again = model_from_dict(doc)
    a, b = model.compile(), again.compile()
    for x, y in zip(a.arrays, b.arrays):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    # the radius is bound to the parameter R through the field vector
    cm = model.compile({"R": 0.31})
    o = cm.arrays.ty_par[0]
    assert cm.arrays.p[o + T.TP_R] == 0.31 and cm.G[o + T.TP_R, cm.param_names.index("R")] == 1


def test_tire_errors_name_the_element():
    m = free_wheel(with_tire=False)
    with pytest.raises(ModelError, match="tire 'bad'.*ground"):
        m.tire("bad", GROUND, (0, 0, 0), (0, 1, 0), radius=0.3, k=1e5)
    with pytest.raises(UnknownNameError, match="nowhere"):
        m.tire("bad", "wheel", "nowhere", (0, 1, 0), radius=0.3, k=1e5)
    with pytest.raises(UnknownNameError, match="sideways"):
        m.tire("bad", "wheel", "C", "sideways", radius=0.3, k=1e5)
    m.tire("bad", "wheel", "C", "spin", radius=("R", -1.0), k=1e5)
    with pytest.raises(ModelError, match="tire 'bad': radius must be positive"):
        m.compile()
    m2 = free_wheel(with_tire=False)
    m2.tire("t", "wheel", "C", "spin", radius=0.3, k=1e5, mu=-0.1)
    with pytest.raises(ModelError, match="tire 't': mu must not be negative"):
        m2.compile()
    with pytest.raises(ModelError, match="road is declared twice"):
        m2.road(0.0)
    m3 = Model("r")
    m3.road(steps=[(1.0, 0.01, 0.0)])
    m3.body("b", 1.0, inertia=(1, 1, 1))
    m3.prismatic("j", GROUND, "b")
    with pytest.raises(ModelError, match="road step #1: length must be positive"):
        m3.compile()


# ----------------------------------------------------------------------------------------
# the directional derivative used by the sensitivity kernels, against complex step
# ----------------------------------------------------------------------------------------


def force_dir(X, dX):
    F, P, dF, dP = (np.zeros(3) for _ in range(4))
    T.tire_force_dir(X[0:3], X[3:6], X[6:9], X[9:12], X[12:19], X[19:], dX[0:3], dX[3:6],
                     dX[6:9], dX[9:12], dX[12:19], dX[19:], F, P, dF, dP)
    return F, P, dF, dP


def force_complex_step(X, dX, eps=1e-30):
    """Complex-step directional derivative of the force law itself (no subtraction:
    exact to rounding for any eps << 1; the branches compare real parts)."""
    Xc = X + 1j * eps * dX
    F, P = np.zeros(3, complex), np.zeros(3, complex)
    T.tire_force(Xc[0:3], Xc[3:6], Xc[6:9], Xc[9:12], Xc[12:19], Xc[19:], F, P)
    return F.real, P.real, F.imag / eps, P.imag / eps


@pytest.mark.parametrize("regime", list(REGIMES))
def test_contact_partials_match_complex_step(regime):
    X = REGIMES[regime]
    rng = np.random.default_rng(11)
    _, _, J, delta, N = jacobian(X)
    assert delta > 0 and N > 0
    scale = np.abs(X)
    scale[scale == 0] = 1.0
    for trial in range(4):
        # a direction in every input (state, tire and road parameters) scaled to the inputs
        dX = rng.normal(size=len(X)) * scale
        F, P, dF, dP = force_dir(X, dX)
        Fc, Pc, dFc, dPc = force_complex_step(X, dX)
        np.testing.assert_array_equal(F, force(X)[:3])
        np.testing.assert_array_equal(P, force(X)[3:])
        # 1e-12 relative: complex step has no subtractive cancellation; what is left is
        # the rounding of two evaluation orders of the same formulas
        ref = np.concatenate([dFc, dPc])
        np.testing.assert_allclose(np.concatenate([dF, dP]), ref, rtol=0,
                                   atol=1e-12 * np.abs(ref).max())
        # and it is the contraction of the full Jacobian (same formulas, 1e-12 likewise)
        np.testing.assert_allclose(np.concatenate([dF, dP]), J @ dX, rtol=0,
                                   atol=1e-12 * np.abs(ref).max())
        # the complex-step value is the real force law (same branches taken)
        np.testing.assert_allclose(Fc, F, rtol=1e-14, atol=1e-14 * np.abs(F).max())


def test_out_of_contact_the_directional_derivative_vanishes():
    X = state(x=2.0, height=0.02 + 0.3 + 1e-4)
    dX = np.random.default_rng(2).normal(size=len(X))
    F, P, dF, dP = force_dir(X, dX)
    assert np.all(F == 0) and np.all(dF == 0)
    _, _, dFc, dPc = force_complex_step(X, dX)
    assert np.all(dFc == 0)
    np.testing.assert_allclose(dP, dPc, rtol=0, atol=1e-14 * np.abs(dPc).max())


# ----------------------------------------------------------------------------------------
# the allocation-free state Jacobian used by the Newton matrix and the step Jacobians
# ----------------------------------------------------------------------------------------


def state_jacobian(X):
    F, P = np.zeros(3), np.zeros(3)
    JF, JP = np.full((3, T.NX_STATE), np.nan), np.full((3, T.NX_STATE), np.nan)
    delta, N = T.tire_force_state_jacobian(X[0:3], X[3:6], X[6:9], X[9:12], X[12:19],
                                           X[19:], F, P, JF, JP)
    return F, P, JF, JP, delta, N


def random_states(n, seed):
    """States in every regime: out of contact, inside the depth ramp, beyond it; on the
    flat road and on both steps; spin axes tilted every way, spinning and skidding."""
    rng = np.random.default_rng(seed)
    depths = (-2e-3, -1e-5, 2e-4, 5e-4, 9e-4, 3e-3, 1e-2)
    for i in range(n):
        tilt = 0.3 if i % 3 else 1.0
        yield state(x=rng.choice([2.0, 5.5, 7.0]) + rng.uniform(-0.3, 0.3),
                    axis=rng.normal(size=3) * tilt + [0, 1, 0], vc=rng.normal(size=3) * 3,
                    w=rng.normal(size=3) * 10, delta=depths[i % len(depths)]
                    * rng.uniform(0.5, 1.5))


def test_state_jacobian_is_the_first_twelve_columns_of_the_full_jacobian():
    regimes = {"out": 0, "depth ramp": 0, "full": 0, "on a step": 0}
    for X in random_states(400, 5):
        F, P, JF, JP, delta, N = state_jacobian(X)
        # the value part is the force law itself, bit for bit (same formulas, same order)
        FP = force(X)
        np.testing.assert_array_equal(F, FP[:3])
        np.testing.assert_array_equal(P, FP[3:])
        F2, P2, J2, delta2, N2 = jacobian(X)
        assert delta == delta2
        # 1e-13 relative: the same chain rule, the rate of penetration summed in another
        # order (rounding of the largest entry of each block)
        assert N == pytest.approx(N2, rel=1e-13, abs=0)
        for J, ref in ((JF, J2[:3, :T.NX_STATE]), (JP, J2[3:, :T.NX_STATE])):
            np.testing.assert_allclose(J, ref, rtol=0, atol=1e-13 * np.abs(ref).max())
        if delta <= 0:
            regimes["out"] += 1
            assert N == 0 and np.all(JF == 0)
            continue
        regimes["depth ramp" if delta < TP[5] else "full"] += 1
        regimes["on a step"] += abs(T.road_profile(ROAD, P[0])[1]) > 1e-3
    assert min(regimes.values()) >= 40, regimes


def test_state_jacobian_matches_central_differences_of_the_force_law():
    checked = 0
    for X in random_states(120, 6):
        delta, N, road_margin, tp = ramp_margins(X)
        # Richardson steps move delta by ~1e-5 |X|: keep away from the kinks of the
        # ramps (delta = 0, depth_ramp; N_raw = force_ramp) and of the road pieces
        if (min(abs(delta), abs(delta - tp[5])) < 0.05 * tp[5] or abs(N - tp[6]) < 0.3 * tp[6]
                or road_margin < 1e-2):
            continue
        checked += 1
        F, P, JF, JP, _, _ = state_jacobian(X)
        Jn = richardson(lambda Xs: force(np.concatenate([Xs, X[12:]])), X[:12].copy())
        # 1e-6 relative to each block's largest entry: Richardson-extrapolated central
        # differences (relative steps 1e-5) have truncation O(h^4) times the fifth
        # derivative, which grows near the kinks of the C1 ramps (these random states may
        # be 5 % of a ramp away; measured worst 2e-8), rounding ~1e-11; a wrong term
        # would show at O(1)
        for J, ref in ((JF, Jn[:3]), (JP, Jn[3:])):
            np.testing.assert_allclose(J, ref, rtol=0, atol=1e-6 * np.abs(ref).max() + 1e-300)
    assert checked >= 40


def test_state_jacobian_runs_on_complex_inputs_and_complex_step_agrees():
    X = REGIMES["on the step ramp, full contact"]
    F0, P0, JF0, JP0, _, _ = state_jacobian(X)
    rng = np.random.default_rng(8)
    eps = 1e-30
    for _ in range(4):
        dX = rng.normal(size=T.NX_STATE)
        Xc = X.astype(complex)
        Xc[:T.NX_STATE] += 1j * eps * dX
        F, P = np.zeros(3, complex), np.zeros(3, complex)
        JF, JP = np.zeros((3, T.NX_STATE), complex), np.zeros((3, T.NX_STATE), complex)
        T.tire_force_state_jacobian(Xc[0:3], Xc[3:6], Xc[6:9], Xc[9:12], Xc[12:19], Xc[19:],
                                    F, P, JF, JP)
        # the real parts are the real evaluation (eps^2 = 1e-60 is below every rounding)
        np.testing.assert_array_equal(F.real, F0)
        np.testing.assert_array_equal(JF.real, JF0)
        # 1e-12 relative: complex step has no subtractive cancellation (see above)
        for J, d in ((JF0, F.imag / eps), (JP0, P.imag / eps)):
            np.testing.assert_allclose(J @ dX, d, rtol=0, atol=1e-12 * np.abs(d).max())
