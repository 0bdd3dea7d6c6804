"""The implicit trapezoidal rule, written once for every formulation (seed 001 §2.3).

Unknown per step: the independent accelerations ``a = zdd^i_{n+1}``;

    z^i_{n+1} = z^i_n + h zd^i_n + h^2/4 (a_n + a),   zd^i_{n+1} = zd^i_n + h/2 (a_n + a)

(:func:`trapezoidal_update`); residual ``r(a)`` of the formulation (semi-recursive:
``R^T tau(z, zd, zdd)``, seed 001 eq 29 in residual form; natural coordinates: ``R^T (M qdd -
Q)``); modified Newton with the iteration matrix ``Mbar + h/2 Cbar + h^2/4 Kbar``
(:func:`iteration_matrix`, formed once per step) and one acceptance test
(:func:`correction_converged`, with the rounding-noise floor :func:`at_noise_floor`).

:func:`integrate_semirecursive` runs the rule on the semi-recursive kernels
(:mod:`workbench.formulations.semirecursive.matrixr`) with step merging next to singular
configurations, sub-stepping, kept states and bit-exact restarts; :func:`integrate_natural`
runs it on the natural-coordinate kernels (:mod:`workbench.formulations.natural.kernels`),
without merging or sub-stepping.  The same step mechanics serve the sensitivity sweeps
(:mod:`workbench.sensitivities.sweeps` uses :func:`iteration_matrix`).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from workbench.formulations.multipliers import kernels as MU
from workbench.formulations.natural import kernels as G
from workbench.formulations.natural import partition as PT
from workbench.formulations.penalty import kernels as PK
from workbench.formulations.semirecursive import matrixr as MR
from workbench.kernels import layout as AR
from workbench.kernels import linalg as LA
from workbench.kernels import tree as K
from workbench.kernels.linalg import (lu_solve_inplace, maxabs, projected_matrix, qr_factor,
                                      qr_solve, sigma_ratio, transpose_times)
from workbench.kernels.status import (OK, ST_MASS, ST_NEAR_SINGULAR, ST_NEWTON, ST_NONFINITE,
                                      ST_POSITION, ST_SINGULAR, ST_ZERO_SPRING)

#: relative size of a Newton correction below which a stagnating residual is accepted as
#: rounding noise (near singular positions the projection amplifies position round-off by
#: 1/sigma); see :func:`at_noise_floor`
NOISE_TOL = 1e-7
#: at most this many equal sub-steps when a step fails (outputs stay at the fixed step)
MAX_SUB = 16
#: at most this many output intervals merged into one step next to a singular node
MAX_SPAN = 4
#: the Newton iterates of a closed-loop model whose DOF are joint coordinates solve with
#: ``Theta_z`` by the coordinate partition's ``m x m`` LU instead of its ``n x n`` QR while
#: the configuration is far from singular: the lower bound of ``sigma_min / sigma_max``
#: at the last node (:func:`workbench.formulations.semirecursive.matrixr.partition_bound`)
#: at least this (ten times ``MR.SING_SKIP``, the merging threshold)
LU_HEALTHY = 10.0 * MR.SING_SKIP
# internal status: the partition's LU met a singular Phi_dep, the attempt is repeated with
# the QR (never returned)
_ST_LU_RETRY = -1
#: highest order of the polynomial extrapolation that predicts a step's accelerations
#: (:func:`predict_acceleration`), and the number of previous rows' accelerations it keeps
PRED_MAX = 6
PRED_HIST = PRED_MAX + 1
#: ``PRED_COEF[o, j] = (-1)^j C(o + 1, j + 1)``: the extrapolation of order ``o`` from
#: ``o + 1`` equally spaced values, newest first (order 3: 4, -6, 4, -1)
PRED_COEF = np.zeros((PRED_MAX + 1, PRED_MAX + 1))
for _o in range(PRED_MAX + 1):
    _c = 1.0
    for _j in range(_o + 1):
        # C(o + 1, j + 1) from C(o + 1, j)
        _c = _c * (_o + 1 - _j) / (_j + 1)
        PRED_COEF[_o, _j] = _c if _j % 2 == 0 else -_c
del _o, _j, _c


# ----------------------------------------------------------------------------------------
# the step mechanics shared by every formulation
# ----------------------------------------------------------------------------------------


@njit(cache=True)
def trapezoidal_update(zi0, zdi0, a0, a, h, zi, zdi):
    """``zi = zi0 + h zdi0 + h^2/4 (a0 + a)``, ``zdi = zdi0 + h/2 (a0 + a)``: the
    trapezoidal rule for positions and velocities given the accelerations at both ends."""
    for k in range(zi.shape[0]):
        zi[k] = zi0[k] + h * zdi0[k] + 0.25 * h * h * (a0[k] + a[k])
        zdi[k] = zdi0[k] + 0.5 * h * (a0[k] + a[k])


@njit(cache=True)
def iteration_matrix(Mb, C, K_, cv, cz, Tm):
    """``Tm = Mbar + cv C + cz K``: with ``cv = h/2``, ``cz = h^2/4`` the Newton iteration
    matrix ``Mbar + h/2 Cbar + h^2/4 Kbar`` of a trapezoidal step (``d(r)/d(a)`` through the
    update), also the matrix of the tangent linear model of one step (direct sweep) and,
    transposed, of the adjoint step."""
    d = Tm.shape[0]
    for i in range(d):
        for j in range(d):
            Tm[i, j] = Mb[i, j] + cv * C[i, j] + cz * K_[i, j]


@njit(cache=True)
def correction_converged(dnorm, newton_tol, anorm):
    """The Newton correction ``dnorm = max |da|`` is below ``newton_tol (1 + max |a|)``:
    the current iterate is accepted (its state is the one evaluated)."""
    return dnorm <= newton_tol * anorm


#: :func:`next_correction_converged`: the largest contraction estimate trusted, and the
#: share of the tolerance the estimated next correction must stay below
THETA_TRUST = 0.1
KAPPA = 0.1


@njit(cache=True)
def next_correction_converged(dnorm, dprev, newton_tol, anorm):
    """The stopping rule of Hairer & Wanner (Solving ODEs II, Sect. IV.8) for a correction
    ``dnorm`` that follows a correction ``dprev`` of the same step: the iteration contracts
    by ``theta = dnorm / dprev``, so the corrected iterate is about ``theta / (1 - theta)
    dnorm`` from the solution, which is also the size of the correction a further residual
    would give.  True when ``theta <= THETA_TRUST`` and that estimate is below ``KAPPA``
    times the tolerance of :func:`correction_converged`: the corrected iterate is accepted
    with its state evaluated and without a residual evaluation that would only confirm
    it.  The estimate can be optimistic: on the closed chain of the peer bench 52 of 2000
    steps accept an iterate where a confirming residual would have asked for one more
    correction (the trajectory stays within the tolerance's accuracy: docs/performance.md)."""
    theta = dnorm / dprev
    return theta <= THETA_TRUST and theta * dnorm <= (1.0 - theta) * KAPPA * newton_tol * anorm


@njit(cache=True)
def _extrapolate_from(order, c0, hist, j0, k):
    """Component ``k`` of the extrapolation of order ``order >= 1`` (:data:`PRED_COEF`)
    from the newest value ``c0`` and the older rows ``hist[j0], ..., hist[j0 + order - 1]``
    (newest first); scalar arguments, no views of ``hist``."""
    s = PRED_COEF[order, 0] * c0
    for j in range(1, order + 1):
        s += PRED_COEF[order, j] * hist[j0 + j - 1, k]
    return s


@njit(cache=True)
def extrapolate(order, ca, hist, k):
    """Component ``k`` of the extrapolation of order ``order >= 1`` (:data:`PRED_COEF`)
    from ``ca, hist[0], ..., hist[order - 1]`` (newest first)."""
    return _extrapolate_from(order, ca[k], hist, 0, k)


@njit(cache=True)
def predictor_weights(ca, hist, nplain, w):
    """Weights ``w[o]`` of the extrapolations of orders ``o = 1 .. omax`` that predict the
    next step's accelerations from the last node's ``ca`` and the previous rows' ``hist``
    (newest first, ``nplain`` of them usable: reached by plain steps); returns ``omax``.

    Each order is weighted by ``1 / e_o^2``, ``e_o`` the error with which it extrapolated
    ``ca`` from the rows before it (max norm; the weights sum to 1): on smooth stretches
    the high orders take over (closed chain: relative predictor error 6.5e-4 at order 3,
    8e-6 with the weights, medians over a run), after a kink such as a tire touching the
    ground the low ones.  A weighted mean, not the best order alone: the prediction stays
    a continuous function of the past states, so that runs at nearby parameter values
    (finite-difference checks) start their Newton iterations from nearby points (the
    best order alone changed the converged accelerations by jumps of the Newton
    tolerance).  The predictor sets only the Newton starting point, not the converged
    solution."""
    omax = min(nplain - 1, PRED_MAX)
    tot = 0.0
    for o in range(1, omax + 1):
        e = 0.0
        for k in range(ca.shape[0]):
            e = max(e, abs(_extrapolate_from(o, hist[0, k], hist, 1, k) - ca[k]))
        w[o] = 1.0 / (e * e + 1e-300)
        tot += w[o]
    for o in range(1, omax + 1):
        w[o] /= tot
    return omax


@njit(cache=True)
def predict_acceleration(ca, hist, nplain, w, a):
    """The Newton starting point ``a`` of a plain step: with at most three usable rows the
    extrapolation of order ``nplain`` (constant, linear, quadratic, cubic: the predictor
    until 2026-11-26), with more the weighted extrapolations of
    :func:`predictor_weights`."""
    d = ca.shape[0]
    if nplain <= 3:
        for k in range(d):
            if nplain >= 2:
                a[k] = extrapolate(nplain, ca, hist, k)
            elif nplain == 1:
                a[k] = ca[k] + (ca[k] - hist[0, k])
            else:
                a[k] = ca[k]
        return
    omax = predictor_weights(ca, hist, nplain, w)
    for k in range(d):
        s = 0.0
        for o in range(1, omax + 1):
            s += w[o] * extrapolate(o, ca, hist, k)
        a[k] = s


@njit(cache=True)
def at_noise_floor(it, dnorm, rn, rbest, anorm):
    """A stagnating iteration at the residual's rounding-noise floor: from the fifth
    iterate on, a correction below ``NOISE_TOL`` relative while the residual no longer
    halves is accepted."""
    return it >= 4 and dnorm <= NOISE_TOL * anorm and rn >= 0.5 * rbest




# ----------------------------------------------------------------------------------------
# semi-recursive formulation
# ----------------------------------------------------------------------------------------


@njit(cache=True)
def predict_position(cz, czd, czdd, hs, Rphi, a, ca, along, w, z):
    """The position predictor of a step of length ``hs`` from the node ``cz, czd, czdd``:
    ``z = z_n + hs zd_n + hs^2/2 zdd_n``, with ``along`` ``+ R^Phi hs^2/4 (a - a_n)``
    (``a``: the predicted DOF accelerations, ``R^Phi`` of the node): the trapezoidal update
    of ``z^i`` carried to every coordinate to first order (exact on the DOF coordinates).
    ``w``: a work vector (d)."""
    n = z.shape[0]
    d = a.shape[0]
    c = 0.25 * hs * hs
    if along:
        for j in range(d):
            w[j] = c * (a[j] - ca[j])
    for k in range(n):
        s = cz[k] + hs * czd[k] + 0.5 * hs * hs * czdd[k]
        if along:
            for j in range(d):
                s += Rphi[k, j] * w[j]
        z[k] = s


@njit(cache=True)
def shift_position(Rphi, da, c, w, z):
    """``z += R^Phi c da``: the first-order move of the position when ``z^i`` moves by
    ``c da`` (seed 001 eq 16; ``R^Phi`` at ``z``).  ``w``: a work vector (d)."""
    n, d = Rphi.shape
    for j in range(d):
        w[j] = c * da[j]
    for k in range(n):
        s = z[k]
        for j in range(d):
            s += Rphi[k, j] * w[j]
        z[k] = s


@njit(cache=True, nogil=True)
def integrate_semirecursive(ma, p, form, t0, h, nsteps, zi0, zdi0, z0, newton_tol, newton_maxit,
                          pos_tol, pos_maxit, conservative,
                          T_out, Z_out, ZD_out, ZDD_out, ZI_out, ZDI_out, ZDDI_out,
                          VIOL_out, VVIOL_out, IT_out, E_out, STEP_out, resume, a_init,
                          aprev_init, nplain_init, kofs, KS_out, progress, partition=True):
    """Fixed-step implicit trapezoidal rule on the independent coordinates.

    Unknown per step: ``a = zdd^i_{n+1}``; ``z^i_{n+1} = z^i_n + h zd^i_n + h^2/4 (a_n + a)``,
    ``zd^i_{n+1} = zd^i_n + h/2 (a_n + a)``; residual ``r(a) = R^T tau(z, zd, zdd)``
    (seed 001 eq 29 in residual form).  Newton iteration matrix (modified Newton, formed
    once per step): ``Mbar + h/2 Cbar + h^2/4 Kbar`` with ``Mbar = R^T M R`` exact and
    ``Cbar, Kbar`` the force-element damping and stiffness projected with ``R``.  An iterate
    is accepted when its correction is below the tolerance (:func:`correction_converged`),
    or, after two corrections, when the contraction they show puts the corrected iterate
    within a tenth of it (:func:`next_correction_converged`): its state is then evaluated
    without the residual that would only confirm it.

    The position problems start from the plain predictor ``z_n + h zd_n + h^2/2 zdd_n``
    and, at later iterates, from the last position.  Starts along ``R^Phi``
    (:func:`predict_position` with ``along``, :func:`shift_position`, as
    :func:`integrate_natural` does) save a third of the closed chain's position evaluations
    but leave positions converged just inside ``pos_tol``, where the plain start's
    correction leaves them well below it: central differences of the trajectory become
    ~30 x noisier, and near singular configurations ``R^Phi`` grows without bound
    (docs/performance.md).

    Closed loops whose DOF are joint coordinates solve with ``Theta_z`` at the Newton
    iterates by the coordinate partition's ``m x m`` LU instead of the ``n x n`` QR while
    the last node is far from singular (:data:`LU_HEALTHY`; ``partition`` False: the QR
    throughout, the reference for the tests).

    Nodes next to a singular configuration of the constraints (MR.SING_SKIP, MR.SING_DOF_SHARE)
    are not used: the step is merged with the next one and the skipped output rows are
    interpolated (:func:`_dense_output`).  A step that cannot be completed next to a
    singular configuration returns ST_NEAR_SINGULAR (value = sigma_min/sigma_max, bad =
    largest component of the near-null vector).

    ``STEP_out[k] = (span, nsub)`` records how output row ``k`` was reached: ``(1, 1)`` one
    trapezoidal step from row ``k - 1`` (the discrete sensitivities assume this), ``nsub >
    1`` sub-steps, ``span > 1`` a step merged over ``span`` intervals, ``(0, 0)`` a row
    interpolated inside a merged step (the initial row is ``(0, 0)``).

    With ``resume`` the run continues a stored trajectory from one of its rows (adjoint
    checkpointing): the acceleration ``a_init`` of that row is taken as it is (not
    re-solved from ``Mbar a = -Qbar``) and the predictor starts from ``aprev_init``
    (:data:`PRED_HIST` x d: the accelerations of the previous rows, newest first,
    ``nplain_init`` of them usable), so that
    the re-run reproduces the stored rows bit for bit.  ``kofs`` is the index of the
    first row in the whole run (times are ``t0 + (kofs + k - 1) h + h`` as there).

    ``KS_out`` (rows x :func:`state_record_size`, or 0 columns: nothing kept) receives the
    converged state of every row reached by one plain step (:func:`store_state`; other
    rows, the initial one included, are left unflagged), for the sensitivity sweeps.
    ``progress[0]`` is the number of output rows written so far (rows below it are final):
    the kernel releases the GIL, so that another thread may read the finished rows while
    it runs (the pipelined sensitivities of :mod:`workbench.sensitivities.driver`).

    Returns (status, step, time, value, bad column); on failure ``step`` is the first
    output row not written.
    """
    n = z0.shape[0]
    d = zi0.shape[0]
    # every work array of the run, owned here; the run itself sees views without
    # reference counts (no atomic increments per kernel call; workbench.kernels.layout.borrowed)
    m = ma.c_type.shape[0]
    own = (MR.make_workspace(ma, n), np.zeros((13, n)), np.zeros((12, d)),
           np.zeros((n, d)), np.zeros((3, n, n)), np.zeros((3, d, d)),
           np.zeros((PRED_HIST, d)), np.zeros(d, dtype=np.int64), np.zeros(PRED_HIST),
           (np.zeros(m, dtype=np.int64), np.zeros((m, m)), np.zeros(m, dtype=np.int64)))
    out = _integrate_semirecursive(
        ma, AR.borrow(p), form, t0, h, nsteps, AR.borrow(zi0), AR.borrow(zdi0), AR.borrow(z0),
        newton_tol, newton_maxit, pos_tol, pos_maxit, conservative,
        AR.borrow((T_out, Z_out, ZD_out, ZDD_out, ZI_out, ZDI_out, ZDDI_out, VIOL_out,
                   VVIOL_out, IT_out, E_out, STEP_out)),
        resume, AR.borrow(a_init), AR.borrow(aprev_init), nplain_init, kofs, AR.borrow(KS_out),
        AR.borrow(progress), AR.borrow(own), partition)
    AR.keepalive(own)
    return out


@njit(cache=True, nogil=True)
def _integrate_semirecursive(ma, p, form, t0, h, nsteps, zi0, zdi0, z0, newton_tol, newton_maxit,
                             pos_tol, pos_maxit, conservative, outs, resume, a_init, aprev_init,
                             nplain_init, kofs, KS_out, progress, work, partition):
    """The run of :func:`integrate_semirecursive` with its work arrays ``work`` (borrowed
    views of the arrays it owns)."""
    (T_out, Z_out, ZD_out, ZDD_out, ZI_out, ZDI_out, ZDDI_out, VIOL_out, VVIOL_out, IT_out,
     E_out, STEP_out) = outs
    ws, vn, vd, Rphi, nn, dd, hist, piv, pw, PL = work
    n = z0.shape[0]
    d = zi0.shape[0]
    m = ma.c_type.shape[0]
    # three copies of the state, rows 3s .. 3s + 2 of vn (z, zd, zdd) and of vd (zi, zdi, a):
    # s = 0 the iterate, s = 1 the last accepted node (c...), s = 2 the last output row (...n)
    z, zd, zdd, cz, czd, czdd, zn, zdn, zddn = (vn[0], vn[1], vn[2], vn[3], vn[4], vn[5],
                                                vn[6], vn[7], vn[8])
    zi, zdi, a, czi, czdi, ca, zin, zdin, an = (vd[0], vd[1], vd[2], vd[3], vd[4], vd[5],
                                                vd[6], vd[7], vd[8])
    zddb, tau, vnull, zfac = vn[9], vn[10], vn[11], vn[12]
    res, rhs, da = vd[9], vd[10], vd[11]
    Md, Kd, Cd = nn[0], nn[1], nn[2]
    Mb, Tm, Mw = dd[0], dd[1], dd[2]
    z[:] = z0
    zi[:] = zi0
    zdi[:] = zdi0
    t = t0 if kofs == 0 else t0 + (kofs - 1) * h + h

    # the coordinate partition (closed loops, coordinate DOF): the velocity and
    # acceleration problems solve by its LU wherever it factorises (the state of a node is
    # then the same bits however the step reached it, and a run resumed from it repeats
    # it), the position problems and the merging test far from singular
    # configurations only (healthy)
    lu_able = partition and MR.partition_setup(ma, n, PL[0]) and not MR.constant_theta(ma)
    healthy = False

    # ---- initial state: position, velocity, acceleration (Algorithm 1 lines 2-5)
    st, it, err, bad = MR.solve_position(ma, p, t, zi, z, ws, pos_tol, pos_maxit, False)
    if st != OK:
        return st, 0, t, err, bad
    st, bad = MR.factor_r(ma, p, z, Rphi, ws)
    if st != OK:
        return st, 0, t, 0.0, bad
    lu_ok = lu_able and MR.partition_factor(ws.Th, PL)
    if lu_ok:
        MR.velocity_acceleration(ma, p, t, zi, zdi, z, zd, zddb, ws, PL)
    else:
        MR.velocity_acceleration(ma, p, t, zi, zdi, z, zd, zddb, ws)
    bad = K.zero_length_spring(ma, p, ws.A, ws.r)
    if bad >= 0:
        return ST_ZERO_SPRING, 0, t, 0.0, bad
    Vpot = MR.residual_tau(ma, p, t, z, zd, zddb, ws, form, tau)
    if resume:
        a[:] = a_init
    else:
        MR.mass_matrix(ma, p, ws, form, n, Md)
        projected_matrix(Rphi, Md, Mb)
        transpose_times(Rphi, tau, rhs)
        for k in range(d):
            a[k] = -rhs[k]
        if not lu_solve_inplace(Mb, a.reshape((d, 1)), Mw):
            return ST_MASS, 0, t, 0.0, -1
    MR.full_accelerations(zddb, Rphi, a, zdd)
    MR.record_row(ma, p, ws, 0, t, z, zd, zdd, zi, zdi, a, 0, Vpot, conservative, T_out, Z_out,
            ZD_out, ZDD_out, ZI_out, ZDI_out, ZDDI_out, VIOL_out, VVIOL_out, IT_out, E_out)
    progress[0] = 1
    # whether the first step may use the partition's LU (healthy: far from singular)
    if lu_ok:
        healthy = MR.partition_bound(ma, ws.Th, PL, Rphi) >= LU_HEALTHY

    _copy_state3(vn, vd, 1, 0)
    _copy_state3(vn, vd, 2, 0)
    # accelerations of the nodes before ``an``, newest first (for the predictor), ``nplain``
    # of them usable: reached by plain steps of length h
    for j in range(PRED_HIST):
        hist[j] = a
    nplain = 0
    if resume:
        hist[:, :] = aprev_init
        nplain = nplain_init
    vnull[:] = 0.0
    # the factorisation of Theta_z and R^Phi in ws/Rphi are those at zfac while fac_ok
    zfac[:] = z
    fac_ok = True
    # an open tree: Theta_z is constant, the position problem is z = z^i and the
    # factorisation and R^Phi of the initial state serve every iterate
    const_theta = MR.constant_theta(ma)
    keep = KS_out.shape[1] > 0
    k0 = 0                               # last output row written
    while k0 < nsteps:
        # Attempts, from the state of row k0 (an, zin, ...):
        # * merging phase: one trapezoidal step over ``span`` output intervals.  If its end
        #   node is next to a singular configuration (rho = sigma_min/sigma_max of Theta_z
        #   below MR.SING_SKIP, or Theta_z singular) the node is not used: the step is merged
        #   with the next one (span + 1, at most MAX_SPAN); skipped rows are interpolated.
        # * if a merged step fails: back to one interval, retried on Newton/position
        #   failure as 2, 4, ... MAX_SUB equal sub-steps (outputs stay at the fixed step h).
        # Other failures end the run; so does a failure with MAX_SUB sub-steps, reported
        # as a singular configuration when rho < MR.SING_DIAG at the last accepted state.
        span = 1
        nsub = 1
        merging = True
        use_lu = False
        bad = -1
        err = 0.0
        rn = 0.0
        iters_total = 0
        while True:
            _copy_state3(vn, vd, 1, 2)
            status = OK
            iters_total = 0
            hs = span * h / nsub
            # the partition's LU in place of the QR: a plain step from a healthy node
            use_lu = healthy and merging and span == 1 and nsub == 1
            bound = -1.0
            for sub in range(nsub):
                if sub == nsub - 1:
                    t = t0 + (kofs + k0 + span - 1) * h + h
                else:
                    t = t0 + (kofs + k0) * h + (sub + 1) * hs
                # predictor: the acceleration extrapolated from the last nodes
                # (predict_acceleration: polynomial extrapolations of up to order PRED_MAX
                # weighted by how well each predicted the last node; cubic already gave ~2
                # Newton evaluations per step on the five-bar at dt = 1e-3 instead of ~3
                # with the quadratic one), linear over a merged step, constant at the first
                # step and in retried sub-steps
                plain = sub == 0 and nsub == 1
                if plain and span == 1:
                    predict_acceleration(ca, hist, nplain, pw, a)
                else:
                    for k in range(d):
                        if plain and nplain >= 1:
                            a[k] = ca[k] + (hs / h) * (ca[k] - hist[0, k])
                        else:
                            a[k] = ca[k]
                predict_position(cz, czd, czdd, hs, Rphi, a, ca, False, rhs, z)
                converged = False
                dnorm = np.inf
                dprev = np.inf
                rbest = np.inf
                iters = 0
                rn = 0.0
                # final: the iterate is accepted by next_correction_converged, its state is
                # evaluated without the residual (tau only where it is kept or the energy
                # is recorded)
                final = False
                for it in range(newton_maxit + 1):
                    trapezoidal_update(czi, czdi, ca, a, hs, zi, zdi)
                    if const_theta and fac_ok:
                        MR.coordinate_position(ma, p, zi, z, ws)
                        pit = 0
                    elif use_lu:
                        st, pit, err, bad = MR.solve_position(ma, p, t, zi, z, ws, pos_tol,
                                                              pos_maxit, True, PL, it > 0)
                        if st != OK:
                            status = _ST_LU_RETRY if st == ST_SINGULAR else st
                            fac_ok = False
                            break
                    else:
                        st, pit, err, bad = MR.solve_position(ma, p, t, zi, z, ws, pos_tol,
                                                              pos_maxit, True, None, it > 0)
                        if st != OK:
                            status = st
                            fac_ok = False
                            break
                    if fac_ok and (const_theta or (pit == 0 and _same(z, zfac))):
                        # the position did not move since Theta_z was factorised and R^Phi
                        # formed (a later Newton iterate: zi moved by h^2/4 da, within the
                        # position tolerance), or Theta_z is constant: both are still exact
                        if lu_ok:
                            MR.velocity_acceleration(ma, p, t, zi, zdi, z, zd, zddb, ws, PL)
                        else:
                            MR.velocity_acceleration(ma, p, t, zi, zdi, z, zd, zddb, ws)
                    elif use_lu:
                        fac_ok = MR.factor_r_lu(ma, p, Rphi, ws, PL)
                        lu_ok = fac_ok
                        if not fac_ok:
                            status = _ST_LU_RETRY
                            break
                        MR.velocity_acceleration(ma, p, t, zi, zdi, z, zd, zddb, ws, PL)
                        zfac[:] = z
                    else:
                        st, bad = MR.factor_r(ma, p, z, Rphi, ws)
                        fac_ok = st == OK
                        if st != OK:
                            status = st
                            break
                        lu_ok = lu_able and MR.partition_factor(ws.Th, PL)
                        if lu_ok:
                            MR.velocity_acceleration(ma, p, t, zi, zdi, z, zd, zddb, ws, PL)
                        else:
                            MR.velocity_acceleration(ma, p, t, zi, zdi, z, zd, zddb, ws)
                        zfac[:] = z
                    MR.full_accelerations(zddb, Rphi, a, zdd)
                    bad = K.zero_length_spring(ma, p, ws.A, ws.r)
                    if bad >= 0:
                        status = ST_ZERO_SPRING
                        break
                    if final:
                        if keep or conservative:
                            Vpot = MR.residual_tau(ma, p, t, z, zd, zdd, ws, form, tau)
                        converged = True
                        iters = it
                        break
                    Vpot = MR.residual_tau(ma, p, t, z, zd, zdd, ws, form, tau)
                    transpose_times(Rphi, tau, res)
                    rn = maxabs(res)
                    if d == 0:
                        # no degrees of freedom (fully driven): a kinematic step, no unknown
                        converged = True
                        iters = 0
                        break
                    if not np.isfinite(rn):
                        # non-finite at the predictor: bad input; after updates: divergence
                        status = ST_NONFINITE if it == 0 else ST_NEWTON
                        rn = rbest
                        break
                    anorm = 1.0 + maxabs(a)
                    # Near singular positions the residual has a rounding-noise floor (the
                    # projection amplifies position round-off by 1/sigma): accept a stagnating
                    # iteration once the correction is below NOISE_TOL relative.
                    if at_noise_floor(it, dnorm, rn, rbest, anorm):
                        converged = True
                        iters = it + 1
                        break
                    rbest = min(rbest, rn)
                    if it == newton_maxit:
                        break
                    if it == 0:
                        # Tm = R^T (M + h/2 C + h^2/4 K) R: one projection of the sum
                        MR.mass_matrix(ma, p, ws, form, n, Md)
                        MR.force_jacobians(ma, p, t, z, zd, ws, n, Kd, Cd)
                        iteration_matrix(Md, Cd, Kd, 0.5 * hs, 0.25 * hs * hs, Kd)
                        projected_matrix(Rphi, Kd, Tm)
                        # factorised once (Mw: its factors), solved at every iterate
                        if not LA.lu_factor_small(Tm, Mw, piv):
                            status = ST_MASS
                            break
                    for k in range(d):
                        da[k] = -res[k]
                    LA.lu_solve_factored(Mw, piv, da)
                    dnorm = maxabs(da)
                    if correction_converged(dnorm, newton_tol, anorm):
                        # the correction from the current iterate is below the tolerance:
                        # accept the iterate (its state is the one evaluated above)
                        converged = True
                        iters = it + 1
                        break
                    for k in range(d):
                        a[k] += da[k]
                    final = it >= 1 and next_correction_converged(dnorm, dprev, newton_tol,
                                                                  anorm)
                    dprev = dnorm
                if status == OK and not converged:
                    status = ST_NEWTON
                if status != OK:
                    break
                iters_total += iters
                _copy_state3(vn, vd, 1, 0)
            if status == _ST_LU_RETRY:
                # Phi_dep singular at an iterate: the attempt again with the QR, starting
                # from the factorisation at the node it leaves
                healthy = False
                MR.factor_theta(ma, p, cz, ws)
                fac_ok = False
                lu_ok = False
                continue
            if use_lu and status != OK:
                # a failed attempt leaves the QR of its last factorised iterate, as the QR's
                # iterates do (the test below and the next attempt read it)
                if qr_factor(ws.Th, ws.V, ws.beta, ws.Rm, 1e-12) >= 0:
                    status = ST_SINGULAR
            if merging:
                if d > 0 and span < MAX_SPAN and k0 + span < nsteps:
                    # the last factorisation in ws is Theta_z at the end node (OK) or at the
                    # last iterate (failure)
                    skip = status == ST_SINGULAR
                    if use_lu and status == OK:
                        # a lower bound of sigma_ratio's estimate: above the threshold it
                        # decides the test; else the node's QR for it
                        bound = MR.partition_bound(ma, ws.Th, PL, Rphi)
                        if bound >= 2.0 * MR.SING_SKIP:
                            skip = False
                        elif qr_factor(ws.Th, ws.V, ws.beta, ws.Rm, 1e-12) >= 0:
                            status = ST_SINGULAR
                            skip = True
                        else:
                            skip = (sigma_ratio(ws.Rm, vnull) < MR.SING_SKIP
                                    and MR.dof_share(ws.Th, m, vnull) < MR.SING_DOF_SHARE)
                    elif status == OK or status == ST_NEWTON or status == ST_POSITION:
                        skip = (sigma_ratio(ws.Rm, vnull) < MR.SING_SKIP
                                and MR.dof_share(ws.Th, m, vnull) < MR.SING_DOF_SHARE)
                    if skip:
                        span += 1
                        continue
                if status == OK:
                    break
                merging = False
                if span > 1:
                    span = 1
                    continue
            if status == OK:
                break
            if (status == ST_NEWTON or status == ST_POSITION) and nsub < MAX_SUB:
                nsub *= 2
                continue
            if status == ST_NEWTON or status == ST_POSITION:
                # the step cannot be resolved: next to a singular configuration?
                MR.factor_theta(ma, p, cz, ws)
                rho = sigma_ratio(ws.Rm, vnull)
                if rho < MR.SING_DIAG:
                    return ST_NEAR_SINGULAR, k0 + 1, t, rho, _argmaxabs(vnull)
            return status, k0 + 1, t, (err if status == ST_POSITION else rn), bad
        k1 = k0 + span
        STEP_out[k1, 0] = span
        STEP_out[k1, 1] = nsub
        MR.record_row(ma, p, ws, k1, t, z, zd, zdd, zi, zdi, a, iters_total, Vpot, conservative,
                T_out, Z_out, ZD_out, ZDD_out, ZI_out, ZDI_out, ZDDI_out, VIOL_out, VVIOL_out,
                IT_out, E_out)
        if KS_out.shape[1] > 0 and span == 1 and nsub == 1:
            # the state evaluated at the accepted Newton iterate is still in the work arrays
            # (after a step by the partition's LU its QR is not formed: the sweeps then take
            # Theta_z^+ from the partition too, or form the QR)
            MR.store_state(ws, zd, zdd, tau, Rphi, KS_out[k1])
        if span > 1:
            # rows skipped by a merged step: interpolated and corrected onto the
            # constraints (output only: the integration continues from the end node)
            H = span * h
            for j in range(1, span):
                tj = t0 + (kofs + k0 + j - 1) * h + h
                st, err, bad, Vj = _dense_output(
                    ma, p, form, tj, j / span, H, an, zin, zdin, zn, zdn, zddn, ca, czi, czdi,
                    cz, czd, czdd, ws, pos_tol, z, zd, zdd, zi, zdi, a, tau)
                if st != OK:
                    return st, k0 + j, tj, err, bad
                MR.record_row(ma, p, ws, k0 + j, tj, z, zd, zdd, zi, zdi, a, 0, Vj, conservative,
                        T_out, Z_out, ZD_out, ZDD_out, ZI_out, ZDI_out, ZDDI_out, VIOL_out,
                        VVIOL_out, IT_out, E_out)
            # leave the factorisation of the end node in ws (reused by the next step)
            MR.factor_theta(ma, p, cz, ws)
            fac_ok = False
            lu_ok = False
            t = t0 + (kofs + k1 - 1) * h + h
            healthy = False
        elif lu_able:
            # the next step's factorisation: the partition's LU while the node is far from
            # singular (the bound at the node), else the QR (formed here after a step by
            # the LU, whose next position problem starts from it)
            if bound < 0.0:
                bound = MR.partition_bound(ma, ws.Th, PL, Rphi) if lu_ok else 0.0
            healthy = bound >= LU_HEALTHY
            if use_lu and not healthy:
                qr_factor(ws.Th, ws.V, ws.beta, ws.Rm, 1e-12)
        if span == 1 and nsub == 1:
            push_history(hist, an)
            nplain = min(nplain + 1, PRED_HIST)
        else:
            nplain = 0
        _copy_state3(vn, vd, 2, 1)
        k0 = k1
        progress[0] = k1 + 1
    return OK, nsteps, t, 0.0, -1


@njit(cache=True)
def _copy_state3(vn, vd, dst, src):
    """Copy the state ``src`` to ``dst`` in the integrator's work arrays (rows ``3s .. 3s +
    2`` of ``vn``: z, zd, zdd and of ``vd``: zi, zdi, a; see :func:`_integrate`)."""
    # element loops: a row slice assigned from a row slice made two views and an overlap
    # check per row (closed chain: ~37 reference-count calls per step)
    for i in range(3):
        t = 3 * dst + i
        s = 3 * src + i
        for k in range(vn.shape[1]):
            vn[t, k] = vn[s, k]
        for k in range(vd.shape[1]):
            vd[t, k] = vd[s, k]


@njit(cache=True)
def push_history(hist, an):
    """``hist[1:] = hist[:-1]; hist[0] = an``: the rows of the acceleration predictor,
    newest first (element loops, no views)."""
    for j in range(hist.shape[0] - 1, 0, -1):
        for k in range(hist.shape[1]):
            hist[j, k] = hist[j - 1, k]
    for k in range(hist.shape[1]):
        hist[0, k] = an[k]


@njit(cache=True)
def _same(x, y):
    """``x == y`` element by element (bitwise equal floats)."""
    for k in range(x.shape[0]):
        if x[k] != y[k]:
            return False
    return True


@njit(cache=True)
def _argmaxabs(x):
    k = -1
    s = -1.0
    for i in range(x.shape[0]):
        if abs(x[i]) > s:
            s = abs(x[i])
            k = i
    return k


@njit(cache=True)
def _hermite(s, H, y0, dy0, y1, dy1, out):
    s2 = s * s
    s3 = s2 * s
    h00 = 2.0 * s3 - 3.0 * s2 + 1.0
    h10 = (s3 - 2.0 * s2 + s) * H
    h01 = 3.0 * s2 - 2.0 * s3
    h11 = (s3 - s2) * H
    for k in range(out.shape[0]):
        out[k] = h00 * y0[k] + h10 * dy0[k] + h01 * y1[k] + h11 * dy1[k]


@njit(cache=True)
def _damped_correction(Th, res, mu, dx):
    """``dx = argmin |Th dx + res|^2 + mu^2 |dx|^2`` (QR of ``[Th; mu I]``): directions
    with singular values well above ``mu`` are corrected, near-null ones are left alone."""
    rows, n = Th.shape
    Ta = np.zeros((rows + n, n))
    Ta[:rows] = Th
    for i in range(n):
        Ta[rows + i, i] = mu
    Va = np.zeros((n, rows + n))
    ba = np.zeros(n)
    Ra = np.zeros((n, n))
    qr_factor(Ta, Va, ba, Ra, 0.0)
    rhs = np.zeros(rows + n)
    for i in range(rows):
        rhs[i] = -res[i]
    qr_solve(Va, ba, Ra, rhs, dx)


@njit(cache=True)
def _dense_output(ma, p, form, t, s, H, a0, zi0, zdi0, z0, zd0, zdd0, a1, zi1, zdi1, z1,
                  zd1, zdd1, ws, pos_tol, z, zd, zdd, zi, zdi, a, tau):
    """State at the fraction ``s`` of a merged step of length ``H`` between two nodes.

    ``zi, zdi, z`` by cubic Hermite interpolation (with the rates at both nodes: an
    O(H^4) error of ~1e-11 at H = 2e-3 on the N-four-bar), ``a, zdd`` linear.  The
    interpolated ``z`` is corrected onto the constraints by damped least squares (damping
    MR.SING_SKIP * largest column norm of ``Theta_z``): the well-conditioned directions are
    solved to rounding, while the near-null directions of the (near-singular)
    configuration keep their interpolated values, which are more accurate there than a
    Newton solution (error up to tol / sigma_min; the velocities and the energy at a
    near-singular position are very sensitive to it).  ``zd`` solves the velocity problem.
    Output only: the integration continues from the end node.

    Returns (status, residual, bad, potential energy); the kinematics of the state are
    left in ``ws``."""
    A, r, u, Z, Zd, phi, hh, hd, hdd = ws.A, ws.r, ws.u, ws.Z, ws.Zd, ws.phi, ws.h, ws.hd, ws.hdd
    Th, V, beta, Rm = ws.Th, ws.V, ws.beta, ws.Rm
    n = z0.shape[0]
    d = zi0.shape[0]
    m = ma.c_type.shape[0]
    _hermite(s, H, zi0, zdi0, zi1, zdi1, zi)
    _hermite(s, H, zdi0, a0, zdi1, a1, zdi)
    _hermite(s, H, z0, zd0, z1, zd1, z)
    for k in range(d):
        a[k] = (1.0 - s) * a0[k] + s * a1[k]
    for k in range(n):
        zdd[k] = (1.0 - s) * zdd0[k] + s * zdd1[k]
    zero = np.zeros(n)
    res = np.zeros(m + d)
    dx = np.zeros(n)
    err = 0.0
    for it in range(4):
        K.frame_positions(ma, p, z, A, r, u)
        Z[:, :] = 0.0
        Zd[:, :] = 0.0
        K.constraints(ma, p, t, z, zero, zero, A, r, Z, Zd, 0, phi)
        K.dof_values(ma, p, A, r, Z, Zd, z, zero, zero, hh, hd, hdd)
        err = 0.0
        for k in range(m):
            res[k] = phi[k]
            err = max(err, abs(phi[k]))
        for k in range(d):
            res[m + k] = hh[k] - zi[k]
            err = max(err, abs(res[m + k]))
        if not np.isfinite(err):
            return ST_NONFINITE, err, -1, 0.0
        if it == 3:
            break
        MR.leading_matrix(ma, p, ws)
        mu = 0.0
        for j in range(n):
            c = 0.0
            for i in range(m + d):
                c += Th[i, j] * Th[i, j]
            mu = max(mu, np.sqrt(c))
        _damped_correction(Th, res, MR.SING_SKIP * mu, dx)
        for k in range(n):
            z[k] += dx[k]
    if err > pos_tol:
        return ST_POSITION, err, -1, 0.0
    # velocity problem (eq 19) at the corrected position: a least-squares solve; its
    # rounding error u |zd| / sigma_min is harmless at velocity level
    MR.leading_matrix(ma, p, ws)
    bad = qr_factor(Th, V, beta, Rm, 1e-12)
    if bad >= 0:
        return ST_SINGULAR, 0.0, bad, 0.0
    Z[:, :] = 0.0
    K.constraints(ma, p, t, z, zero, zero, A, r, Z, Zd, 1, phi)
    for k in range(m):
        res[k] = -phi[k]
    for k in range(d):
        res[m + k] = zdi[k]
    qr_solve(V, beta, Rm, res, zd)
    bad = K.zero_length_spring(ma, p, A, r)
    if bad >= 0:
        return ST_ZERO_SPRING, 0.0, bad, 0.0
    Vp = MR.residual_tau(ma, p, t, z, zd, zdd, ws, form, tau)
    return OK, 0.0, -1, Vp



# ----------------------------------------------------------------------------------------
# global formulation in natural coordinates
# ----------------------------------------------------------------------------------------


@njit(cache=True)
def integrate_natural(ga, ma, p, t0, h, nsteps, zi0, zdi0, q0, aref0, newton_tol, newton_maxit,
                     pos_tol, pos_maxit, conservative, T_out, Q_out, Z_out, ZD_out, ZDD_out,
                     ZI_out, ZDI_out, ZDDI_out, VIOL_out, VVIOL_out, IT_out, E_out, STEP_out,
                     AREF_out, kofs, a_init, part_tol, KAPPA_out):
    """Fixed-step implicit trapezoidal rule on the independent coordinates, global
    formulation in natural coordinates: the unknown ``a = zdd^i_{n+1}``, the update
    (:func:`trapezoidal_update`), the Newton acceptance tests (:func:`correction_converged`,
    :func:`next_correction_converged`, :func:`at_noise_floor`) and the iteration matrix
    (``Mbar + h/2 Cbar + h^2/4 Kbar`` as in
    :func:`iteration_matrix`, with the force-element derivatives projected with ``R``: the
    force tangents along ``(h^2/4 R_j, h/2 R_j)``, the springs and tires evaluated once for
    all the columns (``force_tangents_projected`` of
    :mod:`workbench.formulations.natural.kernels`); ``M`` is constant and block diagonal)
    are those of :func:`integrate_semirecursive`.  Per Newton iterate the
    sparse QR of ``Theta_q`` is refactorised (its symbolic analysis is done once per model,
    :func:`workbench.formulations.natural.kernels.sqr_factor`), ``qdd`` comes from one solve
    and the residual ``R^T (M qdd - Q)`` from one transpose solve; ``R`` itself is formed
    only at the first iterate of a step, for the iteration matrix
    (:func:`workbench.formulations.natural.kernels.solve_va_step`).  The constraint rows,
    their Jacobian, rates and accelerations come from the row program of the run
    (:func:`workbench.formulations.natural.kernels.row_program`: the ``*_p`` kernels, the
    same arithmetic as the operand interpreter, so the same bits), or from the interpreter
    when the model has no program (no symbolic QR analysis, or a Jacobian entry outside its
    pattern).  No step merging or
    sub-stepping: a failure ends the run.  Returns (status, step, t, value, bad).

    ``kofs``: index of the first row in the whole run (times ``t0 + (kofs + k) h``);
    ``a_init`` (length d, or empty: solved from the equations of motion) the initial
    ``zdd^i``.  ``KAPPA_out[k]``: the indicator
    :func:`workbench.formulations.natural.partition.r_ratio` of ``Theta_q`` at row ``k``
    (relative to the initial row); with ``part_tol > 0`` the run stops after the first
    row where it is below ``part_tol``, returning
    :data:`workbench.formulations.natural.partition.ST_REPARTITION` (coordinate
    partitioning, seed 000 eqs 6-8: the coordinates are selected again there).

    Every work array of the run (the workspace, the row program
    :func:`workbench.formulations.natural.kernels.row_program`, the state vectors) is owned
    here; the run itself (:func:`_integrate_natural`) sees views without reference counts,
    as :func:`integrate_semirecursive` does (``workbench.kernels.layout.borrowed``: no
    atomic increments of ~30 arrays per kernel call).
    """
    N = q0.shape[0]
    d = zi0.shape[0]
    mt = ga.phi_sf.shape[0]
    ws = G.make_ws(ga)
    # the row program (per-run specialisation of the constraint rows; the interpreter
    # path when the model has no symbolic QR or an entry falls outside its pattern)
    pr = G.row_program(ga, p, ws)
    own = (ws, pr, aref0.copy(), q0.copy(), zi0.copy(), zdi0.copy(), np.zeros((8, N)),
           np.zeros((N, d)), np.zeros((N, N)), np.zeros((3, d, d)), np.zeros(p.shape[0]),
           np.zeros((2, mt + d)), np.zeros((mt + d, 6)), np.zeros((3 + PRED_HIST, d)),
           np.zeros((ma.ty_pt.shape[0], 3, 3, 13)), np.zeros((d, d)),
           np.zeros(d, dtype=np.int64), np.zeros(PRED_HIST), np.zeros((13, max(d, 12))))
    out = _integrate_natural(
        ga, ma, AR.borrow(p), t0, h, nsteps, newton_tol, newton_maxit, pos_tol, pos_maxit,
        conservative, AR.borrow((T_out, Q_out, Z_out, ZD_out, ZDD_out, ZI_out, ZDI_out,
                                 ZDDI_out, VIOL_out, VVIOL_out, IT_out, E_out, STEP_out,
                                 AREF_out, KAPPA_out)),
        kofs, AR.borrow(a_init), part_tol, AR.borrow(own))
    AR.keepalive(own)
    return out


@njit(cache=True)
def _integrate_natural(ga, ma, p, t0, h, nsteps, newton_tol, newton_maxit, pos_tol, pos_maxit,
                       conservative, outs, kofs, a_init, part_tol, work):
    """The run of :func:`integrate_natural` with its work arrays ``work`` and outputs
    ``outs`` (borrowed views)."""
    (T_out, Q_out, Z_out, ZD_out, ZDD_out, ZI_out, ZDI_out, ZDDI_out, VIOL_out, VVIOL_out,
     IT_out, E_out, STEP_out, AREF_out, KAPPA_out) = outs
    (ws, pr, aref, q, zi, zdi, vec, Rphi, M, dd, zp, md2, sc_jets, d2, TJ, LUt, piv, pw,
     bw) = work
    N = q.shape[0]
    d = zi.shape[0]
    sc = ws.sc
    qd, qddb, qdd, Q, dQk, tau, dqj, dqdj = (vec[0], vec[1], vec[2], vec[3], vec[4], vec[5],
                                             vec[6], vec[7])
    G.mass_matrix(ga, ma, p, p, False, M)
    Tm, Mb, Sk = dd[0], dd[1], dd[2]
    res, skv, da = d2[0], d2[1], d2[2]
    hist = d2[3:]
    mu_, rhs_ = md2[0], md2[1]
    mt = ga.phi_sf.shape[0]
    rn = 0.0
    t = t0 if kofs == 0 else t0 + (kofs - 1) * h + h
    prog = pr.ok[0] == 1
    # the iteration matrix's force block from one evaluation of each spring and tire
    block = prog and G.force_block_ok(ga, ma)
    if prog:
        st, it, err, bad = G.solve_position_p(ga, ma, pr, p, t, zi, q, aref, ws, pos_tol,
                                              pos_maxit, False, False)
    else:
        st, it, err, bad = G.solve_position(ga, ma, p, t, zi, q, aref, ws, pos_tol, pos_maxit,
                                            False)
    if st != OK:
        return st, 0, t, err, bad
    if prog:
        st, bad = G.solve_va_step_p(ga, ma, pr, p, t, zdi, np.zeros(d), q, qd, qddb, Rphi, ws,
                                    True, rhs_, sc_jets)
    else:
        st, bad = G.solve_va(ga, ma, p, t, zdi, q, qd, qddb, Rphi, aref, ws)
    if st != OK:
        return st, 0, t, 0.0, bad
    bad = G.zero_length_spring(ga, ma, p, q)
    if bad >= 0:
        return ST_ZERO_SPRING, 0, t, 0.0, bad
    Rd0 = np.full(N, -1.0)
    KAPPA_out[0] = PT.r_ratio(ws.Rm, Rd0)
    Vpot = G.generalized_forces(ga, ma, p, t, q, qd, aref, sc, Q)
    if a_init.shape[0] == d:
        a = a_init.copy()
    else:
        G.projected_mass(ga, M, Rphi, Mb)
        a, ok = LA.lu_solve_small(Mb, Rphi.T @ (Q - M @ qddb))
        if not ok:
            return ST_MASS, 0, t, 0.0, -1
    qdd[:] = qddb + Rphi @ a
    G.record_row(ga, ma, p, ws, 0, t, q, qd, qdd, zi, zdi, a, 0, Vpot, conservative, M, aref,
                 T_out, Q_out, Z_out, ZD_out, ZDD_out, ZI_out, ZDI_out, ZDDI_out, VIOL_out,
                 VVIOL_out, IT_out, E_out, AREF_out)
    # the accelerations of the rows before the last, newest first, nplain of them usable
    # (every step of this loop is a plain one): the predictor of integrate_semirecursive
    nplain = 0
    for k0 in range(nsteps):
        an = a.copy()
        zin = zi.copy()
        zdin = zdi.copy()
        predict_acceleration(an, hist, nplain, pw, a)
        push_history(hist, an)
        nplain = min(nplain + 1, PRED_HIST)
        t = t0 + (kofs + k0) * h + h
        # the position predictor: the bodies' frames rotated by their angular velocity
        # and acceleration, origins by Taylor (predict_frames), then along R (R of the last
        # step's first iterate: a start, not a result)
        G.predict_frames(ga, q, qd, qdd, h, q)
        for k in range(d):
            da[k] = a[k] - an[k]
        shift_position(Rphi, da, 0.25 * h * h, skv, q)
        # the position moved since Theta_q was factorised and the operand values taken
        shifted = False
        dnorm = np.inf
        dprev = np.inf
        rbest = np.inf
        converged = False
        iters = 0
        # final: accepted by next_correction_converged, the state evaluated without the
        # residual (the forces only when the energy is recorded)
        final = False
        for it in range(newton_maxit + 1):
            trapezoidal_update(zin, zdin, an, a, h, zi, zdi)
            if prog:
                # after the first iterate of a step q is the converged position of the
                # last one, whose operand values pr.OV still holds
                st, pit, err, bad = G.solve_position_p(ga, ma, pr, p, t, zi, q, aref, ws,
                                                       pos_tol, pos_maxit, True,
                                                       it > 0 and not shifted)
            else:
                st, pit, err, bad = G.solve_position(ga, ma, p, t, zi, q, aref, ws, pos_tol,
                                                     pos_maxit, True)
            if st != OK:
                return st, k0 + 1, t, err, bad
            # Theta_q was factorised at this very q by the previous iterate when the
            # position did not move (dz^i within the position tolerance): reused, the
            # same bits as refactorising
            refactor = it == 0 or pit > 0 or shifted
            # qdd = qdd_b + R a by one solve; R itself only for the iteration matrix
            if prog:
                st, bad = G.solve_va_step_p(ga, ma, pr, p, t, zdi, a, q, qd, qdd, Rphi, ws,
                                            it == 0, rhs_, sc_jets, refactor)
            else:
                st, bad = G.solve_va_step(ga, ma, p, t, zdi, a, q, qd, qdd, Rphi, aref, ws,
                                          it == 0, rhs_, sc_jets, refactor)
            if st != OK:
                return st, k0 + 1, t, 0.0, bad
            if prog:
                bad = G.zero_length_spring_p(ga, ma, pr)
            else:
                bad = G.zero_length_spring(ga, ma, p, q)
            if bad >= 0:
                return ST_ZERO_SPRING, k0 + 1, t, 0.0, bad
            if final:
                if conservative:
                    Vpot = G.generalized_forces(ga, ma, p, t, q, qd, aref, sc, Q)
                converged = True
                iters = it
                break
            Vpot = G.generalized_forces(ga, ma, p, t, q, qd, aref, sc, Q)
            G.mass_apply(ga, M, qdd, tau)
            for k in range(N):
                tau[k] -= Q[k]
            # r = R^T tau: the degree-of-freedom rows of the minimum-norm solution of
            # Theta_q^T mu = tau (R = Theta_q^+ [0; I])
            G.sqr_solve_transpose(ga, ws, tau, mu_)
            for j in range(d):
                res[j] = mu_[mt + j]
            rn = maxabs(res)
            if d == 0:
                converged = True
                break
            if not np.isfinite(rn):
                return (ST_NONFINITE if it == 0 else ST_NEWTON), k0 + 1, t, rn, -1
            anorm = 1.0 + maxabs(a)
            if at_noise_floor(it, dnorm, rn, rbest, anorm):
                converged = True
                iters = it + 1
                break
            rbest = min(rbest, rn)
            if it == newton_maxit:
                break
            if it == 0:
                # Tm = Mbar + h/2 Cbar + h^2/4 Kbar with Kbar = -R^T dQ/dq R,
                # Cbar = -R^T dQ/dqd R (M is constant): the force tangents along
                # (h^2/4 R_j, h/2 R_j) (linear in their direction), projected on R; the
                # springs and tires evaluated once for every column (block), else one
                # force tangent per column (the reference path)
                G.projected_mass(ga, M, Rphi, Mb)
                cv = 0.5 * h
                cz = 0.25 * h * h
                if prog:
                    # the tires' wrench Jacobians once, for every column
                    G.tire_state_jacobians(ga, ma, p, q, qd, TJ)
                if block:
                    # Sk = R^T [dQ_1 .. dQ_d], all columns together
                    G.force_tangents_projected(ga, ma, pr, p, t, q, qd, Rphi, cz, cv, zp,
                                               aref, sc, TJ, dqj, dqdj, dQk, Sk, bw)
                    for j in range(d):
                        for i in range(d):
                            Tm[i, j] = Mb[i, j] - Sk[i, j]
                for j in range(0 if block else d):
                    for k in range(N):
                        dqj[k] = cz * Rphi[k, j]
                        dqdj[k] = cv * Rphi[k, j]
                    if prog:
                        G.force_tangent_q(ga, ma, pr, p, t, q, qd, dqj, dqdj, zp, aref, sc,
                                          dQk, TJ)
                    else:
                        G.force_tangent(ga, ma, p, t, q, qd, dqj, dqdj, zp, aref, sc, dQk)
                    # sk_i = sum_k Rphi[k, i] dQk[k] (k ascending), the d sums together;
                    # the coordinates no force element moves (dQk = 0) are skipped
                    skv[:] = 0.0
                    for k in range(N):
                        dk = dQk[k]
                        if dk == 0.0:
                            continue
                        for i in range(d):
                            skv[i] += Rphi[k, i] * dk
                    for i in range(d):
                        Tm[i, j] = Mb[i, j] - skv[i]
                # factorised once, solved at every iterate
                if not LA.lu_factor_small(Tm, LUt, piv):
                    return ST_MASS, k0 + 1, t, 0.0, -1
            for k in range(d):
                da[k] = -res[k]
            LA.lu_solve_factored(LUt, piv, da)
            dnorm = maxabs(da)
            if correction_converged(dnorm, newton_tol, anorm):
                converged = True
                iters = it + 1
                break
            for k in range(d):
                a[k] += da[k]
            # a move of z^i above the position tolerance: the position problem starts
            # from the move along R (shift_position)
            shifted = 0.25 * h * h * dnorm > pos_tol
            if shifted:
                shift_position(Rphi, da, 0.25 * h * h, skv, q)
            final = it >= 1 and next_correction_converged(dnorm, dprev, newton_tol, anorm)
            dprev = dnorm
        if not converged:
            return ST_NEWTON, k0 + 1, t, rn, -1
        STEP_out[k0 + 1, 0] = 1
        STEP_out[k0 + 1, 1] = 1
        if prog:
            G.record_row_p(ga, ma, pr, p, ws, k0 + 1, t, q, qd, qdd, zi, zdi, a, iters, Vpot,
                           conservative, M, aref, T_out, Q_out, Z_out, ZD_out, ZDD_out,
                           ZI_out, ZDI_out, ZDDI_out, VIOL_out, VVIOL_out, IT_out, E_out,
                           AREF_out)
        else:
            G.record_row(ga, ma, p, ws, k0 + 1, t, q, qd, qdd, zi, zdi, a, iters, Vpot,
                         conservative, M, aref, T_out, Q_out, Z_out, ZD_out, ZDD_out, ZI_out,
                         ZDI_out, ZDDI_out, VIOL_out, VVIOL_out, IT_out, E_out, AREF_out)
        kappa = PT.r_ratio(ws.Rm, Rd0)
        KAPPA_out[k0 + 1] = kappa
        if kappa < part_tol:
            return PT.ST_REPARTITION, k0 + 1, t, kappa, -1
    return OK, nsteps, t, 0.0, -1


# ----------------------------------------------------------------------------------------
# the multiplier loop (seed 000 eqs 58-63)
# ----------------------------------------------------------------------------------------


@njit(cache=True)
def _record_multipliers(k, t, z, zd, zdd, lam, phi, phid, E, iters, T_out, Z_out, ZD_out, ZDD_out, L_out,
            VIOL_out, VVIOL_out, E_out, IT_out):
    T_out[k] = t
    Z_out[k] = z
    ZD_out[k] = zd
    ZDD_out[k] = zdd
    L_out[k] = lam
    VIOL_out[k] = np.abs(phi).max() if phi.shape[0] else 0.0
    VVIOL_out[k] = np.abs(phid).max() if phid.shape[0] else 0.0
    E_out[k] = E
    IT_out[k] = iters


@njit(cache=True, nogil=True)
def integrate_multipliers(ma, p, form, t0, h, nsteps, z0, zd0, alpha, beta, newton_tol,
                          newton_maxit, T_out, Z_out, ZD_out, ZDD_out, L_out, VIOL_out,
                          VVIOL_out, E_out, IT_out, progress):
    """Fixed-step implicit trapezoidal rule on all coordinates with the multipliers
    (:mod:`workbench.formulations.multipliers.kernels`: residual, iteration matrix).  ``(z0, zd0)``: a consistent initial state.  Returns (status, step, time,
    value, bad) like the other loops; ``progress[0]`` counts the rows written."""
    n = z0.shape[0]
    m = ma.c_type.shape[0]
    ws = MR.make_workspace(ma, n)
    M = np.zeros((n, n))
    Jc = np.zeros((m, n))
    phi = np.zeros(m)
    phid = np.zeros(m)
    cacc = np.zeros(m)
    crhs = np.zeros(m)
    tau = np.zeros(n)
    Kd = np.zeros((n, n))
    Cd = np.zeros((n, n))
    S = np.zeros((n + m, n + m))
    rhs = np.zeros(n + m)
    z = z0.copy()
    zd = zd0.copy()
    E = MU.augmented_terms(ma, p, form, t0, z, zd, ws, M, Jc, phi, phid, cacc, tau)
    MU.constraint_rhs(phi, phid, cacc, alpha, beta, crhs)
    x = MU.solve_augmented(M, Jc, tau, crhs, S, rhs)
    a = x[:n].copy()
    lam = x[n:].copy()
    if not (np.isfinite(a).all() and np.isfinite(lam).all()):
        return ST_NONFINITE, 0, t0, np.nan, -1
    _record_multipliers(0, t0, z, zd, a, lam, phi, phid, E, 0, T_out, Z_out, ZD_out, ZDD_out,
                        L_out, VIOL_out, VVIOL_out, E_out, IT_out)
    progress[0] = 1
    zn = z.copy()
    zdn = zd.copy()
    an = a.copy()
    W = np.zeros((n + m, n + m))
    Mi = np.zeros((n, n))
    r = np.zeros(n + m)
    g = 1.0 + alpha * h + 0.25 * beta * beta * h * h
    for k in range(1, nsteps + 1):
        t = t0 + k * h
        zn[:] = Z_out[k - 1]
        zdn[:] = ZD_out[k - 1]
        an[:] = ZDD_out[k - 1]
        a[:] = an
        lam[:] = L_out[k - 1]
        converged = False
        it = 0
        err = np.inf
        while it < newton_maxit:
            trapezoidal_update(zn, zdn, an, a, h, z, zd)
            E = MU.augmented_terms(ma, p, form, t, z, zd, ws, M, Jc, phi, phid, cacc, tau)
            MU.constraint_rhs(phi, phid, cacc, alpha, beta, crhs)
            # residual [M a + tau + Phi_z^T lambda; Phi_z a - crhs]
            r[:n] = M @ a + tau + Jc.T @ lam
            r[n:] = Jc @ a - crhs
            if it == 0:
                MR.force_jacobians(ma, p, t, z, zd, ws, n, Kd, Cd)
                W[:, :] = 0.0
                iteration_matrix(M, Cd, Kd, 0.5 * h, 0.25 * h * h, Mi)
                W[:n, :n] = Mi
                W[:n, n:] = Jc.T
                W[n:, :n] = g * Jc
            dx = np.linalg.lstsq(W, -r, rcond=1e-13)[0]
            if not np.isfinite(dx).all():
                return ST_NONFINITE, k, t, np.nan, -1
            scale = 1.0
            err = 0.0
            for i in range(n):
                a[i] += dx[i]
                scale = max(scale, abs(a[i]))
                err = max(err, abs(dx[i]))
            for i in range(m):
                lam[i] += dx[n + i]
            it += 1
            if correction_converged(err, newton_tol, scale):
                converged = True
                break
        if not converged:
            return ST_NEWTON, k, t, err, -1
        # the state that goes with the converged accelerations
        trapezoidal_update(zn, zdn, an, a, h, z, zd)
        E = MU.augmented_terms(ma, p, form, t, z, zd, ws, M, Jc, phi, phid, cacc, tau)
        if not (np.isfinite(z).all() and np.isfinite(zd).all()):
            return ST_NONFINITE, k, t, np.nan, -1
        _record_multipliers(k, t, z, zd, a, lam, phi, phid, E, it, T_out, Z_out, ZD_out,
                            ZDD_out, L_out, VIOL_out, VVIOL_out, E_out, IT_out)
        progress[0] = k + 1
    return OK, nsteps + 1, t0 + nsteps * h, 0.0, -1


# ----------------------------------------------------------------------------------------
# the penalty loop (seed 003 eqs 14-26)
# ----------------------------------------------------------------------------------------

#: predictors of the first Newton iterate of the penalty loop (``predictor`` option)
PREDICTORS = {"previous": 0, "zero": 1, "extrapolated": 2}


@njit(cache=True, nogil=True)
def integrate_penalty(ma, p, form, t0, h, nsteps, z0, zd0, alpha, method, color, ncolor,
                      pattern, reuse, projection, predictor, newton_tol, newton_maxit, T_out,
                      Z_out,
                      ZD_out, ZDD_out, VIOL_out, VVIOL_out, E_out, IT_out, NJ_out, NEV_out,
                      progress):
    """Fixed-step implicit trapezoidal rule on all coordinates with the loops closed by
    penalty forces (:mod:`workbench.formulations.penalty.kernels`, seed 003 eqs 14-26).

    Unknown ``a = zdd_{k+1}``; ``predictor`` of its first iterate (:data:`PREDICTORS`): 0
    the previous accelerations (``z = z_k + h zd_k + h^2/2 zdd_k``), 1 zero accelerations,
    2 the linear extrapolation ``2 zdd_k - zdd_{k-1}`` (the previous ones at the first
    step); Newton-Raphson on ``r = tau(z, zd, a) + Phi_z^T alpha Phi``
    (eq 17) with the tangent ``T`` of eq 20 refactorised at every iteration and ``J = [K C]``
    re-evaluated every ``reuse`` iterations (counted from the first iteration of each step)
    by ``method`` (:data:`~workbench.formulations.penalty.kernels.J_METHODS`; ``color``,
    ``ncolor``: the column groups, ``pattern`` (n x 2n): the structural non-zeros of ``J``).
    ``projection`` 1: the velocities and accelerations are projected (eqs 24-26) with the
    last factorisation; 0: they are the trapezoidal ones.

    ``(z0, zd0)``: a consistent initial state.  Per row: violations, energy, Newton
    iterations, Jacobian evaluations (``NJ_out``) and evaluations of ``tau`` or its tangent
    spent on them (``NEV_out``).  Returns (status, step, time, value, bad)."""
    n = z0.shape[0]
    m = ma.c_type.shape[0]
    ws = MR.make_workspace(ma, n)
    ws2 = MR.make_workspace(ma, n)
    tw = PK.make_tangent_workspace(ma, n)
    exact = method == PK.J_EXACT or method == PK.J_EXACT_COLORED
    M = np.zeros((n, n))
    Jc = np.zeros((m, n))
    phi = np.zeros(m)
    bias = np.zeros(m)
    tau = np.zeros(n)
    tau0 = np.zeros(n)
    Kd = np.zeros((n, n))
    Cd = np.zeros((n, n))
    B = np.zeros((n, max(ncolor, 1)))
    Tm = np.zeros((n, n))
    LU = np.zeros((n, n))
    piv = np.zeros(n, dtype=np.int32)
    r = np.zeros(n)
    z = z0.copy()
    zd = zd0.copy()
    # consistent accelerations at t0 (the seed's step starts from a consistent state): the
    # augmented system [M Phi_z^T; Phi_z 0] [a; lambda] = [Q; -c] in the least-squares
    # sense (massless coordinates, e.g. a vehicle's anti-roll bar halves, are determined
    # by the closures)
    cacc = np.zeros(m)
    crhs = np.zeros(m)
    E = MU.augmented_terms(ma, p, form, t0, z, zd, ws, M, Jc, phi, bias, cacc, tau)
    MU.constraint_rhs(phi, bias, cacc, 0.0, 0.0, crhs)
    a = MU.solve_augmented(M, Jc, tau, crhs, np.zeros((n + m, n + m)), np.zeros(n + m))[:n]
    a = a.copy()
    if not np.isfinite(a).all():
        return ST_NONFINITE, 0, t0, np.nan, -1
    K.constraints(ma, p, t0, z, zd, a, ws.A, ws.r, ws.Z, ws.Zd, 1, bias)
    T_out[0] = t0
    Z_out[0] = z
    ZD_out[0] = zd
    ZDD_out[0] = a
    VIOL_out[0] = np.abs(phi).max() if m else 0.0
    VVIOL_out[0] = np.abs(bias).max() if m else 0.0
    E_out[0] = E
    IT_out[0] = 0
    progress[0] = 1
    zn = z.copy()
    zdn = zd.copy()
    an = a.copy()
    xs = np.zeros(n)
    for k in range(1, nsteps + 1):
        t = t0 + k * h
        zn[:] = Z_out[k - 1]
        zdn[:] = ZD_out[k - 1]
        an[:] = ZDD_out[k - 1]
        if predictor == 1:
            a[:] = 0.0
        elif predictor == 2 and k >= 2:
            for i in range(n):
                a[i] = 2.0 * an[i] - ZDD_out[k - 2, i]
        else:
            a[:] = an
        converged = False
        it = 0
        nj = 0
        nev = 0
        err = np.inf
        rbest = np.inf
        while it < newton_maxit:
            trapezoidal_update(zn, zdn, an, a, h, z, zd)
            if it % reuse == 0:
                # J = dtau/d[z; zd] at zdd = 0 (= -dQ/d[z; zd], eq 23)
                PK.tau_at(ma, p, form, t, z, zd, ws, tau0)
                nev += PK.jacobian_compressed(ma, p, form, t, z, zd, exact, color, ncolor, ws,
                                              ws2, tw, B)
                PK.recover_jacobian(B, color, pattern, exact, z, zd, Kd, Cd)
                nj += 1
            PK.dynamics_terms(ma, p, form, t, z, zd, a, ws, M, Jc, phi, tau)
            PK.penalty_residual(tau, Jc, phi, alpha, r)
            rn = maxabs(r)
            PK.penalty_tangent(M, Kd, Cd, Jc, alpha, h, Tm)
            if not PK.lu_factor(Tm, LU, piv):
                return ST_MASS, k, t, np.nan, -1
            PK.lu_solve(LU, piv, r)
            if not np.isfinite(r).all():
                return ST_NONFINITE, k, t, np.nan, -1
            scale = 1.0
            err = 0.0
            for i in range(n):
                a[i] -= r[i]
                scale = max(scale, abs(a[i]))
                err = max(err, abs(r[i]))
            it += 1
            if correction_converged(err, newton_tol, scale) or at_noise_floor(
                    it, err, rn, rbest, scale):
                converged = True
                break
            rbest = min(rbest, rn)
        if not converged:
            return ST_NEWTON, k, t, err, -1
        trapezoidal_update(zn, zdn, an, a, h, z, zd)
        if projection == 1:
            # eq 24: velocities, bias Phi_t (level 1 at zd = 0)
            K.frame_positions(ma, p, z, ws.A, ws.r, ws.u)
            K.joint_columns(ma, ws.r, ws.u, ws.bcol)
            xs[:] = zd
            K.frame_velocities(ma, ws.zero_n, ws.bcol, ws.Z)
            K.constraints(ma, p, t, z, ws.zero_n, ws.zero_n, ws.A, ws.r, ws.Z, ws.Zd, 1, bias)
            PK.project(Tm, LU, piv, Jc, alpha, h, xs, bias, zd)
            # eq 26: accelerations, bias Phi_dot_z zd + Phi_dot_t (level 2 at zdd = 0, with
            # the projected velocities)
            xs[:] = a
            K.frame_velocities(ma, zd, ws.bcol, ws.Z)
            K.frame_accelerations(ma, zd, ws.zero_n, ws.r, ws.u, ws.bcol, ws.Z, ws.Zd)
            K.constraints(ma, p, t, z, zd, ws.zero_n, ws.A, ws.r, ws.Z, ws.Zd, 2, bias)
            PK.project(Tm, LU, piv, Jc, alpha, h, xs, bias, a)
        E = PK.dynamics_terms(ma, p, form, t, z, zd, a, ws, M, Jc, phi, tau)
        K.constraints(ma, p, t, z, zd, a, ws.A, ws.r, ws.Z, ws.Zd, 1, bias)
        if not (np.isfinite(z).all() and np.isfinite(zd).all() and np.isfinite(a).all()):
            return ST_NONFINITE, k, t, np.nan, -1
        T_out[k] = t
        Z_out[k] = z
        ZD_out[k] = zd
        ZDD_out[k] = a
        VIOL_out[k] = np.abs(phi).max() if m else 0.0
        VVIOL_out[k] = np.abs(bias).max() if m else 0.0
        E_out[k] = E
        IT_out[k] = it
        NJ_out[k] = nj
        NEV_out[k] = nev
        progress[0] = k + 1
    return OK, nsteps + 1, t0 + nsteps * h, 0.0, -1
