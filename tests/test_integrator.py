"""The implicit trapezoidal integrator: accuracy order, exactness on a linear problem,
constraint satisfaction at every step, energy conservation, formulation independence."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import catalog_or_none, four_bar, n_four_bar, ref_energy, ref_point, slider_crank

from workbench import Model, simulate


def oscillator(k=50.0, mass=2.0, c=0.0, x0=0.3, v0=-0.4, z0=0.1, g=9.81):
    """A block on a vertical prismatic joint with a joint spring (rest position z0),
    gravity along the joint: x'' = -(k/m)(x - z0) - (c/m) x' - g."""
    m = Model("oscillator", gravity=(0.0, 0.0, -g))
    m.body("block", mass=mass, inertia=(0.1, 0.1, 0.1))
    m.prismatic("slide", "ground", "block", axis=(0, 0, 1), q0=x0, qd0=v0)
    m.joint_spring("spring", "slide", k=k, c=c, q0=z0)
    return m


def oscillator_exact(t, k=50.0, mass=2.0, x0=0.3, v0=-0.4, z0=0.1, g=9.81):
    w = math.sqrt(k / mass)
    xeq = z0 - mass * g / k
    return xeq + (x0 - xeq) * np.cos(w * t) + (v0 / w) * np.sin(w * t)


def test_linear_oscillator_reproduces_the_trapezoidal_recurrence():
    """On a linear problem the scheme is a linear recurrence; written out here:
    x+ = x + h v + h^2/4 (a + a+), v+ = v + h/2 (a + a+), a+ = -w^2 (x+ - xeq)."""
    k, mass, c, h = 50.0, 2.0, 3.0, 0.01
    res = simulate(oscillator(k=k, mass=mass, c=c), 1.0, h)
    w2, zeta = k / mass, c / mass
    xeq = 0.1 - mass * 9.81 / k
    x, v = 0.3, -0.4
    a = -w2 * (x - xeq) - zeta * v
    # solve the 3x3 linear system of one step for (x+, v+, a+)
    S = np.array([[1.0, 0.0, -h * h / 4], [0.0, 1.0, -h / 2], [w2, zeta, 1.0]])
    xs = [x]
    for _ in range(res.steps):
        rhs = np.array([x + h * v + h * h / 4 * a, v + h / 2 * a, w2 * xeq])
        x, v, a = np.linalg.solve(S, rhs)
        xs.append(x)
    # 1e-10: the Newton tolerance (1e-10 relative on the acceleration) and rounding
    np.testing.assert_allclose(res.z[:, 0], xs, rtol=0, atol=1e-10)


def test_second_order_convergence_against_analytic_solution():
    errors = []
    for h in (0.02, 0.01, 0.005):
        res = simulate(oscillator(), 2.0, h)
        errors.append(abs(res.z[-1, 0] - oscillator_exact(res.t[-1])))
    ratios = [errors[0] / errors[1], errors[1] / errors[2]]
    # [3.5, 4.5]: a second-order phase error scales by 4 when h halves; the band allows
    # the O(h^4) terms (w h = 0.1 at the largest step)
    for ratio in ratios:
        assert 3.5 <= ratio <= 4.5, (errors, ratios)


@pytest.mark.parametrize("builder,t_end", [(four_bar, 1.0), (slider_crank, 0.5)],
                         ids=["four-bar", "slider-crank-3d"])
def test_second_order_convergence_on_closed_mechanisms(builder, t_end):
    """Error of the DOF at t_end against a run with a 16x smaller step."""
    cm = builder().compile()
    ref = simulate(cm, t_end, 1.25e-4)
    errors = []
    for h in (4e-3, 2e-3):
        res = simulate(cm, t_end, h)
        errors.append(abs(res.zi[-1, 0] - ref.zi[-1, 0]))
    ratio = errors[0] / errors[1]
    # [3.5, 4.5]: second order; the reference still has (1/16)^2 ~ 0.4 % of err(h/2)
    # and the O(h^4) terms can move the ratio by a few percent
    assert 3.5 <= ratio <= 4.5, (errors, ratio)


def _slider_crank_model():
    cat = catalog_or_none()
    if cat is not None and "slider-crank" in cat.names():
        return cat.load("slider-crank")
    return slider_crank()


@pytest.mark.parametrize("name", ["four-bar", "slider-crank-3d", "slider-crank-3d sr-origin"])
def test_constraints_hold_at_every_step(name):
    if name == "four-bar":
        model, form, t_end = four_bar(), "sr-com", 3.0
    else:
        model = _slider_crank_model()
        form = "sr-origin" if name.endswith("sr-origin") else "sr-com"
        t_end = 2.0
    res = simulate(model, t_end, 1e-3, formulation=form)
    assert res.steps == int(round(t_end / 1e-3))
    # 1e-10: the position problem is solved to 1e-12 at every step (POS_TOL); the
    # velocity problem is linear and solved exactly up to rounding
    assert np.max(res.constraint_violation) < 1e-10
    assert np.max(res.velocity_violation) < 1e-10
    # the motion is not trivial: the crank makes more than a quarter turn
    assert np.ptp(res.zi[:, 0]) > 1.5


def test_sr1_and_sr2_trajectories_agree():
    cm = slider_crank().compile()
    a = simulate(cm, 1.0, 1e-3, formulation="sr-com")
    b = simulate(cm, 1.0, 1e-3, formulation="sr-origin")
    # 1e-8: both solve the same discrete equations; they differ only by the Newton
    # tolerance (1e-10 relative) accumulated over 1000 steps and by rounding
    np.testing.assert_allclose(a.z, b.z, rtol=0, atol=1e-8)
    np.testing.assert_allclose(a.zd, b.zd, rtol=0, atol=1e-7)


# ----------------------------------------------------------------------------------------
# energy
# ----------------------------------------------------------------------------------------


def _n_four_bar_model(N):
    cat = catalog_or_none()
    if cat is not None and "n-four-bar" in cat.names():
        return cat.load("n-four-bar", N=N)
    return n_four_bar(N)


def _independent_energy(model, res, stride):
    cm = res.compiled
    return np.array([ref_energy(model, cm, res.z[i], res.zd[i])
                     for i in range(0, len(res.t), stride)])


@pytest.fixture(scope="module")
def n_four_bar_run():
    """A02 N-four-bar (N = 4), 4 s at h = 1e-3: the cranks pass the horizontal (singular)
    position four times.  Returns the model, the result and the height of crank0's centre
    of mass at every step (zero at the horizontal; from the independent kinematics)."""
    model = _n_four_bar_model(4)
    res = simulate(model, 4.0, 1e-3)
    cm = res.compiled
    com = model.bodies["crank0"].com
    height = np.array([ref_point(model, cm, z, "crank0", com)[1] for z in res.z])
    return model, res, height


def test_n_four_bar_energy_is_conserved_through_singular_positions(n_four_bar_run):
    """The energy is recomputed independently of the kernels at every 50th step and at
    the worst step; the kernel energy is then checked at every step."""
    model, res, height = n_four_bar_run
    passes = np.count_nonzero(np.diff(np.sign(height)) != 0)
    assert passes >= 4
    near = np.abs(height) < 0.5 * math.sin(math.radians(5.0))  # within 5 deg (com at L/2)
    assert np.count_nonzero(near) > 10                          # the windows are visited
    sample = np.arange(0, len(res.t), 50)
    E = _independent_energy(model, res, 50)
    scale = np.abs(E).max()
    # the kernel energy agrees with the independent one (1e-9 relative: rounding)
    np.testing.assert_allclose(res.energy[sample], E, rtol=0, atol=1e-9 * scale)
    i = int(np.argmax(np.abs(res.energy - res.energy[0])))
    assert ref_energy(model, res.compiled, res.z[i], res.zd[i]) == pytest.approx(
        res.energy[i], abs=1e-9 * scale)
    # 1e-4 relative at every step: the trapezoidal rule keeps the energy up to an O(h^2)
    # oscillation (~1e-5 relative at h = 1e-3); a pass through the singular position
    # must not make it jump
    assert np.max(np.abs(res.energy - res.energy[0])) < 1e-4 * scale
    # positions and velocities satisfy the constraints at every step, also next to the
    # singular positions (1e-10: position tolerance 1e-12; linear velocity problem)
    assert np.max(res.constraint_violation) < 1e-10
    assert np.max(res.velocity_violation) < 1e-10


def test_energy_is_conserved_on_spatial_slider_crank():
    model = slider_crank()
    res = simulate(model, 2.0, 1e-3)
    E = _independent_energy(model, res, 20)
    scale = np.max(np.abs(E))
    # 1e-9 relative: same quantity computed two ways
    np.testing.assert_allclose(res.energy[::20], E, rtol=0, atol=1e-9 * scale)
    # 1e-3 relative: O(h^2) energy oscillation of the trapezoidal rule, h = 1e-3, with
    # crank rates up to ~10 rad/s; a missing or doubled velocity term gives O(1) drift
    assert np.max(np.abs(E - E[0])) < 1e-3 * scale


def _pendulum_trapezoidal(z0, w0, h_of_step, c, k):
    """Independent scalar implicit trapezoidal rule for c z'' = k sin z (a compound
    pendulum measured from the upright position), solved per step by bracketing."""
    from scipy.optimize import brentq

    def acc(z):
        return k * math.sin(z) / c

    z, w, a = z0, w0, acc(z0)
    out = [(z, w)]
    for H in h_of_step:
        def res(z1):
            return (2.0 * (z1 - z) / H - w - w) - 0.5 * H * (a + acc(z1))
        guess = z + H * w + 0.5 * H * H * a
        z1 = brentq(res, guess - 0.05, guess + 0.05, xtol=1e-15)
        w = 2.0 * (z1 - z) / H - w
        z, a = z1, acc(z1)
        out.append((z, w))
    return np.array(out)


def test_n_four_bar_energy_error_is_the_trapezoidal_rules_own(n_four_bar_run):
    """With the first crank angle as DOF the parallelogram N-four-bar is a compound
    pendulum with constant reduced mass c = (N+1)(I + m L^2/4) + N m L^2 and potential
    k cos z, k = g m L ((N+1)/2 + N).  An independent scalar trapezoidal rule with the same
    step sequence gives the same trajectory and the same max |E - E(0)|: the energy error
    the summary reports is the rule's own bounded oscillation, not a formulation defect,
    and it does not accumulate (secular drift far below it)."""
    model, res, _ = n_four_bar_run
    assert res.dof_names == ("pivot0",)
    N, L, m, g = 4, 1.0, 1.0, 9.81
    c = (N + 1) * (m * L * L / 12.0 + m * L * L / 4.0) + N * m * L * L
    k = g * m * L * ((N + 1) / 2.0 + N)
    # the computed rows (merged steps next to the aligned position span 2+ intervals;
    # interpolated rows are skipped)
    rows = [0] + [i for i in range(1, len(res.t)) if res.step_kind[i, 0] > 0]
    H = np.diff(res.t[rows])
    ref = _pendulum_trapezoidal(res.zi[0, 0], res.zdi[0, 0], H, c, k)
    # 1e-5: next to the aligned (singular) position the projected accelerations carry
    # rounding amplified by 1/sigma_min (README, ~1e-4 relative there), which the
    # trajectory keeps; elsewhere the agreement is at the Newton tolerance
    np.testing.assert_allclose(res.zi[rows, 0], ref[:, 0], rtol=0, atol=1e-5)
    np.testing.assert_allclose(res.zdi[rows, 0], ref[:, 1], rtol=0, atol=1e-5)
    E_ref = 0.5 * c * ref[:, 1] ** 2 + k * np.cos(ref[:, 0])
    err_ref = np.max(np.abs(E_ref - E_ref[0]))
    # 2 %: same discrete solution; the energy error is an O(h^2) quantity (~2.5e-4 J)
    # differences of which are at the 1e-6..1e-5 level
    assert res.energy_error_max == pytest.approx(err_ref, rel=0.02)
    assert res.energy_error_max > 1e-5           # the oscillation is really there
    # the secular drift is a small fraction of the oscillation (bounded, not accumulating)
    assert res.energy_drift < 0.2 * res.energy_error_max
    s = res.summary()
    assert s["energy_drift"] == res.energy_drift
    assert s["energy_error_max"] == res.energy_error_max


def test_energy_trend_separates_drift_from_oscillation():
    from workbench.integrators.simulation import energy_trend
    t = np.linspace(0.0, 20.0, 20001)
    osc = 2e-3 * np.sin(2.0 * np.pi * t / 1.7) ** 2          # bounded, period 1.7 s / 2
    ramp = -5e-3 * t / 20.0                                   # steady loss of 5e-3 J
    # oscillation alone: its trend is below amplitude * period / duration
    assert abs(energy_trend(t, osc)) < 2e-3 * 1.7 / 20.0
    # ramp + oscillation: the ramp is recovered to that accuracy
    assert energy_trend(t, ramp + osc) == pytest.approx(-5e-3, abs=2e-3 * 1.7 / 20.0)
    # a jump of J at a fraction f of the run shows up as 6 f (1 - f) J
    jump = np.where(t > 5.0, 1e-2, 0.0)
    assert energy_trend(t, jump) == pytest.approx(6 * 0.25 * 0.75 * 1e-2, rel=1e-3)


def test_damping_dissipates_exactly_the_discrete_damper_work():
    """Linear damped oscillator: for the trapezoidal rule the energy balance holds
    exactly per step, E(n+1) - E(n) = -c h ((v(n) + v(n+1)) / 2)^2 (insert
    x(n+1) - x(n) = h (v(n) + v(n+1)) / 2 and the equation of motion at both ends).  The
    energy is computed independently of the kernels."""
    c, h = 0.8, 1e-3
    model = oscillator(c=c)
    res = simulate(model, 2.0, h)
    cm = res.compiled
    E = np.array([ref_energy(model, cm, res.z[i], res.zd[i]) for i in range(len(res.t))])
    assert np.all(np.diff(E) < 0)
    v = res.zd[:, 0]
    work = np.concatenate([[0.0], np.cumsum(c * h * (0.5 * (v[1:] + v[:-1])) ** 2)])
    assert work[-1] > 1.0                   # most of the initial energy is dissipated
    # 1e-9 relative: the identity is exact; Newton tolerance (1e-10) and rounding
    np.testing.assert_allclose(E[0] - E, work, rtol=0, atol=1e-9 * abs(E[0]))


# ----------------------------------------------------------------------------------------
# rheonomic constraints (drives)
# ----------------------------------------------------------------------------------------


def driven_cart_pendulum():
    """Cart on the x axis driven by x_c = 0.2 sin(3 t); point-mass pendulum (L = 1 m,
    1 kg) hinged on it, angle from +x about +z, g along -y."""
    m = Model("cart-pendulum", gravity=(0.0, -9.81, 0.0), planar=True)
    m.body("cart", 5.0, inertia=(0.1, 0.1, 0.1))
    m.body("bob", 1.0, com=(1.0, 0, 0), inertia=(0.0, 0.0, 0.0))
    m.prismatic("track", "ground", "cart", axis=(1, 0, 0))
    m.revolute("swing", "cart", "bob", axis=(0, 0, 1), q0=-1.0)
    m.drive("motor", "track", {"type": "sine", "amplitude": 0.2, "omega": 3.0})
    m.dof("swing")
    return m


def test_driven_coordinate_follows_its_drive_and_free_motion_matches_ode():
    from scipy.integrate import solve_ivp
    res = simulate(driven_cart_pendulum(), 2.0, 1e-3)
    t = res.t
    # the drive is a constraint: exact at every step (1e-12: position tolerance)
    np.testing.assert_allclose(res.coordinate("track"), 0.2 * np.sin(3 * t), atol=1e-12)
    # velocity and acceleration levels: linear least-squares solves (rounding)
    np.testing.assert_allclose(res.zd[:, 0], 0.6 * np.cos(3 * t), atol=1e-10)
    np.testing.assert_allclose(res.zdd[:, 0], -1.8 * np.sin(3 * t), atol=1e-9)

    # Lagrange for the bob: theta'' = (sin(theta) xc'' - g cos(theta)) / L
    def rhs(tt, y):
        return [y[1], (math.sin(y[0]) * (-1.8 * math.sin(3 * tt)) - 9.81 * math.cos(y[0]))]

    ode = solve_ivp(rhs, (0.0, 2.0), [-1.0, 0.0], t_eval=t, rtol=1e-11, atol=1e-12,
                    method="DOP853")
    # 1e-4 rad: trapezoidal O(h^2) error, (w h)^2 / 12 ~ 1e-6 per radian of phase, over
    # ~2 s of swinging at up to ~4 rad/s
    np.testing.assert_allclose(res.coordinate("swing"), ode.y[0], atol=1e-4)


def driven_crank():
    m = Model("driven-crank", gravity=(0.0, -9.81, 0.0), planar=True)
    m.body("crank", 1.0, com=(0.05, 0, 0), inertia=(0, 0, 1e-3))
    m.revolute("crank", "ground", "crank", axis=(0, 0, 1))
    m.drive("motor", "crank", {"type": "polynomial", "coefficients": [0.0, 2.0]})
    m.dof()
    return m


def test_fully_driven_mechanism_is_a_kinematic_simulation():
    res = simulate(driven_crank(), 0.5, 1e-2)
    # 1e-12: the drive is a constraint solved to the position tolerance
    np.testing.assert_allclose(res.coordinate("crank"), 2.0 * res.t, atol=1e-12)
    # velocity and acceleration levels are linear solves (1e-12: rounding)
    np.testing.assert_allclose(res.zd[:, 0], 2.0, atol=1e-12)
    np.testing.assert_allclose(res.zdd[:, 0], 0.0, atol=1e-12)
    assert res.zi.shape == (51, 0) and res.zdi.shape == (51, 0) and res.zddi.shape == (51, 0)
    assert res.dof_names == () and res.energy is None          # a drive does work
    assert np.all(res.newton_iterations == 0)                  # nothing to iterate on
    s = res.summary()
    assert s["steps"] == 50 and s["degrees_of_freedom"] == [] and s["energy_drift"] is None
    frame = res.to_frame()
    assert len(frame) == 51 and "z[crank]" in frame.columns


def test_locked_structure_without_coordinates_simulates():
    """A body welded to the ground: no coordinates at all, conservative, nothing moves."""
    m = Model("welded", gravity=(0.0, -9.81, 0.0))
    m.body("block", 2.0, com=(0.3, 0.0, 0.0), inertia=(0.1, 0.1, 0.1))
    m.fixed("weld", "ground", "block")
    res = simulate(m, 0.05, 1e-2)
    assert res.z.shape == (6, 0) and res.steps == 5
    # potential energy m g y_com = 0 at y = 0, no motion: exactly zero at every step
    assert res.energy is not None and np.all(res.energy == 0.0)


def test_cli_simulates_a_fully_driven_model(tmp_path):
    """`workbench simulate FILE` on a 0-DOF model: summary, history and plot are written."""
    import json

    from workbench.apps.cli import main
    from workbench.model.serialize import save_json
    path = tmp_path / "driven-crank.json"
    save_json(driven_crank(), path)
    out = tmp_path / "out"
    assert main(["simulate", str(path), "--t-end", "0.1", "--dt", "0.01", "--out",
                 str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["degrees_of_freedom"] == [] and summary["steps"] == 10
    assert summary["energy_drift"] is None and summary["newton_iterations"] == 0
    assert (out / "plot.png").stat().st_size > 0
    assert len((out / "history.csv").read_text().splitlines()) == 12   # header + 11 rows


# ----------------------------------------------------------------------------------------
# nodes next to singular configurations
# ----------------------------------------------------------------------------------------


def test_sigma_ratio_estimates_the_conditioning_of_theta_z():
    """The O(n^2) estimate used by the integrator against numpy's SVD."""
    from workbench.kernels import linalg as LA
    rng = np.random.default_rng(7)
    for n in (1, 3, 20, 81):
        for _ in range(4):
            U, _s, Vt = np.linalg.svd(rng.normal(size=(n + 2, n)), full_matrices=False)
            s = np.logspace(0.0, -rng.uniform(1.0, 10.0), n) if n > 1 else np.ones(1)
            Th = (U * s) @ Vt
            V, beta, Rm, v = np.zeros((n, n + 2)), np.zeros(n), np.zeros((n, n)), np.zeros(n)
            LA.qr_factor(Th, V, beta, Rm, 0.0)
            est = LA.sigma_ratio(Rm, v)
            true = s[-1] / s[0]
            # an upper bound (|R v| >= sigma_min, column norm <= sigma_max) within sqrt(n)
            # (sigma_max from the largest column norm) times the inverse-iteration error (a
            # few percent); 1e-4 below: the QR perturbs sigma_min by ~u / ratio (< 1e-5)
            assert true * (1 - 1e-4) <= est <= 1.1 * math.sqrt(n) * true, (n, est, true)
            assert abs(np.linalg.norm(v) - 1.0) < 1e-12    # a unit vector
    Rm = np.array([[1.0, 2.0], [0.0, 0.0]])                 # exactly singular
    assert LA.sigma_ratio(Rm, np.zeros(2)) == 0.0


@pytest.fixture(scope="module")
def n_four_bar_40_crossing():
    """N = 40 from rest-ish start to 1.25 s: the output node t = 1.244 s lies 1.0e-4 rad
    from the aligned (singular) position, sigma_min/sigma_max = 2e-6 there."""
    model = _n_four_bar_model(40)
    cm = model.compile()
    return {form: simulate(cm, 1.25, 1e-3, formulation=form)
            for form in ("sr-com", "sr-origin")}


def test_node_next_to_a_singular_position_is_stepped_over(n_four_bar_40_crossing):
    """The projected accelerations at the node 1e-4 rad from the singular position carry
    rounding noise of ~5e-3 relative (1/sigma^2 amplification); evaluated there, they
    changed the energy permanently by -6.9e-3 J (sr-com) and +2.2e-4 J (sr-origin), and
    the two formulations diverged.  The node is skipped (one step of 2h), the row is
    interpolated."""
    for form, res in n_four_bar_40_crossing.items():
        k = 1244
        assert res.t[k] == pytest.approx(1.244, abs=1e-12)
        assert abs(res.zi[k, 0] - 1.5 * math.pi) < 2e-4          # the singular node
        assert res.newton_iterations[k] == 0                      # not an integration node
        # the step structure records it: row k interpolated, row k + 1 ends a 2h step
        assert tuple(res.step_kind[k]) == (0, 0) and tuple(res.step_kind[k + 1]) == (2, 1)
        assert np.all(res.step_kind[k - 3:k] == 1)
        assert np.all(res.newton_iterations[k - 3:k] > 0) and res.newton_iterations[k + 1] > 0
        E = res.energy
        smooth = 0.5 * ((E[k - 1] - E[k - 3]) + (E[k + 3] - E[k + 1]))   # 2-step trend
        # 1e-4 J: the merged 2h step changes the O(h^2) energy oscillation by ~3e-5 J
        assert abs((E[k + 1] - E[k - 1]) - smooth) < 1e-4, form
        # the interpolated row is consistent with its neighbours (noise ~1e-5 J)
        assert abs(E[k] - 0.5 * (E[k - 1] + E[k + 1])) < 1e-4, form
        # it satisfies the constraints like any other row (1e-12: rounding of the
        # corrections at the near-singular position)
        assert res.constraint_violation[k] < 1e-12 and res.velocity_violation[k] < 1e-12
        assert res.zddi[k, 0] == pytest.approx(0.5 * (res.zddi[k - 1, 0] + res.zddi[k + 1, 0]))
    a, b = n_four_bar_40_crossing["sr-com"], n_four_bar_40_crossing["sr-origin"]
    # both formulations give the same projected equations: the trajectories agree to the
    # Newton tolerance (before the fix they differed by 3e-5 rad/s after the crossing);
    # 1e-9 rad: each step's acceleration is converged to 1e-10 (1 + |a|) and the two
    # runs' Newton errors accumulate over 1250 steps through the crossing (seen: 1.7e-10)
    np.testing.assert_allclose(a.zdi, b.zdi, rtol=0, atol=1e-8)
    np.testing.assert_allclose(a.zi, b.zi, rtol=0, atol=1e-9)


def test_sensitivities_refuse_a_trajectory_with_merged_steps(n_four_bar_40_crossing):
    """The discrete sweeps differentiate one trapezoidal step per interval: a trajectory
    that stepped over a singular node is reported, with the row and its time."""
    from workbench.errors import SensitivityError
    from workbench.objectives import coordinate
    from workbench.sensitivities.driver import sensitivity
    res = n_four_bar_40_crossing["sr-com"]
    with pytest.raises(SensitivityError) as exc:
        sensitivity(res.compiled, [coordinate("psi", res.dof_names[0])], method="adjoint",
                    t_end=1.25, dt=1e-3, simulation=res)
    first = 1 + int(np.flatnonzero(np.any(res.step_kind[1:] != 1, axis=1))[0])
    assert exc.value.step == first <= 1244 and exc.value.time == pytest.approx(res.t[first])
    assert "merged" in str(exc.value) and "n-four-bar" in str(exc.value).lower()
