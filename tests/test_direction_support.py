"""The step Jacobians evaluate a direction's tangents only at the frames it moves
(``tangents.moved_frames``): claims that the skipped entries are exact zeros, checked
against the same kernels run with every frame marked (the unrestricted computation)."""

from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench.apps.vehicle import prepare
from workbench.formulations.semirecursive import matrixr as MR
from workbench.kernels import tangents as T
from workbench.kernels import tree as K


@pytest.fixture(scope="module")
def buggy():
    cm = prepare("buggy-dlc").compile()
    res = wb.simulate(cm, 0.3, 0.015)
    return cm, res.t[-1], res.z[-1].copy(), res.zd[-1].copy(), res.zdd[-1].copy()


def _subtree(ma, f0):
    nf = ma.fr_parent.shape[0]
    inside = np.zeros(nf, dtype=bool)
    for f in range(nf):
        inside[f] = f == f0 or (ma.fr_parent[f] >= 0 and inside[ma.fr_parent[f]])
    return inside


def _dtau(cm, t, z, zd, zdd, dz, dzd, dzdd, mv):
    """dtau along (dz, dzd, dzdd) by the tangent chain of the step Jacobians (SR-I)."""
    ma, p = cm.arrays, cm.arrays.p
    n, nf, nb = cm.n, ma.fr_parent.shape[0], ma.b_frame.shape[0]
    ws = MR.make_workspace(ma, n)
    K.frame_positions(ma, p, z, ws.A, ws.r, ws.u)
    K.joint_columns(ma, ws.r, ws.u, ws.bcol)
    tau = np.zeros(n)
    MR.residual_tau(ma, p, t, z, zd, zdd, ws, MR.FORM_COM, tau)
    A, r, u, bcol, Z, Zd = ws.A, ws.r, ws.u, ws.bcol, ws.Z, ws.Zd
    dp = np.zeros(p.shape[0])
    th, dr, du, dP = (np.zeros((nf, 3)) for _ in range(4))
    db, dZ, dZd, dbv, dV, dVd, Fs, dFs = (np.zeros((nf, 6)) for _ in range(8))
    bm, bdm = np.zeros(nb), np.zeros(nb)
    bg, bdg, dfb, dnb = (np.zeros((nb, 3)) for _ in range(4))
    bJ, bdJ = np.zeros((nb, 3, 3)), np.zeros((nb, 3, 3))
    dQj, dtau = np.zeros(n), np.zeros(n)
    TJ = np.zeros((ma.ty_pt.shape[0], 3, 3, 13))
    T.frame_positions_t(ma, p, dp, z, dz, A, r, u, th, dr, du, mv)
    T.joint_columns_t(ma, r, u, dr, du, db, mv)
    T.frame_velocities_t(ma, zd, dzd, bcol, db, dZ, mv)
    T.frame_accelerations_t(ma, zd, zdd, dzd, dzdd, r, u, bcol, Z, dr, du, db, dZ, dZd, mv)
    for b in range(nb):
        bm[b] = K.body_inertia(ma, p, A, r, b, bg[b], bJ[b])
    T.body_inertias_t(ma, p, dp, A, r, th, dr, bg, bJ, bdm, bdg, bdJ, mv)
    T.tire_state_jacobians(ma, p, A, r, Z, Zd, TJ)
    T.applied_forces_t(ma, p, dp, t, z, zd, dz, dzd, A, r, Z, Zd, th, dr, dZ, dZd, dfb, dnb,
                       dQj, True, bm, bg, bdm, bdg, TJ, True, mv)
    T.reference_points_t(ma, dr, dP, bdg)
    T.com_columns_t(ma, r, u, ws.P, dr, du, dP, dbv, mv)
    T.com_kinematics_t(ma, zd, zdd, dzd, dzdd, r, u, ws.P, ws.bv, ws.Vc, ws.Vdc, dr, du, dP,
                       dbv, dV, dVd, mv)
    T.com_wrenches(ma, ws.P, ws.Vc, ws.Vdc, ws.fb, ws.nb, bm, bg, bJ, Fs)
    T.inverse_dynamics_com_t(ma, ws.P, ws.bv, ws.Vc, ws.Vdc, ws.fb, ws.nb, dP, dbv, dV, dVd,
                             dfb, dnb, dQj, dtau, bm, bg, bJ, True, Fs, dFs, bdm, bdg, bdJ, mv)
    return dtau


def test_a_wheel_direction_moves_only_the_wheels_subtree(buggy):
    cm, *_ = buggy
    ma = cm.arrays
    nf = ma.fr_parent.shape[0]
    f0 = nf - 1                              # the last frame: a leaf of the tree
    c = ma.fr_coord[f0]
    dz = np.zeros(cm.n)
    dz[c] = 1.0
    mv = np.zeros(nf + 1, dtype=np.int64)
    T.moved_frames(ma, dz, 0 * dz, 0 * dz, False, mv)
    assert np.array_equal(mv[:nf] != 0, _subtree(ma, f0))
    assert mv[nf] == 0                       # the ground does not move
    T.reset_moved(mv)
    T.moved_frames(ma, dz, 0 * dz, 0 * dz, True, mv)
    assert mv.min() == 1                     # a field direction moves everything


@pytest.mark.parametrize("frame", [6, 9, 13])
def test_restricted_tangents_equal_the_unrestricted_ones(buggy, frame):
    """A direction confined to the subtree of ``frame`` (position, rate and acceleration
    tangents of its coordinates): the residual tangent with the frames it leaves skipped
    equals, bit for bit, the one computed at every frame; it is nonzero at the ancestors
    (the chassis carries the subtree's reaction), so the comparison is not vacuous."""
    cm, t, z, zd, zdd = buggy
    ma = cm.arrays
    nf = ma.fr_parent.shape[0]
    inside = _subtree(ma, frame)
    rng = np.random.default_rng(frame)
    dz, dzd, dzdd = np.zeros((3, cm.n))
    for f in np.flatnonzero(inside):
        c = ma.fr_coord[f]
        if c >= 0:
            dz[c], dzd[c], dzdd[c] = rng.normal(size=3)
    mv = np.zeros(nf + 1, dtype=np.int64)
    T.moved_frames(ma, dz, dzd, dzdd, False, mv)
    assert 0 < mv[:nf].sum() < nf
    every = np.ones(nf + 1, dtype=np.int64)
    got = _dtau(cm, t, z, zd, zdd, dz, dzd, dzdd, mv)
    ref = _dtau(cm, t, z, zd, zdd, dz, dzd, dzdd, every)
    assert np.array_equal(got, ref)
    root = ma.fr_coord[0]
    assert abs(ref[root]) > 0.0
