"""The coordinate partition of ``Theta_z`` (closed loops whose DOF are joint coordinates):
the m x m LU of ``Phi_dep`` that replaces the n x n QR at the trapezoidal rule's Newton
iterates far from singular configurations, and ``Theta_z^+`` of the step Jacobians
(:mod:`workbench.formulations.semirecursive.matrixr`: ``partition_*``,
``theta_partitioned``; ``workbench.integrators.trapezoidal.integrate_semirecursive``).

The references are independent: numpy's dense solves and SVD of the same leading matrix,
and the integrator's own QR path (``partition=False``), which is the code before the
partition."""

import numpy as np
import pytest

import workbench as wb
from workbench import sensitivity
from workbench.apps.bench import closed_chain
from workbench.apps.vehicle import prepare
from workbench.formulations.interface import FORM_COM
from workbench.formulations.semirecursive import matrixr as MR
from workbench.integrators import trapezoidal as TZ
from workbench.integrators.simulation import RunJob
from workbench.kernels.linalg import (lu_factor_small, lu_solve_factored,
                                      lu_solve_factored_columns, lu_solve_transpose_factored,
                                      sigma_ratio)


def _run(cm, t_end, dt, partition, keep=False):
    """The semi-recursive trapezoidal run, with or without the partition's LU."""
    job = RunJob(cm, "sr-com", FORM_COM, 0.0, dt, int(round(t_end / dt)), cm.zi0, cm.zdi0,
                 cm.z_guess, keep_states=keep)
    job.status = TZ.integrate_semirecursive(*job._args, partition)
    return job.result()


@pytest.fixture(scope="module")
def models():
    buggy = prepare("buggy-dlc")
    return {
        "closed chain": (closed_chain(10).compile(), 0.5, 1e-3),
        "buggy": (buggy.compile(), 3.0, float(buggy.meta["dt"])),
        "five-bar": (wb.catalog.load("five-bar").compile(), 5.0, 1e-3),
    }


@pytest.fixture(scope="module")
def runs(models):
    return {name: (_run(cm, T, h, True), _run(cm, T, h, False))
            for name, (cm, T, h) in models.items()}


def _states(cm, sim, rows):
    """The workspace (position kinematics, leading matrix, QR) and the partition at rows."""
    ma, p = cm.arrays, cm.arrays.p
    m = ma.c_type.shape[0]
    for k in rows:
        ws = MR.make_workspace(ma, cm.n)
        MR.factor_theta(ma, p, sim.z[k].copy(), ws)
        PL = (np.zeros(m, dtype=np.int64), np.zeros((m, m)), np.zeros(m, dtype=np.int64))
        assert MR.partition_setup(ma, cm.n, PL[0])
        assert MR.partition_factor(ws.Th, PL)
        yield k, ws, PL


def test_lu_transpose_solve_equals_numpy():
    # tolerance: a backward-stable solve of these well-conditioned matrices (cond < 1e3)
    # is accurate to ~n eps cond
    rng = np.random.default_rng(7)
    for n in (1, 2, 3, 5, 9, 14):
        A = rng.standard_normal((n, n)) + n * np.eye(n)[rng.permutation(n)]
        LU, piv = np.zeros((n, n)), np.zeros(n, dtype=np.int64)
        assert lu_factor_small(A, LU, piv)
        b = rng.standard_normal(n)
        x = b.copy()
        lu_solve_transpose_factored(LU, piv, x)
        ref = np.linalg.solve(A.T, b)
        assert np.abs(x - ref).max() <= 1e-12 * np.abs(ref).max()


def test_solving_all_columns_at_once_gives_the_bits_of_one_solve_per_column():
    """``lu_solve_factored_columns`` (``R^Phi`` and ``Phi_dep^-1`` of the partition) does,
    for every column, the operations of ``lu_solve_factored`` in the same order: the same
    bits, including a pivoted matrix and a zero multiplier; and it solves the system
    (tolerance: backward-stable solves of matrices with cond < 1e3, ~n eps cond)."""
    rng = np.random.default_rng(11)
    for n, k in ((1, 1), (2, 3), (5, 1), (9, 14), (14, 9), (20, 33)):
        A = rng.standard_normal((n, n)) + n * np.eye(n)[rng.permutation(n)]
        if n > 2:
            A[2, 0] = 0.0                      # an exact zero below the first pivot
        LU, piv = np.zeros((n, n)), np.zeros(n, dtype=np.int64)
        assert lu_factor_small(A, LU, piv)
        B = rng.standard_normal((n, k))
        X = B.copy()
        lu_solve_factored_columns(LU, piv, X)
        for c in range(k):
            x = B[:, c].copy()
            lu_solve_factored(LU, piv, x)
            assert np.array_equal(X[:, c], x)
        ref = np.linalg.solve(A, B)
        assert np.abs(X - ref).max() <= 1e-12 * np.abs(ref).max()


@pytest.mark.parametrize("name", ["closed chain", "buggy", "five-bar"])
def test_partition_solves_equal_dense_solves(models, runs, name):
    cm, _, _ = models[name]
    sim = runs[name][0]
    ma, p = cm.arrays, cm.arrays.p
    m, d = ma.c_type.shape[0], cm.d
    rng = np.random.default_rng(3)
    N = len(sim.t)
    for k, ws, PL in _states(cm, sim, (1, N // 3, N - 1)):
        Th = ws.Th.copy()
        cond = np.linalg.cond(Th)
        # tolerance: 100 eps cond (both are backward-stable solves of the same system)
        tol = 100 * np.finfo(float).eps * cond
        b = rng.standard_normal(m + d)
        x = np.zeros(cm.n)
        MR.partition_solve(ma, ws.Th, PL, b, x)
        ref = np.linalg.solve(Th, b)
        assert np.abs(x - ref).max() <= tol * np.abs(ref).max()
        # R^Phi: the same bits as partitioned_r (its own LU of the same matrix)
        R1, R2 = np.zeros((cm.n, d)), np.zeros((cm.n, d))
        MR.partition_r(ma, ws.Th, PL, R1)
        assert MR.partitioned_r(ma, ws.Th, R2)
        assert np.array_equal(R1, R2)
        Tinv = np.linalg.inv(Th)
        assert np.abs(R1 - Tinv[:, m:]).max() <= tol * np.abs(Tinv).max()
        # S and mu of the step Jacobians
        tau = rng.standard_normal(cm.n)
        S, mu = np.zeros((cm.n, m)), np.zeros(m + d)
        assert MR.theta_partitioned(ma, p, ws, PL, tau, mu, S)
        assert np.abs(S - Tinv[:, :m]).max() <= tol * np.abs(Tinv).max()
        dof = ma.dof_i[:, 0]
        assert np.all(S[dof] == 0.0)
        ref_mu = np.linalg.solve(Th.T, tau)
        assert np.abs(mu - ref_mu).max() <= tol * np.abs(ref_mu).max()
        # the merging test's bound: below the true ratio and below sigma_ratio's estimate
        bound = MR.partition_bound(ma, ws.Th, PL, R1)
        sv = np.linalg.svd(Th, compute_uv=False)
        assert 0.0 < bound <= sv[-1] / sv[0]
        assert bound <= sigma_ratio(ws.Rm, np.zeros(cm.n))


@pytest.mark.parametrize("name", ["closed chain", "buggy", "five-bar"])
def test_lu_iterates_follow_the_qr_trajectory(runs, name):
    lu, qr = runs[name]
    # the LU path was taken (other rounding, so other bits) ...
    assert not np.array_equal(lu.zdd, qr.zdd)
    # ... and both solve the same discrete equations: the same merging decisions, and
    # the states within the Newton tolerance (corrections below 1e-10 relative to 1 +
    # max|a|; the five-bar's singular crossings amplify the difference by 1/rho, rho down
    # to 1e-3 at its merged steps)
    assert np.array_equal(lu.step_kind, qr.step_kind)
    assert np.abs(lu.z - qr.z).max() <= 1e-9 * (1.0 + np.abs(qr.z).max())
    assert np.abs(lu.zdd - qr.zdd).max() <= 1e-6 * (1.0 + np.abs(qr.zdd).max())
    assert lu.max_constraint_violation <= 1e-10


def test_sweep_on_lu_rows_equals_sweep_on_qr_rows(models):
    # the rows kept after a step by the partition's LU carry no QR: the sweep takes
    # Theta_z^+ from the partition; its gradient equals the one on rows kept by the QR
    # path to the trajectories' own difference (tolerance: the two trajectories differ
    # at the Newton tolerance, 1e-10 relative)
    cm, T, h = models["buggy"]
    g = {}
    for part in (True, False):
        sim = _run(cm, T, h, part, keep=True)
        for meth in ("adjoint", "direct"):
            r = sensitivity(cm, t_end=T, dt=h, method=meth, threads=1, simulation=sim)
            g[part, meth] = np.asarray(r.gradient)
    ref = np.abs(g[False, "adjoint"]).max()
    assert np.abs(g[True, "adjoint"] - g[False, "adjoint"]).max() <= 1e-8 * ref
    # direct = adjoint on the same rows (the sweeps' exactness)
    assert np.abs(g[True, "adjoint"] - g[True, "direct"]).max() <= 1e-12 * ref
