"""The reverse-mode (vector-Jacobian) kernels of :mod:`workbench.kernels.cotangents`
against two independent references: central differences of the residual ``tau``
computed by the inverse dynamics, and the forward-mode step Jacobians (every field a
parameter, the geometric ones included)."""

import numpy as np
import pytest
from conftest import bind, random_tree, set_item, slider_crank

from workbench import objectives as O
from workbench.apps.bench import closed_chain
from workbench.apps.peers_bench import chain_data, chain_objective, open_chain
from workbench.compiled.parameters import kinematic_parameters
from workbench.errors import OptionError
from workbench.formulations.semirecursive import matrixr as MR
from workbench.formulations.semirecursive import step_jacobians as S
from workbench.formulations.semirecursive import step_vjp as SV
from workbench.integrators.simulation import simulate
from workbench.kernels import cotangents as CT
from workbench.model import catalog
from workbench.model.elements import GROUND
from workbench.sensitivities.driver import sensitivity


def _sprung_tree(seed):
    """A random open tree with every joint type (auxiliary frames, prismatic and fixed
    joints, full inertia tensors, gravity along a random direction) and joint
    spring-dampers on its first three joints that have a coordinate."""
    m = random_tree(seed)
    for j in list(m.joints)[:3]:
        if m.joints[j].type != "fixed":
            m.joint_spring(f"js{j}", j, k=7.0, c=0.5, q0=0.3)
    return m


def _vjp(ma, p, z, zd, zdd, v):
    n = z.shape[0]
    out = (np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(p.shape[0]))
    CT.virtual_power_gradient_r(ma, p, z, zd, zdd, v, *out)
    return out


@pytest.mark.parametrize("seed", [3, 5])
def test_virtual_power_gradient_matches_central_differences_of_tau(seed):
    cm = _sprung_tree(seed).compile()
    ma = cm.arrays
    p = ma.p.copy()
    assert CT.virtual_power_supported(ma)
    rng = np.random.default_rng(seed)
    x = [rng.normal(size=cm.n) for _ in range(3)] + [p]
    v = rng.normal(size=cm.n)
    grads = _vjp(ma, p, *x[:3], v)

    def vtau(args):
        z, zd, zdd, pp = args
        return v @ MR.full_dynamics_terms(ma, pp, 1, 0.0, z, zd, zdd)[1]

    h = 1e-6
    for k, g in enumerate(grads):
        fd = np.zeros_like(g)
        for i in range(g.shape[0]):
            hi, lo = list(x), list(x)
            hi[k] = x[k].copy()
            lo[k] = x[k].copy()
            hi[k][i] += h
            lo[k][i] -= h
            fd[i] = (vtau(hi) - vtau(lo)) / (2 * h)
        # central differences with h = 1e-6: truncation ~h^2 and rounding ~1e-16/h of
        # O(10) values, ~1e-9 absolute; 1e-7 of the largest entry leaves margin, and any
        # missing term is O(1)
        np.testing.assert_allclose(g, fd, rtol=0, atol=1e-7 * np.abs(fd).max())
    # the fields nothing reads (e.g. points no element uses) get exact zeros
    assert np.count_nonzero(grads[3]) < p.shape[0]


@pytest.mark.parametrize("case", ["tree3", "tree5", "chain5", "chain20"])
@pytest.mark.parametrize("form", [MR.FORM_ORIGIN, MR.FORM_COM])
def test_one_reverse_pass_gives_the_transposed_step_jacobians(case, form):
    """``K^T v``, ``C^T v``, ``Mbar^T v`` and ``P^T v`` (every field a parameter, so the
    joint locations and the bodies' offsets move the configuration) from one reverse
    pass equal the forward step Jacobians' columns contracted with ``v``."""
    cm = (_sprung_tree(int(case[4:])) if case.startswith("tree")
          else open_chain(int(case[5:]))).compile()
    ma = cm.arrays
    p = ma.p
    n, d, nfield = cm.n, cm.d, p.shape[0]
    rng = np.random.default_rng(2)
    zi, zdi, a = rng.normal(size=d) * 0.5, rng.normal(size=d), rng.normal(size=d)
    z = cm.z_guess.copy()
    MR.coordinate_position(ma, p, zi, z, MR.make_workspace(ma, n))
    Gm = np.eye(nfield)
    pkin = kinematic_parameters(cm, Gm)
    assert pkin.any()
    Jr, Mb = np.zeros((d, 2 * d + nfield)), np.zeros((d, d))
    R, zd, zdd = np.zeros((n, d)), np.zeros(n), np.zeros(n)
    e = np.zeros(0, dtype=np.int64)
    st = S.step_jacobians(ma, p, form, 0.0, zi, zdi, a, z, Gm, pkin,
                          np.zeros(nfield, dtype=np.int64), e, e, e, Jr, Mb,
                          np.zeros((0, 3 * d + nfield)), np.zeros(0), R, zd, zdd)
    assert st == MR.OK
    v = rng.normal(size=d)
    zb, zdb, zddb, pb = _vjp(ma, p, z, zd, zdd, R @ v)
    # two exact evaluations of the same derivatives in different orders: rounding only
    # (measured <= 3e-15 relative); 1e-12 as for direct = adjoint
    for rev, fwd in ((R.T @ zb, v @ Jr[:, :d]), (R.T @ zdb, v @ Jr[:, d:2 * d]),
                     (R.T @ zddb, v @ Mb), (pb, v @ Jr[:, 2 * d:])):
        np.testing.assert_allclose(rev, fwd, rtol=0, atol=1e-12 * np.abs(fwd).max())


@pytest.mark.parametrize("case", ["five-bar", "closed-chain", "slider-crank"])
def test_closed_loop_products_give_the_transposed_step_jacobians(case):
    """On closed loops, one pass with ``v = R mu`` (the ``dR^Phi`` term included) and the
    transposed position, velocity and acceleration problems
    (:func:`~workbench.formulations.semirecursive.step_vjp.implicit_chain`) give ``K^T mu``,
    ``C^T mu``, ``Mbar^T mu`` and ``P^T mu`` of the forward step Jacobians, every field a
    parameter (the closure points, joint locations and the rod's length move the
    configuration), at a state of a simulated trajectory."""
    model = {"five-bar": lambda: catalog.load("five-bar"), "closed-chain": lambda: closed_chain(4),
             "slider-crank": lambda: _parametrized_slider_crank()[0]}[case]()
    cm = model.compile()
    ma, p = cm.arrays, cm.arrays.p
    n, d, nfield, m = cm.n, cm.d, p.shape[0], ma.c_type.shape[0]
    assert m > 0
    sim = simulate(cm, 0.04, 1e-3)
    row = 30
    t, z, zi, zdi, a = sim.t[row], sim.z[row], sim.zi[row], sim.zdi[row], sim.zddi[row]
    Gm = np.eye(nfield)
    Jr, Mb = np.zeros((d, 2 * d + nfield)), np.zeros((d, d))
    R, zd, zdd = np.zeros((n, d)), np.zeros(n), np.zeros(n)
    e = np.zeros(0, dtype=np.int64)
    st = S.step_jacobians(ma, p, MR.FORM_ORIGIN, t, zi, zdi, a, z.copy(), Gm,
                          kinematic_parameters(cm, Gm), np.zeros(nfield, dtype=np.int64), e, e,
                          e, Jr, Mb, np.zeros((0, 3 * d + nfield)), np.zeros(0), R, zd, zdd)
    assert st == MR.OK
    # the sweep's row: the partition, R^Phi, the full rates and accelerations, and kap =
    # -(Theta_z^-T tau)[:m]; the same kernels as the step Jacobians', so the same numbers
    vw = SV.make_vjp_workspace(ma, n, nfield)
    Rphi, PL = vw[5][0], vw[5][1]
    assert MR.partition_setup(ma, n, PL[0])
    zd2, zdd2 = np.zeros(n), np.zeros(n)
    assert SV.closed_loop_row(ma, p, MR.FORM_ORIGIN, t, z, zi, zdi, a, zd2, zdd2, np.zeros(n),
                              np.zeros(n), vw)
    np.testing.assert_allclose(Rphi, R, rtol=0, atol=1e-14)
    np.testing.assert_allclose(zd2, zd, rtol=0, atol=1e-14 * np.abs(zd).max())
    np.testing.assert_allclose(zdd2, zdd, rtol=0, atol=1e-14 * np.abs(zdd).max())
    mu = np.random.default_rng(4).normal(size=d)
    SV.residual_products(ma, p, z, zd, zdd, Rphi @ mu, vw, True)
    zb, zdb, zddb = vw[3][0], vw[3][1], vw[3][2]
    dof = ma.dof_i[:, 0]
    # two exact evaluations of the same derivatives in different orders: rounding only
    # (measured <= 2e-15 relative on the closed chain); 1e-12 as for direct = adjoint
    for rev, fwd in ((zb[dof], mu @ Jr[:, :d]), (zdb[dof], mu @ Jr[:, d:2 * d]),
                     (zddb[dof], mu @ Mb), (vw[4], mu @ Jr[:, 2 * d:])):
        np.testing.assert_allclose(rev, fwd, rtol=0, atol=1e-12 * np.abs(fwd).max())


def test_models_with_other_loads_are_not_claimed():
    cm = random_tree(3, forces=True).compile()
    assert not CT.virtual_power_supported(cm.arrays)


# ----------------------------------------------------------------------------------------
# the discrete adjoint by reverse-mode step products (products="reverse")
# ----------------------------------------------------------------------------------------


def _parametrized_sprung_tree():
    """:func:`_sprung_tree` with parameters bound to a mass, a centre-of-mass coordinate,
    an inertia, a joint location (geometric: it moves the configuration), a measured
    point's coordinate and a joint spring's stiffness, damping and rest angle."""
    m = _sprung_tree(3)
    b = m.bodies

    bind(m, "m1", float(b["b1"].mass), "kg", lambda nm: setattr(b["b1"], "mass", nm))
    bind(m, "xg2", float(b["b2"].com[0]), "m", set_item(b["b2"], "com", 0))
    bind(m, "I3", float(b["b3"].inertia[0]), "kg*m^2", set_item(b["b3"], "inertia", 0))
    j2 = m.joints["j2"]
    bind(m, "jz", float(j2.parent_point[2]), "m", set_item(j2, "parent_point", 2))
    p1 = list(b["b4"].points["p1"])
    bind(m, "py", float(p1[1]), "m", lambda nm: b["b4"].points.__setitem__(
        "p1", (p1[0], nm, p1[2])))
    js = m.joint_springs[next(iter(m.joint_springs))]
    bind(m, "kj", 7.0, "N*m/rad", lambda nm: setattr(js, "k", nm))
    bind(m, "cj", 0.5, "N*m*s/rad", lambda nm: setattr(js, "c", nm))
    bind(m, "qj", 0.3, "rad", lambda nm: setattr(js, "q0", nm))
    return m, ["m1", "xg2", "I3", "jz", "py", "kj", "cj", "qj"]


# every measure kind of the semi-recursive kernels but reactions
_TREE_OBJECTIVES = [
    O.point_position("x", "b4.p1", components="xz", power=1),
    O.point_velocity("v", "b6.p1"),
    O.point_acceleration("a", "b2.p0", components="y"),
    O.angular_velocity("wb", "b4", components="xz", frame="body"),
    O.angular_velocity("wg", "b3", frame="global"),
    O.coordinate("q", "j0"),
    O.coordinate("qd", "j3.a2", level=1),
    O.coordinate("qdd", "j4.ry", level=2),
]


def _parametrized_slider_crank():
    """The spatial slider-crank of the conftest (a cut spherical joint: three
    point-coincidence rows; revolute, prismatic and universal joints) with a linear point
    spring-damper from the crank tip to a ground anchor, and parameters bound to the
    crank's mass, a coordinate of the conrod's end B (geometric: a closure point) and the
    spring's stiffness, damping and rest length."""
    m = slider_crank()
    m.point(GROUND, "anchor", (0.05, 0.3, 0.35))
    m.spring("sp", "crank", "B", GROUND, "anchor", k=50.0, c=0.4, length=0.1)
    b = m.bodies
    bind(m, "mc", float(b["crank"].mass), "kg", lambda nm: setattr(b["crank"], "mass", nm))
    pB = list(b["conrod"].points["B"])
    bind(m, "Bz", float(pB[2]), "m", lambda nm: b["conrod"].points.__setitem__(
        "B", (pB[0], pB[1], nm)))
    sp = m.springs["sp"]
    bind(m, "ks", 50.0, "N/m", lambda nm: setattr(sp, "k", nm))
    bind(m, "cs", 0.4, "N*s/m", lambda nm: setattr(sp, "c", nm))
    bind(m, "Ls", 0.1, "m", lambda nm: setattr(sp, "length", nm))
    return m, ["mc", "Bz", "ks", "cs", "Ls"]


_SLIDER_CRANK_OBJECTIVES = [
    O.point_position("x", "conrod.C", components="x", power=1),
    O.point_velocity("v", "crank.B"),
    O.point_acceleration("a", "conrod.B", components="yz"),
    O.coordinate("s", "slider"),
    O.coordinate("sd", "slider", level=1),
    O.coordinate("sdd", "slider", level=2),
]


def _reverse_case(case):
    """(model, keywords of sensitivity) of the reverse-products comparisons."""
    if case == "tree":
        model, names = _parametrized_sprung_tree()
        return model, dict(objectives=_TREE_OBJECTIVES, parameters=names, t_end=0.1, dt=1e-3)
    if case == "chain":
        return open_chain(5), dict(objectives=[chain_objective(5)],
                                   parameters=chain_data(5).names, t_end=0.2, dt=1e-3)
    if case == "five-bar":
        # every parameter bound to a field (18; gravity and the initial angles are
        # load-time values)
        model = catalog.load("five-bar")
        cm = model.compile()
        names = [nm for j, nm in enumerate(cm.param_names) if np.any(cm.G[:, j])]
        assert len(names) == 18
        return model, dict(parameters=names, t_end=0.15, dt=1e-3)
    if case == "closed-chain":
        return closed_chain(4), dict(
            objectives=[O.point_position("tip_y", "link3.tip", "y"), O.coordinate("q", "j2")],
            parameters=[f"{k}{i}" for i in range(4) for k in ("m", "xg", "I", "k", "c")],
            t_end=0.15, dt=1e-3)
    model, names = _parametrized_slider_crank()
    return model, dict(objectives=_SLIDER_CRANK_OBJECTIVES, parameters=names, t_end=0.15,
                       dt=1e-3)


@pytest.mark.parametrize("case", ["tree", "chain", "five-bar", "closed-chain", "slider-crank"])
def test_reverse_products_give_the_adjoint_and_direct_gradients(case):
    """The discrete adjoint by reverse-mode products (no step Jacobian formed; the
    transposed solve by preconditioned passes; on the closed loops the dR^Phi term and
    the transposed position, velocity and acceleration problems) equals the
    Jacobian-based discrete adjoint and the direct method: the same discrete derivative,
    to rounding.  The closed loops: the five-bar (planar cut revolute, point springs,
    every differentiable parameter, geometric ones included), a chain closed by a
    distance rod, the spatial slider-crank (cut spherical joint, a point spring)."""
    model, kw = _reverse_case(case)
    cm = model.compile()
    sim = simulate(cm, kw["t_end"], kw["dt"], keep_states=True)
    run = {k: v for k, v in kw.items() if k not in ("t_end", "dt")}
    rev = sensitivity(cm, method="adjoint", products="reverse", simulation=sim, threads=1,
                      **run)
    fwd = sensitivity(cm, method="adjoint", simulation=sim, threads=1, **run)
    direct = sensitivity(cm, method="direct", simulation=sim, threads=1, **run)
    assert rev.timings["products"] == "reverse"
    # the passes contract by ~1e-3 (docs/performance.md, session 23): a handful per row
    assert 2 <= rev.timings["reverse_passes_per_row"] <= 10 * len(rev.objectives)
    # 1e-11 of each objective's largest entry: the two adjoints and the direct method
    # agree to ~1e-13 (rounding of the recursions and of the solves with T); the same
    # bound as direct = adjoint elsewhere in the suite
    for j in range(len(rev.objectives)):
        scale = np.abs(fwd.gradient[j]).max()
        for other in (fwd.gradient[j], direct.gradient[j]):
            np.testing.assert_allclose(rev.gradient[j], other, rtol=0, atol=1e-11 * scale)
        np.testing.assert_allclose(rev.running[:, j], fwd.running[:, j], rtol=0,
                                   atol=1e-11 * scale)
    # the objectives: the same measures, evaluated from the kept states on both sides
    np.testing.assert_allclose(rev.psi, fwd.psi, rtol=1e-14, atol=0)


def test_reverse_products_in_checkpointed_segments_equal_full_storage():
    cm = open_chain(5).compile()
    kw = dict(objectives=[chain_objective(5)], parameters=chain_data(5).names, t_end=0.2,
              dt=1e-3, threads=1, products="reverse")
    full = sensitivity(cm, method="adjoint", **kw)
    seg = sensitivity(cm, method="adjoint", checkpoint_steps=37, **kw)
    assert seg.timings["segments"] > 1
    # the segments re-run the same steps bit for bit; the recursion is the same
    np.testing.assert_allclose(seg.gradient, full.gradient, rtol=1e-13, atol=0)


def test_auto_products_take_reverse_where_the_dof_are_many_per_objective():
    """``products="auto"`` (the default): reverse on an open chain with 10 DOF and one
    objective (>= 6 per objective), forward on the chain with 5, on the five-bar (2 DOF,
    closures) and on the direct method; the same gradient as the explicit choice."""
    def run(model, objectives, names, **kw):
        return sensitivity(model, objectives=objectives, parameters=names, t_end=0.02,
                           dt=1e-3, threads=1, **kw)

    c10 = open_chain(10).compile()
    auto = run(c10, [chain_objective(10)], ["m0", "m9"], method="adjoint")
    assert auto.timings["products"] == "reverse"
    fwd = run(c10, [chain_objective(10)], ["m0", "m9"], method="adjoint", products="forward")
    # the same discrete adjoint (1e-11 as in the comparisons above)
    np.testing.assert_allclose(auto.gradient, fwd.gradient, rtol=0,
                               atol=1e-11 * np.abs(fwd.gradient).max())
    c5 = open_chain(5).compile()
    assert run(c5, [chain_objective(5)], ["m0"], method="adjoint").timings["products"] == \
        "forward"
    assert run(c10, [chain_objective(10)], ["m0"], method="direct").timings.get(
        "products", "forward") == "forward"
    five = sensitivity("five-bar", method="adjoint", t_end=0.01, threads=1)
    assert five.timings["products"] == "forward"


def test_reverse_products_refuse_what_they_do_not_cover():
    with pytest.raises(OptionError, match="buggy-dlc.*products='forward'"):
        sensitivity("buggy-dlc", method="adjoint", products="reverse", t_end=0.045)
    with pytest.raises(OptionError, match="discrete adjoint"):
        sensitivity(open_chain(2).compile(), objectives=[chain_objective(2)],
                    parameters=["m0"], method="direct", products="reverse", t_end=0.01,
                    dt=1e-3)
    with pytest.raises(OptionError, match="unknown value 'backward'"):
        sensitivity(open_chain(2).compile(), objectives=[chain_objective(2)],
                    parameters=["m0"], products="backward", t_end=0.01, dt=1e-3)


def test_the_cli_takes_the_products_option_and_refuses_an_uncovered_model(capsys):
    from workbench.apps.cli import main
    assert main(["sensitivity", "buggy-dlc", "--products", "reverse", "--t-end", "0.045"]) == 2
    err = capsys.readouterr().err
    assert "products='reverse'" in err and "buggy-dlc" in err and "Traceback" not in err
