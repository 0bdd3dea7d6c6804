"""The global loop's position predictor (:func:`workbench.formulations.natural.kernels.
predict_frames`): each body's frame vectors rotated by its angular velocity and
acceleration (origins by the Taylor polynomial); the global loop then adds the move along
``R`` (``shift_position``, tested in ``test_position_predictor.py``).

The references are independent of the kernel: rotations in closed form (SciPy's
``Rotation.from_rotvec``, products of fixed-axis exponentials and their analytic
derivatives) and the Taylor polynomial of the old predictor."""

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from workbench.formulations.natural import kernels as G
from workbench.formulations.natural.build import global_model
from workbench.model import catalog


@pytest.fixture(scope="module")
def spatial():
    return global_model(catalog.load("spatial-four-bar").compile())[0]


@pytest.fixture(scope="module")
def planar():
    return global_model(catalog.load("five-bar").compile())[0]


def _hat(w):
    return np.array([[0.0, -w[2], w[1]], [w[2], 0.0, -w[0]], [-w[1], w[0], 0.0]])


def _state(ga, b, r, rd, rdd, A, Ad, Add, rng):
    """Natural coordinates and rates with body ``b`` given, the others random."""
    N, D, nqb = ga.nq, ga.D, ga.nqb
    q, qd, qdd = rng.standard_normal((3, N))
    s0 = b * nqb
    for x, y, M in ((q, r, A), (qd, rd, Ad), (qdd, rdd, Add)):
        x[s0:s0 + D] = y
        for k in range(D):
            x[s0 + (1 + k) * D:s0 + (2 + k) * D] = M[:, k]
    return q, qd, qdd


def _predict(ga, q, qd, qdd, h):
    out = np.zeros(ga.nq)
    G.predict_frames(ga, q, qd, qdd, h, out)
    return out


def _frame(ga, b, x):
    D, nqb = ga.D, ga.nqb
    s0 = b * nqb
    return x[s0:s0 + D], np.column_stack([x[s0 + (1 + k) * D:s0 + (2 + k) * D]
                                          for k in range(D)])


def test_a_fixed_axis_rotation_with_constant_acceleration_is_predicted_exactly(spatial):
    """Spin about a fixed axis with constant angular acceleration: the rotation over the
    step is ``exp((h omega + h^2/2 alpha) k)`` exactly, at 1.2 rad per step (a buggy wheel
    turns about 1 rad per 15 ms step), where the Taylor polynomial of the frame vectors is
    off by more than 0.1 (so the check can fail)."""
    ga = spatial
    rng = np.random.default_rng(1)
    axis = rng.standard_normal(3)
    axis /= np.linalg.norm(axis)
    A0 = Rotation.random(random_state=2).as_matrix()
    h, om, al = 0.015, 70.0, 300.0
    W = _hat(om * axis)
    Ad = W @ A0
    Add = (_hat(al * axis) + W @ W) @ A0
    r, rd, rdd = rng.standard_normal((3, 3))
    for b in range(ga.nb):
        q, qd, qdd = _state(ga, b, r, rd, rdd, A0, Ad, Add, rng)
        x = _predict(ga, q, qd, qdd, h)
        rp, Ap = _frame(ga, b, x)
        exact = Rotation.from_rotvec((h * om + 0.5 * h * h * al) * axis).as_matrix() @ A0
        assert np.max(np.abs(Ap - exact)) < 1e-14      # rounding of a few products
        np.testing.assert_array_equal(rp, r + h * rd + 0.5 * h * h * rdd)
        taylor = A0 + h * Ad + 0.5 * h * h * Add
        assert np.max(np.abs(taylor - exact)) > 0.1


def test_a_general_rotation_is_predicted_to_third_order_and_stays_orthonormal(spatial):
    """``A(t) = A0 exp(t W1) exp(t W2)`` (non-parallel rates: the axis turns): the predicted
    frame is orthonormal to rounding and its error is third order in ``h`` (halving ``h``
    divides it by about 8)."""
    ga = spatial
    rng = np.random.default_rng(3)
    A0 = Rotation.random(random_state=4).as_matrix()
    w1, w2 = 6.0 * rng.standard_normal((2, 3))
    W1, W2 = _hat(w1), _hat(w2)
    Ad = A0 @ (W1 + W2)
    Add = A0 @ (W1 @ W1 + 2.0 * W1 @ W2 + W2 @ W2)
    z3 = np.zeros(3)
    err = []
    for h in (0.02, 0.01, 0.005):
        q, qd, qdd = _state(ga, 0, z3, z3, z3, A0, Ad, Add, rng)
        _, Ap = _frame(ga, 0, _predict(ga, q, qd, qdd, h))
        assert np.max(np.abs(Ap.T @ Ap - np.eye(3))) < 1e-14
        exact = A0 @ Rotation.from_rotvec(h * w1).as_matrix() @ \
            Rotation.from_rotvec(h * w2).as_matrix()
        err.append(np.max(np.abs(Ap - exact)))
    for e0, e1 in zip(err, err[1:]):
        assert 6.0 < e0 / e1 < 10.0


def test_planar_frames_turn_by_the_angle_of_the_step(planar):
    """A planar body turning at ``omega`` with ``alpha``: the frame is the rotation by
    ``h omega + h^2/2 alpha`` exactly."""
    ga = planar
    rng = np.random.default_rng(5)
    h, th0, om, al = 0.01, 0.7, 90.0, -400.0

    def rot(t):
        return np.array([[np.cos(t), -np.sin(t)], [np.sin(t), np.cos(t)]])

    J = np.array([[0.0, -1.0], [1.0, 0.0]])
    A0 = rot(th0)
    Ad = om * J @ A0
    Add = (al * J - om * om * np.eye(2)) @ A0
    z2 = np.zeros(2)
    q, qd, qdd = _state(ga, 1, z2, z2, z2, A0, Ad, Add, rng)
    _, Ap = _frame(ga, 1, _predict(ga, q, qd, qdd, h))
    assert np.max(np.abs(Ap - rot(th0 + h * om + 0.5 * h * h * al))) < 1e-14


def test_the_prediction_in_place_equals_the_prediction_into_a_new_array(spatial, planar):
    """The global loop predicts in place (``q`` is ``cq``): each body is read before it is
    written, so the result is the same bits as into a separate array."""
    for ga in (spatial, planar):
        rng = np.random.default_rng(6)
        q, qd, qdd = rng.standard_normal((3, ga.nq))
        h = 0.3
        expected = _predict(ga, q, qd, qdd, h)
        inplace = q.copy()
        G.predict_frames(ga, inplace, qd, qdd, h, inplace)
        assert np.array_equal(inplace, expected)
        assert not np.array_equal(expected, q)
