"""The force block of the global loop's iteration matrix from one evaluation of each force
element (``force_tangents_projected``) equals the per-column reference path (one
``force_tangent_q`` per column of ``R``, projected on ``R``) that it replaces."""

import numpy as np
import pytest
from test_global import random_closed

from workbench.forces import tire_mf as TL
from workbench.formulations.natural import kernels as G
from workbench.formulations.natural.build import global_model
from workbench.integrators.simulation import simulate


def _vehicle(name):
    from workbench.apps import vehicle
    return vehicle.prepare(name).compile()


def _model(name):
    if name == "random-closed":
        return random_closed().compile()
    return _vehicle(name)


def _reference_and_block(cm, k, dt, rng):
    """Both force blocks at row ``k`` of a global run, its DOF velocities perturbed (so
    that every damper, tire slip and speed control has a non-trivial rate)."""
    ga = global_model(cm)[0]
    ma = cm.arrays
    p = ma.p
    r = simulate(cm, k * dt, dt, formulation="global")
    Q, AREF = r.natural
    t, q, aref = r.t[k], Q[k].copy(), AREF[k].copy()
    zdi = r.zdi[k] * (1.0 + 0.2 * rng.standard_normal(r.zdi.shape[1]))
    N, d, m = ga.nq, ga.dof_sf.shape[0], ga.phi_sf.shape[0]
    ws = G.make_ws(ga)
    pr = G.row_program(ga, p, ws)
    assert pr.ok[0] == 1 and G.force_block_ok(ga, ma)
    # the operand values (pr.OV) at the converged position, then the rates (pr.OR) and R
    st = G.solve_position_p(ga, ma, pr, p, t, r.zi[k].copy(), q, aref, ws, 1e-12, 20, False,
                            False)
    assert st[0] == 0
    qd, qdd, R = np.zeros(N), np.zeros(N), np.zeros((N, d))
    st = G.solve_va_step_p(ga, ma, pr, p, t, zdi, r.zddi[k].copy(), q, qd, qdd, R, ws, True,
                           np.zeros(m + d), np.zeros((m + d, 6)))
    assert st[0] == 0
    TJ = np.zeros((ma.ty_pt.shape[0], 3, 3, 13))
    G.tire_state_jacobians(ga, ma, p, q, qd, TJ)
    zp = np.zeros(p.shape[0])
    cz, cv = 0.25 * dt * dt, 0.5 * dt
    Sref = np.zeros((d, d))
    dQ = np.zeros(N)
    for j in range(d):
        G.force_tangent_q(ga, ma, pr, p, t, q, qd, cz * R[:, j], cv * R[:, j], zp, aref,
                          ws.sc, dQ, TJ)
        Sref[:, j] = R.T @ dQ
    S = np.full((d, d), np.nan)
    G.force_tangents_projected(ga, ma, pr, p, t, q, qd, R, cz, cv, zp, aref, ws.sc, TJ,
                               np.zeros(N), np.zeros(N), np.zeros(N), S,
                               np.zeros((13, max(d, 12))))
    return ma, TJ, S, Sref


@pytest.mark.parametrize("name,k,dt", [("buggy-dlc", 40, 0.015), ("coach", 20, 0.005),
                                       ("random-closed", 30, 1e-3)])
def test_force_block_in_one_pass_equals_the_per_column_tangents(name, k, dt):
    """The buggy (coil-overs, disc tires), the coach (Magic Formula tires with their
    aligning moments, speed control, springs) and a closed random mechanism (spring-damper,
    joint spring, applied force and torque, through the per-column part of the block):
    every element type of the global side, each active (non-zero tire loads, non-zero
    spring forces)."""
    cm = _model(name)
    ma, TJ, S, Sref = _reference_and_block(cm, k, dt, np.random.default_rng(3))
    present = {"springs": ma.sp_pt.shape[0], "tires": ma.ty_pt.shape[0],
               "joint springs": ma.js_coord.shape[0], "applied": ma.af_type.shape[0],
               "speed control": ma.sc_pt.shape[0]}
    expect = {"buggy-dlc": ("springs", "tires"),
              "coach": ("springs", "tires", "speed control"),
              "random-closed": ("springs", "joint springs", "applied")}[name]
    for e in expect:
        assert present[e] > 0, e
    if name == "coach":
        assert np.any(ma.ty_law == TL.LAW_MF)                   # the aligning moments
    if ma.ty_pt.shape[0]:
        assert np.all(np.abs(TJ[:, 0, 2, 0]) > 0.0)            # every tire carries a load
    assert np.max(np.abs(Sref)) > 0.0
    # the same chain rule in another order of operations (the springs' 3 x 3 tangent
    # applied to the columns' relative displacements, the tires' inputs linear in the
    # column): rounding, 1e-12 of the block's largest entry
    np.testing.assert_allclose(S, Sref, rtol=0, atol=1e-12 * np.max(np.abs(Sref)))
