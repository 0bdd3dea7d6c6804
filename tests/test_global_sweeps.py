"""Issue 29 item 3: the global formulation's sensitivity sweeps on the simulation's
kernels (``natural.step_jacobians.step_jacobians_w``) against references: the per-row
tangent of ``Theta_q^T mu`` (``kernels.theta_grad_t``), the exact-zero tangents of a
parameter column that moves no constraint, and the semi-recursive gradients."""

import numpy as np
import pytest

from workbench.formulations.natural import kernels as G
from workbench.formulations.natural import step_jacobians as GS
from workbench.formulations.natural.build import global_model
from workbench.integrators.simulation import simulate
from workbench.model import catalog
from workbench.sensitivities.driver import sensitivity


def _model(name):
    if name.startswith("buggy"):
        from workbench.apps import vehicle
        return vehicle.prepare(name).compile()
    return catalog.load(name).compile()


def _rows(cm, t_end, dt, every):
    r = simulate(cm, t_end, dt, formulation="global")
    Q, AREF = r.natural
    return [(r.t[k], Q[k].copy(), AREF[k].copy(), r.zdi[k].copy(), r.zddi[k].copy())
            for k in range(0, len(r.t), every)]


@pytest.mark.parametrize("name,t_end,dt,every", [("five-bar", 0.3, 1e-3, 100),
                                                 ("buggy-dlc", 1.5, 0.015, 25)])
def test_grouped_gradient_tangent_equals_per_row_tangent(name, t_end, dt, every):
    """``theta_grad_t_grouped`` (the operands' gradients applied once, the rows' vectors
    summed per operand) equals the row-by-row tangent (``sf_grad_t`` per row, every operand
    applied again) along state and field directions: the same derivative summed in another
    order, so to rounding (1e-13 of the largest entry; measured about 1e-16); and, along a
    state direction, the central difference of ``Theta_q^T mu`` (``theta_jacobian`` at
    ``q +- eps dq``; eps = 1e-6: truncation ~1e-12, cancellation ~1e-10 relative, bound
    1e-7)."""
    cm = _model(name)
    ga = global_model(cm)[0]
    ma = cm.arrays
    p = ma.p
    N = ga.nq
    md = ga.phi_sf.shape[0] + ga.dof_sf.shape[0]
    ws = G.make_ws(ga)
    pr = G.row_program(ga, p, ws)
    nop = ga.op_ptr.shape[0] - 1
    OB = np.zeros((nop, 3, 3))
    OD = np.zeros((nop, 3, 3))
    Gacc = np.zeros((nop, 3))
    V = np.zeros((12, 3))
    rng = np.random.default_rng(4)
    z = np.zeros(N)
    for t, q, aref, zdi, a in _rows(cm, t_end, dt, every):
        G.operand_base(ga, p, q, z, z, OB)
        mu = rng.standard_normal(md)
        for has_p in (False, True):
            dq = rng.standard_normal(N)
            dp = rng.standard_normal(p.shape[0]) if has_p else np.zeros(p.shape[0])
            G.operand_dir(ga, p, dq, q, dp, has_p, True, OD, 0, np.zeros(3))
            out = np.zeros(N)
            ref = np.zeros(N)
            G.theta_grad_t_grouped(ga, pr.tw, dp, has_p, OB, OD, mu, Gacc, out)
            m = ga.phi_sf.shape[0]
            for k in range(md):
                s = ga.phi_sf[k] if k < m else ga.dof_sf[k - m]
                G.sf_grad_t(ga, p, s, q, dq, dp, V, mu[k], ref)
            assert np.max(np.abs(out - ref)) <= 1e-13 * np.max(np.abs(ref))
            if not has_p:
                eps = 1e-6
                Tp = np.zeros((md, N))
                Tm = np.zeros((md, N))
                G.theta_jacobian(ga, p, q + eps * dq, aref.copy(), ws.sc, Tp)
                G.theta_jacobian(ga, p, q - eps * dq, aref.copy(), ws.sc, Tm)
                fd = (Tp.T @ mu - Tm.T @ mu) / (2 * eps)
                assert np.max(np.abs(out - fd)) <= 1e-7 * np.max(np.abs(fd))


def test_parameter_columns_that_move_no_constraint():
    """The five-bar's parameters split into those that move a constraint (the geometric
    ones: joint locations and link lengths) and the others (masses, inertias, springs):
    along every one of the others the tangents of every row of ``Theta`` are exact zeros
    at any state, which is what lets the sweep skip their position, velocity and
    acceleration problems."""
    cm = _model("five-bar")
    ga, q0, aref0, _ = global_model(cm)
    ma = cm.arrays
    p = ma.p
    nf = p.shape[0]
    Gm = np.eye(nf)
    kin = GS.constraint_columns_g(ga, ma, Gm)
    assert 0 < kin.sum() < nf                       # both kinds exist
    nop = ga.op_ptr.shape[0] - 1
    OB = np.zeros((nop, 3, 3))
    OD = np.zeros((nop, 3, 3))
    md = ga.phi_sf.shape[0] + ga.dof_sf.shape[0]
    tg = np.zeros(md)
    rng = np.random.default_rng(9)
    N = ga.nq
    z = np.zeros(N)
    for t, q, aref, zdi, a in _rows(cm, 0.3, 1e-3, 100):
        qd = rng.standard_normal(N)
        G.operand_base(ga, p, q, qd, z, OB)
        moved = np.zeros(nf, dtype=bool)
        for j in range(nf):
            for lv, base in ((0, q), (1, qd)):
                G.operand_dir(ga, p, z, base, Gm[:, j], True, lv == 0, OD, lv, np.zeros(3))
            for lv in (0, 1):
                G.theta_tangents(ga, p, Gm[:, j], True, OB, OD, lv, tg)
                G.drive_tangents(ga, ma, p, Gm[:, j], t, lv, tg)
                moved[j] |= bool(np.any(tg != 0.0))
        # every field that moves a row is classified as moving one (the classification may
        # be wider: a time function's coefficient count is bounded from above)
        assert moved.any() and np.all(kin[moved] == 1)


@pytest.mark.parametrize("name,t_end,dt", [("five-bar", 0.2, 1e-3), ("buggy-dlc", 4.5, 0.015)])
def test_global_sweep_gradients_equal_semi_recursive(name, t_end, dt):
    """Direct and adjoint gradients of the global sweeps (LU state, grouped gradient
    tangents, skipped columns) equal the semi-recursive ones: the same discrete problem
    in other coordinates, solved to the Newton tolerance (1e-10 relative on the
    accelerations; 1e-6 relative on the gradients, as in ``tests/test_global.py``).  The
    buggy's horizon reaches into the lane change (before it the gradient is ~1e-33)."""
    cm = _model(name)
    g = {}
    for f in ("global", "sr-com"):
        for m in ("direct", "adjoint"):
            g[(f, m)] = np.asarray(sensitivity(cm, method=m, formulation=f, t_end=t_end,
                                               dt=dt).gradient)
    scale = np.max(np.abs(g[("sr-com", "adjoint")]))
    for m in ("direct", "adjoint"):
        assert np.max(np.abs(g[("global", m)] - g[("sr-com", m)])) <= 1e-6 * scale
    # direct = adjoint within the global formulation: the same Jacobians, two recursions
    assert np.max(np.abs(g[("global", "direct")] - g[("global", "adjoint")])) <= 1e-12 * scale
