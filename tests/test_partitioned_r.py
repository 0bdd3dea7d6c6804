"""``R^Phi`` by coordinate partitioning (:func:`matrixr.partitioned_r`, used by
:func:`matrixr.factor_r` when every DOF is a joint coordinate): against the last ``d``
columns of ``Theta_z^-1`` from numpy's dense solve, on a closed chain, the five-bar and the
buggy (nine closure equations) at states of their runs; and the fallback when a DOF is not
a coordinate."""

from __future__ import annotations

import numpy as np
import pytest

from workbench import Model
from workbench.apps.bench import closed_chain
from workbench.apps.vehicle import prepare
from workbench.formulations.semirecursive import matrixr as MR
from workbench.integrators.simulation import simulate
from workbench.model import catalog
from workbench.model.elements import GROUND


def _models():
    b = prepare("buggy-dlc")
    return {"closed-chain": (closed_chain(6).compile(), 0.2, 1e-3),
            "five-bar": (catalog.load("five-bar").compile(), 0.3, 1e-3),
            "buggy-dlc": (b.compile(), 0.6, float(b.meta["dt"]))}


MODELS = _models()


@pytest.mark.parametrize("name", sorted(MODELS))
def test_partitioned_r_is_the_last_d_columns_of_the_inverse(name):
    cm, T, dt = MODELS[name]
    ma = cm.arrays
    m, d, n = ma.c_type.shape[0], cm.d, cm.n
    assert m > 0
    sim = simulate(cm, T, dt)
    for k in (0, len(sim.t) // 2, len(sim.t) - 1):
        ws = MR.make_workspace(ma, n)
        z = sim.z[k].copy()
        st, *_ = MR.solve_position(ma, ma.p, sim.t[k], sim.zi[k], z, ws, 1e-12, 20, False)
        assert st == MR.OK
        MR.leading_matrix(ma, ma.p, ws)
        R = np.full((n, d), np.nan)
        assert MR.partitioned_r(ma, ws.Th, R)
        E = np.zeros((m + d, d))
        E[m:] = np.eye(d)
        ref = np.linalg.solve(ws.Th, E)
        # 1e-12 relative to the largest entry: two exact solves of a well-conditioned
        # system (cond(Theta_z) below 1e3 on these states), rounding only
        scale = np.abs(ref).max()
        assert np.abs(R - ref).max() <= 1e-12 * scale * max(1.0, np.linalg.cond(ws.Th) / 1e3)
        # the product of the QR path (factor_r) is the same matrix
        R2 = np.zeros((n, d))
        st, _ = MR.factor_r(ma, ma.p, z, R2, ws)
        assert st == MR.OK
        np.testing.assert_array_equal(R2, R)


def test_a_point_dof_falls_back_to_the_qr_solves():
    """A DOF that is a point coordinate: no partition of the joint coordinates, Rphi is left
    to the QR path (which still forms it)."""
    m = Model("slider-point", gravity=(0.0, -9.81, 0.0), planar=True)
    m.body("a", 1.0, inertia=(0.0, 0.0, 0.1), points={"tip": (0.5, 0.0, 0.0)})
    m.revolute("j", GROUND, "a", axis=(0, 0, 1), q0=0.3)
    m.dof({"point": "a.tip", "axis": "y"})
    cm = m.compile()
    assert cm.arrays.dof_type[0] == 1                     # DOF_POINT
    ma = cm.arrays
    ws = MR.make_workspace(ma, cm.n)
    z = cm.z_guess.copy()
    MR.solve_position(ma, ma.p, 0.0, cm.zi0, z, ws, 1e-12, 20, False)
    MR.leading_matrix(ma, ma.p, ws)
    R = np.full((cm.n, cm.d), 7.0)
    assert not MR.partitioned_r(ma, ws.Th, R)
    assert (R == 7.0).all()
    st, _ = MR.factor_r(ma, ma.p, z, R, ws)
    assert st == MR.OK and np.isfinite(R).all()
