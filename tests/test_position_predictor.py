"""The starts of the trapezoidal rule's position problems along ``R^Phi``
(:func:`workbench.integrators.trapezoidal.predict_position`, :func:`shift_position`; the
global loop :func:`integrate_natural` moves along its ``R`` with ``shift_position`` and
starts a step from its bodies' turned frames, ``tests/test_global_predictor.py``), tested
at states of semi-recursive runs.

The references are independent of those kernels: the trapezoidal update of the DOF (the
definition of the step) and the position problem solved by Newton-Raphson to rounding
(``MR.solve_position``)."""

import numpy as np
import pytest

from workbench import simulate
from workbench.apps.bench import closed_chain
from workbench.apps.vehicle import prepare
from workbench.formulations.semirecursive import matrixr as MR
from workbench.integrators import trapezoidal as TZ


@pytest.fixture(scope="module")
def runs():
    buggy = prepare("buggy-dlc")
    cc = closed_chain(10).compile()
    bc = buggy.compile()
    h_b = float(buggy.meta["dt"])
    return {"closed chain": (cc, simulate(cc, 0.3, 1e-3), 1e-3),
            "buggy": (bc, simulate(bc, 150 * h_b, h_b), h_b)}


def _node(cm, sim, k):
    """The position of row ``k`` (its position problem solved again) and ``R^Phi`` there."""
    ma, p = cm.arrays, cm.arrays.p
    ws = MR.make_workspace(ma, cm.n)
    z = sim.z[k].copy()
    st, _, _, _ = MR.solve_position(ma, p, sim.t[k], sim.zi[k], z, ws, 1e-12, 20, False)
    assert st == MR.OK
    R = np.zeros((cm.n, sim.zi.shape[1]))
    st, _ = MR.factor_r(ma, p, z, R, ws)
    assert st == MR.OK
    return z, R


@pytest.mark.parametrize("name", ["closed chain", "buggy"])
def test_predictor_along_r_is_the_trapezoidal_update_on_the_dof_coordinates(runs, name):
    """On a DOF coordinate ``R^Phi``'s row is a unit row, so the predicted position there is
    ``z_n + h zd^i + h^2/4 (a_n + a)``, the trapezoidal update itself (from the node's
    coordinate ``z_n``, within the position tolerance of ``z^i``); against the next row's
    position the predictor is never worse than the plain second-order one, and better where
    the DOF accelerations change."""
    cm, sim, h = runs[name]
    ma = cm.arrays
    d = sim.zi.shape[1]
    gain = []
    for k in (40, 90, 140):
        z, R = _node(cm, sim, k)
        a_pred = sim.zddi[k + 1]
        w = np.zeros(d)
        zp = np.zeros(cm.n)
        TZ.predict_position(z, sim.zd[k], sim.zdd[k], h, R, a_pred, sim.zddi[k], True, w, zp)
        z0 = np.zeros(cm.n)
        TZ.predict_position(z, sim.zd[k], sim.zdd[k], h, R, a_pred, sim.zddi[k], False, w, z0)
        for j in range(d):
            c = ma.dof_i[j, 0]
            # the node's coordinate (within the position tolerance of z^i) updated as z^i is
            upd = z[c] + h * sim.zdi[k, j] + 0.25 * h * h * (sim.zddi[k, j] + a_pred[j])
            # rounding: the same terms summed in another order (a few ulps of |z|)
            assert abs(zp[c] - upd) <= 8e-16 * (1.0 + abs(upd))
        # the reference: the next row's position problem solved to 1e-14 (the stored row
        # itself is the integrator's accepted iterate, within pos_tol of it: not independent
        # of the predictor the integrator started from)
        zref = sim.z[k + 1].copy()
        st, _, _, _ = MR.solve_position(ma, cm.arrays.p, sim.t[k + 1], sim.zi[k + 1], zref,
                                        MR.make_workspace(ma, cm.n), 1e-14, 50, False)
        assert st == MR.OK
        e_along = np.abs(zp - zref).max()
        e_plain = np.abs(z0 - zref).max()
        gain.append(e_plain / e_along)
    # the plain predictor errs by h^2/4 |R (a - a_n)| ~ h^3 on every coordinate; along R^Phi
    # that term is gone.  Where the DOF accelerations barely change (the buggy at rows 40
    # and 90) both errors are the other terms' (measured ratios 0.988 and 0.999): never
    # worse beyond 5 %, and markedly better where they change (measured 2.7 and more)
    assert min(gain) > 0.95 and max(gain) > 2.0, gain


@pytest.mark.parametrize("name", ["closed chain", "buggy"])
def test_shift_is_the_first_order_move_of_the_position(runs, name):
    """``z + R^Phi dz^i`` against the position problem solved at ``z^i + dz^i``: the error
    is second order in ``dz^i`` (a tenth of the move: a hundredth of the error) and far
    below the move itself."""
    cm, sim, _ = runs[name]
    ma, p = cm.arrays, cm.arrays.p
    d = sim.zi.shape[1]
    rng = np.random.default_rng(3)
    k = 100
    z, R = _node(cm, sim, k)
    direction = rng.standard_normal(d)
    errs = []
    for eps in (1e-3, 1e-4):
        c = 0.5 * eps
        zs = z.copy()
        TZ.shift_position(R, direction, c, np.zeros(d), zs)
        zstar = z.copy()
        st, _, _, _ = MR.solve_position(ma, p, sim.t[k], sim.zi[k] + c * direction, zstar,
                                        MR.make_workspace(ma, cm.n), 1e-14, 50, False)
        assert st == MR.OK
        move = np.abs(zstar - z).max()
        err = np.abs(zstar - zs).max()
        assert err < 1e-2 * move
        errs.append(err)
    # second order: 100x smaller for a 10x smaller move (30-300: the third-order term and
    # the solve's rounding, ~1e-14, at the smaller move)
    assert 30.0 < errs[0] / errs[1] < 300.0, errs
