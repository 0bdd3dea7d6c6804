"""Kinematic set-up and single-state evaluations around the Matrix-R kernels.

* :func:`choose_dof` / :func:`resolve_dof`: the degrees of freedom (seed 001 §2.2.2-2.2.3).
* :func:`assemble`: consistent initial position and velocity (Algorithm 1, lines 2-3).
* :func:`state_terms`: projected mass matrix and forces at a state (eqs 42-44).
* :func:`raise_for_status`: turns kernel status codes into typed exceptions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg

from . import _arrays as AR
from . import _kernels as K
from . import _matrixr as MR
from .errors import (AssemblyError, ModelError, NewtonConvergenceError, NonFiniteError,
                     SingularConfigurationError, UnknownNameError)

FORM_GLOBAL = 2  # global formulation in natural coordinates (workbench.natural)
FORMULATIONS = {"sr-com": MR.FORM_COM, "sr-origin": MR.FORM_ORIGIN, "global": FORM_GLOBAL}
FORMULATION_LABEL = {
    "global": "global Matrix-R formulation in natural coordinates (points and unit vectors)",
    "sr-com": "semi-recursive, centre-of-mass reference points (SR-I, RTdyn0)",
    "sr-origin": "semi-recursive, global-origin reference point (SR-II, RTdyn1)",
}

POS_TOL = 1e-12
POS_MAXIT = 30


def formulation_code(name: str) -> int:
    if name not in FORMULATIONS:
        raise ValueError(f"unknown formulation {name!r}; choose one of {sorted(FORMULATIONS)}")
    return FORMULATIONS[name]


def _constraint_jacobian(ma, z):
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
    Jc, _, _ = _constraint_jacobian(ma, z_guess)
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
    Jc, A, r = _constraint_jacobian(ma, z_guess)
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
    Jc, A, r = _constraint_jacobian(ma, z)
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
    Jc, _, _ = _constraint_jacobian(ma, z)
    if not np.all(np.isfinite(Jc)):
        return []
    if Jc.shape[0] and _rank(Jc) != cm.n - cm.d:
        return None
    zero = np.zeros_like(z)
    names = list(choose_dof(ma, z, zero, list(cm.coord_names), [])[2])
    return [] if names == list(cm.dof_names) else names


def raise_for_status(cm, status: int, time: float, value: float, bad: int, context: str,
                     z=None):
    """Translate a kernel status code into a typed exception naming model elements.

    ``z``: the last accepted configuration of a run (used to name the joints of a
    near-singular configuration)."""
    if status == MR.OK:
        return
    if status == MR.ST_NEAR_SINGULAR:
        joints = near_null_joints(cm, z) if z is not None else []
        if not joints:
            joints = cm.joints_of_coordinates([bad])
        better = suggest_dof(cm, z) if z is not None else []
        if better is None:
            better = []
            hint = ("; the constraint Jacobian Phi_z itself loses rank there (a singular "
                    "position of the mechanism)")
        elif better:
            hint = (f"; the coordinates {better} determine the configuration there: choose "
                    "them with Model.dof(...) or 'dof' in the model file")
        else:
            hint = ""
        raise SingularConfigurationError(
            f"{context}: the step cannot be completed next to a singular configuration: "
            f"the leading matrix Theta_z = [Phi_z; B] is near-singular (sigma_min/sigma_max "
            f"~ {value:.1e} < {MR.SING_DIAG:g} at the last accepted state; joints: "
            f"{', '.join(joints)}); the degrees of freedom {list(cm.dof_names)} do not "
            f"determine the motion through it (singular position such as a dead point, or a "
            f"poor choice of degrees of freedom){hint}", time, joints, better)
    if status == MR.ST_SINGULAR:
        joints = cm.joints_of_coordinates([bad])
        raise SingularConfigurationError(
            f"{context}: the leading matrix Theta_z = [Phi_z; B] is singular at coordinate "
            f"{cm.coord_names[bad] if 0 <= bad < cm.n else bad!r} (joints: {', '.join(joints)}); "
            f"the degrees of freedom {list(cm.dof_names)} do not determine the configuration "
            f"(singular position or a poor choice of degrees of freedom)", time, joints)
    if status == MR.ST_POSITION:
        raise AssemblyError(
            f"{context}: the position problem did not converge (max |Phi| = {value:.3g}); "
            f"closure constraints: {sorted(set(cm.constraint_names))}", time, value,
            sorted(set(cm.constraint_names)))
    if status == MR.ST_NEWTON:
        raise NewtonConvergenceError(
            f"{context}: Newton-Raphson of the trapezoidal step did not converge "
            f"(residual {value:.3g}); reduce the time step", time, value)
    if status == MR.ST_NONFINITE:
        raise NonFiniteError(f"{context}: a NaN or infinite value appeared (model "
                             f"{cm.name!r})", time)
    if status == MR.ST_ZERO_SPRING:
        name = cm.spring_names[bad] if 0 <= bad < len(cm.spring_names) else f"#{bad}"
        raise NonFiniteError(
            f"{context}: spring {name!r} has zero length (its two end points coincide), so "
            f"the direction of its force T (x2 - x1) / L is undefined (0/0); move one of its "
            f"end points", time, element=name)
    if status == MR.ST_MASS:
        raise SingularConfigurationError(
            f"{context}: the projected mass matrix R^T M R is singular (a degree of freedom "
            f"without inertia?) in model {cm.name!r}", time, [])
    raise RuntimeError(f"unknown kernel status {status}")


@dataclass
class StateTerms:
    """Consistent state and projected dynamic terms at one instant (seed 001 eqs 42-44)."""

    z: np.ndarray
    zd: np.ndarray
    zdd_bias: np.ndarray
    R: np.ndarray
    M_full: np.ndarray
    tau_bias: np.ndarray
    M_bar: np.ndarray
    Q_bar: np.ndarray


def state_terms(cm, t: float = 0.0, zi=None, zdi=None, z_guess=None,
                formulation: str = "sr-com") -> StateTerms:
    """Solve the position and velocity problems at ``(t, z^i, zd^i)`` and evaluate
    ``Mbar = R^T M R`` and ``Qbar`` with the chosen formulation."""
    form = formulation_code(formulation)
    if form == FORM_GLOBAL:
        raise ModelError("state_terms: the global formulation has its own state kernels "
                         "(workbench._global); use formulation 'sr-com' or 'sr-origin'")
    zi = cm.zi0 if zi is None else np.asarray(zi, dtype=float)
    zdi = cm.zdi0 if zdi is None else np.asarray(zdi, dtype=float)
    z0 = cm.z_guess if z_guess is None else np.asarray(z_guess, dtype=float)
    out = MR.evaluate_state(cm.arrays, cm.arrays.p, form, float(t), zi, zdi, z0, POS_TOL,
                            POS_MAXIT)
    st, err, bad = out[0], out[1], out[2]
    raise_for_status(cm, st, t, err, bad, f"model {cm.name!r}")
    return StateTerms(*out[3:])


def assemble(cm, t: float = 0.0) -> StateTerms:
    """Consistent initial configuration: raises :class:`AssemblyError` naming the
    constraints that could not be satisfied."""
    try:
        return state_terms(cm, t)
    except AssemblyError as exc:
        raise AssemblyError(f"model {cm.name!r} cannot be assembled from the initial guess "
                            f"with the degrees of freedom {list(cm.dof_names)} fixed: {exc}",
                            t, exc.residual, exc.constraints) from None
