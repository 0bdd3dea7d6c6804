"""Coordinate partitioning in natural coordinates (seed 000 eqs 2-8, ``"global-partitioned"``):
the independent natural coordinates are those LAPACK's pivoted LU leaves, the motion is
that of the semi-recursive formulation up to the integrators' O(h^2) difference, a
degrading partition is re-selected, and the gradients are exact."""

import numpy as np
import pytest
import scipy.linalg as sl

import workbench as wb
from workbench import objectives as O
from workbench.errors import AssemblyError, NewtonConvergenceError, OptionError
from workbench.formulations.natural import partition as PT
from workbench.formulations.natural.build import global_model
from workbench.model import catalog


def _selection(cm, q, aref):
    ga = global_model(cm)[0]
    Phq = PT.constraint_jacobian(ga, cm.arrays.p, q, aref)
    m = Phq.shape[0]
    dep, piv = np.zeros(m, dtype=np.int64), np.zeros(m)
    perm = PT.select_columns(Phq, PT.REDUNDANT_RTOL, dep, piv)
    return Phq, perm, dep, piv


@pytest.mark.parametrize("name", ["slider-crank", "five-bar", "quick-return"])
def test_selected_dependent_block_is_nonsingular_and_is_the_choice_of_scipy_lu(name):
    # independent reference: LAPACK getrf (scipy.linalg.lu) of Phi_q^T, i.e. Gaussian
    # elimination of Phi_q with column pivoting; its first m row interchanges name the
    # dependent coordinates.  Checked along a run (every 25th row of 0.5 s).
    cm = catalog.load(name).compile()
    res = wb.simulate(cm, 0.5, 1e-3, "global")
    Q, AREF = res.natural
    for k in range(0, len(res.t), 25):
        Phq, perm, dep, piv = _selection(cm, Q[k], AREF[k])
        m, n = Phq.shape
        assert np.all(dep >= 0)                          # full row rank: no redundant row
        P, L, U = sl.lu(Phq.T)
        lapack = np.argmax(P, axis=0)                    # row of Phi_q^T at position i
        assert list(perm[:m]) == list(lapack[:m])
        np.testing.assert_allclose(piv, np.abs(np.diag(U)), rtol=1e-12)
        Phqd = Phq[:, perm[:m]]
        s = np.linalg.svd(Phqd, compute_uv=False)
        assert s[-1] > 1e-3 * s[0]                       # well conditioned, not just regular
        assert n - m == cm.d


def test_redundant_constraints_leave_the_models_degrees_of_freedom():
    # Bricard linkage: one constraint row of Phi_q is redundant (rank m - 1); the
    # elimination skips it and leaves cm.d = 1 coordinate free, whose dependent block has
    # the rank of Phi_q (numpy's SVD as reference)
    cm = catalog.load("bricard").compile()
    ga, q0, aref0, _ = global_model(cm)
    res = wb.simulate(cm, 0.01, 1e-3, "global")
    Q, AREF = res.natural
    Phq, perm, dep, piv = _selection(cm, Q[0], AREF[0])
    r = int(np.sum(dep >= 0))
    assert r == np.linalg.matrix_rank(Phq) == Phq.shape[0] - 1
    assert Phq.shape[1] - r == cm.d == 1
    assert np.linalg.matrix_rank(Phq[:, perm[:r]]) == r
    g = wb.simulate(cm, 0.5, 1e-3, "global-partitioned")
    assert g.max_constraint_violation < 1e-10


def _difference(name, dt, t_end):
    cm = catalog.load(name).compile()
    g = wb.simulate(cm, t_end, dt, "global-partitioned")
    s = wb.simulate(cm, t_end, dt, "sr-com")
    assert g.max_constraint_violation < 1e-10
    assert np.max(g.velocity_violation) < 1e-9
    assert np.all(np.isfinite(g.z))
    return np.max(np.abs(g.z - s.z)), g


@pytest.mark.parametrize("name,bound", [("slider-crank", 0.017), ("five-bar", 1.2e-5),
                                        ("quick-return", 1.4e-3)])
def test_partitioned_motion_equals_sr_com_up_to_the_integrators_second_order_difference(name,
                                                                                         bound):
    # Both runs are the trapezoidal rule, on different coordinates (natural coordinates
    # q^i vs relative joint coordinates): each discrete trajectory is within O(h^2) of the
    # exact motion with its own error constant, so they differ by O(h^2), not by round-off
    # (the global formulation on the relative DOF agrees to 1e-10, tests/test_global.py).
    # Claim: the difference is second order (ratio ~4 when dt halves) and small; the
    # bounds are 1.5x the differences measured at dt = 1e-3 over 1 s (0.011 rad, 7.5e-6,
    # 9.1e-4; the slider-crank's crank turns 6 rad/s, so its selected coordinates,
    # components of the crank's unit vectors, curve strongly: error constant ~ omega^3).
    d1, g1 = _difference(name, 1e-3, 1.0)
    d2, g2 = _difference(name, 5e-4, 1.0)
    assert d1 < bound
    assert 3.5 < d1 / d2 < 4.6
    assert g1.coordinate(g1.coord_names[0]).shape == (1001,)
    assert g1.point_position("ground", [0.0, 0.0, 0.0]).shape == (1001, 3)


def _bottom_time(res):
    """First time the pendulum angle (0 = horizontal) passes -pi/2 (the bob at the bottom,
    where the initially independent coordinate e2_x = -sin(angle) stops moving)."""
    a = res.coordinate("pivot")
    k = int(np.argmax(a < -np.pi / 2))
    return res.t[k]


def test_pendulum_reselects_at_the_bottom_and_keeps_the_sr_com_motion():
    sr = {dt: wb.simulate("pendulum", 2.0, dt, "sr-com") for dt in (1e-3, 5e-4)}
    tb = _bottom_time(sr[1e-3])
    g = {dt: wb.simulate("pendulum", 2.0, dt, "global-partitioned") for dt in (1e-3, 5e-4)}
    g1 = g[1e-3]
    assert g1.dof_names == ("bob.e2_x",)
    assert len(g1.partition_changes) >= 2
    first = g1.partition_changes[0]
    assert first["from"] == ["bob.e2_x"] and first["to"] != first["from"]
    # re-selected before the bottom, once the indicator fell below the threshold
    assert 0.5 * tb < first["time"] < tb and first["indicator"] < PT.PARTITION_TOL
    assert g1.summary()["partition_changes"][0]["time"] == first["time"]
    assert g1.max_constraint_violation < 1e-10
    d = [np.max(np.abs(g[dt].z - sr[dt].z)) for dt in (1e-3, 5e-4)]
    assert d[0] < 1e-4 and 3.5 < d[0] / d[1] < 4.5
    # from a change on, the integrated coordinates are the new ones: zi is q[to] (to the
    # position tolerance)
    k = first["step"]
    j = PT.coordinate_names(g1.compiled).index(first["to"][0])
    assert abs(g1.zi[k + 1, 0] - g1.natural[0][k + 1, j]) < 1e-11


def test_without_reselection_the_pendulum_fails_at_the_bottom_with_a_typed_error():
    tb = _bottom_time(wb.simulate("pendulum", 1.0, 1e-3, "sr-com"))
    with PT.partition_threshold(0.0):
        with pytest.raises((NewtonConvergenceError, AssemblyError)) as exc:
            wb.simulate("pendulum", 1.0, 1e-3, "global-partitioned")
    assert abs(exc.value.time - tb) < 0.01
    assert f"t = {exc.value.time:g} s" in str(exc.value)
    with pytest.raises(OptionError):
        with PT.partition_threshold(1.5):
            pass


def test_partitioned_gradients_direct_equal_adjoint_equal_central_differences():
    # five-bar, 0.25 s (its first re-selection is at 0.302 s): a kinematic parameter
    # (moves the initial assembly, hence q^i(0)) and a mass
    kw = dict(parameters=["Ls1", "mA1"], formulation="global-partitioned", t_end=0.25,
              dt=1e-3)
    d = wb.sensitivity("five-bar", method="direct", **kw)
    assert d.simulation.partition_changes == []
    a = wb.sensitivity("five-bar", method="adjoint", **kw)
    f = wb.sensitivity("five-bar", method="fd", **kw)
    assert np.max(np.abs(d.gradient - a.gradient) / np.abs(d.gradient)) < 1e-9
    assert np.max(np.abs(d.gradient - f.gradient) / np.abs(f.gradient)) < 1e-6
    np.testing.assert_allclose(d.psi, f.psi, rtol=1e-12)


def test_a_gradient_through_a_reselection_is_refused_naming_its_time():
    ob = O.coordinate("psi", "pivot")
    res = wb.simulate("pendulum", 0.6, 1e-3, "global-partitioned")
    t = res.partition_changes[0]["time"]
    for method in ("direct", "adjoint"):
        with pytest.raises(OptionError, match=f"t = {t:.6g} s"):
            wb.sensitivity("pendulum", ob, ["L"], method=method,
                           formulation="global-partitioned", t_end=0.6, dt=1e-3)
    # the objective itself (measures segment by segment) is still evaluated
    fd = wb.sensitivity("pendulum", ob, ["L"], method="fd", formulation="global-partitioned",
                        t_end=0.6, dt=1e-3)
    ref = wb.sensitivity("pendulum", ob, ["L"], method="fd", formulation="sr-com", t_end=0.6,
                         dt=1e-3)
    assert abs(fd.psi[0] - ref.psi[0]) < 1e-4 * abs(ref.psi[0])
