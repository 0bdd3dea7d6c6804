"""Named design parameters of a compiled model as columns of the field x parameter map
``Gm`` (:func:`parameter_columns`), and what each parameter moves: the kinematic ones (points
of constraints and point DOFs), the ones read only by force and inertia elements (reverse
mode), the cyclic DOFs of an objective, and the initial-state sensitivities."""

from __future__ import annotations

import numpy as np

from workbench.compiled.build import CompiledModel
from workbench.errors import ModelError, UnknownNameError
from workbench.kernels import measures as MS
from workbench.kernels import tree as K
from workbench.kernels.layout import (AF_FORCE, C_CAM, C_DIST, C_DOTVP, C_DOTVV, C_DRIVE, C_PTCOMP,
                                      DOF_COORD, DOF_POINT, FIXED, PRISMATIC, REVOLUTE)
from workbench.kernels.tangents import dof_initial_t


def parameter_columns(cm: CompiledModel, parameters) -> tuple:
    if parameters is None:
        meta = cm.model.meta if hasattr(cm.model, "meta") else {}
        parameters = meta.get("design_parameters") if isinstance(meta, dict) else None
        if not parameters:
            raise ModelError(f"model {cm.name!r}: no parameters given and no "
                             "design_parameters declared in the model")
    names = list(parameters)
    seen = set()
    dup = [nm for nm in names if nm in seen or seen.add(nm)]
    if dup:
        raise ModelError(f"model {cm.name!r}: parameter {dup[0]!r} is listed twice")
    cols = []
    for nm in names:
        if nm not in cm.param_names:
            raise UnknownNameError("parameter", nm, cm.param_names)
        j = cm.param_names.index(nm)
        if not np.any(cm.G[:, j]):
            raise ModelError(
                f"model {cm.name!r}: parameter {nm!r} is not bound to any numeric field of "
                "the compiled model (it is a load-time value such as an initial condition "
                "or a gravity direction); it cannot be differentiated")
        cols.append(j)
    Gm = np.ascontiguousarray(cm.G[:, cols], dtype=float)
    units = tuple(cm.param_units[j] for j in cols)
    return tuple(names), Gm, units


def constraint_elements(ma) -> tuple:
    """``(points, vectors, driven)``: the model points and vectors the constraint equations
    read (point coincidences, rods, perpendicularities) and the coordinates they read
    directly (driven coordinates, the two coordinates of a cam relation)."""
    pts, vcs, driven = set(), set(), set()
    c_type, c_i = np.asarray(ma.c_type), np.asarray(ma.c_i)
    for k, t in enumerate(c_type):
        if t in (C_PTCOMP, C_DIST):
            pts.update((int(c_i[k, 0]), int(c_i[k, 1])))
        elif t == C_DOTVV:
            vcs.update((int(c_i[k, 0]), int(c_i[k, 1])))
        elif t == C_DOTVP:
            vcs.add(int(c_i[k, 0]))
            pts.update((int(c_i[k, 1]), int(c_i[k, 2])))
        elif t == C_DRIVE:
            driven.add(int(c_i[k, 0]))
        elif t == C_CAM:
            driven.update((int(c_i[k, 0]), int(c_i[k, 1])))
    return pts, vcs, driven


def kinematic_parameters(cm: CompiledModel, Gm) -> np.ndarray:
    """``1`` for each parameter column of ``Gm`` bound to a field that defines the
    configuration (body origins, joint locations, the coordinates of points used by a
    constraint or a point DOF, rod lengths, the coefficients of a drive's time
    function, the Fourier coefficients of a cam profile), else ``0``.

    Any other parameter leaves the position, velocity and acceleration problems,
    ``Theta_z`` and ``R`` unchanged (``dz = dzd = dzdd = 0``), which
    :func:`workbench.formulations.semirecursive.step_jacobians.step_jacobians` uses to skip their
    tangents: masses, inertias, centres of
    mass, force-element data and the points where only force elements (springs, tires,
    applied forces) and measures act, e.g. a spring's mounting point (its direction
    still carries the point's tangent ``dp`` into the forces and measures)."""
    ma = cm.arrays
    nfield = ma.p.shape[0]
    kin = np.zeros(nfield, dtype=bool)
    pts = constraint_elements(ma)[0]
    pts.update(int(ma.dof_i[k, 0]) for k in range(ma.dof_type.shape[0])
               if ma.dof_type[k] == DOF_POINT)
    for start in (list(ma.b_org) + list(ma.fr_off)
                  + [int(ma.pt_fld[k]) for k in sorted(pts)]):
        if 0 <= start < nfield:
            kin[start:start + 3] = True
    for k in range(ma.c_type.shape[0]):
        if ma.c_type[k] == C_DIST and 0 <= ma.c_fld[k] < nfield:
            kin[ma.c_fld[k]] = True
        elif ma.c_type[k] == C_DRIVE:
            # the coefficients of a drive's time function (amplitudes, times, rates); the
            # magnitudes and directions of applied loads are force-element data
            tf = int(ma.c_i[k, 1])
            kin[int(ma.tf_fld[tf]):int(ma.tf_fld[tf]) + int(ma.tf_n[tf])] = True
        elif ma.c_type[k] == C_CAM:
            # the 2N + 1 Fourier coefficients of the profile
            kin[int(ma.c_fld[k]):int(ma.c_fld[k]) + 2 * int(ma.c_i[k, 3]) + 1] = True
    return np.array([1 if np.any(Gm[kin, j] != 0.0) else 0 for j in range(Gm.shape[1])],
                    dtype=np.int64)


def cyclic_dofs(cm: CompiledModel, co) -> np.ndarray:
    """``1`` for each degree of freedom whose *position* the step residual and the
    measures of ``co`` do not depend on (a wheel spin angle), else ``0``.

    Such a coordinate is the angle ``q`` of a revolute joint whose child is a leaf of the
    tree (no frame below it) carrying one body that is axisymmetric about the joint axis:
    inertia ``J a = lambda a`` with ``mu (I - a a^T)`` across it, centre of mass on the
    axis; every point of the body used by a spring, tire, constraint, load, point DOF or
    measure lies on the axis and every vector used is parallel to it; no joint spring and
    no drive on ``q``, no load or body-frame angular-velocity measure on the body, no
    measure of ``q`` itself, and only coordinate DOFs.  Rotating the body about its axis
    then moves nothing the equations read, so the position column of the step Jacobians
    (``dr/dz^i``, ``dm/dz^i``, the ``dR^T tau`` term) is zero in exact arithmetic and
    :func:`workbench.formulations.semirecursive.step_jacobians.step_jacobians` skips it (the
    velocity column is computed: the spin
    rate enters gyroscopic terms and tire slip)."""
    ma = cm.arrays
    p = np.asarray(ma.p)
    d = cm.d
    out = np.zeros(d, dtype=np.int64)
    dof_type = np.asarray(ma.dof_type)
    if d == 0 or np.any(dof_type != DOF_COORD):
        return out
    fr_parent = np.asarray(ma.fr_parent)
    _, _, drive_coords = constraint_elements(ma)
    used_pts, used_vcs = _used_elements(ma, co)
    load_bodies = set()
    for s_, t in enumerate(np.asarray(ma.af_type)):
        k = int(ma.af_idx[s_])
        load_bodies.add(int(ma.pt_body[k]) if t == AF_FORCE else k)
    # speed-controlled wheels and carriers, and the measured body
    load_bodies.update(int(b) for b in np.asarray(ma.sw_body))
    load_bodies.update(int(b) for b in np.asarray(ma.sw_carrier) if b >= 0)
    load_bodies.update(int(ma.pt_body[k]) for k in np.asarray(ma.sc_pt))
    angvel_body_bodies, coord_measured = set(), set()
    for t, a in zip(np.asarray(co.ms_type), np.asarray(co.ms_a)):
        if t == MS.MS_ANGVEL_BODY:
            angvel_body_bodies.add(int(a))
        elif t == MS.MS_COORD:
            coord_measured.add(int(a))
    spring_coords = set(int(c) for c in np.asarray(ma.js_coord))
    # a path follower's servo acts on its coordinate and reads its preview point
    spring_coords.update(int(c) for c in np.asarray(ma.pf_coord))
    pt_body, pt_fld = np.asarray(ma.pt_body), np.asarray(ma.pt_fld)
    vc_body, vc_val = np.asarray(ma.vc_body), np.asarray(ma.vc_val)
    for col in range(d):
        c = int(ma.dof_i[col, 0])
        frames = np.nonzero(np.asarray(ma.fr_coord) == c)[0]
        if len(frames) != 1:
            continue
        f = int(frames[0])
        if ma.fr_type[f] != REVOLUTE or np.any(fr_parent == f):
            continue
        bodies = np.nonzero(np.asarray(ma.b_frame) == f)[0]
        if len(bodies) != 1:
            continue
        b = int(bodies[0])
        if (c in drive_coords or c in spring_coords or c in coord_measured
                or b in load_bodies or b in angvel_body_bodies):
            continue
        axis = np.asarray(ma.fr_C)[f].T @ np.asarray(ma.fr_axis)[f]   # in the body frame
        axis = axis / np.linalg.norm(axis)
        o = int(ma.b_org[b])
        org = p[o:o + 3]
        k0 = int(ma.b_inr[b])
        J00, J11, J22, J01, J02, J12 = p[k0:k0 + 6]
        J = np.array([[J00, J01, J02], [J01, J11, J12], [J02, J12, J22]])
        lam = axis @ J @ axis
        across = J - lam * np.outer(axis, axis)
        mu = 0.5 * np.trace(across)
        tol = 1e-12 * max(1.0, float(np.max(np.abs(J))))
        if np.max(np.abs(across - mu * (np.eye(3) - np.outer(axis, axis)))) > tol:
            continue
        com = org + p[int(ma.b_com[b]):int(ma.b_com[b]) + 3]

        def on_axis(x):
            return np.linalg.norm(np.cross(x, axis)) <= 1e-12 * max(1.0, np.linalg.norm(x))

        if not on_axis(com):
            continue
        if not all(on_axis(org + p[int(pt_fld[k]):int(pt_fld[k]) + 3])
                   for k in used_pts if int(pt_body[k]) == b):
            continue
        if not all(np.linalg.norm(np.cross(vc_val[k], axis)) <= 1e-12
                   for k in used_vcs if int(vc_body[k]) == b):
            continue
        out[col] = 1
    return out | symmetry_dofs(cm, co)


def _used_elements(ma, co) -> tuple:
    """``(points, vectors)``: every model point and vector the equations and the measures
    of ``co`` read (constraints, springs, tires, rods, loads, speed control, path
    followers, point DOFs, point measures)."""
    pts, vcs, _ = constraint_elements(ma)
    pts.update(int(k) for k in np.asarray(ma.sp_pt).ravel())
    pts.update(int(k) for k in np.asarray(ma.ty_pt))
    vcs.update(int(k) for k in np.asarray(ma.ty_vc))
    pts.update(int(k) for k in np.asarray(ma.rd_pt).ravel())
    pts.update(int(k) for k in np.asarray(ma.sc_pt))
    vcs.update(int(k) for k in np.asarray(ma.sc_vc))
    pts.update(int(k) for k in np.asarray(ma.pf_pt))
    for s_, t in enumerate(np.asarray(ma.af_type)):
        if t == AF_FORCE:
            pts.add(int(ma.af_idx[s_]))
    for k in range(ma.dof_type.shape[0]):
        if ma.dof_type[k] == DOF_POINT:
            pts.add(int(ma.dof_i[k, 0]))
    for t, a in zip(np.asarray(co.ms_type), np.asarray(co.ms_a)):
        if t <= MS.MS_ACC:
            pts.add(int(a))
    return pts, vcs


def symmetry_dofs(cm: CompiledModel, co) -> np.ndarray:
    """``1`` for each degree of freedom whose position translates the whole model along a
    symmetry of everything the step residual and the measures of ``co`` read, else ``0``:
    the horizontal translations of a vehicle's chassis on a flat road.

    The coordinate ``c`` of a prismatic frame ``f`` whose ancestors are prismatic or fixed
    frames (so that its axis ``u`` is the same in every configuration), with every body
    in the subtree of ``f`` and every point and vector the equations or the measures read
    on a body (none on the ground).  Changing ``c`` at fixed other coordinates, rates and
    accelerations then translates the whole model along ``u`` with every closure equation
    still met (they relate the model's own points and vectors), so ``R^Phi`` does not
    change, and the step residual ``R^T tau`` and the measures are invariant when, in
    addition:

    * tires: the road is the plane ``z = h(x)``: ``u_z = 0`` and, on a road with steps,
      ``u_x = 0`` (gravity, a uniform field, is invariant under any translation);
    * no applied load, speed control, speed-controlled wheel, path follower, joint spring
      or drive on ``c`` (their data are fixed in space or read ``c``);
    * measures: point positions only in components the translation does not change
      (``u_k = 0``), no measure of ``c`` itself; point velocities and accelerations,
      angular velocities, the other coordinates, every rate and coordinate acceleration
      and the reactions do not change.

    The position column of the step Jacobians (``dr/dz^i``, ``dm/dz^i``, the ``dR^T tau``
    term, ``mu^T Phi_zz(R_c, .)``) is then zero in exact arithmetic, and
    :func:`workbench.formulations.semirecursive.step_jacobians.jacobian_rows` skips it as it
    skips a wheel's spin angle (:func:`cyclic_dofs`, which includes these); the velocity
    column is computed.  ``tests/test_buggy.py`` checks the gradients with and without the
    skip.

    Rotations are not included: turning the model about a joint axis at fixed DOF rates
    is a symmetry only if no coordinate above the joint moves (the rates of a chassis's
    global translations would have to turn with it; the buggy's yaw is no symmetry of its
    state, measured: 6 % error in the gradient had it been skipped)."""
    ma = cm.arrays
    d = cm.d
    out = np.zeros(d, dtype=np.int64)
    dof_type = np.asarray(ma.dof_type)
    if d == 0 or np.any(dof_type != DOF_COORD):
        return out
    for arr in (ma.af_type, ma.sc_pt, ma.sw_body, ma.pf_pt):
        if np.asarray(arr).shape[0] > 0:
            return out
    fr_parent, fr_type = np.asarray(ma.fr_parent), np.asarray(ma.fr_type)
    pt_body, vc_body = np.asarray(ma.pt_body), np.asarray(ma.vc_body)
    used_pts, used_vcs = _used_elements(ma, co)
    if any(int(pt_body[k]) < 0 for k in used_pts) or any(int(vc_body[k]) < 0
                                                          for k in used_vcs):
        return out
    _, _, driven = constraint_elements(ma)
    driven.update(int(c) for c in np.asarray(ma.js_coord))
    # the global joint axes (constant for the frames tested below)
    nf = fr_parent.shape[0]
    A, r, u = np.zeros((nf, 3, 3)), np.zeros((nf, 3)), np.zeros((nf, 3))
    K.frame_positions(ma, ma.p, np.asarray(cm.z_guess, dtype=float), A, r, u)
    tires = np.asarray(ma.ty_pt).shape[0] > 0
    road_steps = int(ma.rd_fld[1]) > 1
    b_frame = np.asarray(ma.b_frame)
    ms_type, ms_a, ms_c = np.asarray(co.ms_type), np.asarray(co.ms_a), np.asarray(co.ms_c)
    for col in range(d):
        c = int(ma.dof_i[col, 0])
        frames = np.nonzero(np.asarray(ma.fr_coord) == c)[0]
        if len(frames) != 1 or c in driven:
            continue
        f = int(frames[0])
        if int(fr_type[f]) != PRISMATIC:
            continue
        a, ok = int(fr_parent[f]), True
        while a >= 0:
            ok = ok and int(fr_type[a]) in (PRISMATIC, FIXED)
            a = int(fr_parent[a])
        inside = np.zeros(nf, dtype=bool)
        for k in range(nf):                      # parents come before their children
            inside[k] = k == f or (fr_parent[k] >= 0 and inside[fr_parent[k]])
        if not ok or not all(inside[int(bf)] for bf in b_frame):
            continue
        on = np.abs(u[f] / np.linalg.norm(u[f])) > 1e-12     # components u moves
        if tires and (on[2] or (road_steps and on[0])):
            continue
        good = True
        for t, a_, cc in zip(ms_type, ms_a, ms_c):
            if t == MS.MS_POS:
                good = good and not on[int(cc)]
            elif t == MS.MS_COORD:
                good = good and int(a_) != c
            elif t not in (MS.MS_VEL, MS.MS_ACC, MS.MS_ANGVEL, MS.MS_ANGVEL_BODY,
                           MS.MS_RATE, MS.MS_COORD_ACC, MS.MS_REACTION):
                good = False
        if good:
            out[col] = 1
    return out


def reverse_parameters(cm: CompiledModel, Gm) -> np.ndarray:
    """``1`` for each parameter column of ``Gm`` bound only to masses, centres of mass,
    inertias and spring-damper data (point-to-point and joint): both methods get their
    columns of ``dr/drho`` in reverse mode
    (:func:`workbench.formulations.semirecursive.step_jacobians.virtual_power_lanes`, one pass
    over the bodies for all of them: the adjoint with its ``no`` cotangents, the direct
    method with the ``d`` unit cotangents), so the cost does not grow with their
    number."""
    ma = cm.arrays
    nfield = ma.p.shape[0]
    ok = np.zeros(nfield, dtype=bool)
    for b in range(ma.b_frame.shape[0]):
        ok[ma.b_mass[b]] = True
        ok[ma.b_com[b]:ma.b_com[b] + 3] = True
        ok[ma.b_inr[b]:ma.b_inr[b] + 6] = True
    # the reverse-mode lanes know the linear spring law only: the fields of a spring with an
    # air-spring or piecewise-damper law are differentiated in forward mode
    linear = np.all(np.asarray(ma.sp_law)[:, :2] == 0, axis=1)
    for arr in (ma.sp_k, ma.sp_c, ma.sp_L0):
        ok[np.asarray(arr, dtype=np.int64)[linear]] = True
    for arr in (ma.js_k, ma.js_c, ma.js_z0):
        ok[np.asarray(arr, dtype=np.int64)] = True
    kin = kinematic_parameters(cm, Gm)
    return np.array([1 if kin[j] == 0 and not np.any(Gm[~ok, j] != 0.0) else 0
                     for j in range(Gm.shape[1])], dtype=np.int64)


def initial_sensitivities(cm: CompiledModel, Gm):
    """``dz^i(t0)/drho``, ``dzd^i(t0)/drho``: nonzero only for point-coordinate DOF whose
    initial value is read from the initial configuration (no explicit ``value``)."""
    ma = cm.arrays
    SZ, SV = dof_initial_t(ma, ma.p, Gm, cm.z_guess, cm.zd_guess)
    spec = list(getattr(cm.model, "dof_spec", None) or [])
    for k in range(cm.d):
        item = spec[k] if k < len(spec) else None
        if isinstance(item, dict) and "value" in item:
            SZ[k] = 0.0
        SV[k] = 0.0       # point-DOF velocities are given values (default 0)
    return np.ascontiguousarray(SZ), np.ascontiguousarray(SV)

