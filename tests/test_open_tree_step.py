"""The open-tree shortcut of the trapezoidal integrator (issue 29 item 2): with no closure
equations and every DOF a joint coordinate, ``Theta_z`` is constant, the position problem is
``z = z^i`` and ``R^Phi`` is formed once (:func:`matrixr.constant_theta`,
:func:`matrixr.coordinate_position`); and ``R^T X R`` visits only the non-zero entries of a
sparse ``R`` (:func:`workbench.kernels.linalg.projected_matrix`).

References independent of the code under test: the closed-form equations of motion of a
planar chain in absolute angles (the same formulas as the JAX peer of
``workbench bench peers``), integrated by the trapezoidal rule in numpy, and numpy's dense
matrix products."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.apps.bench import closed_chain
from workbench.apps.peers_bench import chain_data, open_chain
from workbench.formulations.semirecursive import matrixr as MR
from workbench.integrators.simulation import simulate
from workbench.kernels.linalg import projected_matrix


def _closed_form_accel(d, q, v):
    """Accelerations of the planar chain of :func:`chain_data` in relative angles."""
    n = d.n
    lever = np.zeros((n, n))
    for i in range(n):
        lever[i, :i] = d.L
        lever[i, i] = d.xg
    T = np.tril(np.ones((n, n)))
    m, k, c = np.array(d.m), np.array(d.k), np.array(d.c)
    th, w = T @ q, T @ v
    C = (lever.T * m) @ lever + np.diag(np.full(n, d.Izz))
    dth = th[:, None] - th[None, :]
    M = T.T @ (C * np.cos(dth)) @ T
    hv = (C * np.sin(dth)) @ (w * w)
    G = d.g * np.cos(th) * (m @ lever)
    Q = -k * q - c * v - T.T @ (hv + G)
    return np.linalg.solve(M, Q)


def _trapezoidal_reference(d, h, nsteps):
    """The trapezoidal rule on the closed-form ODE, each step solved by Newton on the new
    accelerations (Jacobian by central differences, converged to 1e-13 of the residual)."""
    q = np.array(d.q0, dtype=float)
    v = np.zeros(d.n)
    a = _closed_form_accel(d, q, v)
    rows = [q.copy()]
    for _ in range(nsteps):
        def res(an):
            return an - _closed_form_accel(d, q + h * v + 0.25 * h * h * (a + an),
                                           v + 0.5 * h * (a + an))
        an = a.copy()
        for _ in range(20):
            r = res(an)
            if np.abs(r).max() <= 1e-13 * (1.0 + np.abs(an).max()):
                break
            J = np.empty((d.n, d.n))
            for j in range(d.n):
                e = np.zeros(d.n)
                e[j] = 1e-6
                J[:, j] = (res(an + e) - res(an - e)) / 2e-6
            an = an - np.linalg.solve(J, r)
        q = q + h * v + 0.25 * h * h * (a + an)
        v = v + 0.5 * h * (a + an)
        a = an
        rows.append(q.copy())
    return np.array(rows)


def test_open_chain_trajectory_is_the_trapezoidal_rule_of_the_closed_form_equations():
    n, h, nsteps = 4, 1e-3, 300
    cm = open_chain(n).compile()
    assert MR.constant_theta(cm.arrays)
    sim = simulate(cm, nsteps * h, h)
    ref = _trapezoidal_reference(chain_data(n), h, nsteps)
    assert np.abs(ref[-1] - ref[0]).max() > 0.1            # the chain has moved
    # 1e-10 rad: both solve the same discrete equations, ours to the Newton tolerance
    # 1e-10 (1 + max |a|) on the accelerations (|a| ~ 100 rad/s^2: h^2/4 x 1e-8 per step)
    assert np.abs(sim.z - ref).max() < 1e-10


def test_constant_theta_holds_for_open_trees_only():
    assert MR.constant_theta(open_chain(3).compile().arrays)
    assert not MR.constant_theta(closed_chain(4).compile().arrays)


@pytest.mark.parametrize("kind", ["selection", "sparse", "dense"])
def test_projected_matrix_is_the_dense_product(kind):
    rng = np.random.default_rng(5)
    n, d = 12, 7
    M = rng.standard_normal((n, n))
    if kind == "selection":
        R = np.zeros((n, d))
        R[rng.permutation(n)[:d], np.arange(d)] = 1.0
    elif kind == "sparse":
        R = rng.standard_normal((n, d)) * (rng.random((n, d)) < 0.15)
    else:
        R = rng.standard_normal((n, d))
    out = np.empty((d, d))
    projected_matrix(R, M, out)
    # 1e-14: the same sums of at most n products of O(1) numbers, in the same order
    np.testing.assert_allclose(out, R.T @ M @ R, rtol=0, atol=1e-14 * n)
    if kind == "selection":
        sel = np.argmax(R, axis=0)
        np.testing.assert_array_equal(out, M[np.ix_(sel, sel)])
