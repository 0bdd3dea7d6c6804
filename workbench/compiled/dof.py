"""Choice of the degrees of freedom at compile time (seed 001 §2.2.2-2.2.3):
:func:`choose_dof` / :func:`resolve_dof`, and the diagnosis of a near-singular choice
(:func:`near_null_joints`, :func:`suggest_dof`)."""

from __future__ import annotations

import numpy as np
import scipy.linalg

from workbench.errors import ModelError, UnknownNameError
from workbench.kernels import layout as AR
from workbench.kernels import tree as K


def constraint_jacobian_at(ma, z):
    nf = ma.fr_parent.shape[0]
    n = z.shape[0]
    A = np.zeros((nf, 3, 3))
    r = np.zeros((nf, 3))
    u = np.zeros((nf, 3))
    bcol = np.zeros((nf, 6))
    K.frame_positions(ma, ma.p, z, A, r, u)
    K.joint_columns(ma, r, u, bcol)
    Jc = np.zeros((ma.c_type.shape[0], n))
    K.constraint_jacobian(ma, ma.p, A, r, bcol, n, Jc)
    return Jc, A, r


def _rank(Jc) -> int:
    if Jc.shape[0] == 0:
        return 0
    s = np.linalg.svd(Jc, compute_uv=False)
    return int(np.sum(s > 1e-9 * max(s[0], 1.0)))


def choose_dof(ma, z_guess, zd_guess, coord_names, constraint_names):
    """Automatic choice: the coordinates whose rows of a null-space basis of ``Phi_z`` are
    best conditioned (QR with column pivoting of the basis' transpose) at the guess."""
    n = len(coord_names)
    Jc, _, _ = constraint_jacobian_at(ma, z_guess)
    if Jc.shape[0]:
        _, s, Vt = np.linalg.svd(Jc)
        rank = int(np.sum(s > 1e-9 * max(s[0], 1.0)))
        N = Vt[rank:].T
    else:
        N = np.eye(n)
    d = N.shape[1]
    if d == 0:
        return (np.zeros(0, np.int64), np.zeros((0, 2), np.int64), [], np.zeros(0), np.zeros(0))
    _, _, piv = scipy.linalg.qr(N.T, pivoting=True)
    cols = sorted(int(c) for c in piv[:d])
    dof_i = np.array([[c, 0] for c in cols], dtype=np.int64)
    return (np.full(d, AR.DOF_COORD, dtype=np.int64), dof_i, [coord_names[c] for c in cols],
            np.array([z_guess[c] for c in cols]), np.array([zd_guess[c] for c in cols]))


def resolve_dof(ma, spec, z_guess, zd_guess, coord_names, point_index):
    """Degrees of freedom from the model's ``dof`` list (names or point components)."""
    types, idx, names, zi0, zdi0 = [], [], [], [], []
    Jc, A, r = constraint_jacobian_at(ma, z_guess)
    for item in spec:
        if isinstance(item, str):
            if item not in coord_names:
                raise UnknownNameError("coordinate (dof)", item, coord_names)
            c = coord_names.index(item)
            types.append(AR.DOF_COORD)
            idx.append([c, 0])
            names.append(item)
            zi0.append(z_guess[c])
            zdi0.append(zd_guess[c])
        elif isinstance(item, dict) and "point" in item:
            pname = item["point"]
            if pname not in point_index:
                raise UnknownNameError("point (dof)", pname, point_index)
            axis = item.get("axis", "x")
            if axis not in ("x", "y", "z"):
                raise ModelError(f"dof on point {pname}: axis must be x, y or z, got {axis!r}")
            ax = "xyz".index(axis)
            k = point_index[pname]
            x = np.zeros(3)
            K.point_position(ma, ma.p, A, r, k, x)
            types.append(AR.DOF_POINT)
            idx.append([k, ax])
            names.append(f"{pname}.{axis}")
            zi0.append(float(item.get("value", x[ax])))
            zdi0.append(float(item.get("velocity", 0.0)))
        else:
            raise ModelError(f"cannot read degree of freedom {item!r}")
    n = len(coord_names)
    expected = n - _rank(Jc)
    if len(types) != expected:
        raise ModelError(f"the model has {expected} degrees of freedom at the initial guess, "
                         f"but dof lists {len(types)}: {names}")
    return (np.asarray(types, dtype=np.int64), np.asarray(idx, dtype=np.int64).reshape(-1, 2),
            names, np.asarray(zi0, dtype=float), np.asarray(zdi0, dtype=float))


def near_null_joints(cm, z, share: float = 0.25) -> list:
    """Joints that move in the near-null direction of ``Theta_z = [Phi_z; B]`` at ``z``
    (coordinates whose component of the last right singular vector is at least ``share``
    of the largest): the joints whose motion the degrees of freedom fail to determine."""
    ma = cm.arrays
    z = np.asarray(z, dtype=float)
    Jc, A, r = constraint_jacobian_at(ma, z)
    n = z.shape[0]
    nf = ma.fr_parent.shape[0]
    u = np.zeros((nf, 3))
    bcol = np.zeros((nf, 6))
    K.frame_positions(ma, ma.p, z, A, r, u)
    K.joint_columns(ma, r, u, bcol)
    Bm = np.zeros((ma.dof_type.shape[0], n))
    K.dof_jacobian(ma, ma.p, A, r, bcol, n, Bm)
    Th = np.vstack([Jc, Bm])
    if n == 0 or not np.all(np.isfinite(Th)):
        return []
    v = np.linalg.svd(Th)[2][-1]
    vmax = np.max(np.abs(v))
    return cm.joints_of_coordinates([int(c) for c in np.nonzero(np.abs(v) >= share * vmax)[0]])


def suggest_dof(cm, z) -> list:
    """Coordinates that would determine the configuration ``z`` best (the automatic
    choice of :func:`choose_dof` made at ``z``); ``[]`` when they are the model's own
    degrees of freedom or cannot be evaluated; ``None`` when ``Phi_z`` itself loses rank
    there (a singular position of the mechanism, which no choice of degrees of freedom
    removes)."""
    ma = cm.arrays
    z = np.asarray(z, dtype=float)
    if z.shape[0] == 0 or not np.all(np.isfinite(z)):
        return []
    Jc, _, _ = constraint_jacobian_at(ma, z)
    if not np.all(np.isfinite(Jc)):
        return []
    if Jc.shape[0] and _rank(Jc) != cm.n - cm.d:
        return None
    zero = np.zeros_like(z)
    names = list(choose_dof(ma, z, zero, list(cm.coord_names), [])[2])
    return [] if names == list(cm.dof_names) else names


