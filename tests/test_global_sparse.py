"""Issue 29 item 3: the global formulation's sparse kernels (symbolic QR analysis once per
model, numeric refactorisation per Newton iteration, block-diagonal mass matrix, one force
tangent per column of R) against references: dense solves of the same systems, the dense
mass matrix, and the generic (profile) QR path kept in the code, run by a model whose
symbolic fields are empty."""

import numpy as np
import pytest

from workbench.formulations.natural import kernels as G
from workbench.formulations.natural.build import GLOBAL_ATTR, global_model, no_lu, no_symbolic
from workbench.integrators.simulation import simulate
from workbench.kernels.linalg import projected_matrix
from workbench.model import catalog

EPS = np.finfo(float).eps


def _buggy():
    from workbench.apps import vehicle
    return vehicle.prepare("buggy-step", parameters={"x0": 5.25}).compile()


def _model(name):
    return _buggy() if name == "buggy" else catalog.load(name).compile()


def _states(cm, t_end, dt, every):
    """Natural coordinates, branches and degree-of-freedom velocities along a global run."""
    r = simulate(cm, t_end, dt, formulation="global")
    Q, AREF = r.natural
    return [(r.t[k], Q[k].copy(), AREF[k].copy(), r.zdi[k].copy())
            for k in range(0, len(r.t), every)]


@pytest.mark.parametrize("name,t_end,dt,every", [("five-bar", 0.5, 1e-3, 50),
                                                 ("buggy", 0.15, 1e-3, 30)])
def test_sparse_qr_solves_equal_dense_solves(name, t_end, dt, every):
    cm = _model(name)
    ga = global_model(cm)[0]
    p = cm.arrays.p
    m = ga.phi_sf.shape[0]
    d = ga.dof_sf.shape[0]
    N = ga.nq
    assert ga.sq_cperm.shape[0] == N             # the model has its symbolic analysis
    ws = G.make_ws(ga)
    rng = np.random.default_rng(3)
    for t, q, aref, zdi in _states(cm, t_end, dt, every):
        G.theta_jacobian(ga, p, q, aref, ws.sc, ws.Th)
        Th = ws.Th.copy()
        assert G.sqr_factor(ga, ws.Th, ws, 1e-12) == -1
        assert ws.flags[G.FL_MODE] == 1           # the symbolic path ran (no fallback)
        # Theta_q is square and regular here: the sparse QR and LAPACK's LU solve the same
        # system; both are backward stable, so they agree to a few eps times cond(Theta_q)
        # (measured: 1e-14 relative on the buggy, cond ~ 1e2)
        tol = 100 * EPS * np.linalg.cond(Th)
        b = rng.standard_normal(m + d)
        x = np.zeros(N)
        G.sqr_solve(ga, ws, b, x)
        xd = np.linalg.solve(Th, b)
        assert np.max(np.abs(x - xd)) <= tol * np.max(np.abs(xd))
        c = rng.standard_normal(N)
        mu = np.zeros(m + d)
        G.sqr_solve_transpose(ga, ws, c, mu)
        mud = np.linalg.solve(Th.T, c)
        assert np.max(np.abs(mu - mud)) <= tol * np.max(np.abs(mud))
        R = np.zeros((N, d))
        G.sqr_solve_units(ga, ws, m, R)
        Rd = np.linalg.solve(Th, np.eye(m + d)[:, m:])
        assert np.max(np.abs(R - Rd)) <= tol * np.max(np.abs(Rd))
        # the generic (profile) QR of the same matrix: the same solutions
        assert G.sqr_factor_generic(ga, Th, ws, 1e-12) == -1
        assert ws.flags[G.FL_MODE] == 0
        Rg = np.zeros((N, d))
        G.sqr_solve_units(ga, ws, m, Rg)
        assert np.max(np.abs(Rg - Rd)) <= tol * np.max(np.abs(Rd))
        # back to the symbolic path after the generic one (R cleared of its entries)
        G.sqr_factor(ga, Th, ws, 1e-12)
        G.sqr_solve_units(ga, ws, m, R)
        assert np.max(np.abs(R - Rd)) <= tol * np.max(np.abs(Rd))


def test_entry_outside_the_symbolic_pattern_falls_back_to_the_generic_qr():
    cm = _model("five-bar")
    ga, q0, aref0, _ = global_model(cm)
    ws = G.make_ws(ga)
    G.theta_jacobian(ga, cm.arrays.p, q0, aref0.copy(), ws.sc, ws.Th)
    Th = ws.Th.copy()
    mr, n = Th.shape
    # an entry of Theta_q outside the symbolic pattern (sq_mask is in the kernel's layout:
    # column position in sq_cperm, row position in sq_rperm)
    cpos = np.argsort(ga.sq_cperm)
    rpos = np.argsort(ga.sq_rperm)
    i, j = next((i, j) for i in range(mr) for j in range(n)
                if ga.sq_mask[cpos[j], rpos[i]] == 0)
    assert Th[i, j] == 0.0
    Th[i, j] = 0.3
    before = ws.flags.copy()
    G.sqr_factor(ga, Th, ws, 1e-12)
    assert ws.flags[G.FL_GENERIC] == before[G.FL_GENERIC] + 1
    assert ws.flags[G.FL_MODE] == 0
    b = np.random.default_rng(0).standard_normal(mr)
    x = np.zeros(n)
    G.sqr_solve(ga, ws, b, x)
    xd = np.linalg.solve(Th, b)
    assert np.max(np.abs(x - xd)) <= 100 * EPS * np.linalg.cond(Th) * np.max(np.abs(xd))


@pytest.mark.parametrize("name", ["five-bar", "buggy"])
def test_block_mass_kernels_equal_dense_products(name):
    cm = _model(name)
    ga, q0, aref0, _ = global_model(cm)
    ma, p = cm.arrays, cm.arrays.p
    N = ga.nq
    rng = np.random.default_rng(1)
    M = np.zeros((N, N))
    G.mass_matrix(ga, ma, p, p, False, M)
    R = rng.standard_normal((N, 5))
    Mb = np.zeros((5, 5))
    G.projected_mass(ga, M, R, Mb)
    Md = np.zeros((5, 5))
    projected_matrix(R, M, Md)
    # the dense loop adds the same products in the same order plus exact zeros
    assert np.array_equal(Mb, Md)
    x = rng.standard_normal(N)
    y = np.zeros(N)
    G.mass_apply(ga, M, x, y)
    assert np.allclose(y, M @ x, rtol=1e-14, atol=1e-14 * np.max(np.abs(M @ x)))
    dp = rng.standard_normal(p.shape[0])
    dM = np.zeros((N, N))
    G.mass_matrix(ga, ma, p, dp, True, dM)
    z = np.zeros(N)
    G.mass_dir_apply(ga, ma, p, dp, x, z)
    assert np.allclose(z, dM @ x, rtol=1e-13, atol=1e-13 * np.max(np.abs(dM @ x)))


@pytest.mark.parametrize("name,t_end", [("five-bar", 1.0), ("buggy", 0.15)])
def test_symbolic_path_run_equals_generic_path_run(name, t_end):
    """The whole global run with the sparse kernels equals the run with the generic QR
    (the code path before issue 29, still selected by a model without the symbolic
    analysis) to the Newton tolerance: both solve the same discrete equations, the
    factorisations differ in rounding only (measured: 1e-14 relative)."""
    cm = _model(name)
    fast = simulate(cm, t_end, 1e-3, formulation="global")
    cm2 = _model(name)
    ga, q0, aref0, names = global_model(cm2)
    object.__setattr__(cm2, GLOBAL_ATTR, (ga._replace(**no_symbolic()), q0, aref0, names))
    slow = simulate(cm2, t_end, 1e-3, formulation="global")
    # NEWTON_TOL = 1e-10 relative on the accelerations, position tolerance 1e-12
    scale = 1.0 + np.max(np.abs(slow.zdi))
    assert np.max(np.abs(fast.zi - slow.zi)) < 1e-9 * scale
    assert np.max(np.abs(fast.zdi - slow.zdi)) < 1e-8 * scale
    assert np.max(np.abs(fast.natural[0] - slow.natural[0])) < 1e-9 * (
        1.0 + np.max(np.abs(slow.natural[0])))


@pytest.mark.parametrize("name,t_end,dt,every", [("five-bar", 0.5, 1e-3, 50),
                                                 ("buggy", 0.15, 1e-3, 30)])
def test_row_program_equals_the_interpreter(name, t_end, dt, every):
    """The row program (per-run specialisation of the constraint rows) gives the bits of the
    generic operand interpreter: row values, rates and accelerations, branch updates, joint
    coordinate jets, force tangents along state directions, the Jacobian straight into the
    compact QR (the same factors as the gathered dense Theta_q), R in one block, and the
    whole position and velocity/acceleration steps.  The model's static-pivot LU is left
    out (``no_lu``): with it the program's factorisation is the LU
    (``tests/test_global_lu.py``)."""
    cm = _model(name)
    ga = global_model(cm)[0]._replace(**no_lu())
    ma = cm.arrays
    p = ma.p
    m = ga.phi_sf.shape[0]
    d = ga.dof_sf.shape[0]
    N = ga.nq
    ws = G.make_ws(ga)
    wi = G.make_ws(ga)
    pr = G.row_program(ga, p, ws)
    assert pr.ok[0] == 1                          # every instruction in the pattern
    rng = np.random.default_rng(5)
    for t, q, aref, zdi in _states(cm, t_end, dt, every):
        qd = np.zeros(N)
        qddb = np.zeros(N)
        R = np.zeros((N, d))
        G.solve_va(ga, ma, p, t, zdi, q, qd, qddb, R, aref.copy(), wi)
        qdd = qddb + R @ rng.standard_normal(d)
        Jp = np.zeros((m + d, 6))
        Ji = np.zeros((m + d, 6))
        G.prog_values(ga, ma, pr, p, t, q, aref, Jp)
        G.theta_values(ga, ma, p, t, q, aref, wi.sc, Ji)
        assert np.array_equal(Jp[:, 0], Ji[:, 0])
        G.prog_va(ga, ma, pr, p, t, qd, Jp)
        G.theta_va(ga, ma, p, t, q, qd, wi.sc, Ji)
        assert np.array_equal(Jp[:, 1:3], Ji[:, 1:3])
        # jets of every scalar function (relative coordinates, record rows)
        G.prog_operands(ga, pr.ts, qdd, False, pr.OA)
        jet = np.zeros(3)
        jeti = np.zeros(6)
        z = np.zeros(N)
        for s in range(ga.sf_kind.shape[0]):
            G.prog_jet(ga, ma, pr, p, s, t, aref, jet)
            G.sf_jet(ga, ma, p, s, t, q, qd, qdd, z, z, z, p, False, aref, wi.sc, jeti)
            assert np.array_equal(jet, jeti[:3])
        # force tangents along state directions from the operand values and rates, the
        # tires' as products with their Jacobians at this state (the other elements: the
        # same bits; the tires': the same derivative in another order of operations)
        zp = np.zeros(p.shape[0])
        TJ = np.zeros((ma.ty_pt.shape[0], 3, 3, 13))
        G.tire_state_jacobians(ga, ma, p, q, qd, TJ)
        for _ in range(2):
            dq = rng.standard_normal(N)
            dqd = rng.standard_normal(N)
            f1 = np.zeros(N)
            f2 = np.zeros(N)
            G.force_tangent_q(ga, ma, pr, p, t, q, qd, dq, dqd, zp, aref, wi.sc, f1, TJ)
            G.force_tangent(ga, ma, p, t, q, qd, dq, dqd, zp, aref, wi.sc, f2)
            if ma.ty_pt.shape[0] == 0:
                assert np.array_equal(f1, f2)
            else:
                # 1e-12 relative: rounding of two evaluation orders of one chain rule
                np.testing.assert_allclose(f1, f2, rtol=0, atol=1e-12 * np.max(np.abs(f2)))
        # branch references
        a1 = aref + 0.3
        a2 = a1.copy()
        G.prog_update_aref(ga, ma, pr, p, t, a1)
        G.update_aref(ga, ma, p, t, q, a2, wi.sc)
        assert np.array_equal(a1, a2)
        # the Jacobian into the compact columns: the factors of sqr_factor on Theta_q
        assert G.prog_factor(ga, pr, ws, 1e-12) == -1
        G.theta_jacobian(ga, p, q, aref, wi.sc, wi.Th)
        assert G.sqr_factor(ga, wi.Th, wi, 1e-12) == -1
        assert ws.flags[G.FL_MODE] == 1 and wi.flags[G.FL_MODE] == 1
        for f in ("Rc", "Vc", "beta", "Wc"):
            assert np.array_equal(getattr(ws, f), getattr(wi, f)), f
        # R: all columns together = one sqr_solve per unit right-hand side, bit for bit
        Rb = np.zeros((N, d))
        G.sqr_solve_units(ga, ws, m, Rb)
        for j in range(d):
            e = np.zeros(m + d)
            e[m + j] = 1.0
            x = np.zeros(N)
            G.sqr_solve(ga, ws, e, x)
            assert np.array_equal(Rb[:, j], x)
        # the steps of the loop: a position problem from a perturbed z^i, the next one
        # from its solution (reusing the factorisation; with "fresh" the first residual
        # from the kept operand values, as the loop does after the first iterate of a
        # step), then the velocities, accelerations and R
        zi = np.array([Ji[m + k, 0] for k in range(d)]) + 1e-4 * rng.standard_normal(d)
        zi2 = zi + 1e-6 * rng.standard_normal(d)
        acc = rng.standard_normal(d)
        out = {}
        for path in ("interpreter", "program", "fresh"):
            qq = q.copy()
            ar = aref.copy()
            w = G.make_ws(ga)
            pw = G.row_program(ga, p, w)
            v = np.zeros(N)
            a = np.zeros(N)
            Rs = np.zeros((N, d))
            rhs = np.zeros(m + d)
            J = np.zeros((m + d, 6))
            if path == "interpreter":
                st1 = G.solve_position(ga, ma, p, t, zi, qq, ar, w, 1e-12, 20, False)
                st2 = G.solve_position(ga, ma, p, t, zi2, qq, ar, w, 1e-12, 20, True)
                G.solve_va_step(ga, ma, p, t, zdi, acc, qq, v, a, Rs, ar, w, True, rhs, J)
            else:
                st1 = G.solve_position_p(ga, ma, pw, p, t, zi, qq, ar, w, 1e-12, 20, False,
                                         False)
                st2 = G.solve_position_p(ga, ma, pw, p, t, zi2, qq, ar, w, 1e-12, 20, True,
                                         path == "fresh")
                G.solve_va_step_p(ga, ma, pw, p, t, zdi, acc, qq, v, a, Rs, w, True, rhs, J)
            assert st1[0] == 0 and st2[0] == 0 and st2[1] > 0
            out[path] = (qq, ar, v, a, Rs)
        for path in ("program", "fresh"):
            for x, y in zip(out[path], out["interpreter"]):
                assert np.array_equal(x, y)


def test_row_program_falls_back_without_the_symbolic_analysis():
    """A model without the symbolic QR analysis (or an instruction outside its pattern)
    gets no row program: the loop takes the interpreter path."""
    cm = _model("five-bar")
    ga = global_model(cm)[0]
    gn = ga._replace(**no_symbolic())
    ws = G.make_ws(gn)
    assert ws.gpos.shape[0] == 0
    assert G.row_program(gn, cm.arrays.p, ws).ok[0] == 0
