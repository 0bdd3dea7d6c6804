"""Coordinate partitioning in natural coordinates (seed 000 eqs 2-8): ``"global-partitioned"``.

The global formulation (:mod:`workbench.formulations.natural.kernels`) integrates the
relative degrees of freedom ``z^i`` of the model through the rows ``h(q) - z^i = 0``.
Coordinate partitioning, the seed's baseline, integrates a subset ``q^i`` of the natural
coordinates themselves instead.  The velocity constraints ``Phi_q qd = -Phi_t`` split into
the dependent and independent columns (seed 000 eq 6)

    Phi_qd qd^d + Phi_qi qd^i = -Phi_t,   qd = H qd^i + ...,   H = [-Phi_qd^-1 Phi_qi; I]

(eqs 7-8; H is ``n_q x (n_q - r)``, ``r = rank Phi_q``: the seed's ``3 n_b x n_c`` is an OCR
slip, notes seeds-000-002 §1.3).  Here the selection rows ``q_k - z^i_k = 0`` take the place
of ``h(q) - z^i``: ``B = h_q = E^i`` (rows of the identity), constant, with zero tangents, so
``Theta_q = [Phi_q; E^i]`` and the projection ``R`` of the natural-coordinate kernels IS the
``H`` of eq 8 (up to the column order), and the loop, the step Jacobians and the sweeps of
the natural family serve unchanged (:func:`partition_arrays`).

Selection (:func:`select_columns`): Gaussian elimination with column pivoting of ``Phi_q``
at the assembled configuration (the seed's "Gaussian elimination with column pivoting",
[38]): row by row, the coordinate with the largest reduced coefficient becomes dependent;
a row whose reduced coefficients all fall below :data:`REDUNDANT_RTOL` times the largest
entry of ``Phi_q`` is a redundant constraint (the Bricard linkage).  The other ``n_q - r``
coordinates are independent.  The arithmetic is that of LAPACK ``getf2`` on ``Phi_q^T``
(first maximum on ties), i.e. the choice of ``scipy.linalg.lu(Phi_q.T)``.

Re-selection: every converged step the integrator reads the indicator
``kappa = min_k |R_kk| / |R_kk|_0`` of the Householder QR ``Theta_q = Q R`` that the step
has just factorised, each diagonal entry relative to its value right after the last
selection (:func:`r_ratio`; free, and scale-free: ``|det Theta_q| = |det Phi_qd|`` for a
square ``Theta_q``, so the entry of the degrading direction goes to zero with the
dependent block).  When it falls below ``threshold`` (:data:`PARTITION_TOL` unless set
with :func:`partition_threshold`), the coordinates are selected again at the current
consistent state, and the integration continues from it with ``q^i, qd^i, qdd^i`` read
from ``q, qd, qdd`` (:func:`run_partitioned`).  ``threshold = 0`` never re-selects.
"""

from __future__ import annotations

import contextlib
import contextvars
import time

import numpy as np
from numba import njit

from workbench.errors import OptionError, SingularConfigurationError
from workbench.formulations.interface import POS_MAXIT, POS_TOL
from workbench.formulations.natural import kernels as G
from workbench.formulations.natural.build import global_model, no_symbolic
from workbench.formulations.semirecursive import matrixr as MR
from workbench.formulations.status import raise_for_status

#: re-select when the indicator ``kappa`` of :func:`r_ratio` falls below this value (a
#: diagonal entry of the QR factor of ``Theta_q`` 10 % below its value at the last
#: selection: the pivoted elimination is consulted again, and usually keeps its choice
#: until another coordinate has the larger pivot).  Measured (dt = 1e-3, largest error of
#: the relative coordinates against sr-com at dt = 2.5e-4 / secular energy drift) for the
#: thresholds 0.25 / 0.5 / 0.7 / 0.9: slider-crank 5 s 0.63 / 0.19 / 0.23 / 0.076 rad,
#: drift 4.0e-3 / 1.2e-3 / 4.8e-4 / 3.8e-4 J; quick-return 2 s 2.8e-3 / 1.8e-3 / 9.1e-4 /
#: 9.2e-4; pendulum 10 s 4.2e-4 / 2.6e-4 / 1.9e-4 / 1.3e-4; five-bar 5 s 1.2e-4 / 1.2e-4 /
#: 1.5e-4 / 1.3e-4 (sr-com itself at dt = 1e-3: 5.7e-3, 5.0e-4, 2.3e-5, 1.1e-4).
PARTITION_TOL = 0.9
#: a constraint row whose reduced coefficients are all below this fraction of
#: ``max |Phi_q|`` is redundant (:func:`select_columns`)
REDUNDANT_RTOL = 1e-10
#: a body turning more than this (rad per step) is named when a step fails
ROTATION_PER_STEP = 0.1
#: status of :func:`workbench.integrators.trapezoidal.integrate_natural`: stopped for a
#: re-selection after output row ``step`` (not a failure)
ST_REPARTITION = 100

THRESHOLD = contextvars.ContextVar("workbench_partition_threshold", default=PARTITION_TOL)


@contextlib.contextmanager
def partition_threshold(threshold: float):
    """Within the block, ``"global-partitioned"`` runs re-select when a diagonal entry of
    the QR factor of ``Theta_q`` falls below ``threshold`` times its value at the last
    selection (:func:`r_ratio`; 0: never re-select; default :data:`PARTITION_TOL`)."""
    threshold = float(threshold)
    if not (np.isfinite(threshold) and 0.0 <= threshold < 1.0):
        raise OptionError(f"partition threshold {threshold!r} must be in [0, 1)")
    token = THRESHOLD.set(threshold)
    try:
        yield
    finally:
        THRESHOLD.reset(token)


# ----------------------------------------------------------------------------------------
# kernels
# ----------------------------------------------------------------------------------------


@njit(cache=True)
def select_columns(Phq, rtol, dep, piv):
    """Gaussian elimination with column pivoting of ``Phi_q`` (m x n; seed 000 §2.2, eqs
    6-8): for each constraint row ``i`` in turn, the not yet chosen coordinate with the
    largest reduced coefficient ``|A_ij|`` (the first one on ties, in the order of the
    interchanges) becomes dependent (``dep[i] = j``, ``piv[i] = |A_ij|``) and is
    eliminated from the later rows; a row whose reduced coefficients are all
    ``<= rtol max |Phi_q|`` is redundant (``dep[i] = -1``).  Operations in the order of
    LAPACK ``getf2`` on ``Phi_q^T`` (multipliers by the reciprocal pivot, rank-one
    update).  Returns ``perm``: the coordinates, dependent ones first (in the order of
    their rows), then the independent ones."""
    m, n = Phq.shape
    A = Phq.copy()
    perm = np.arange(n)
    scale = 0.0
    for i in range(m):
        for j in range(n):
            scale = max(scale, abs(A[i, j]))
    r = 0
    for i in range(m):
        dep[i] = -1
        piv[i] = 0.0
        best = r
        amax = abs(A[i, perm[r]]) if r < n else 0.0
        for s in range(r + 1, n):
            v = abs(A[i, perm[s]])
            if v > amax:
                amax = v
                best = s
        if r >= n or amax <= rtol * scale:
            continue
        jp = perm[best]
        perm[best] = perm[r]
        perm[r] = jp
        dep[i] = jp
        piv[i] = amax
        inv = 1.0 / A[i, jp]
        for s in range(r + 1, n):
            j = perm[s]
            lj = A[i, j] * inv
            if lj != 0.0:
                for k in range(i + 1, m):
                    A[k, j] -= lj * A[k, jp]
        r += 1
    return perm


@njit(cache=True)
def r_ratio(Rm, Rd0):
    """``min_k |R_kk| / Rd0_k``: the indicator of a degrading dependent block, from the
    triangular factor of ``Theta_q = [Phi_q; E^i]`` left by
    :func:`workbench.formulations.natural.kernels.sqr_factor` and the moduli ``Rd0`` of its
    diagonal right after the selection (fills ``Rd0`` and returns 1 when ``Rd0[0] < 0``).
    ``|R_kk|`` is the distance of column ``k`` from the span of the columns before it
    (``>= sigma_min``), and ``prod |R_kk| = |det Phi_qd|`` for a square ``Theta_q``: the
    entry that belongs to the degrading direction goes to zero with the dependent block,
    whatever the scale of the others."""
    n = Rm.shape[0]
    if n > 0 and Rd0[0] < 0.0:
        for k in range(n):
            Rd0[k] = abs(Rm[k, k])
        return 1.0
    lo = 1.0
    for k in range(n):
        if Rd0[k] > 0.0:
            lo = min(lo, abs(Rm[k, k]) / Rd0[k])
    return lo


@njit(cache=True)
def constraint_jacobian(ga, p, q, aref):
    """``Phi_q`` (m x n) of the natural-coordinate constraints at ``q``."""
    ws = G.make_ws(ga)
    G.theta_jacobian(ga, p, q, aref, ws.sc, ws.Th)
    return ws.Th[:ga.phi_sf.shape[0]].copy()


@njit(cache=True)
def state_at(ga, ma, p, t, q, zdi, a, aref):
    """``(status, qd, qdd)`` at a converged position ``q`` of the loop with arrays ``ga``:
    the velocity problem for ``zd^i`` and ``qdd = qdd_b + R a`` (eqs 19, 21)."""
    N = q.shape[0]
    ws = G.make_ws(ga)
    qd = np.zeros(N)
    qddb = np.zeros(N)
    R = np.zeros((N, zdi.shape[0]))
    st, bad = G.solve_va(ga, ma, p, t, zdi, q, qd, qddb, R, aref, ws)
    return st, qd, qddb + R @ a


@njit(cache=True)
def assemble(ga, ma, p, t, zi, zdi, q, aref, pos_tol, pos_maxit):
    """The consistent position and velocity of the global formulation's degrees of freedom
    (``h(q) = z^i``, ``h_q qd = zd^i``) from the guess ``q``: ``(status, bad, err, qd)``."""
    ws = G.make_ws(ga)
    st, it, err, bad = G.solve_position(ga, ma, p, t, zi, q, aref, ws, pos_tol, pos_maxit,
                                        False)
    qd = np.zeros(q.shape[0])
    if st != MR.OK:
        return st, bad, err, qd
    qddb = np.zeros(q.shape[0])
    R = np.zeros((q.shape[0], zi.shape[0]))
    st, bad = G.solve_va(ga, ma, p, t, zdi, q, qd, qddb, R, aref, ws)
    return st, bad, err, qd


@njit(cache=True)
def initial_tangents(ga, ma, p, t, zdi, q, aref, Gm, SZ0, SV0, sel, SZ, SV):
    """``SZ = dq^i(t0)/drho``, ``SV = dqd^i(t0)/drho`` (``q^i = q[sel]``) of a start
    given by the global formulation's degrees of freedom ``z^i_0, zd^i_0`` (arrays ``ga``)
    with their tangents ``SZ0, SV0``: the position and velocity levels of the tangent of
    ``Theta = [Phi; h(q) - z^i]`` (seed 001 eqs 32a-b, 37a-b, as in
    :func:`workbench.formulations.natural.step_jacobians.step_jacobians_g`),
    ``Theta_q dq = [-Phi_rho; dz^i - h_rho]``, ``Theta_q dqd = -(dTheta_q) qd + [0; dzd^i]``.
    Returns a status code."""
    N = q.shape[0]
    m = ga.phi_sf.shape[0]
    d = zdi.shape[0]
    ws = G.make_ws(ga)
    qd = np.zeros(N)
    qddb = np.zeros(N)
    R = np.zeros((N, d))
    st, bad = G.solve_va(ga, ma, p, t, zdi, q, qd, qddb, R, aref, ws)
    if st != MR.OK:
        return st
    nop = ga.op_ptr.shape[0] - 1
    OB = np.zeros((nop, 3, 3))
    OD = np.zeros((nop, 3, 3))
    G.operand_base(ga, p, q, qd, qddb, OB)
    zero = np.zeros(N)
    tmp3 = np.zeros(3)
    tg = np.zeros(m + d)
    rhs = np.zeros(m + d)
    dq = np.zeros(N)
    dqd = np.zeros(N)
    for j in range(Gm.shape[1]):
        dp = np.ascontiguousarray(Gm[:, j])
        G.operand_dir(ga, p, zero, q, dp, True, True, OD, 0, tmp3)
        G.operand_dir(ga, p, zero, qd, dp, True, False, OD, 1, tmp3)
        G.theta_tangents(ga, p, dp, True, OB, OD, 0, tg)
        G.drive_tangents(ga, ma, p, dp, t, 0, tg)
        for k in range(m + d):
            rhs[k] = -tg[k]
        for k in range(d):
            rhs[m + k] += SZ0[k, j]
        G.sqr_solve(ga, ws, rhs, dq)
        G.operand_dir(ga, p, dq, q, dp, True, True, OD, 0, tmp3)
        G.theta_tangents(ga, p, dp, True, OB, OD, 1, tg)
        G.drive_tangents(ga, ma, p, dp, t, 1, tg)
        for k in range(m + d):
            rhs[k] = -tg[k]
        for k in range(d):
            rhs[m + k] += SV0[k, j]
        G.sqr_solve(ga, ws, rhs, dqd)
        for k in range(sel.shape[0]):
            SZ[k, j] = dq[sel[k]]
            SV[k, j] = dqd[sel[k]]
    return MR.OK


# ----------------------------------------------------------------------------------------
# arrays of a partition
# ----------------------------------------------------------------------------------------


def coordinate_names(cm) -> tuple:
    """Names of the natural coordinates, ``"body.r_x"``, ``"body.e1_y"``, ... (frame origin
    ``r`` and frame unit vectors ``e_k`` of each body)."""
    ga = global_model(cm)[0]
    D, nqb = int(ga.D), int(ga.nqb)
    return tuple(f"{cm.body_names[i // nqb]}."
                 f"{('r' if i % nqb < D else f'e{(i % nqb) // D}')}_{'xyz'[i % D]}"
                 for i in range(int(ga.nq)))


#: attribute of a CompiledModel instance that keeps the partition arrays (see
#: :data:`workbench.formulations.natural.build.GLOBAL_ATTR` for why on the instance)
PARTITION_ATTR = "_natural_partitions"


def _store(cm) -> dict:
    store = getattr(cm, "__dict__", None)
    hit = None if store is None else store.get(PARTITION_ATTR)
    if hit is None:
        hit = {}
        if store is not None:
            object.__setattr__(cm, PARTITION_ATTR, hit)      # CompiledModel is frozen
    return hit


def selection_base(cm):
    """``(ga, nsf0)``: the global arrays of ``cm`` with one scalar function ``q_k`` per
    natural coordinate appended (``e_c . r_b`` or ``e_c . e_k`` of its body: bilinear, so
    every jet and tangent kernel serves it, with ``h_q = e_k^T`` and zero tangents), and the
    number of scalar functions before them (selection function of coordinate ``k``:
    ``nsf0 + k``)."""
    store = _store(cm)
    if "base" not in store:
        ga, q0, aref0, _ = global_model(cm)
        D, nqb, nq = int(ga.D), int(ga.nqb), int(ga.nq)
        ops = list(ga.op_ptr)
        terms = [list(ga.tm_body), list(ga.tm_org), [tuple(c) for c in ga.tm_c],
                 list(ga.tm_f1), list(ga.tm_f2), list(ga.tm_sign)]

        def add_op(body, org, c):
            for lst, v in zip(terms, (body, org, tuple(c), -1, -1, 1.0)):
                lst.append(v)
            ops.append(ops[-1] + 1)
            return len(ops) - 2

        eye = np.eye(3)
        const = [add_op(-1, 0.0, eye[c]) for c in range(D)]
        nsf0 = int(ga.sf_kind.shape[0])
        sf_op = [list(o) for o in ga.sf_op]
        for k in range(nq):
            b, i = divmod(k, nqb)
            o = add_op(b, 1.0, (0.0, 0.0, 0.0)) if i < D else add_op(b, 0.0, eye[i // D - 1])
            sf_op.append([o, const[i % D], 0, 0])
        # structural pattern of Phi_q (union over perturbed configurations, as in
        # profile_ordering): first and last column of each row in the column order
        ws = G.make_ws(ga)
        rng = np.random.default_rng(12345)
        P = np.zeros(ws.Th.shape, dtype=bool)
        for _ in range(3):
            G.theta_jacobian(ga, cm.arrays.p, q0 + 0.1 * rng.standard_normal(nq),
                             aref0.copy(), ws.sc, ws.Th)
            P |= ws.Th != 0.0
        Pc = P[:ga.phi_sf.shape[0]][:, ga.cperm]
        nz = Pc.any(axis=1)
        span = (np.where(nz, Pc.argmax(axis=1), nq),
                np.where(nz, nq - 1 - Pc[:, ::-1].argmax(axis=1), nq))
        base = ga._replace(
            op_ptr=np.array(ops, dtype=np.int64),
            tm_body=np.array(terms[0], dtype=np.int64), tm_org=np.array(terms[1], dtype=float),
            tm_c=np.array(terms[2], dtype=float).reshape(-1, 3),
            tm_f1=np.array(terms[3], dtype=np.int64), tm_f2=np.array(terms[4], dtype=np.int64),
            tm_sign=np.array(terms[5], dtype=float),
            sf_kind=np.concatenate([ga.sf_kind, np.full(nq, G.SF_BIL, dtype=np.int64)]),
            sf_op=np.array(sf_op, dtype=np.int64).reshape(-1, 4),
            sf_K=np.concatenate([ga.sf_K, np.zeros(nq)]),
            sf_fK=np.concatenate([ga.sf_fK, np.full(nq, -1, dtype=np.int64)]),
            sf_tf=np.concatenate([ga.sf_tf, np.full(nq, -1, dtype=np.int64)]),
            **no_symbolic())
        store["base"] = (base, nsf0, span)
    return store["base"][:2]


def partition_arrays(cm, indep):
    """The natural-coordinate arrays whose degree-of-freedom rows are the selection rows
    ``q_k - z^i_k`` of the independent coordinates ``indep`` (kept per selection).  The
    sparse QR keeps the column order of the global formulation
    (:func:`~workbench.formulations.natural.build.profile_ordering`) and sorts the rows by
    their first and last column in it, the selection row of ``q_k`` at the position of
    column ``k`` (the row order that ordering gives; about 5 us instead of its 50 ms
    search on the buggy, which matters with a re-selection every few steps)."""
    store = _store(cm)
    key = tuple(int(k) for k in indep)
    if key not in store:
        selection_base(cm)
        base, nsf0, (lead, last) = store["base"]
        pos = np.empty(base.cperm.shape[0], dtype=np.int64)
        pos[base.cperm] = np.arange(base.cperm.shape[0])
        sel = pos[np.array(key, dtype=np.int64)]
        rperm = np.lexsort((np.concatenate([last, sel]), np.concatenate([lead, sel])))
        store[key] = base._replace(dof_sf=np.array([nsf0 + k for k in key], dtype=np.int64),
                                   rperm=rperm.astype(np.int64))
    return store[key]


def select(cm, q, aref, t=0.0):
    """The independent natural coordinates at configuration ``q`` (:func:`select_columns`
    on ``Phi_q``), sorted.  SingularConfigurationError when the rank of ``Phi_q`` leaves
    other than ``cm.d`` coordinates free."""
    ga = global_model(cm)[0]
    Phq = constraint_jacobian(ga, cm.arrays.p, q, aref[:ga.sf_kind.shape[0]])
    m = Phq.shape[0]
    dep = np.zeros(m, dtype=np.int64)
    piv = np.zeros(m)
    perm = select_columns(Phq, REDUNDANT_RTOL, dep, piv)
    r = int(np.sum(dep >= 0))
    indep = np.sort(perm[r:])
    if len(indep) != cm.d:
        raise SingularConfigurationError(
            f"model {cm.name!r} (global-partitioned): Phi_q has rank {r} at t = {t:.6g} s, "
            f"which leaves {len(indep)} natural coordinates free, not the model's {cm.d} "
            "degrees of freedom (a singular position)", t, [])
    return indep


# ----------------------------------------------------------------------------------------
# the run
# ----------------------------------------------------------------------------------------


def run_partitioned(cm, t0, dt, nsteps, newton_tol, newton_maxit, loop):
    """Integrate ``nsteps`` steps with coordinate partitioning.

    ``loop``: :func:`workbench.integrators.trapezoidal.integrate_natural`.  The initial
    configuration is assembled from the model's degrees of freedom (as the global
    formulation does), the independent natural coordinates are chosen there
    (:func:`select`), and the loop runs until it ends or stops for a re-selection (status
    :data:`ST_REPARTITION` at a row whose indicator fell below the threshold); it then
    continues from that row with the coordinates chosen there.  Returns ``(status, out,
    segments, changes)``: the loop's last status, the output arrays, ``[(first row,
    independent coordinates)]`` and the re-selections that changed the coordinates
    ``{"time", "step", "from", "to", "indicator"}`` (``indicator``: :func:`r_ratio` at that
    row, relative to the last selection, below the threshold)."""
    start = time.perf_counter()
    ga0, q0, aref0, _ = global_model(cm)
    ma = cm.arrays
    p = ma.p
    tol = THRESHOLD.get()
    q = q0.copy()
    aref = aref0.copy()
    st, bad, err, qd = assemble(ga0, ma, p, float(t0), np.ascontiguousarray(cm.zi0, float),
                                np.ascontiguousarray(cm.zdi0, float), q, aref, POS_TOL,
                                POS_MAXIT)
    ctx = f"model {cm.name!r} (global-partitioned) (initial state)"
    if st == MR.ST_SINGULAR and bad >= 0:
        raise SingularConfigurationError(
            f"{ctx}: the degrees of freedom {list(cm.dof_names)} do not determine the "
            f"initial configuration (natural coordinate {coordinate_names(cm)[bad]})",
            float(t0), [])
    raise_for_status(cm, st, float(t0), err, bad, ctx)
    base, nsf0 = selection_base(cm)
    aref = np.concatenate([aref, np.zeros(base.sf_kind.shape[0] - aref.shape[0])])
    names = coordinate_names(cm)
    n, d, N = cm.n, cm.d, nsteps + 1
    out = dict(T=np.zeros(N), Q=np.zeros((N, ga0.nq)), Z=np.zeros((N, n)),
               ZD=np.zeros((N, n)), ZDD=np.zeros((N, n)), ZI=np.zeros((N, d)),
               ZDI=np.zeros((N, d)), ZDDI=np.zeros((N, d)), viol=np.zeros(N),
               vviol=np.zeros(N), iters=np.zeros(N, dtype=np.int64), energy=np.zeros(N),
               steps=np.zeros((N, 2), dtype=np.int64), AREF=np.zeros((N, aref.shape[0])),
               kappa=np.zeros(N))
    order = ("T", "Q", "Z", "ZD", "ZDD", "ZI", "ZDI", "ZDDI", "viol", "vviol", "iters",
             "energy", "steps", "AREF")
    indep = select(cm, q, aref, float(t0))
    segments, changes = [(0, indep)], []
    k, a = 0, np.zeros(0)
    while True:
        gp = partition_arrays(cm, indep)
        it_k = int(out["iters"][k])
        status = loop(gp, ma, p, float(t0), float(dt), nsteps - k,
                      np.ascontiguousarray(q[indep]), np.ascontiguousarray(qd[indep]), q,
                      aref, newton_tol, newton_maxit,
                      POS_TOL, POS_MAXIT, cm.conservative, *(out[nm][k:] for nm in order),
                      k, a, tol, out["kappa"][k:])
        out["iters"][k] = it_k
        st, step = status[0], status[1]
        if st != ST_REPARTITION:
            out["wall"] = time.perf_counter() - start
            out["note"] = "" if st == MR.OK else rotation_note(cm, gp, out, k + step - 1, dt)
            return (st, k + step, *status[2:]), out, segments, changes
        k += step
        q = out["Q"][k].copy()
        aref = out["AREF"][k].copy()
        t = float(out["T"][k])
        st, qd, qdd = state_at(gp, ma, p, t, q, out["ZDI"][k], out["ZDDI"][k], aref)
        raise_for_status(cm, st, t, 0.0, -1, f"model {cm.name!r} (global-partitioned), "
                         f"re-selection at step {k}")
        new = select(cm, q, aref, t)
        if not np.array_equal(new, indep):
            changes.append({"time": t, "step": k, "from": [names[i] for i in indep],
                            "to": [names[i] for i in new],
                            "indicator": float(out["kappa"][k])})
            segments.append((k, new))
            indep = new
        a = np.ascontiguousarray(qdd[indep])


def rotation_note(cm, gp, out, k, dt) -> str:
    """A note naming the body that turns fastest at output row ``k`` when it turns more
    than :data:`ROTATION_PER_STEP` rad per step (its unit-vector components, candidates
    for independent coordinates, then swing through their extremes within a few steps;
    the wheels of buggy-dlc at 15 ms turn 0.55 rad), else ''."""
    if k < 0:
        return ""
    q, aref = out["Q"][k].copy(), out["AREF"][k].copy()
    st, qd, _ = state_at(gp, cm.arrays, cm.arrays.p, float(out["T"][k]), q, out["ZDI"][k],
                         out["ZDDI"][k], aref)
    if st != MR.OK:
        return ""
    w = [np.linalg.norm([G.angvel_bil(gp, b, c, False, q, qd) for c in range(3)])
         for b in range(int(gp.nb))]
    b = int(np.argmax(w))
    if w[b] * dt <= ROTATION_PER_STEP:
        return ""
    return (f"; body {cm.body_names[b]!r} turns {w[b] * dt:.2g} rad per step: the "
            f"components of its unit vectors swing through their extremes within a few steps, "
            f"reduce the time step below {ROTATION_PER_STEP / w[b]:.2g} s")


# ----------------------------------------------------------------------------------------
# sensitivities
# ----------------------------------------------------------------------------------------


def segment_arrays(cm, sim):
    """``[(first row, end row, arrays)]`` of the partitions of a ``"global-partitioned"``
    result (:func:`partition_arrays` of each selection, as in the run)."""
    segments, _ = sim.partition
    ends = [k for k, _ in segments[1:]] + [len(sim.t)]
    return [(k0, k1, partition_arrays(cm, sel)) for (k0, sel), k1 in zip(segments, ends)]


def sweep_start(cm, sim, Gm, SZ0, SV0):
    """``dq^i(t0)/drho, dqd^i(t0)/drho`` of a ``"global-partitioned"`` result from the
    initial sensitivities ``SZ0, SV0`` of the model's degrees of freedom
    (:func:`initial_tangents` at the initial configuration)."""
    ga = global_model(cm)[0]
    Qh, AREF = sim.natural
    nsf = ga.sf_kind.shape[0]
    sel = np.asarray(sim.partition[0][0][1], dtype=np.int64)
    SZ = np.zeros((len(sel), Gm.shape[1]))
    SV = np.zeros((len(sel), Gm.shape[1]))
    st = initial_tangents(ga, cm.arrays, cm.arrays.p, float(sim.t[0]),
                          np.ascontiguousarray(cm.zdi0, dtype=float), Qh[0].copy(),
                          AREF[0][:nsf].copy(), np.ascontiguousarray(Gm, dtype=float),
                          np.ascontiguousarray(SZ0, dtype=float),
                          np.ascontiguousarray(SV0, dtype=float), sel, SZ, SV)
    raise_for_status(cm, st, float(sim.t[0]), 0.0, -1,
                     f"model {cm.name!r} (global-partitioned), initial sensitivities")
    return SZ, SV
