"""Position and velocity problems of closed loops in RCR form, O(n + m): the closure that
seed 004 leaves out (its eqs 23-24 constrain only velocities and accelerations;
shared/notes/seeds-003-004.md §2.12), and the forward dynamics of a whole evaluation
``(t, z^I, zd^I) -> (z, zd, zdd)`` with the independent coordinates ``I`` of the loop
structure (every coordinate that is not a dependent of some loop).

* **Positions** (:func:`solve_positions`): for every group (bases parents first) and every
  loop in elimination order, Gauss-Newton on the loop's own dependents ``D`` with all other
  coordinates fixed: ``(J^T J) dz_D = -J^T Phi_l(z)``, ``J = [a_k]_{k in D}`` (the loop
  columns of :func:`workbench.formulations.rcr.loops.row_functionals`, ``rows x m_i``, so
  the normal matrix is at most 6 x 6), until ``max |Phi_l| <= tol``.  Redundant rows are
  consistent at the solution, so the iteration converges quadratically like Newton.  Only
  the frames on the loop's two paths from its base are updated per iteration
  (:func:`_frame_position`); a loop that uses the dependents of an earlier loop (the
  N-four-bar) sees them solved.  Cost O(n_i) per iteration and loop.
* **Velocities** (:func:`solve_velocities`): the elimination of
  :func:`~workbench.formulations.rcr.loops.loop_kinematics` with ``kappa = 0`` (cut
  closures have no ``Phi_t``) gives ``zd_k = K_k xi_v`` with ``xi_v = [X_p; zd_I]``,
  ``X_p = sum_chain b_j zd_j`` (eq 33 at velocity level).
* **Accelerations**: :func:`workbench.formulations.rcr.loops.forward_dynamics`.
* **Drives**: a driven coordinate is set from its drive (``z_c = f(t)``, ``zd_c = f'(t)``,
  :func:`~workbench.formulations.rcr.loops.prescribed_motion`) before the position problem;
  it is never a Gauss-Newton unknown, and its velocity enters the velocity problem as the
  known part ``k_c`` (``zd_k = K_k xi_v + k_k``).

:func:`forward_dynamics` chains the three; :func:`integrate_rk4` is the explicit RK4 of the
independent coordinates through it (the seed integrates the independent speeds), the same
scheme as :mod:`workbench.integrators.rk4` with RCR in place of Matrix-R.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from workbench.formulations.rcr import loops as RL
from workbench.kernels import layout as AR
from workbench.kernels import tree as K

#: status codes of :func:`forward_dynamics`
OK, ST_POSITION, ST_SINGULAR = 0, 1, 2
#: status of :func:`integrate_rk4`: the smallest relative pivot at a row fell below the
#: re-selection threshold (the row is written; the caller selects other dependents there)
ST_RESELECT = 3
#: ``LoopWorkspace.fail[0]`` of a singular position problem (after the kinds of
#: :mod:`workbench.formulations.rcr.loops`)
FAIL_POSITION = 4

_S3a = AR.scratch(3)
_S3b = AR.scratch(3)
_S3c = AR.scratch(3)
_S6 = AR.scratch(6)
_S6x6 = AR.scratch(6, 6)


@njit(cache=True)
def _frame_position(ma, p, z, f, A, r, u, bcol):
    """Position, rotation, axis and joint column of frame ``f`` from its parent's (the body
    of :func:`workbench.kernels.tree.frame_positions` and
    :func:`~workbench.kernels.tree.joint_columns` for one frame)."""
    par = ma.fr_parent[f]
    o = ma.fr_off[f]
    s0, s1, s2 = p[o], p[o + 1], p[o + 2]
    a0, a1, a2 = ma.fr_axis[f, 0], ma.fr_axis[f, 1], ma.fr_axis[f, 2]
    typ = ma.fr_type[f]
    c = ma.fr_coord[f]
    q = z[c] if c >= 0 else 0.0
    if typ == AR.PRISMATIC:
        s0 += a0 * q
        s1 += a1 * q
        s2 += a2 * q
    P = _S6x6()
    for i in range(3):
        for j in range(3):
            P[i, j] = (1.0 if i == j else 0.0) if par < 0 else A[par, i, j]
        r[f, i] = 0.0 if par < 0 else r[par, i]
    for i in range(3):
        r[f, i] += P[i, 0] * s0 + P[i, 1] * s1 + P[i, 2] * s2
        u[f, i] = P[i, 0] * a0 + P[i, 1] * a1 + P[i, 2] * a2
    Cq = _S6x6()
    if typ == AR.REVOLUTE:
        cq = np.cos(q)
        sq = np.sin(q)
        vq = 1.0 - cq
        Cq[0, 0] = cq + a0 * a0 * vq
        Cq[0, 1] = a0 * a1 * vq - a2 * sq
        Cq[0, 2] = a0 * a2 * vq + a1 * sq
        Cq[1, 0] = a1 * a0 * vq + a2 * sq
        Cq[1, 1] = cq + a1 * a1 * vq
        Cq[1, 2] = a1 * a2 * vq - a0 * sq
        Cq[2, 0] = a2 * a0 * vq - a1 * sq
        Cq[2, 1] = a2 * a1 * vq + a0 * sq
        Cq[2, 2] = cq + a2 * a2 * vq
    else:
        for i in range(3):
            for j in range(3):
                Cq[i, j] = 1.0 if i == j else 0.0
    for j in range(3):
        C0, C1, C2 = ma.fr_C[f, 0, j], ma.fr_C[f, 1, j], ma.fr_C[f, 2, j]
        c0 = Cq[0, 0] * C0 + Cq[0, 1] * C1 + Cq[0, 2] * C2
        c1 = Cq[1, 0] * C0 + Cq[1, 1] * C1 + Cq[1, 2] * C2
        c2 = Cq[2, 0] * C0 + Cq[2, 1] * C1 + Cq[2, 2] * C2
        for i in range(3):
            A[f, i, j] = P[i, 0] * c0 + P[i, 1] * c1 + P[i, 2] * c2
    if typ == AR.REVOLUTE:
        bcol[f, 0] = r[f, 1] * u[f, 2] - r[f, 2] * u[f, 1]
        bcol[f, 1] = r[f, 2] * u[f, 0] - r[f, 0] * u[f, 2]
        bcol[f, 2] = r[f, 0] * u[f, 1] - r[f, 1] * u[f, 0]
        for i in range(3):
            bcol[f, 3 + i] = u[f, i]
    elif typ == AR.PRISMATIC:
        for i in range(3):
            bcol[f, i] = u[f, i]
            bcol[f, 3 + i] = 0.0
    else:
        for i in range(6):
            bcol[f, i] = 0.0


@njit(cache=True)
def row_value(ma, p, A, r, k):
    """Position-level value of constraint row ``k`` (as
    :func:`workbench.kernels.tree.constraints` at level 0, for the cut-joint types)."""
    typ = ma.c_type[k]
    ci = ma.c_i[k]
    x1 = _S3a()
    x2 = _S3b()
    e = _S3c()
    s = 0.0
    if typ == AR.C_PTCOMP:
        K.point_position(ma, p, A, r, ci[0], x1)
        K.point_position(ma, p, A, r, ci[1], x2)
        return x1[ci[2]] - x2[ci[2]]
    if typ == AR.C_DOTVV:
        K.vector_global(ma, A, ci[0], x1)
        K.vector_global(ma, A, ci[1], x2)
        for i in range(3):
            s += x1[i] * x2[i]
        return s
    if typ == AR.C_DOTVP:
        K.vector_global(ma, A, ci[0], e)
        K.point_position(ma, p, A, r, ci[1], x1)
        K.point_position(ma, p, A, r, ci[2], x2)
        for i in range(3):
            s += e[i] * (x2[i] - x1[i])
        return s
    K.point_position(ma, p, A, r, ci[0], x1)
    K.point_position(ma, p, A, r, ci[1], x2)
    for i in range(3):
        s += (x2[i] - x1[i]) ** 2
    L = p[ma.c_fld[k]]
    return s - L * L


@njit(cache=True)
def _update_ancestors(ma, p, z, f, A, r, u, bcol, fb_ptr):
    """Positions of ``f`` and of its ancestors below the nearest strict ancestor that is
    the base of a group (or the root), root side first: the base of a nested group may sit
    below frames whose coordinates an earlier group has just solved.  Groups are solved
    with their bases parents first, so that ancestor's position is current (its group's
    dependents lie below it, and every group with dependents above it has its base above
    it); walking to it, not to the root, keeps a chain of nested groups (a ladder) O(n)."""
    depth = 0
    g = f
    while g >= 0:
        depth += 1
        g = ma.fr_parent[g]
        if g >= 0 and fb_ptr[g + 2] > fb_ptr[g + 1]:
            break
    chain = np.empty(depth, dtype=np.int64)
    g = f
    for i in range(depth - 1, -1, -1):
        chain[i] = g
        g = ma.fr_parent[g]
    for i in range(depth):
        _frame_position(ma, p, z, chain[i], A, r, u, bcol)


@njit(cache=True)
def solve_positions(ma, p, z, ls, lp_ptr, lp_fr, ws, lw, tol, maxit, min_it=0):
    """Gauss-Newton on the dependents of every loop, loop after loop (see the module
    docstring), ``z`` updated in place (its independent entries are kept).  On return the
    frame positions and joint columns in ``ws`` are those of the final ``z``.  Every loop
    takes at least ``min_it`` iterations: with 1, a change of the independent positions
    that leaves the closure residual below ``tol`` (next to a singular configuration, where
    the closures hardly resist it) still moves the dependents with it, as Matrix-R's Newton
    step on ``Theta = [Phi; h(z) - z^i]`` does.

    Returns ``(status, coordinate, residual)``: ``OK``; ``ST_POSITION`` (no convergence in
    ``maxit`` iterations: the loop cannot close, coordinate = its first dependent) or
    ``ST_SINGULAR`` (the normal matrix ``J^T J`` is not positive definite: a singular
    dependent set, coordinate = the dependent where the Cholesky factorisation failed)."""
    A, r, u, bcol = ws.A, ws.r, ws.u, ws.bcol
    K.frame_positions(ma, p, z, A, r, u)
    K.joint_columns(ma, r, u, bcol)
    Cs = lw.Cs
    nr_max = Cs.shape[1]
    phi = np.empty(nr_max)
    J = np.empty((nr_max, 6))
    N = _S6x6()
    g6 = _S6()
    dz = _S6()
    own = np.empty(6, dtype=np.int64)
    ownf = np.empty(6, dtype=np.int64)
    owns = np.empty(6, dtype=np.int64)
    err = 0.0
    for q in range(ls.fb_grp.shape[0]):
        g = ls.fb_grp[q]
        base = ls.g_base[g]
        if base >= 0:
            _update_ancestors(ma, p, z, base, A, r, u, bcol, ls.fb_ptr)
        for lo in range(ls.g_loop_ptr[g], ls.g_loop_ptr[g + 1]):
            r0 = ls.l_row_ptr[lo]
            nr = ls.l_row_ptr[lo + 1] - r0
            md = 0
            for c_ in range(ls.l_coord_ptr[lo], ls.l_coord_ptr[lo + 1]):
                if ls.lc_status[c_] == RL.ST_OWN:
                    own[md] = ls.lc_coord[c_]
                    ownf[md] = ls.lc_frame[c_]
                    owns[md] = ls.lc_side[c_]
                    md += 1
            for it in range(maxit + 1):
                for j in range(lp_ptr[lo], lp_ptr[lo + 1]):
                    _frame_position(ma, p, z, lp_fr[j], A, r, u, bcol)
                err = 0.0
                for i in range(nr):
                    phi[i] = row_value(ma, p, A, r, ls.l_row[r0 + i])
                    err = max(err, abs(phi[i]))
                if not np.isfinite(err):
                    return ST_POSITION, own[0], err
                if err <= tol and it >= min_it:
                    break
                if it == maxit:
                    return ST_POSITION, own[0], err
                for i in range(nr):
                    RL.row_functionals(ma, p, A, r, ls.l_row[r0 + i], ls.l_fa[lo], Cs, i)
                for i in range(nr):
                    for a in range(md):
                        s = 0.0
                        for j in range(6):
                            s += Cs[owns[a], i, j] * bcol[ownf[a], j]
                        J[i, a] = s
                # normal equations (J^T J) dz = -J^T phi, Cholesky in N
                for a in range(md):
                    s = 0.0
                    for i in range(nr):
                        s -= J[i, a] * phi[i]
                    g6[a] = s
                    for b in range(a + 1):
                        s = 0.0
                        for i in range(nr):
                            s += J[i, a] * J[i, b]
                        N[a, b] = s
                scale = 0.0
                for a in range(md):
                    scale = max(scale, N[a, a])
                for a in range(md):
                    for b in range(a + 1):
                        s = N[a, b]
                        for k in range(b):
                            s -= N[a, k] * N[b, k]
                        if a == b:
                            if not (s > 1e-13 * scale):
                                return ST_SINGULAR, own[a], err
                            N[a, a] = np.sqrt(s)
                        else:
                            N[a, b] = s / N[b, b]
                for a in range(md):
                    s = g6[a]
                    for k in range(a):
                        s -= N[a, k] * dz[k]
                    dz[a] = s / N[a, a]
                for a in range(md - 1, -1, -1):
                    s = dz[a]
                    for k in range(a + 1, md):
                        s -= N[k, a] * dz[k]
                    dz[a] = s / N[a, a]
                for a in range(md):
                    z[own[a]] += dz[a]
    K.frame_positions(ma, p, z, A, r, u)
    K.joint_columns(ma, r, u, bcol)
    return OK, -1, err


@njit(cache=True)
def solve_velocities(ma, p, zd, ls, ws, lw, tol):
    """The dependent velocities ``zd_k = K_k xi_v + k_k`` (eq 33 at velocity level,
    ``kappa = 0``: cut closures have no ``Phi_t``; ``k_k`` from the prescribed velocities
    ``zd_c = f'(t)`` of the driven coordinates, already in ``zd``) at the positions in
    ``ws`` (:func:`solve_positions`), ``zd`` updated in place.  Returns -1 or the coordinate
    of a singular dependent pivot."""
    lw.kappa[:] = 0.0
    bad = RL.loop_kinematics(ma, p, ws.A, ws.r, ws.bcol, ls, lw, tol, zd)
    if bad >= 0:
        return bad
    xi = lw.xi
    nx = xi.shape[0]
    for g in range(ls.g_base.shape[0]):
        for i in range(nx):
            xi[i] = 0.0
        for q in range(ls.g_chain_ptr[g], ls.g_chain_ptr[g + 1]):
            f = ls.g_chain[q]
            c = ma.fr_coord[f]
            if c >= 0:
                for i in range(6):
                    xi[i] += ws.bcol[f, i] * zd[c]
        x0 = ls.g_xi_ptr[g]
        for q in range(x0, ls.g_xi_ptr[g + 1]):
            xi[6 + q - x0] = zd[ls.g_xi[q]]
        for lo in range(ls.g_loop_ptr[g], ls.g_loop_ptr[g + 1]):
            for q in range(ls.l_coord_ptr[lo], ls.l_coord_ptr[lo + 1]):
                if ls.lc_status[q] == RL.ST_OWN:
                    c = ls.lc_coord[q]
                    s = lw.kd[c]
                    for a in range(nx):
                        s += lw.Kd[c, a] * xi[a]
                    zd[c] = s
    return -1


@njit(cache=True)
def forward_dynamics(ma, p, t, z, zd, zdd, ls, lp_ptr, lp_fr, ws, aw, lw, tol, pos_tol,
                     pos_maxit, min_it=0):
    """One whole RCR evaluation in O(n + m): the independent entries of ``z`` and ``zd``
    are the input; the dependent entries of ``z`` (the Newton guess on entry), ``zd`` and
    all of ``zdd`` are the output.  Returns ``(status, coordinate, value)``: ``OK``,
    ``ST_POSITION`` (positions did not converge; value = the residual) or ``ST_SINGULAR``
    (a singular pivot, ``lw.fail`` gives its kind for the acceleration problem).
    ``min_it``: the least Gauss-Newton iterations per loop (:func:`solve_positions`).
    Driven coordinates are set from their drives first (``z_c = f(t)``, ``zd_c = f'(t)``,
    :func:`~workbench.formulations.rcr.loops.prescribed_motion`) and are neither iterated
    nor solved for."""
    lw.fail[0] = RL.FAIL_NONE
    lw.fail[1] = -1
    RL.prescribed_motion(ma, p, t, ls, z, zd, zdd, 0)
    st, bad, err = solve_positions(ma, p, z, ls, lp_ptr, lp_fr, ws, lw, pos_tol, pos_maxit,
                                   min_it)
    if st == ST_SINGULAR:
        lw.fail[0] = FAIL_POSITION
        lw.fail[1] = bad
    if st != OK:
        return st, bad, err
    bad = solve_velocities(ma, p, zd, ls, ws, lw, tol)
    if bad >= 0:
        lw.fail[0] = RL.FAIL_DEPENDENT
        lw.fail[1] = bad
        return ST_SINGULAR, bad, lw.piv[0]
    bad = RL.forward_dynamics(ma, p, t, z, zd, ls, ws, aw, lw, zdd, tol)
    if bad >= 0:
        return ST_SINGULAR, bad, lw.piv[0]
    return OK, -1, 0.0


@njit(cache=True)
def integrate_rk4(ma, p, t0, h, nsteps, z0, zd0, indep, ls, lp_ptr, lp_fr, ws, aw, lw, tol,
                  pos_tol, pos_maxit, T_out, Z_out, ZD_out, ZDD_out, reselect_tol=0.0):
    """Fixed-step explicit RK4 of the independent coordinates ``indep`` (seed 002 eqs
    41-46, as :func:`workbench.integrators.rk4.integrate_rk4`) through
    :func:`forward_dynamics`; row ``k`` of the outputs is the state at ``t0 + k h`` with its
    accelerations.  Pivot monitoring: when the smallest relative dependent pivot of a row
    ``k >= 1`` (``lw.piv[0]``, eq 34 relative to ``a^T a``) is below ``reselect_tol``, the
    run stops after writing that row with :data:`ST_RESELECT` (coordinate: the dependent of
    that pivot).  Returns ``(status, step, time, coordinate)``."""
    n = z0.shape[0]
    ni = indep.shape[0]
    z = z0.copy()
    zd = zd0.copy()
    zs = z0.copy()
    zds = zd0.copy()
    zdd = np.zeros(n)
    ks = np.zeros((4, 2, ni))
    dep = np.ones(n, dtype=np.bool_)
    for j in range(ni):
        dep[indep[j]] = False
    for k in range(nsteps + 1):
        t = t0 + k * h
        st, bad, _ = forward_dynamics(ma, p, t, z, zd, zdd, ls, lp_ptr, lp_fr, ws, aw, lw, tol,
                                      pos_tol, pos_maxit)
        if st != OK:
            return st, k, t, bad
        T_out[k] = t
        for j in range(n):
            Z_out[k, j] = z[j]
            ZD_out[k, j] = zd[j]
            ZDD_out[k, j] = zdd[j]
        if k == nsteps:
            break
        if k > 0 and lw.piv[0] < reselect_tol:
            return ST_RESELECT, k, t, int(lw.piv[1])
        for j in range(ni):
            ks[0, 0, j] = zd[indep[j]]
            ks[0, 1, j] = zdd[indep[j]]
        for s_ in range(1, 4):
            c = 0.5 * h if s_ < 3 else h
            # the dependents' Newton guess: the row's positions moved on by its rates (a
            # guess on the branch the run follows, also next to a bifurcation)
            for j in range(n):
                zs[j] = z[j] + c * zd[j]
                zds[j] = zd[j]
            for j in range(ni):
                zs[indep[j]] = z[indep[j]] + c * ks[s_ - 1, 0, j]
                zds[indep[j]] = zd[indep[j]] + c * ks[s_ - 1, 1, j]
            st, bad, _ = forward_dynamics(ma, p, t + c, zs, zds, zdd, ls, lp_ptr, lp_fr, ws,
                                          aw, lw, tol, pos_tol, pos_maxit)
            if st != OK:
                return st, k + 1, t + c, bad
            for j in range(ni):
                ks[s_, 0, j] = zds[indep[j]]
                ks[s_, 1, j] = zdd[indep[j]]
        for j in range(ni):
            i = indep[j]
            z[i] += h / 6.0 * (ks[0, 0, j] + 2.0 * ks[1, 0, j] + 2.0 * ks[2, 0, j]
                               + ks[3, 0, j])
            zd[i] += h / 6.0 * (ks[0, 1, j] + 2.0 * ks[1, 1, j] + 2.0 * ks[2, 1, j]
                                + ks[3, 1, j])
        # the next row's dependents: guessed from stage 4 (positions at t + h)
        for j in range(n):
            if dep[j]:
                z[j] = zs[j]
    return OK, nsteps + 1, t0 + nsteps * h, -1


@njit(cache=True)
def record_rows(ma, p, T, Z_out, ZD_out, ZDD_out, conservative, VIOL, VVIOL, E):
    """Per output row of a run: ``max |Phi|`` (position level), ``max |Phi_z zd + Phi_t|``
    (velocity level) and, for a conservative model, the mechanical energy (kinetic +
    gravity + springs), from the full state alone (the run's report, as
    :func:`workbench.formulations.semirecursive.matrixr.record_row` gives it for Matrix-R)."""
    nf = ma.fr_parent.shape[0]
    nb = ma.b_frame.shape[0]
    m = ma.c_type.shape[0]
    n = Z_out.shape[1]
    A = np.zeros((nf, 3, 3))
    r = np.zeros((nf, 3))
    u = np.zeros((nf, 3))
    bcol = np.zeros((nf, 6))
    Z = np.zeros((nf, 6))
    Zd = np.zeros((nf, 6))
    fb = np.zeros((nb, 3))
    nb_ = np.zeros((nb, 3))
    Qj = np.zeros(n)
    phi = np.zeros(m)
    for k in range(T.shape[0]):
        z, zd, zdd = Z_out[k], ZD_out[k], ZDD_out[k]
        K.frame_kinematics(ma, p, z, zd, zdd, A, r, u, bcol, Z, Zd)
        K.constraints(ma, p, T[k], z, zd, zdd, A, r, Z, Zd, 0, phi)
        s = 0.0
        for i in range(m):
            s = max(s, abs(phi[i]))
        VIOL[k] = s
        K.constraints(ma, p, T[k], z, zd, zdd, A, r, Z, Zd, 1, phi)
        s = 0.0
        for i in range(m):
            s = max(s, abs(phi[i]))
        VVIOL[k] = s
        if conservative:
            V = K.applied_forces(ma, p, T[k], z, zd, A, r, Z, Zd, fb, nb_, Qj)
            E[k] = V + K.kinetic_energy(ma, p, A, r, Z)
