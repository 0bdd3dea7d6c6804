"""Kinematics of named points, vectors and bodies along a stored trajectory (the methods
:meth:`SimulationResult.point_position` etc.).

Every row is evaluated from the stored relative coordinates, rates and accelerations
``(z, zd, zdd)`` (which every formulation stores, the global one included) by the frame
kinematics of the tree (:func:`workbench.kernels.tree.frame_kinematics`), no position,
velocity or acceleration problem is solved again.  Points and angular velocities go through
the objective-measure kernel (:func:`workbench.kernels.measures.measures`, by
:func:`~workbench.formulations.semirecursive.step_jacobians.measures_stored`), so they are
the very values the objectives integrate; vectors through
:func:`workbench.kernels.tree.vector_kinematics`.

Names follow :mod:`workbench.objectives`: a point is ``"body.point"`` (a named point of the
model, ground points included), a body its name, a vector ``"body.vector"``.  A point
may also be given as a body plus body-frame coordinates (SI, metres; relative to the body
reference like the model's named points; global coordinates for the ground).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from workbench.errors import UnknownNameError
from workbench.formulations.semirecursive import matrixr as MR
from workbench.formulations.semirecursive.step_jacobians import measures_stored
from workbench.kernels import layout as AR
from workbench.kernels import measures as MS
from workbench.kernels import tree as K
from workbench.model.elements import GROUND

_I64 = np.int64


@njit(cache=True)
def vectors_stored(ma, p, ZZ, ZD, ZDD, ks, E):
    """``E[n, j] = (e, ed, edd)`` (3 x 3) of model vector ``ks[j]`` at every stored row
    ``n`` of the full coordinates, rates and accelerations (frame kinematics only)."""
    N = ZZ.shape[0]
    nf = ma.fr_parent.shape[0]
    A = np.zeros((nf, 3, 3))
    r = np.zeros((nf, 3))
    u = np.zeros((nf, 3))
    bcol = np.zeros((nf, 6))
    Z = np.zeros((nf, 6))
    Zd = np.zeros((nf, 6))
    for k in range(N):
        K.frame_kinematics(ma, p, ZZ[k], ZD[k], ZDD[k], A, r, u, bcol, Z, Zd)
        for j in range(ks.shape[0]):
            K.vector_kinematics(ma, A, Z, Zd, ks[j], E[k, j, 0], E[k, j, 1], E[k, j, 2])


def _rows(z, zd, zdd):
    return tuple(np.ascontiguousarray(a, dtype=np.float64) for a in (z, zd, zdd))


def _with_fields(ma, **changed):
    """Kernel arrays equal to ``ma`` except the ``changed`` fields (same numba type, so
    no kernel is compiled again)."""
    return AR.with_fields(ma, **changed)


def _body_index(cm, body: str, kind: str = "body", ground: bool = True) -> int:
    """Index of a body (ground: -1 when ``ground``), UnknownNameError otherwise."""
    if ground and body == GROUND:
        return -1
    if body not in cm.body_names:
        known = tuple(cm.body_names) + ((GROUND,) if ground else ())
        raise UnknownNameError(kind, body, known)
    return cm.body_names.index(body)


def _split(name: str, kind: str, known_of_body, known_all):
    """``(body, item)`` of ``"body.item"``; an unknown name raises UnknownNameError
    listing the items of its body when the body exists, else every known name."""
    body, dot, item = str(name).rpartition(".")
    if dot and body in known_of_body:
        items = known_of_body[body]
        if item in items:
            return body, item
        raise UnknownNameError(f"{kind} on body {body!r}", name,
                               [f"{body}.{i}" for i in items])
    raise UnknownNameError(kind, name, known_all)


def _point_fields(cm, point, local):
    """``(ma, p, k)``: kernel arrays, field vector and index of the point (a named point,
    or a point appended to copies of the arrays for body + local coordinates)."""
    ma = cm.arrays
    if local is None:
        if point not in cm.point_index:
            bodies = cm.model.bodies
            _split(point, "point", {b: tuple(bodies[b].points) for b in bodies},
                   cm.point_index)
            raise UnknownNameError("point", point, cm.point_index)
        return ma, ma.p, cm.point_index[point]
    b = _body_index(cm, point)
    loc = np.asarray(local, dtype=np.float64).reshape(-1)
    if loc.shape != (3,) or not np.all(np.isfinite(loc)):
        raise ValueError(f"local coordinates of a point on {point!r} must be three finite "
                         f"numbers, got {local!r}")
    p = np.concatenate([ma.p, loc])
    pt_body = np.append(ma.pt_body, _I64(b)).astype(_I64)
    pt_fld = np.append(ma.pt_fld, _I64(ma.p.shape[0])).astype(_I64)
    ma2 = _with_fields(ma, p=p, pt_body=pt_body, pt_fld=pt_fld)
    return ma2, ma2.p, pt_body.shape[0] - 1


def point_history(cm, z, zd, zdd, point, local=None):
    """``(x, v, a)``, each ``(N, 3)`` in the global frame, of a point along the rows
    ``z, zd, zdd`` of a trajectory of ``cm``: ``point`` is ``"body.point"``, or a body
    name with ``local`` its body-frame coordinates."""
    ma, p, k = _point_fields(cm, point, local)
    ms_type = np.repeat(np.array([MS.MS_POS, MS.MS_VEL, MS.MS_ACC], dtype=_I64), 3)
    ms_a = np.full(9, k, dtype=_I64)
    ms_c = np.tile(np.arange(3, dtype=_I64), 3)
    Z, ZD, ZDD = _rows(z, zd, zdd)
    MV = np.zeros((Z.shape[0], 9))
    measures_stored(ma, p, Z, ZD, ZDD, ms_type, ms_a, ms_c, MV)
    return MV[:, 0:3].copy(), MV[:, 3:6].copy(), MV[:, 6:9].copy()


def angular_velocity_history(cm, z, zd, zdd, body, frame="global"):
    """``(N, 3)`` angular velocity of ``body`` along the rows: components on the global
    axes (``frame="global"``) or on the body's own axes (``frame="body"``)."""
    if frame not in ("global", "body"):
        raise ValueError(f"frame must be 'global' or 'body', got {frame!r}")
    b = _body_index(cm, body, ground=False)
    code = MS.MS_ANGVEL if frame == "global" else MS.MS_ANGVEL_BODY
    ms_type = np.full(3, code, dtype=_I64)
    ms_a = np.full(3, b, dtype=_I64)
    ms_c = np.arange(3, dtype=_I64)
    Z, ZD, ZDD = _rows(z, zd, zdd)
    MV = np.zeros((Z.shape[0], 3))
    ma = cm.arrays
    measures_stored(ma, ma.p, Z, ZD, ZDD, ms_type, ms_a, ms_c, MV)
    return MV


def vector_history(cm, z, zd, zdd, name):
    """``(e, ed, edd)``, each ``(N, 3)`` in the global frame, of the named unit vector
    ``"body.vector"`` of the model (body-frame components fixed on the body)."""
    bodies = cm.model.bodies
    known = {b: tuple(bodies[b].vectors) for b in bodies}
    body, vec = _split(name, "vector", known,
                       [f"{b}.{v}" for b, vs in known.items() for v in vs])
    b = _body_index(cm, body)
    val = np.asarray(bodies[body].vectors[vec], dtype=np.float64).reshape(1, 3)
    ma = cm.arrays
    vc_body = np.append(ma.vc_body, _I64(b)).astype(_I64)
    vc_val = np.ascontiguousarray(np.concatenate([np.reshape(ma.vc_val, (-1, 3)), val]))
    ma2 = _with_fields(ma, vc_body=vc_body, vc_val=vc_val)
    Z, ZD, ZDD = _rows(z, zd, zdd)
    E = np.zeros((Z.shape[0], 1, 3, 3))
    vectors_stored(ma2, ma2.p, Z, ZD, ZDD, np.array([vc_body.shape[0] - 1], dtype=_I64), E)
    return E[:, 0, 0].copy(), E[:, 0, 1].copy(), E[:, 0, 2].copy()


@njit(cache=True)
def constraint_forces_stored(ma, p, form, TT, ZZ, ZD, ZDD, L):
    """Multipliers ``L[n]`` (m) of the closure constraints recovered from a stored row of
    any formulation: the open-tree equations ``M zdd - Q + Phi_z^T lambda = 0`` hold on the
    constraint manifold, so ``Phi_z^T lambda = -tau(z, zd, zdd)`` with ``tau = M zdd - Q``
    the semi-recursive inverse dynamics (``form``: the reference point), solved in the
    least-squares sense (minimum-norm multipliers of redundant constraints)."""
    N = ZZ.shape[0]
    n = ZZ.shape[1]
    m = L.shape[1]
    ws = MR.make_workspace(ma, n)
    tau = np.zeros(n)
    Jc = np.zeros((m, n))
    for k in range(N):
        K.frame_positions(ma, p, ZZ[k], ws.A, ws.r, ws.u)
        K.joint_columns(ma, ws.r, ws.u, ws.bcol)
        MR.residual_tau(ma, p, TT[k], ZZ[k], ZD[k], ZDD[k], ws, form, tau)
        K.constraint_jacobian(ma, p, ws.A, ws.r, ws.bcol, n, Jc)
        L[k] = np.linalg.lstsq(Jc.T.copy(), -tau, rcond=1e-12)[0]


@njit(cache=True)
def constraint_jacobian_at(ma, p, z, Jc):
    """``Jc = Phi_z`` (m x n) of the closure equations at the coordinates ``z``."""
    ws = MR.make_workspace(ma, z.shape[0])
    K.frame_positions(ma, p, z, ws.A, ws.r, ws.u)
    K.joint_columns(ma, ws.r, ws.u, ws.bcol)
    K.constraint_jacobian(ma, p, ws.A, ws.r, ws.bcol, z.shape[0], Jc)


def redundant_closures(cm, z) -> tuple:
    """``(rank, m)`` of the closure Jacobian at the coordinates ``z``: ``rank < m`` means
    redundant closure equations, whose multipliers are not unique (the minimum-norm ones
    are reported)."""
    Jc = np.zeros((cm.m, cm.n))
    if cm.m:
        constraint_jacobian_at(cm.arrays, cm.arrays.p, np.ascontiguousarray(z, dtype=float),
                               Jc)
    sv = np.linalg.svd(Jc, compute_uv=False) if cm.m else np.zeros(0)
    rank = int(np.sum(sv > 1e-10 * max(1.0, float(sv.max(initial=0.0)))))
    return rank, cm.m


def constraint_force_history(cm, form, t, z, zd, zdd) -> np.ndarray:
    """``(N, m)`` multipliers of the closure constraints along stored rows
    (:func:`constraint_forces_stored`)."""
    L = np.zeros((len(t), cm.m))
    if cm.m:
        T = np.ascontiguousarray(t, dtype=np.float64)
        constraint_forces_stored(cm.arrays, cm.arrays.p, form, T, *_rows(z, zd, zdd), L)
    return L
