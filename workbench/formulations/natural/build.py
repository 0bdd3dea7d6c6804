"""Global formulation in natural (fully Cartesian) coordinates, built from the SAME model.

``formulation="global"`` in :func:`workbench.simulate` and :func:`workbench.sensitivity`
(CLI ``--formulation global``).  The design (coordinates, constraints, DOF, mass matrix,
forces) is described in :mod:`workbench.formulations.natural.kernels`; this module builds the flat
arrays
(:class:`GlobalArrays`) from a :class:`~workbench.compiled.CompiledModel` and wraps the
integrator and the sensitivity sweeps.

Supported (scope of issue 6): planar and spatial models whose tree joints are revolute,
prismatic, fixed, spherical or floating, and spatial models with cylindrical and universal
tree joints; every cut joint, distance constraint and drive of the compiled model;
point-to-point spring-dampers, joint spring-dampers, point forces, torques, gravity and
tire-ground contacts (:mod:`workbench.forces.tire`, evaluated on the wheel state taken from the
natural coordinates).  Cam relations (``Model.cam_relation``, a closure between two joint
coordinates) are not supported: :class:`~workbench.errors.ModelError` naming the relation.  Every relative coordinate of a spatial model has a joint-coordinate
function of the natural coordinates (revolute/cylindrical/universal angles and the z-y-x
angles of spherical/floating joints as ``atan2`` of two bilinear functions, the middle
z-y-x angle as ``asin`` of one; travels bilinear), so any of them can be a degree of
freedom, be driven or carry a joint spring; planar models support these on revolute and
prismatic coordinates only (:class:`~workbench.errors.ModelError` naming the element
otherwise).  Objectives: point positions/velocities/accelerations, body angular
velocities (global or body components), joint coordinates and their rates.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import types
from numba.experimental import structref

from workbench.errors import ModelError
from workbench.formulations.natural import kernels as G
from workbench.kernels import layout as AR
from workbench.kernels import tree as K
from workbench.model.elements import perpendiculars

GlobalArrays = namedtuple("GlobalArrays", [
    "D", "nqb", "nq", "nb",
    "op_ptr", "tm_body", "tm_org", "tm_c", "tm_f1", "tm_f2", "tm_sign",
    "sf_kind", "sf_op", "sf_K", "sf_fK", "sf_tf",
    "phi_sf", "dof_sf", "jc_sf", "pt_op", "rperm", "cperm",
    "sq_ptr", "sq_cols", "sq_vptr", "sq_vrows", "sq_mask", "sq_rperm", "sq_cperm",
    "sq_gptr", "sq_grow", "sq_gsrc", "sq_zptr", "sq_zrow",
    "lu_rowp", "lu_colp", "lu_uptr", "lu_ucol", "lu_lptr", "lu_lrow", "lu_pptr", "lu_upd",
    "lu_gdst"])


@structref.register
class GlobalArraysType(types.StructRef):
    """Numba type of the global-formulation arrays: one StructRef passed as one pointer
    (a named tuple of ~20 arrays is reference-counted member by member on every kernel
    call that LLVM does not inline; see :mod:`workbench.kernels.layout`)."""

    def preprocess_fields(self, fields):
        return tuple((name, types.unliteral(typ)) for name, typ in fields)


class GlobalKernelArrays(structref.StructRefProxy):
    """Python handle of :class:`GlobalArraysType`; attributes read the named tuple."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.tuple, name)

    def _replace(self, **kw):
        return _as_struct(self.tuple._replace(**kw))

    def __reduce__(self):
        return (_as_struct, (self.tuple,))


structref.define_boxing(GlobalArraysType, GlobalKernelArrays)


def _as_struct(tup):
    return AR.struct_from_tuple(GlobalArrays(*tup), GlobalArraysType)


class _Build:
    def __init__(self):
        self.terms = []
        self.ops = [0]
        self.sfs = []

    def op(self, terms):
        self.terms.extend(terms)
        self.ops.append(len(self.terms))
        return len(self.ops) - 2

    def sf(self, kind, ops, K=0.0, fK=-1, tf=-1):
        ops = list(ops) + [0] * (4 - len(ops))
        self.sfs.append((kind, ops, K, fK, tf))
        return len(self.sfs) - 1


def _t(body, org=0.0, c=(0.0, 0.0, 0.0), f1=-1, f2=-1, sign=1.0):
    return (int(body), float(org), tuple(float(x) for x in c), int(f1), int(f2), float(sign))


def build_global(cm) -> tuple:
    """``(GlobalArrays, q0, aref0, names)`` of the natural-coordinate model of ``cm``."""
    ma = cm.arrays
    p = ma.p
    planar = bool(ma.planar)
    D = 2 if planar else 3
    nqb = D + D * D
    nb = ma.b_frame.shape[0]
    if planar and ma.ty_pt.shape[0] > 0:
        raise ModelError("tire force elements need a spatial model (global formulation)")
    if planar and ma.sc_pt.shape[0] > 0:
        names_sc = ", ".join(repr(n) for n in cm.model.speed_controls)
        raise ModelError(f"speed control {names_sc}: needs a spatial model (global "
                         "formulation)")
    if ma.pf_pt.shape[0] > 0:
        names_pf = ", ".join(repr(n) for n in cm.model.path_followers)
        raise ModelError(f"path follower {names_pf}: not available in the global (natural "
                         "coordinate) formulation; use the semi-recursive one")
    if ma.rd_pt.shape[0] > 0:
        names_rd = ", ".join(repr(d.name) for d in cm.model.distances.values()
                             if d.mass is not None)
        raise ModelError(f"rod {names_rd}: rod elements are not available in the global "
                         "(natural coordinate) formulation; use a semi-recursive, multiplier "
                         "or penalty formulation, or model the rod as a body")
    bld = _Build()
    names = []
    eye = np.eye(3)

    def point_terms(k, sign=1.0):
        b = int(ma.pt_body[k])
        if b < 0:
            return [_t(-1, 0.0, (0, 0, 0), ma.pt_fld[k], -1, sign)]
        return [_t(b, 1.0, (0, 0, 0), ma.pt_fld[k], ma.b_org[b], sign)]

    def vec_terms(b, c, sign=1.0):
        return [_t(b, 0.0, c, -1, -1, sign)]

    pt_op = np.array([bld.op(point_terms(k)) for k in range(ma.pt_body.shape[0])],
                     dtype=np.int64)
    const_op = [bld.op(vec_terms(-1, eye[i])) for i in range(3)]
    phi = []

    def add_phi(sf, name):
        phi.append(sf)
        names.append(name)

    # ---- rigid bodies: e_k . e_l = delta_kl
    for b in range(nb):
        for k in range(D):
            for l in range(k, D):
                add_phi(bld.sf(G.SF_BIL, [bld.op(vec_terms(b, eye[k])),
                                          bld.op(vec_terms(b, eye[l]))],
                               K=1.0 if k == l else 0.0), f"body {cm.body_names[b]} (rigid)")
    # ---- tree joints
    jc_sf = np.full(cm.n, -1, dtype=np.int64)
    jtype = {j.child: j for j in cm.model.joints.values()}
    for b in range(nb):
        bname = cm.body_names[b]
        j = jtype[bname]
        chain = [int(ma.b_frame[b])]
        while ma.fr_parent[chain[0]] >= 0 and ma.fr_body[ma.fr_parent[chain[0]]] < 0:
            chain.insert(0, int(ma.fr_parent[chain[0]]))
        pf = int(ma.fr_parent[chain[0]])
        pb = int(ma.fr_body[pf]) if pf >= 0 else -1
        f0 = chain[0]
        s_fld = int(ma.fr_off[f0])
        a = np.asarray(ma.fr_axis[f0], dtype=float)
        C = np.asarray(ma.fr_C[chain[-1]], dtype=float)
        where = f"joint {j.name}"
        crd = [int(ma.fr_coord[f]) for f in chain if ma.fr_coord[f] >= 0]
        if planar:
            if j.type in ("cylindrical", "universal"):
                raise ModelError(f"{where}: tree joints of type {j.type!r} need a spatial "
                                 "model (global formulation)")
            if j.type == "revolute" and abs(abs(a[2]) - 1.0) > 1e-9:
                raise ModelError(f"{where}: planar model needs a revolute axis along z")
            if j.type == "prismatic" and abs(a[2]) > 1e-9:
                raise ModelError(f"{where}: planar model needs a prismatic axis in the plane")
        delta = [_t(b, 1.0)]
        if pb >= 0:
            delta.append(_t(pb, 1.0, sign=-1.0))
        delta.append(_t(pb, 0.0, (0, 0, 0), s_fld, -1, -1.0))
        d_op = bld.op(delta)
        n1, _ = perpendiculars(a)
        n2 = np.cross(a, n1)

        def angle_sf(cv1, pv, cv2, pw):
            # atan2((A_c C^T cv2) . (A_p pw), (A_c C^T cv1) . (A_p pv))
            return bld.sf(G.SF_ANGLE, [bld.op(vec_terms(b, C.T @ cv1)), bld.op(vec_terms(pb, pv)),
                                       bld.op(vec_terms(b, C.T @ cv2)), bld.op(vec_terms(pb, pw))])

        def rel_rot(i, k, sign=1.0):
            # element R_ik of the relative rotation A_p^T A_c C^T: (A_p e_i) . (A_c C^T e_k)
            return [bld.op(vec_terms(pb, eye[i], sign)), bld.op(vec_terms(b, C.T @ eye[k]))]

        # joint point on the axis / coincident joint point
        if j.type in ("revolute", "fixed", "spherical", "universal"):
            for i in range(D):
                add_phi(bld.sf(G.SF_BIL, [d_op, const_op[i]]), j.name)
        if j.type in ("prismatic", "cylindrical"):
            perp = [np.cross([0.0, 0.0, 1.0], a)] if planar else [n1, n2]
            for n in perp:
                add_phi(bld.sf(G.SF_BIL, [d_op, bld.op(vec_terms(pb, n))]), j.name)
            # travel along the axis: (A_p a) . (r_c - r_p - A_p s)
            jc_sf[crd[0]] = bld.sf(G.SF_BIL, [bld.op(vec_terms(pb, a)), d_op])
        # rotation about a single axis: the axis stays parallel, angle of C^T n1 about it
        if j.type in ("revolute", "cylindrical"):
            if not planar:
                ca = bld.op(vec_terms(b, C.T @ a))
                for n in (n1, n2):
                    add_phi(bld.sf(G.SF_BIL, [ca, bld.op(vec_terms(pb, n))]), j.name)
            jc_sf[crd[-1]] = angle_sf(n1, n1, n1, n2)
        if j.type in ("prismatic", "fixed"):
            pairs = [(0, 1)] if planar else [(0, 1), (0, 2), (1, 2)]
            for k, l in pairs:
                add_phi(bld.sf(G.SF_BIL, [bld.op(vec_terms(b, C.T @ eye[k])),
                                          bld.op(vec_terms(pb, eye[l]))]), j.name)
        if j.type == "universal":
            # A_c = A_p Rot(a1, th1) Rot(a2, th2) C; a2 (second frame axis) is fixed in the
            # cross piece, so (A_p a1) . (A_c C^T a2) = a1 . a2
            a2 = np.asarray(ma.fr_axis[chain[1]], dtype=float)
            cc = float(a @ a2)
            if abs(abs(cc) - 1.0) < 1e-6:
                raise ModelError(f"{where}: universal joint with parallel axes")
            add_phi(bld.sf(G.SF_BIL, [bld.op(vec_terms(pb, a)),
                                      bld.op(vec_terms(b, C.T @ a2))], K=cc), j.name)
            # th1: angle of the image of a2 about a1 (reference: the part of a2 normal to a1)
            u1 = a2 - cc * a
            u1 /= np.linalg.norm(u1)
            jc_sf[crd[0]] = bld.sf(G.SF_ANGLE, [
                bld.op(vec_terms(b, C.T @ a2)), bld.op(vec_terms(pb, u1)),
                bld.op(vec_terms(b, C.T @ a2)), bld.op(vec_terms(pb, np.cross(a, u1)))])
            # th2: angle about a2 of the part m1 of a1 normal to a2, seen from A_p a1 (a1 is
            # fixed in the cross piece): x = s cos th2, y = s sin th2, s = |a1 x a2|
            m1 = a - cc * a2
            m1 /= np.linalg.norm(m1)
            m2 = np.cross(m1, a2)
            pa = bld.op(vec_terms(pb, a))
            jc_sf[crd[1]] = bld.sf(G.SF_ANGLE, [bld.op(vec_terms(b, C.T @ m1)), pa,
                                                bld.op(vec_terms(b, C.T @ m2)), pa])
        if j.type in ("spherical", "floating") and not planar:
            # z-y-x angles of R = A_p^T A_c C^T = Rz Ry Rx (model.py)
            r0 = 3 if j.type == "floating" else 0
            jc_sf[crd[r0]] = bld.sf(G.SF_ANGLE, rel_rot(0, 0) + rel_rot(1, 0))
            jc_sf[crd[r0 + 1]] = bld.sf(G.SF_ASIN, rel_rot(2, 0, -1.0))
            jc_sf[crd[r0 + 2]] = bld.sf(G.SF_ANGLE, rel_rot(2, 2) + rel_rot(2, 1))
        if j.type == "floating" and not planar:
            for k in range(3):
                jc_sf[crd[k]] = bld.sf(G.SF_BIL, [bld.op(vec_terms(pb, eye[k])), d_op])
    # ---- primitive constraints of the compiled model (cuts, distances, drives)
    for k in range(ma.c_type.shape[0]):
        typ = int(ma.c_type[k])
        ci = ma.c_i[k]
        nm = cm.constraint_names[k]
        if typ == AR.C_PTCOMP:
            o = bld.op(point_terms(ci[0]) + point_terms(ci[1], -1.0))
            add_phi(bld.sf(G.SF_BIL, [o, const_op[int(ci[2])]]), nm)
        elif typ == AR.C_DOTVV:
            add_phi(bld.sf(G.SF_BIL, [bld.op(vec_terms(ma.vc_body[ci[0]], ma.vc_val[ci[0]])),
                                      bld.op(vec_terms(ma.vc_body[ci[1]], ma.vc_val[ci[1]]))]),
                    nm)
        elif typ == AR.C_DOTVP:
            o = bld.op(point_terms(ci[2]) + point_terms(ci[1], -1.0))
            add_phi(bld.sf(G.SF_BIL, [bld.op(vec_terms(ma.vc_body[ci[0]], ma.vc_val[ci[0]])),
                                      o]), nm)
        elif typ == AR.C_DIST:
            o = bld.op(point_terms(ci[1]) + point_terms(ci[0], -1.0))
            add_phi(bld.sf(G.SF_BIL, [o, o], fK=int(ma.c_fld[k])), nm)
        elif typ == AR.C_DRIVE:
            s = jc_sf[int(ci[0])]
            if s < 0:
                raise ModelError(f"drive {nm!r}: the global formulation of a planar model "
                                 "drives revolute or prismatic coordinates only, not "
                                 f"{cm.coord_names[ci[0]]!r}")
            kind, ops, K_, fK, _ = bld.sfs[s]
            add_phi(bld.sf(kind, ops, K_, fK, int(ci[1])), nm)
        elif typ == AR.C_CAM:
            # z_a - s(z_b) would compose two joint-coordinate functions through the cam
            # profile: a scalar-function kind the natural kernels do not have
            raise ModelError(f"cam relation {nm!r}: the global formulation does not support "
                             "cam relations (a closure between two joint coordinates); use "
                             "sr-com, sr-origin or multipliers")
    # ---- degrees of freedom (same independent coordinates as the semi-recursive model)
    dof = []
    for k in range(ma.dof_type.shape[0]):
        if ma.dof_type[k] == AR.DOF_COORD:
            s = jc_sf[int(ma.dof_i[k, 0])]
            if s < 0:
                raise ModelError(f"degree of freedom {cm.dof_names[k]!r}: the global "
                                 "formulation of a planar model supports revolute/prismatic "
                                 "coordinates or point coordinates as DOF")
            dof.append(s)
        else:
            c = int(ma.dof_i[k, 1])
            if c >= D:
                raise ModelError(f"degree of freedom {cm.dof_names[k]!r}: z component in a "
                                 "planar model")
            dof.append(bld.sf(G.SF_BIL, [pt_op[int(ma.dof_i[k, 0])], const_op[c]]))
    for s in range(ma.js_coord.shape[0]):
        if jc_sf[int(ma.js_coord[s])] < 0:
            raise ModelError(f"joint spring {s}: the global formulation of a planar model "
                             "supports joint springs on revolute/prismatic coordinates only")
    T = bld.terms
    ga = GlobalArrays(
        D=D, nqb=nqb, nq=nb * nqb, nb=nb,
        op_ptr=np.array(bld.ops, dtype=np.int64),
        tm_body=np.array([x[0] for x in T], dtype=np.int64),
        tm_org=np.array([x[1] for x in T], dtype=float),
        tm_c=np.array([x[2] for x in T], dtype=float).reshape(len(T), 3),
        tm_f1=np.array([x[3] for x in T], dtype=np.int64),
        tm_f2=np.array([x[4] for x in T], dtype=np.int64),
        tm_sign=np.array([x[5] for x in T], dtype=float),
        sf_kind=np.array([s[0] for s in bld.sfs], dtype=np.int64),
        sf_op=np.array([s[1] for s in bld.sfs], dtype=np.int64).reshape(len(bld.sfs), 4),
        sf_K=np.array([s[2] for s in bld.sfs], dtype=float),
        sf_fK=np.array([s[3] for s in bld.sfs], dtype=np.int64),
        sf_tf=np.array([s[4] for s in bld.sfs], dtype=np.int64),
        phi_sf=np.array(phi, dtype=np.int64), dof_sf=np.array(dof, dtype=np.int64),
        jc_sf=jc_sf, pt_op=pt_op,
        rperm=np.arange(len(phi) + len(dof), dtype=np.int64),
        cperm=np.arange(nb * nqb, dtype=np.int64), **no_symbolic())
    ga = _as_struct(ga)
    # ---- initial natural coordinates from the model's relative-coordinate guess
    nf = ma.fr_parent.shape[0]
    A = np.zeros((nf, 3, 3))
    r = np.zeros((nf, 3))
    u = np.zeros((nf, 3))
    K.frame_positions(ma, p, cm.z_guess, A, r, u)
    q0 = np.zeros(ga.nq)
    for b in range(nb):
        f = ma.b_frame[b]
        if planar and abs(A[f, 2, 2] - 1.0) > 1e-9:
            raise ModelError(f"body {cm.body_names[b]!r}: planar model whose body frame is "
                             "not aligned with z (global formulation)")
        q0[b * nqb:b * nqb + D] = r[f, :D]
        for k in range(D):
            q0[b * nqb + (1 + k) * D:b * nqb + (2 + k) * D] = A[f, :D, k]
    aref0 = np.zeros(len(bld.sfs))
    for c in range(cm.n):
        if jc_sf[c] >= 0:
            aref0[jc_sf[c]] = cm.z_guess[c]
    for s, (kind, ops, K_, fK, tf) in enumerate(bld.sfs):
        if kind == G.SF_ANGLE and tf >= 0:
            base = [k for k in range(len(bld.sfs)) if bld.sfs[k][1] == ops and bld.sfs[k][4] < 0]
            if base:
                aref0[s] = aref0[base[0]]
    ga = profile_ordering(ga, ma, p, q0, aref0)
    return ga, q0, aref0, tuple(names)


def _qr_profile_cost(P):
    """Symbolic cost ``sum_k (n - k) (hi_k - k + 1)`` of the Householder QR of
    :func:`workbench.formulations.natural.kernels.sqr_factor` on a boolean pattern ``P`` (mr x n,
    already permuted):
    the reflector of column ``k`` spans rows ``k..hi_k`` and merges their structures."""
    mr, n = P.shape
    rows = [int("".join("1" if x else "0" for x in P[i][::-1]), 2) for i in range(mr)]
    cost = 0
    for k in range(n):
        bit = 1 << k
        hk = k
        for i in range(mr - 1, k, -1):
            if rows[i] & bit:
                hk = i
                break
        union = 0
        for i in range(k, hk + 1):
            union |= rows[i]
        union &= ~((1 << (k + 1)) - 1)          # columns > k
        for i in range(k + 1, hk + 1):
            rows[i] = union
        rows[k] |= union
        cost += (n - k) * (hk - k + 1)
    return cost


def profile_ordering(ga, ma, p, q0, aref0):
    """Row and column permutations of ``Theta_q`` for the sparse QR
    (:func:`workbench.formulations.natural.kernels.sqr_factor`): columns in reverse Cuthill-McKee
    order of the pattern of
    ``Theta_q^T Theta_q`` (or the natural order when that is not cheaper), rows sorted by
    their leading column.  The pattern is structural: the union over random perturbations
    of the initial coordinates (entries that vanish only at a special configuration count).
    """
    import scipy.sparse as sp
    from scipy.sparse.csgraph import reverse_cuthill_mckee
    ws = G.make_ws(ga)
    Th, sc = ws.Th, ws.sc
    rng = np.random.default_rng(12345)
    P = np.zeros(Th.shape, dtype=bool)
    for _ in range(3):
        G.theta_jacobian(ga, p, q0 + 0.1 * rng.standard_normal(q0.shape[0]), aref0.copy(), sc,
                         Th)
        P |= Th != 0.0
    mr, n = P.shape
    if mr == 0 or n == 0:
        return ga

    def rows_sorted(cp):
        Pc = P[:, cp]
        lead = np.where(Pc.any(axis=1), Pc.argmax(axis=1), n)
        last = np.where(Pc.any(axis=1), n - 1 - Pc[:, ::-1].argmax(axis=1), n)
        return np.lexsort((last, lead))

    best = None
    AtA = sp.csr_matrix(P.T.astype(float) @ P.astype(float))
    for cp in (np.arange(n), np.asarray(reverse_cuthill_mckee(AtA, symmetric_mode=True))):
        cp = cp.astype(np.int64)
        rp = rows_sorted(cp).astype(np.int64)
        cost = _qr_profile_cost(P[rp][:, cp])
        if best is None or cost < best[0]:
            best = (cost, rp, cp)
    sq = symbolic_qr(P, [best[2]])
    Th0 = Th.copy()
    G.theta_jacobian(ga, p, q0, aref0.copy(), sc, Th0)
    lu = (symbolic_lu(P, sq["sq_rperm"], sq["sq_cperm"], Th0, sq["sq_gptr"], sq["sq_grow"])
          if sq["sq_cperm"].shape[0] == n else no_lu())
    return ga._replace(rperm=best[1], cperm=best[2], **{**sq, **lu})


def no_symbolic() -> dict:
    """The symbolic-analysis fields of :class:`GlobalArrays` left empty:
    :func:`workbench.formulations.natural.kernels.sqr_factor` then runs its generic (profile)
    loop on ``rperm``/``cperm``."""
    e = np.zeros(0, dtype=np.int64)
    one = np.zeros(1, dtype=np.int64)
    return dict(sq_ptr=one, sq_cols=e, sq_vptr=one, sq_vrows=e,
                sq_mask=np.zeros((0, 0), dtype=np.uint8), sq_rperm=e, sq_cperm=e,
                sq_gptr=one, sq_grow=e, sq_gsrc=e, sq_zptr=one, sq_zrow=e, **no_lu())


def no_lu() -> dict:
    """The static-pivot LU fields of :class:`GlobalArrays` left empty (no LU: the sparse QR
    alone; :func:`symbolic_lu`)."""
    e = np.zeros(0, dtype=np.int64)
    one = np.zeros(1, dtype=np.int64)
    return dict(lu_rowp=e, lu_colp=e, lu_uptr=one, lu_ucol=e, lu_lptr=one, lu_lrow=e,
                lu_pptr=one, lu_upd=e, lu_gdst=e)


def _lu_fill(B):
    """Symbolic LU without pivoting of the square boolean pattern ``B`` (already in pivot
    order): per column ``k`` the rows ``i > k`` of ``L`` and per row ``k`` the columns
    ``j > k`` of ``U`` (ascending), and the multiply-add count ``sum_k |L_k| |U_k|``."""
    B = B.copy()
    n = B.shape[0]
    lrows, ucols, flops = [], [], 0
    for k in range(n):
        li = np.nonzero(B[k + 1:, k])[0] + k + 1
        uj = np.nonzero(B[k, k + 1:])[0] + k + 1
        if li.size and uj.size:
            B[np.ix_(li, uj)] = True
        lrows.append(li)
        ucols.append(uj)
        flops += li.size * uj.size
    return lrows, ucols, flops


def symbolic_lu(P, rp, cp, Th0, gptr, grow):
    """Static-pivot sparse LU of a square ``Theta_q`` (issue 29 item 3), analysed once per
    model beside the QR's analysis (:func:`symbolic_qr`, whose row and column orders ``rp``,
    ``cp`` and gather lists ``gptr``, ``grow`` it reads): SuperLU's partial pivoting on
    ``Theta_q`` at the initial coordinates (``Th0``, the structural zeros of the pattern
    ``P`` filled with small values so that the analysis sees the whole pattern) chooses the
    row and column orders (the cheapest by multiply-adds of ``MMD_ATA``, ``COLAMD`` and
    ``MMD_AT_PLUS_A``); the fill of the pattern in that fixed order gives ``L`` (by columns,
    ``lu_lrow[lu_lptr[k]:lu_lptr[k + 1]]``) and ``U`` (by rows, diagonal first,
    ``lu_ucol[lu_uptr[k]:lu_uptr[k + 1]]``).  Values: ``F = [U entries | L entries]``;
    ``lu_upd[lu_pptr[k] + a (|U_k| - 1) + b]`` is the position in ``F`` of the entry
    ``(L row a of column k, U column b + 1 of row k)`` that pivot ``k`` updates;
    ``lu_gdst[c]`` the position in ``F`` of the ``c``-th gathered entry of the QR's working
    columns (:data:`workbench.formulations.natural.kernels.NaturalWorkspace`); row ``i`` of
    the pivot order is row ``lu_rowp[i]`` of ``Theta_q``, column ``j`` its column
    ``lu_colp[j]``.  The numeric phase
    (:func:`workbench.formulations.natural.kernels.prog_factor`) checks every pivot against
    its column and falls back to the QR when one fails, so the orders only decide the
    speed.  Empty fields (:func:`no_lu`) for a non-square matrix or a failed analysis."""
    import scipy.sparse as sp
    import scipy.sparse.linalg as spl
    mr, n = P.shape
    if mr != n or n == 0 or cp.shape[0] != n:
        return no_lu()
    Pp = P[rp][:, cp]
    A0 = np.asarray(Th0, dtype=float)[rp][:, cp]
    big = max(float(np.max(np.abs(A0))), 1.0)
    A0 = np.where(Pp & (A0 == 0.0), 1e-6 * big, A0)
    best = None
    for spec in ("MMD_ATA", "COLAMD", "MMD_AT_PLUS_A"):
        try:
            lu = spl.splu(sp.csc_matrix(A0), permc_spec=spec, diag_pivot_thresh=1.0)
        except RuntimeError:                 # singular at q0: keep the others
            continue
        lr = np.argsort(lu.perm_r).astype(np.int64)
        lc = np.argsort(lu.perm_c).astype(np.int64)
        lrows, ucols, flops = _lu_fill(Pp[lr][:, lc])
        if best is None or flops < best[0]:
            best = (flops, lr, lc, lrows, ucols)
    if best is None:
        return no_lu()
    _, lr, lc, lrows, ucols = best
    uptr, ucol = [0], []
    for k in range(n):
        ucol.append(k)
        ucol.extend(ucols[k].tolist())
        uptr.append(len(ucol))
    nU = len(ucol)
    lptr, lrow = [0], []
    for k in range(n):
        lrow.extend(lrows[k].tolist())
        lptr.append(len(lrow))
    pos = {}
    for k in range(n):
        for c in range(uptr[k], uptr[k + 1]):
            pos[(k, ucol[c])] = c
        for c in range(lptr[k], lptr[k + 1]):
            pos[(lrow[c], k)] = nU + c
    pptr, upd = [0], []
    for k in range(n):
        for i in lrows[k]:
            for j in ucols[k]:
                upd.append(pos[(int(i), int(j))])
        pptr.append(len(upd))
    il = np.argsort(lr)                      # row position (QR order) -> LU pivot order
    jl = np.argsort(lc)
    gdst = []
    for j in range(n):
        for c in range(gptr[j], gptr[j + 1]):
            gdst.append(pos[(int(il[grow[c]]), int(jl[j]))])
    return dict(lu_rowp=np.asarray(rp[lr], dtype=np.int64),
                lu_colp=np.asarray(cp[lc], dtype=np.int64),
                lu_uptr=np.array(uptr, dtype=np.int64), lu_ucol=np.array(ucol, dtype=np.int64),
                lu_lptr=np.array(lptr, dtype=np.int64), lu_lrow=np.array(lrow, dtype=np.int64),
                lu_pptr=np.array(pptr, dtype=np.int64), lu_upd=np.array(upd, dtype=np.int64),
                lu_gdst=np.array(gdst, dtype=np.int64))


def _row_merge(P, cp):
    """Symbolic sparse Householder QR (row-merge) of the pattern ``P`` (mr x n, boolean) with
    the column order ``cp``: for each column ``k`` (in that order) the rows not yet used as
    pivots that are structurally non-zero in it form the reflector's support; the first
    becomes the pivot row of ``k`` and every row of the support takes the union of their
    patterns (columns > k for the others).  Returns ``(cost, rows, supports, unions)``
    (``rows``: the original row indices in pivot order, then the unused rows; ``supports``
    and ``unions``: per column, original row indices and column positions), or ``None``
    when a column has an empty support (structurally rank deficient)."""
    Pc = P[:, cp]
    mr, n = Pc.shape
    pat = [set(np.nonzero(Pc[i])[0].tolist()) for i in range(mr)]
    incol = [set() for _ in range(n)]
    for i in range(mr):
        for j in pat[i]:
            incol[j].add(i)
    used = np.zeros(mr, dtype=bool)
    order, supports, unions = [], [], []
    cost = 0
    for k in range(n):
        S = sorted(i for i in incol[k] if not used[i])
        if not S:
            return None
        u = set()
        for i in S:
            u |= pat[i]
        u = {j for j in u if j >= k}
        piv = S[0]
        used[piv] = True
        order.append(piv)
        rest = {j for j in u if j > k}
        for i in S:
            for j in pat[i]:
                incol[j].discard(i)
            pat[i] = set(u) if i == piv else set(rest)
            for j in pat[i]:
                if j > k or i == piv:
                    incol[j].add(i)
        supports.append(S)
        unions.append(sorted(u))
        cost += len(S) * len(u)
    order += [i for i in range(mr) if not used[i]]
    return cost, order, supports, unions


def symbolic_qr(P, cands) -> dict:
    """Symbolic analysis of the sparse Householder QR of ``Theta_q`` done once per model
    (the analysis phase of a sparse direct solver; the numeric phase is
    :func:`workbench.formulations.natural.kernels.sqr_factor`): a fill-reducing column order
    (the cheapest of ``cands`` and of the minimum-degree orderings of ``Theta_q^T Theta_q``
    of SuperLU, ``MMD_ATA`` and ``COLAMD``, by the symbolic flop count), the row order that
    puts the pivot row of column ``k`` at position ``k``, and per column the rows of its
    reflector (``sq_vrows[sq_vptr[k]:sq_vptr[k + 1]]``, positions in that row order, ``k``
    first) and the columns it can change (``sq_cols[sq_ptr[k]:sq_ptr[k + 1]]``, ascending,
    ``k`` first: also the pattern of row ``k`` of ``R``); ``sq_mask`` (n x mr) is the pattern
    in the kernel's column-major layout, against which every factorisation checks the
    numeric matrix (an entry outside it sends that factorisation to the generic loop)."""
    import scipy.sparse as sp
    import scipy.sparse.linalg as spl
    P = np.asarray(P, dtype=bool)
    mr, n = P.shape
    if mr < n or n == 0:
        return no_symbolic()
    cands = [np.asarray(c, dtype=np.int64) for c in cands]
    if mr == n:
        rng = np.random.default_rng(7)
        A = sp.csc_matrix(np.where(P, 1.0 + rng.random(P.shape), 0.0))
        for spec in ("MMD_ATA", "COLAMD"):
            try:
                cands.append(np.argsort(spl.splu(A, permc_spec=spec).perm_c).astype(np.int64))
            except RuntimeError:            # structurally singular: keep the others
                pass
    best = None
    for cp in cands:
        r = _row_merge(P, cp)
        if r is not None and (best is None or r[0] < best[0][0]):
            best = (r, cp)
    if best is None:
        return no_symbolic()
    (cost, order, supports, unions), cp = best
    pos = np.empty(mr, dtype=np.int64)
    pos[np.array(order, dtype=np.int64)] = np.arange(mr)
    vptr, vrows, ptr, cols = [0], [], [0], []
    for k in range(n):
        vrows.extend(sorted(int(pos[i]) for i in supports[k]))
        vptr.append(len(vrows))
        cols.extend(unions[k])
        ptr.append(len(cols))
    rp = np.array(order, dtype=np.int64)
    Pp = P[rp][:, cp]
    # gather lists: per column j the rows of the pattern and their flat index in Theta_q,
    # and every row of W[j] that can be non-zero at some stage (zeroed before the gather)
    gptr, grow, gsrc = [0], [], []
    wpat = [set(np.nonzero(Pp[:, j])[0].tolist()) for j in range(n)]
    for k in range(n):
        sup = vrows[vptr[k]:vptr[k + 1]]
        for j in cols[ptr[k]:ptr[k + 1]]:
            wpat[j].update(sup)
    zptr, zrow = [0], []
    for j in range(n):
        rows_j = np.nonzero(Pp[:, j])[0]
        grow.extend(rows_j.tolist())
        gsrc.extend((rp[rows_j] * n + cp[j]).tolist())
        gptr.append(len(grow))
        zrow.extend(sorted(wpat[j]))
        zptr.append(len(zrow))
    return dict(sq_ptr=np.array(ptr, dtype=np.int64), sq_cols=np.array(cols, dtype=np.int64),
                sq_vptr=np.array(vptr, dtype=np.int64), sq_vrows=np.array(vrows, dtype=np.int64),
                sq_mask=np.ascontiguousarray(P[rp][:, cp].T).astype(np.uint8),
                sq_rperm=rp, sq_cperm=np.asarray(cp, dtype=np.int64),
                sq_gptr=np.array(gptr, dtype=np.int64), sq_grow=np.array(grow, dtype=np.int64),
                sq_gsrc=np.array(gsrc, dtype=np.int64), sq_zptr=np.array(zptr, dtype=np.int64),
                sq_zrow=np.array(zrow, dtype=np.int64))


#: attribute of a CompiledModel instance that keeps its :func:`build_global` (made on first
#: use).  Kept on the instance, not in a module-level table: it lives and dies with the
#: compiled model (nothing accumulates over the designs of an optimisation, and no entry
#: can outlive its model and be found again under a recycled ``id``), and a copy made by
#: ``dataclasses.replace`` (whose fields, e.g. ``z_guess``, may differ) starts without one.
GLOBAL_ATTR = "_natural_global"


def global_model(cm):
    """:func:`build_global` of a compiled model, built once per instance and kept on it."""
    store = getattr(cm, "__dict__", None)        # None: an instance without a __dict__
    hit = None if store is None else store.get(GLOBAL_ATTR)
    if hit is None:
        hit = build_global(cm)
        if store is not None:
            object.__setattr__(cm, GLOBAL_ATTR, hit)  # CompiledModel is frozen
    return hit


