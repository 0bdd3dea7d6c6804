"""The point-to-line joint of seed 000 (App. B.1, Fig. B.9): a prismatic joint along the
line, an implicit massless intermediate body, a revolute joint at the point; and its cut
form (a point of one body on a line of another, free rotation about the normal).

Independent references: the seed's construction (2 coordinates, the point on the line),
the two-degree-of-freedom Lagrange equations of a bar whose end slides on an inclined
line, integrated by scipy; energy conservation; the same bar modelled with the cut form
on free carriers (the same motion: the degrees of freedom differ by a constant linear map,
which the trapezoidal rule commutes with); plane geometry of a crank whose rod slides
through a pivoted sleeve; central differences of the constraint rows.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import frame_state

import workbench as wb
from workbench.compiled.dof import constraint_jacobian_at
from workbench.errors import ModelError
from workbench.kernels import tree as K
from workbench.model.files import model_from_dict
from workbench.model.serialize import model_to_dict

T_END, DT = 1.0, 1e-3
FORMULATIONS = ("sr-com", "sr-origin", "global", "multipliers")


def _p(cm, name):
    return float(cm.param_values[cm.param_names.index(name)])


@pytest.fixture(scope="module")
def cm():
    return wb.catalog.load("point-to-line").compile()


@pytest.fixture(scope="module")
def runs(cm):
    return {f: wb.simulate(cm, T_END, DT, f) for f in FORMULATIONS}


def test_construction_is_the_seeds(cm, runs):
    """Two coordinates (slide z_1, rotation z_2) on an implicit massless body; the end P
    stays on the line through O along h_c = (cos theta_c, sin theta_c) at the slide."""
    assert cm.coord_names == ("ptl.s", "ptl.phi")
    assert cm.body_names == ("ptl.slider", "bar")
    assert (cm.n, cm.m, cm.d) == (2, 0, 2)
    assert cm.model.bodies["ptl.slider"].mass == 0.0
    res = runs["sr-com"]
    tc = np.radians(_p(cm, "theta_c"))
    h = np.array([np.cos(tc), np.sin(tc)])
    P = res.point_position("bar.P")[:, :2]
    # rounding of the frame recursion
    np.testing.assert_allclose(P @ np.array([-h[1], h[0]]), 0.0, atol=1e-14)
    np.testing.assert_allclose(P @ h, res.coordinate("ptl.s"), atol=1e-14)
    # the bar's angle is the rotation coordinate (the slider keeps the ground's frame)
    F = res.point_position("bar.F")[:, :2]
    ang = np.arctan2(F[:, 1] - P[:, 1], F[:, 0] - P[:, 0])
    np.testing.assert_allclose(np.unwrap(ang), res.coordinate("ptl.phi"), atol=1e-12)


def lagrange_reference(cm, t):
    """The bar (mass m, length L, centroidal inertia I) with its end at s h on the line
    h = (cos a, sin a) and the angle phi: G = s h + L/2 (cos phi, sin phi),
    T = m/2 (s'^2 + L^2/4 phi'^2 + L s' phi' sin(a - phi)) + I/2 phi'^2,
    V = m g G_y + ks/2 s^2; Lagrange's equations
    m s'' + c phi'' - m L/2 cos(a - phi) phi'^2 = -m g sin a - ks s,
    c s'' + (m L^2/4 + I) phi'' = -m g L/2 cos phi,  c = m L/2 sin(a - phi)."""
    from scipy.integrate import solve_ivp
    a = np.radians(_p(cm, "theta_c"))
    L, m, I, ks, g = (_p(cm, k) for k in ("L", "m", "I", "ks", "g"))

    def rhs(_, x):
        s, ph, sd, phd = x
        c = m * L / 2 * np.sin(a - ph)
        M = np.array([[m, c], [c, m * L * L / 4 + I]])
        f = np.array([-m * g * np.sin(a) - ks * s + m * L / 2 * np.cos(a - ph) * phd ** 2,
                      -m * g * L / 2 * np.cos(ph)])
        return np.r_[sd, phd, np.linalg.solve(M, f)]

    x0 = [0.0, -np.pi / 3, 0.0, 0.0]
    sol = solve_ivp(rhs, (0, t[-1]), x0, t_eval=t, rtol=1e-12, atol=1e-12, method="DOP853")
    return sol.y[:2].T


def test_motion_matches_the_lagrange_equations_of_the_bar(cm):
    err = []
    for dt in (1e-3, 5e-4):
        res = wb.simulate(cm, T_END, dt)
        err.append(np.abs(res.zi - lagrange_reference(cm, res.t)).max())
    # second order (ratio 4; 3.5 asserted), measured 2.0e-5 and 5.0e-6 (s in m, phi in rad)
    assert err[1] < err[0] / 3.5, err
    assert err[1] < 1e-5, err


def test_every_formulation_gives_the_same_conservative_motion(runs):
    ref = runs["sr-com"]
    # the two reference points solve the same discrete equations: rounding only
    np.testing.assert_allclose(runs["sr-origin"].z, ref.z, atol=1e-10)
    # the global formulation (the massless slider a body of natural coordinates): its
    # Newton iterations stop at 1e-10 (measured 3e-11 on the coordinates)
    np.testing.assert_allclose(runs["global"].zi, ref.zi, atol=1e-7)
    # no closure: the multiplier formulation integrates the same open-tree equations
    # (measured 1e-11)
    np.testing.assert_allclose(runs["multipliers"].zi, ref.zi, atol=1e-8)
    for res in runs.values():
        assert res.max_constraint_violation < 1e-10
        # conservative: bounded ripple of the rule (8e-5 J here), no secular drift
        # beyond 1e-4 J (measured 3.4e-5 J)
        assert abs(res.energy_drift) < 1e-4


def test_static_equilibrium_is_the_hanging_bar_on_the_stretched_spring(cm):
    """At rest the bar hangs vertically (phi = -pi/2) and the slide's spring balances the
    weight's component along the line: ks s = -m g sin(theta_c)."""
    e = wb.equilibrium(cm)
    a = np.radians(_p(cm, "theta_c"))
    m, ks, g = (_p(cm, k) for k in ("m", "ks", "g"))
    # the equilibrium solver's tolerance (measured 1e-16)
    np.testing.assert_allclose(e.z, [-m * g * np.sin(a) / ks, -np.pi / 2], atol=1e-10)


def test_spatial_point_to_line_gives_the_same_motion_in_every_formulation():
    """An oblique line and an oblique normal in space (the massless slider a body of 12
    natural coordinates in the global formulation)."""
    mod = wb.Model("spatial-ptl", gravity=(0, 0, -9.81))
    mod.point("ground", "O", (0.1, -0.2, 0.3))
    mod.body("bar", mass=1.0, com=(0.2, 0.05, 0), inertia=(0.01, 0.02, 0.02),
             points={"P": (0.05, 0.1, -0.1)})
    mod.point_to_line("ptl", "ground", "bar", axis=(0.3, 0.8, -0.52), normal=(0.1, -0.2, 0.9),
                      parent_point="O", child_point="P", qd0=(0.5, 2.0))
    runs = {f: wb.simulate(mod, 0.5, DT, f) for f in FORMULATIONS}
    for f, res in runs.items():
        # rounding (sr-origin) and Newton's stopping tests (global, multipliers: no
        # closure): measured 8e-12
        np.testing.assert_allclose(res.z, runs["sr-com"].z, atol=1e-9)
        assert abs(res.energy_drift) < 1e-5                  # measured 2.6e-6 J


# ----------------------------------------------------------------------------------------
# the cut form
# ----------------------------------------------------------------------------------------


def bar_on_carriers(cm):
    """The shipped bar on two massless carriers (x, y) and a revolute, its end P held on
    the line by a cut point-to-line to ground; the degrees of freedom are the carrier x
    (= s cos theta_c) and the bar's angle (= phi)."""
    a = np.radians(_p(cm, "theta_c"))
    L, m, I, ks, g = (_p(cm, k) for k in ("L", "m", "I", "ks", "g"))
    h = (np.cos(a), np.sin(a), 0.0)
    mod = wb.Model("bar-on-carriers", gravity=(0, -g, 0), planar=True)
    mod.body("cx", mass=0.0)
    mod.body("cy", mass=0.0)
    mod.body("bar", mass=m, com=(L / 2, 0, 0), inertia=(0, 0, I),
             points={"P": (0, 0, 0), "F": (L, 0, 0)})
    mod.prismatic("sx", "ground", "cx", axis=(1, 0, 0))
    mod.prismatic("sy", "cx", "cy", axis=(0, 1, 0))
    mod.revolute("th", "cy", "bar", q0=-np.pi / 3)
    mod.cut("line", "point-to-line", "ground", "bar", point1=(0, 0, 0), point2="P", axis1=h)
    # the slide's spring ks/2 s^2 = ks/2 (x^2 + y^2) on the line: springs on both carriers
    mod.joint_spring("kx", "sx", k=ks)
    mod.joint_spring("ky", "sy", k=ks)
    mod.dof("sx", "th")
    return mod


def test_cut_point_to_line_gives_the_tree_joints_motion(cm, runs):
    alt = bar_on_carriers(cm).compile()
    assert (alt.n, alt.m, alt.d) == (3, 1, 2)
    res = wb.simulate(alt, T_END, DT)
    assert res.max_constraint_violation < 1e-10
    # the same trapezoidal solution (a linear map of the DOF) up to Newton's stopping
    # tests: measured 1.5e-15 m
    for pt in ("bar.P", "bar.F"):
        np.testing.assert_allclose(res.point_position(pt), runs["sr-com"].point_position(pt),
                                   atol=1e-9)


def slotted_crank():
    """A crank with a flywheel (pivot O, pin A at 0.1 m) drives a rod through a sleeve pivoted on ground at
    B = (0.3, 0): the rod's line (through A along its x) passes through B, the rod turning
    freely: a cut point-to-line (line on the rod, point on ground)."""
    mod = wb.Model("slotted-crank", gravity=(0, -9.81, 0), planar=True)
    mod.point("ground", "O", (0, 0, 0))
    mod.point("ground", "B", (0.3, 0.0, 0))
    mod.body("crank", mass=1.0, com=(0.05, 0, 0), inertia=(0, 0, 0.05),
             points={"O": (0, 0, 0), "A": (0.1, 0, 0)})
    mod.body("rod", mass=1.0, com=(0.25, 0, 0), inertia=(0, 0, 0.02), points={"A": (0, 0, 0)})
    mod.revolute("crank", "ground", "crank", parent_point="O", child_point="O", qd0=20.0)
    mod.revolute("rod", "crank", "rod", parent_point="A", child_point="A")
    mod.cut("sleeve", "point-to-line", "rod", "ground", point1="A", point2="B",
            axis1=(1, 0, 0))
    mod.dof("crank")
    return mod


@pytest.mark.parametrize("formulation", FORMULATIONS)
def test_cut_point_to_line_closes_a_slotted_crank_in_every_formulation(formulation):
    res = wb.simulate(slotted_crank(), 0.5, DT, formulation)
    th = res.coordinate("crank")
    assert np.ptp(th) > 2 * np.pi
    A = 0.1 * np.c_[np.cos(th), np.sin(th)]
    rod = th + res.coordinate("rod")                       # the rod's absolute angle
    ang = np.arctan2(-A[:, 1], 0.3 - A[:, 0])              # plane geometry: A -> B
    if formulation == "multipliers":
        # Baumgarte: a bounded drift (measured 7e-6 m) instead of the exact closure
        assert res.max_constraint_violation < 3e-5
        np.testing.assert_allclose(np.sin(rod - ang), 0.0, atol=1e-4)   # measured 3.4e-5
    else:
        assert res.max_constraint_violation < 1e-10
        # the position problem's residual (measured 3e-12)
        np.testing.assert_allclose(np.sin(rod - ang), 0.0, atol=1e-9)
        assert abs(res.energy_drift) < 1e-4          # conservative (measured 5.6e-6 J)


def test_spatial_cut_rows_vanish_on_the_tree_joints_motion_and_match_differences():
    """In space the cut has 4 rows (the point on the line: 2; the normals parallel: 2).
    A bar on a spatial tree point-to-line joint (an oblique line and normal) satisfies the
    same cut between the same two bodies at any coordinates (the cut's rows and their
    Jacobian vanish), and the rows' Jacobian on a free chain matches central differences."""
    a = np.array([0.3, 0.8, -0.52])
    nv = np.array([0.1, -0.2, 0.9])
    mod = wb.Model("spatial-ptl", gravity=(0, 0, -9.81))
    mod.point("ground", "O", (0.1, -0.2, 0.3))
    mod.body("bar", mass=1.0, com=(0.2, 0.05, 0), inertia=(0.01, 0.02, 0.02),
             points={"P": (0.05, 0.1, -0.1)})
    mod.point_to_line("ptl", "ground", "bar", axis=a, normal=nv, parent_point="O",
                      child_point="P")
    mod.cut("same", "point-to-line", "ground", "bar", point1="O", point2="P", axis1=a,
            normal=nv, normal2=nv)
    cm = mod.compile()
    assert cm.m == 4
    rng = np.random.default_rng(3)
    for _ in range(3):
        z = rng.uniform(-1, 1, cm.n)
        A, r, _, _, Z, Zd = frame_state(cm, z, np.zeros(cm.n))
        phi = np.zeros(cm.m)
        K.constraints(cm.arrays, cm.arrays.p, 0.0, z, np.zeros(cm.n), np.zeros(cm.n), A, r, Z,
                      Zd, 0, phi)
        # rounding of the frame recursion
        np.testing.assert_allclose(phi, 0.0, atol=1e-14)
        np.testing.assert_allclose(constraint_jacobian_at(cm.arrays, z)[0], 0.0, atol=1e-14)
    # on a free chain (3 slides and a spherical joint) the 4 rows are independent and
    # their Jacobian is the derivative of their values
    free = wb.Model("free", gravity=(0, 0, -9.81))
    free.point("ground", "O", (0.1, -0.2, 0.3))
    for b in ("c1", "c2", "c3"):
        free.body(b, mass=0.0)
    free.body("bar", mass=1.0, com=(0.2, 0.05, 0), inertia=(0.01, 0.02, 0.02),
              points={"P": (0.05, 0.1, -0.1)})
    for b, p, ax in (("c1", "ground", (1, 0, 0)), ("c2", "c1", (0, 1, 0)),
                     ("c3", "c2", (0, 0, 1))):
        free.prismatic(f"s{b}", p, b, axis=ax)
    free.spherical("sph", "c3", "bar")
    free.cut("line", "point-to-line", "ground", "bar", point1="O", point2="P", axis1=a,
             normal=nv, normal2=(0.3, 0.2, 0.9))
    fm = free.compile()
    z = rng.uniform(-0.5, 0.5, fm.n)
    Jc = constraint_jacobian_at(fm.arrays, z)[0]
    assert np.linalg.matrix_rank(Jc) == 4

    def phi(zz):
        A, r, _, _, Z, Zd = frame_state(fm, zz, np.zeros(fm.n))
        out = np.zeros(fm.m)
        K.constraints(fm.arrays, fm.arrays.p, 0.0, zz, np.zeros(fm.n), np.zeros(fm.n), A, r,
                      Z, Zd, 0, out)
        return out

    h = 1e-4
    Jfd = np.column_stack([(-phi(z + 2 * h * e) + 8 * phi(z + h * e) - 8 * phi(z - h * e)
                            + phi(z - 2 * h * e)) / (12 * h) for e in np.eye(fm.n)])
    # 5-point difference with h = 1e-4 of O(1) rows: truncation ~1e-14, rounding ~1e-12
    np.testing.assert_allclose(Jc, Jfd, atol=1e-10)


# ----------------------------------------------------------------------------------------
# builder and model file
# ----------------------------------------------------------------------------------------


def test_model_file_round_trip_compiles_to_the_same_arrays(cm):
    again = model_from_dict(model_to_dict(cm.model)).compile()
    for a, b in zip(cm.arrays, again.arrays):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    slot = slotted_crank()
    doc = model_to_dict(slot)
    assert doc["cuts"][0]["normal"] == [0.0, 0.0, 1.0]
    again = model_from_dict(doc).compile()
    for a, b in zip(slot.compile().arrays, again.arrays):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_bad_point_to_line_input_is_refused_by_name():
    mod = wb.Model("bad", planar=True)
    mod.body("bar", mass=1.0)
    with pytest.raises(ModelError, match="point-to-line joint 'p'.*parallel"):
        mod.point_to_line("p", "ground", "bar", axis=(0, 0, 1))
    with pytest.raises(ModelError, match="joint 'r'.*point-to-line joints only"):
        mod.revolute("r", "ground", "bar", normal=(0, 0, 1))
    with pytest.raises(ModelError, match="cut joint 'c'.*point-to-line cuts only"):
        mod.cut("c", "revolute", "bar", "ground", normal=(0, 0, 1))
    mod.point_to_line("p", "ground", "bar", axis=(1, 0, 0))
    mod.cut("tilted", "point-to-line", "bar", "ground", axis1=(1, 0, 0), normal=(1, 0, 1))
    with pytest.raises(ModelError, match="cut joint 'tilted'.*planar point-to-line"):
        mod.compile()
