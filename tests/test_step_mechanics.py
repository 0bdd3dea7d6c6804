"""The step mechanics of the trapezoidal loops (issue 29 item 2): the acceleration
predictor of adaptive order, the Newton matrix factorised once per step, and what they do
to a run (fewer Newton evaluations, the same converged trajectory)."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.apps.bench import closed_chain
from workbench.integrators.simulation import simulate
from workbench.integrators.trapezoidal import (KAPPA, PRED_COEF, PRED_HIST, PRED_MAX, THETA_TRUST,
                                               extrapolate, next_correction_converged,
                                               predict_acceleration, predictor_weights)
from workbench.kernels.linalg import lu_factor_small, lu_solve_factored, lu_solve_inplace


@pytest.mark.parametrize("n", [1, 2, 5, 14])
def test_one_factorisation_serves_every_right_hand_side(n):
    """The Newton matrix is factorised once per step and solved at every iterate: each
    right-hand side solved with the one factorisation equals numpy's (LAPACK) solution to
    rounding, pivoting included (matrices with small leading entries force row
    exchanges), and a singular matrix is reported."""
    rng = np.random.default_rng(n)
    LU = np.zeros((n, n))
    piv = np.zeros(n, dtype=np.int64)
    for _ in range(10):
        A = rng.standard_normal((n, n)) + (0.0 if n > 1 else 1.0)
        A[0, 0] *= 1e-3                                     # exchanges needed
        assert lu_factor_small(A, LU, piv)
        for _ in range(3):
            b = rng.standard_normal(n)
            x = b.copy()
            lu_solve_factored(LU, piv, x)
            # 1e-9: random matrices of condition up to ~1e4-1e5
            np.testing.assert_allclose(x, np.linalg.solve(A, b), rtol=0, atol=1e-9)
        X = rng.standard_normal((n, 3))
        Y = X.copy()
        assert lu_solve_inplace(A, Y, np.zeros((n, n)))
        np.testing.assert_allclose(Y, np.linalg.solve(A, X), rtol=0, atol=1e-9)
    S = np.ones((n, n))
    assert lu_factor_small(S, LU, piv) == (n == 1)      # rank one: singular unless 1 x 1


def test_extrapolation_of_order_o_is_exact_for_polynomials_of_degree_o():
    """``PRED_COEF[o]`` are the binomial weights of the order-o extrapolation: exact for a
    polynomial of degree o sampled at equal steps (an independent property), not for
    degree o + 1."""
    t = np.arange(-PRED_HIST, 1, dtype=float)               # ..., -1, 0; predict at 1
    for o in range(1, PRED_MAX + 1):
        for deg, exact in ((o, True), (o + 1, False)):
            f = (t + 0.3) ** deg
            newest_first = f[::-1]                           # f(0), f(-1), ...
            ca = newest_first[:1]
            hist = newest_first[1:].reshape(-1, 1)
            pred = extrapolate(o, ca, hist, 0)
            assert (abs(pred - 1.3 ** deg) < 1e-9 * 1.3 ** deg) == exact, (o, deg)
    assert list(PRED_COEF[3, :4]) == [4.0, -6.0, 4.0, -1.0]


def test_predictor_weights_follow_the_smoothness_of_the_history():
    """With few usable rows the prediction is the former one (constant, linear, quadratic,
    cubic extrapolation); with more, the orders are weighted by how well each extrapolated
    the last row: the highest order dominates on a smooth history, the linear one right
    after a jump, and the prediction is a continuous function of the history."""
    d = 2
    w = np.zeros(PRED_HIST)
    a = np.zeros(d)
    t = -np.arange(0, PRED_HIST + 1) * 0.05                 # 0, -h, -2h, ...
    rows = np.exp(t)[:, None] * np.ones(d)
    for k in range(4):
        predict_acceleration(rows[0], rows[1:], k, w, a)
        expect = rows[0] if k == 0 else (2 * rows[0] - rows[1] if k == 1 else
                                         sum(PRED_COEF[k, j] * rows[j] for j in range(k + 1)))
        np.testing.assert_allclose(a, expect, rtol=1e-15)
    # samples of a smooth function (exp): the order-6 extrapolation carries the weight
    assert predictor_weights(rows[0], rows[1:], PRED_HIST, w) == PRED_MAX
    assert w[PRED_MAX] > 0.9 and abs(w[1:PRED_MAX + 1].sum() - 1.0) < 1e-15
    predict_acceleration(rows[0], rows[1:], PRED_HIST, w, a)
    # exp(0.05) from samples: error of the order-6 extrapolation ~ (0.05)^7
    np.testing.assert_allclose(a, np.exp(0.05), rtol=1e-8)
    # a jump one step back (a contact closing): extrapolated from the rows before it, the
    # last row is missed by o x the jump at order o, so the linear order dominates
    rows2 = rows.copy()
    rows2[:2] += 0.3
    predictor_weights(rows2[0], rows2[1:], PRED_HIST, w)
    assert w[1] > 0.5 and w[1] == w[1:PRED_MAX + 1].max()
    # continuity: a change of 1e-9 in the history moves the prediction by O(1e-9)
    a1 = np.zeros(d)
    predict_acceleration(rows2[0], rows2[1:], PRED_HIST, w, a)
    rows3 = rows2.copy()
    rows3[3] += 1e-9
    predict_acceleration(rows3[0], rows3[1:], PRED_HIST, w, a1)
    assert np.max(np.abs(a1 - a)) < 1e-7


def test_closed_chain_takes_two_residual_evaluations_per_step_and_the_same_trajectory():
    """The stiff 10-link closed chain of the peer bench: the cubic predictor started 6.5e-4
    (median, relative) from the solution and the modified Newton iteration contracts by
    ~5e-4, so the default tolerance took 3.9 evaluations per step; the weighted predictor
    starts ~1e-5 away: 3 evaluations on almost every step, the third one only confirming
    the second correction; the contraction-based stopping rule accepts that iterate
    without its residual: 2 residual evaluations per step.  The converged trajectory is
    the same to the Newton tolerance: checked against a run at a 1000x tighter tolerance
    (the predictor and the stopping rule change where Newton starts and stops, not what
    it converges to)."""
    cm = closed_chain(10).compile()
    run = simulate(cm, 1.0, 1e-3)
    tight = simulate(cm, 1.0, 1e-3, newton_tol=1e-13)
    assert run.newton_iterations[1:].mean() < 2.1
    # 1e-8 rad: per-step acceleration errors of 1e-10 (1 + |a|) accumulated over 1000 steps
    np.testing.assert_allclose(run.z, tight.z, rtol=0, atol=1e-8)
    assert np.max(np.abs(run.constraint_violation)) < 1e-12


def test_stopping_rule_accepts_when_the_next_correction_is_estimated_below_the_tolerance():
    """Hairer & Wanner's rule on a linear iteration of known contraction ``theta``: the
    corrections are ``d_k = d_0 theta^k``, the error after correction ``k`` is ``d_k
    theta / (1 - theta)`` exactly, and the rule accepts iff that is below ``KAPPA`` times
    the tolerance; a contraction above ``THETA_TRUST`` is never trusted."""
    tol, anorm = 1e-10, 3.0
    for theta in (1e-4, 5e-4, 1e-2, 0.05):
        d_prev = 1e-3
        for k in range(1, 12):
            d = d_prev * theta
            err_after = d * theta / (1.0 - theta)
            bound = KAPPA * tol * anorm
            if abs(err_after / bound - 1.0) > 1e-9:      # no case at the rounding boundary
                assert next_correction_converged(d, d_prev, tol, anorm) == (err_after <= bound)
            d_prev = d
    # an iteration that stalls (theta = 0.5) is not accepted however small the correction
    assert not next_correction_converged(1e-30, 2e-30, tol, anorm)
    assert THETA_TRUST < 0.5
