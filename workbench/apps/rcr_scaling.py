"""Scaling studies of seed 004 (measurements, not tests): the O(n) tree recursion against
the dense path, and the closed-loop RCR against Matrix-R.

**Closed loops** (:func:`bench_scaling`, ``workbench bench scaling``): per member of a loop
family (:func:`loop_family`: the N-four-bar, a chain closed once), :func:`measure_loops`
times the acceleration solve at a consistent state (RCR:
:func:`workbench.formulations.rcr.loops.forward_dynamics`; Matrix-R:
:func:`matrix_r_accelerations`, step (3) of :func:`workbench.integrators.rk4.forward_dynamics`
with its QR of ``Theta_z`` and ``R``) and a whole evaluation at an RK4 stage (RCR:
:func:`workbench.formulations.rcr.closure.forward_dynamics`; Matrix-R:
:func:`workbench.integrators.rk4.forward_dynamics`), then fits exponents (:func:`fit`) and
the crossover of the fitted power laws (:func:`crossover`); CSV and log-log plot with
``out``.

**Open tree** (the rest of this module):

``python -m workbench.formulations.rcr.scaling [n ...]`` times one forward-dynamics
evaluation ``zdd = M^-1 Q`` of an open chain of ``n`` bodies (:func:`chain_model`) two ways:

* ``aba``: :func:`workbench.formulations.rcr.tree.forward_dynamics` (kinematics, forces,
  the articulated-body passes);
* ``dense``: :func:`dense_forward_dynamics`, the same kinematics and forces, then
  ``tau0 = -Q`` by the SR-II inverse dynamics, ``M`` by composite inertias
  (:func:`workbench.formulations.semirecursive.matrixr.mass_matrix`, O(n^2) on a chain) and
  an LU solve (O(n^3)); its two dominant parts are timed alone as well
  (``mass_matrix``, ``solve``).

Each time is the best of several repeats of a loop of calls (the machine is shared); the
fitted exponent is the least-squares slope of ``log t`` against ``log n``.  The numbers of
docs/rcr.md come from this script.  Run it with one BLAS thread
(``OPENBLAS_NUM_THREADS=1``) so that the LU solve is timed on one core like the rest."""

from __future__ import annotations

import sys
import time

import numpy as np
from numba import njit

from workbench.formulations.rcr import closure as RC
from workbench.formulations.rcr import loops as RL
from workbench.formulations.rcr import tree as RT
from workbench.formulations.semirecursive import matrixr as MR
from workbench.integrators import rk4 as RK
from workbench.kernels import tree as K
from workbench.kernels.linalg import lu_solve_inplace, projected_matrix
from workbench.model.builder import Model
from workbench.model.elements import GROUND

#: the chain sizes of the study
SIZES = (10, 30, 100, 300, 1000)


def chain_model(n: int, seed: int = 0) -> Model:
    """A planar-like open chain of ``n`` bodies in 3-D: revolute joints about axes near the
    global z axis (tilted by up to 0.1 rad, so the motion is spatial), every fourth joint
    prismatic along its link; links of 1/sqrt(n) m (the chain stays about 1 m long), random
    masses, centres of mass and full inertia tensors (small products); gravity along -y; a joint
    spring-damper on every joint."""
    rng = np.random.default_rng(seed)
    L = 1.0 / np.sqrt(n)
    m = Model(f"chain-{n}", gravity=(0.0, -9.81, 0.0))
    parent = GROUND
    for i in range(n):
        b = f"b{i}"
        mass = float(rng.uniform(0.5, 2.0)) / n
        J = float(mass * L * L / 12.0)
        Ixx = 0.1 * J * float(rng.uniform(0.5, 1.5))
        Iyy = J * float(rng.uniform(0.5, 1.5))
        # Izz = Iyy + Ixx / 2 keeps the triangle inequality with room for the products
        m.body(b, mass=mass, com=(0.5 * L, float(rng.uniform(-0.1, 0.1) * L), 0.0),
               inertia=(Ixx, Iyy, Iyy + 0.5 * Ixx, 0.02 * Ixx, -0.01 * Ixx, 0.01 * Ixx))
        off = (0.0, 0.0, 0.0) if parent == GROUND else (L, 0.0, 0.0)
        if i % 4 == 3:
            m.prismatic(f"j{i}", parent, b, parent_point=off, axis=(1.0, 0.0, 0.0),
                        q0=0.0)
        else:
            tilt = rng.uniform(-0.1, 0.1, 2)
            m.revolute(f"j{i}", parent, b, parent_point=off,
                       axis=(float(tilt[0]), float(tilt[1]), 1.0), q0=0.3)
        m.joint_spring(f"s{i}", f"j{i}", k=0.1 / n, c=0.01 / n)
        parent = b
    return m


@njit(cache=True)
def dense_forward_dynamics(ma, p, t, z, zd, ws, M, tau, zdd):
    """``zdd = M^-1 Q`` the dense way: kinematics, ``tau = M 0 - Q``
    (:func:`~workbench.formulations.semirecursive.matrixr.residual_tau`, SR-II), the mass
    matrix (:func:`~workbench.formulations.semirecursive.matrixr.mass_matrix`, SR-II) and
    an LU solve of ``M zdd = -tau``."""
    n = z.shape[0]
    K.frame_positions(ma, p, z, ws.A, ws.r, ws.u)
    K.joint_columns(ma, ws.r, ws.u, ws.bcol)
    MR.residual_tau(ma, p, t, z, zd, ws.zero_n, ws, 1, tau)
    MR.mass_matrix(ma, p, ws, 1, n, M)
    x = np.linalg.solve(M, -tau)
    zdd[:] = x


@njit(cache=True)
def _loop_aba(ma, p, z, zd, ws, aw, zdd, reps):
    for _ in range(reps):
        RT.forward_dynamics(ma, p, 0.0, z, zd, ws, aw, zdd)


@njit(cache=True)
def _loop_dense(ma, p, z, zd, ws, M, tau, zdd, reps):
    for _ in range(reps):
        dense_forward_dynamics(ma, p, 0.0, z, zd, ws, M, tau, zdd)


@njit(cache=True)
def _loop_mass(ma, p, ws, M, reps):
    n = M.shape[0]
    for _ in range(reps):
        MR.mass_matrix(ma, p, ws, 1, n, M)


@njit(cache=True)
def _loop_solve(M, b, reps):
    s = 0.0
    for _ in range(reps):
        s += np.linalg.solve(M, b)[0]
    return s


def _best(fn, budget=0.15, repeats=7):
    """Seconds per call of ``fn(reps)``: the best of ``repeats`` loops of about
    ``budget`` seconds each."""
    fn(1)
    reps, el = 1, 0.0
    while True:
        t0 = time.perf_counter()
        fn(reps)
        el = time.perf_counter() - t0
        if el > budget / 4 or reps > 1 << 20:
            break
        reps *= 4
    reps = max(1, int(reps * budget / max(el, 1e-9)))
    best = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(reps)
        best = min(best, (time.perf_counter() - t0) / reps)
    return best


def measure(sizes=SIZES, seed: int = 0, budget: float = 0.15):
    """Per ``n``: seconds per call of ``aba``, ``dense``, ``mass_matrix``, ``solve``, the
    relative difference of the two accelerations, ``cond(M)`` and the backward errors of
    both solutions (a list of dicts)."""
    rows = []
    for n in sizes:
        cm = chain_model(n, seed).compile()
        ma = cm.arrays
        p = ma.p
        rng = np.random.default_rng(seed + n)
        z = np.asarray(cm.z_guess, dtype=float) + 0.1 * rng.standard_normal(n)
        zd = rng.standard_normal(n)
        ws = MR.make_workspace(ma, n)
        aw = RT.make_aba_workspace(ma)
        M = np.zeros((n, n))
        tau = np.zeros(n)
        a1 = np.zeros(n)
        a2 = np.zeros(n)
        RT.forward_dynamics(ma, p, 0.0, z, zd, ws, aw, a1)
        dense_forward_dynamics(ma, p, 0.0, z, zd, ws, M, tau, a2)
        diff = float(np.abs(a1 - a2).max() / np.abs(a2).max())
        cond = float(np.linalg.cond(M))
        # backward errors |M zdd + tau| / (|tau| + |M| |zdd|) of both solutions
        res = [float(np.abs(M @ a + tau).max()
                     / (np.abs(tau).max() + np.abs(M).max() * np.abs(a).max())) for a in (a1, a2)]
        rhs = -tau.copy()
        Mc = M.copy()
        row = {
            "n": n,
            "aba": _best(lambda k: _loop_aba(ma, p, z, zd, ws, aw, a1, k), budget),
            "dense": _best(lambda k: _loop_dense(ma, p, z, zd, ws, M, tau, a2, k), budget),
            "mass_matrix": _best(lambda k: _loop_mass(ma, p, ws, M, k), budget),
            "solve": _best(lambda k: _loop_solve(Mc, rhs, k), budget),
            "rel_diff": diff, "cond_M": cond, "res_aba": res[0], "res_dense": res[1],
        }
        rows.append(row)
    return rows


def exponent(rows, key, nmin=0):
    """Least-squares slope of ``log t`` against ``log n`` over the rows with ``n >= nmin``."""
    sel = [r for r in rows if r["n"] >= nmin]
    x = np.log([r["n"] for r in sel])
    y = np.log([r[key] for r in sel])
    return float(np.polyfit(x, y, 1)[0])


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    sizes = tuple(int(a) for a in argv) or SIZES
    rows = measure(sizes)
    keys = ("aba", "dense", "mass_matrix", "solve")
    print("| n | ABA (us) | dense (us) | mass matrix (us) | LU solve (us) | dense/ABA | "
          "rel. diff | cond(M) | backward err. ABA | backward err. dense |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['n']} | " + " | ".join(f"{1e6 * r[k]:.4g}" for k in keys)
              + f" | {r['dense'] / r['aba']:.3g} | {r['rel_diff']:.1e} | {r['cond_M']:.1e} "
              f"| {r['res_aba']:.1e} | {r['res_dense']:.1e} |")
    for nmin in (0, 100):
        print(f"fitted exponents (n >= {nmin}): " + ", ".join(
            f"{k} {exponent(rows, k, nmin):.2f}" for k in keys))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


# ----------------------------------------------------------------------------------------
# closed loops: RCR against the Matrix-R acceleration solve
# ----------------------------------------------------------------------------------------

#: the loop counts of the N-four-bar study and the link counts of the chain closed once
LOOP_SIZES = (10, 30, 100, 300, 1000)
CHAIN_SIZES = (10, 30, 100, 300, 1000)


@njit(cache=True)
def matrix_r_accelerations(ma, p, t, zi, zdi, z, zd, zddb, R, ws, tau, Md, Mb, a, zdd):
    """The Matrix-R acceleration solve at the consistent configuration ``z`` (the step (3)
    of :func:`workbench.integrators.rk4.forward_dynamics` with what it needs of step (2)):
    frame positions, ``Theta_z = [Phi_z; B]`` and its Householder QR, ``R = R^Phi``, the
    velocity problem and the particular accelerations ``zdd_b``
    (:func:`~workbench.formulations.semirecursive.matrixr.solve_velocity_acceleration`),
    ``tau(z, zd, zdd_b)`` and ``M`` (SR-II), ``R^T M R a = -R^T tau`` (LU) and
    ``zdd = zdd_b + R a``.  Returns the status of the velocity problem."""
    n = z.shape[0]
    d = zi.shape[0]
    K.frame_positions(ma, p, z, ws.A, ws.r, ws.u)
    st, bad = MR.solve_velocity_acceleration(ma, p, t, zi, zdi, z, zd, zddb, R, ws)
    if st != 0:
        return st
    MR.residual_tau(ma, p, t, z, zd, zddb, ws, 1, tau)
    MR.mass_matrix(ma, p, ws, 1, n, Md)
    projected_matrix(R, Md, Mb)
    for j in range(d):
        s = 0.0
        for k in range(n):
            s -= R[k, j] * tau[k]
        a[j] = s
    Mw = np.zeros((d, d))
    lu_solve_inplace(Mb, a.reshape((d, 1)), Mw)
    MR.full_accelerations(zddb, R, a, zdd)
    return 0


@njit(cache=True)
def _loop_rcr(ma, p, z, zd, ls, ws, aw, lw, zdd, reps):
    for _ in range(reps):
        RL.forward_dynamics(ma, p, 0.0, z, zd, ls, ws, aw, lw, zdd, 1e-10)


@njit(cache=True)
def _loop_mr(ma, p, zi, zdi, z, zd, zddb, R, ws, tau, Md, Mb, a, zdd, reps):
    for _ in range(reps):
        matrix_r_accelerations(ma, p, 0.0, zi, zdi, z, zd, zddb, R, ws, tau, Md, Mb, a, zdd)


@njit(cache=True)
def _loop_rcr_full(ma, p, zs, zds, z, zd, zdd, ls, lp_ptr, lp_fr, ws, aw, lw, reps):
    for _ in range(reps):
        z[:] = zs
        zd[:] = zds
        RC.forward_dynamics(ma, p, 0.0, z, zd, zdd, ls, lp_ptr, lp_fr, ws, aw, lw, 1e-10,
                            1e-12, 30)


@njit(cache=True)
def _loop_mr_full(ma, p, zi, zdi, zs, z, ws, zd, zdd, R, tau, Md, Mb, Mw, a, zhat, Zdh,
                  reps):
    for _ in range(reps):
        z[:] = zs
        RK.forward_dynamics(ma, p, 1, 0.0, zi, zdi, z, ws, zd, zdd, R, tau, Md, Mb, Mw, a,
                            K.ROD_EXACT, zhat, Zdh, 1e-12, 30)


def _best_few(fn, budget, repeats):
    """:func:`_best`, but with fewer repeats when one call takes longer than the budget."""
    fn(1)   # compile / load the loop kernel
    t0 = time.perf_counter()
    fn(1)
    one = time.perf_counter() - t0
    if one > budget:
        best = one
        for _ in range(max(0, min(repeats, 3) - 1)):
            t0 = time.perf_counter()
            fn(1)
            best = min(best, time.perf_counter() - t0)
        return best
    return _best(fn, budget, repeats)


def loop_family(family: str, size: int):
    """``(compiled model, zi, zdi)`` of a closed-loop family member: ``"n-four-bar"`` (the
    catalog's IFToMM A02 model with ``N = size`` loops, 2N + 1 coordinates, one degree of
    freedom) or ``"closed-chain"`` (:func:`workbench.apps.bench.closed_chain` with ``size``
    links: a planar chain closed once by a distance to the ground, ``size - 1`` degrees of
    freedom), ``"ladder"`` (:func:`workbench.formulations.rcr.models.ladder` with ``size``
    cells, each a loop based on the rung below: nested loops, ``3 size`` coordinates,
    ``size`` degrees of freedom) or ``"ladder-ground"`` (the same bodies with the tree
    through the ground: every loop coupled to all those below it)."""
    if family == "n-four-bar":
        from workbench.model import catalog

        cm = catalog.load("n-four-bar", N=size).compile()
        return cm, np.array([0.4]), np.array([1.3])
    if family == "closed-chain":
        from workbench.apps.bench import closed_chain

        cm = closed_chain(size).compile()
        d = len(cm.dof_names)
        z = np.asarray(cm.z_guess, dtype=float)
        zi = np.array([z[cm.coordinate(nm)] for nm in cm.dof_names])
        rng = np.random.default_rng(size)
        return cm, zi, rng.standard_normal(d) / np.sqrt(size)
    if family in ("ladder", "ladder-ground"):
        from workbench.formulations.rcr.models import ladder

        cm = ladder(size, tree="rung" if family == "ladder" else "ground").compile()
        z = np.asarray(cm.z_guess, dtype=float)
        zi = np.array([z[cm.coordinate(nm)] for nm in cm.dof_names])
        rng = np.random.default_rng(size)
        return cm, zi, rng.standard_normal(size) / np.sqrt(size)
    raise ValueError(f"unknown loop family {family!r}")


def measure_loops(family="n-four-bar", sizes=LOOP_SIZES, budget: float = 0.15,
                  repeats: int = 7):
    """Per family member: seconds per call of the RCR acceleration solve
    (:func:`workbench.formulations.rcr.loops.forward_dynamics`) and of the Matrix-R one
    (:func:`matrix_r_accelerations`) at the same consistent state (solved once by
    :func:`~workbench.formulations.semirecursive.matrixr.evaluate_state`), the relative
    difference of the two accelerations and the acceleration-closure residual of RCR."""
    from workbench.formulations.rcr import LoopSolver

    rows = []
    for size in sizes:
        cm, zi, zdi = loop_family(family, size)
        ma = cm.arrays
        p = ma.p
        n = cm.n
        d = zi.shape[0]
        ev = MR.evaluate_state(ma, p, 1, 0.0, zi, zdi, np.asarray(cm.z_guess, dtype=float),
                               1e-12, 50)
        if ev.status != 0:
            raise RuntimeError(f"{family} {size}: no consistent state (status {ev.status})")
        z, zd = ev.z, ev.zd
        solver = LoopSolver(cm, [c for c in cm.coord_names if c not in cm.dof_names], z0=z)
        if [cm.coord_names[c] for c in solver.independent] != list(cm.dof_names):
            raise RuntimeError(f"{family} {size}: the RCR independents are not the model's "
                               "degrees of freedom; the whole evaluations would differ")
        ls, lw = solver.structure, solver.lw
        ws1, aw = solver.ws, solver.aw
        ws2 = MR.make_workspace(ma, n)
        zdd1 = np.zeros(n)
        zdd2 = np.zeros(n)
        zd2 = zd.copy()
        zddb = np.zeros(n)
        R = np.zeros((n, d))
        tau = np.zeros(n)
        Md = np.zeros((n, n))
        Mb = np.zeros((d, d))
        a = np.zeros(d)
        solver.accelerations(0.0, z, zd, out=zdd1)
        matrix_r_accelerations(ma, p, 0.0, zi, zdi, z, zd2, zddb, R, ws2, tau, Md, Mb, a, zdd2)
        diff = float(np.abs(zdd1 - zdd2).max() / np.abs(zdd2).max())
        Jc = ws2.Th[:ma.c_type.shape[0]]
        kappa = np.zeros(ma.c_type.shape[0])
        K.constraints(ma, p, 0.0, z, zd, np.zeros(n), ws1.A, ws1.r, ws1.Z,
                      ws1.Zd - aw.Y, 2, kappa)
        clos = float(np.abs(Jc @ zdd1 + kappa).max()
                     / (np.abs(Jc).max() * np.abs(zdd1).max() + np.abs(kappa).max()))
        # componentwise backward errors of both: the projected residual R^T (M zdd + tau0)
        # relative to |R|^T (|M| |zdd| + |tau0|) (R spans the null space of Phi_z)
        tau0 = np.zeros(n)
        MR.residual_tau(ma, p, 0.0, z, zd, np.zeros(n), ws2, 1, tau0)
        bres = []
        for x in (zdd1, zdd2):
            r = R.T @ (Md @ x + tau0)
            sc = np.abs(R).T @ (np.abs(Md) @ np.abs(x) + np.abs(tau0))
            bres.append(float(np.max(np.abs(r) / sc)))
        cond = float(np.linalg.cond(Mb)) if d > 1 else 1.0
        # a whole evaluation (position, velocity and acceleration problems) at an RK4
        # stage: the independents moved by half a step (h / 2 = 5e-4 s) along their rates,
        # from the converged state, which is the guess (Matrix-R: with the factorisation of
        # Theta_z at the converged state, as in the integrator)
        zi_s = zi + 5e-4 * zdi
        zs = z.copy()
        zs[solver.independent] += 5e-4 * zd[solver.independent]
        zds = zd.copy()
        zf, zdf, zddf = zs.copy(), zds.copy(), np.zeros(n)
        lp_ptr, lp_fr = solver.paths
        zm, zdm, zddm = z.copy(), np.zeros(n), np.zeros(n)
        Mw = np.zeros((d, d))
        nf = ma.fr_parent.shape[0]
        zhat, Zdh = np.zeros(n), np.zeros((nf, 6))
        st1 = RC.forward_dynamics(ma, p, 0.0, zf, zdf, zddf, ls, lp_ptr, lp_fr, ws1, aw, lw,
                                  1e-10, 1e-12, 30)[0]
        st2 = RK.forward_dynamics(ma, p, 1, 0.0, zi_s, zdi, zm, ws2, zdm, zddm, R, tau, Md, Mb,
                                  Mw, a, K.ROD_EXACT, zhat, Zdh, 1e-12, 30)[0]
        if st1 != 0 or st2 != 0:
            raise RuntimeError(f"{family} {size}: whole evaluation failed (RCR status {st1}, "
                               f"Matrix-R status {st2})")
        diff_full = float(np.abs(zddf - zddm).max() / np.abs(zddm).max())
        rows.append({
            "family": family, "size": size, "n": n, "m": int(ma.c_type.shape[0]), "d": d,
            "rcr_full": _best_few(lambda k: _loop_rcr_full(ma, p, zs, zds, zf, zdf, zddf, ls,
                                                           lp_ptr, lp_fr, ws1, aw, lw, k),
                                  budget, repeats),
            "matrix_r_full": _best_few(lambda k: _loop_mr_full(ma, p, zi_s, zdi, z, zm, ws2,
                                                               zdm, zddm, R, tau, Md, Mb, Mw,
                                                               a, zhat, Zdh, k),
                                       budget, repeats),
            "rel_diff_full": diff_full,
            "rcr": _best_few(lambda k: _loop_rcr(ma, p, z, zd, ls, ws1, aw, lw, zdd1, k),
                             budget, repeats),
            "matrix_r": _best_few(lambda k: _loop_mr(ma, p, zi, zdi, z, zd2, zddb, R, ws2,
                                                     tau, Md, Mb, a, zdd2, k),
                                  budget, repeats),
            "rel_diff": diff, "closure": clos, "res_rcr": bres[0], "res_matrix_r": bres[1],
            "cond": cond,
        })
    return rows


def fit(rows, key, xkey="n", nmin=0):
    """Least-squares slope of ``log t`` against ``log rows[xkey]`` (``xkey >= nmin``)."""
    sel = [r for r in rows if r[xkey] >= nmin]
    return float(np.polyfit(np.log([r[xkey] for r in sel]),
                            np.log([r[key] for r in sel]), 1)[0])


def crossover(rows, a="rcr", b="matrix_r", xkey="n"):
    """The size where ``t_a = t_b`` on the two fitted power laws (``None`` if ``a`` is
    faster everywhere the laws are fitted and the laws do not cross at positive sizes)."""
    x = np.log([r[xkey] for r in rows])
    pa = np.polyfit(x, np.log([r[a] for r in rows]), 1)
    pb = np.polyfit(x, np.log([r[b] for r in rows]), 1)
    if abs(pa[0] - pb[0]) < 1e-12:
        return None
    return float(np.exp((pb[1] - pa[1]) / (pa[0] - pb[0])))


#: the families of :func:`bench_scaling` and their default sizes
#: ladders: cells (3 coordinates, 2 closure equations and 1 degree of freedom each);
#: with the tree through the ground every loop is coupled to those below it (O(N^3))
LADDER_SIZES = (3, 10, 30, 100, 300)
LADDER_GROUND_SIZES = (3, 10, 30, 100)
FAMILIES = {"n-four-bar": LOOP_SIZES, "closed-chain": CHAIN_SIZES, "ladder": LADDER_SIZES,
            "ladder-ground": LADDER_GROUND_SIZES}


def bench_scaling(families=tuple(FAMILIES), sizes=None, out=None, echo=print,
                  budget: float = 0.15, repeats: int = 7):
    """The scaling study of the closed-loop acceleration solve (``workbench bench
    scaling``): :func:`measure_loops` per family, a table, the fitted exponents (all sizes,
    and ``n >= 100``), the crossover of the fitted power laws, and with ``out`` (a
    directory) ``scaling.csv`` and a log-log plot ``scaling.png``.  Returns the rows."""
    import csv
    import os

    rows = []
    for fam in families:
        fam_rows = measure_loops(fam, sizes or FAMILIES[fam], budget, repeats)
        rows += fam_rows
        echo(f"{fam}: wall time per evaluation (us); acceleration solve at a consistent "
             "state, and whole evaluation (position, velocity, acceleration) at an RK4 stage")
        echo("| size | n | m | d | RCR | Matrix-R | Matrix-R / RCR | rel. diff | cond | "
             "backward err. RCR | backward err. Matrix-R | RCR whole | Matrix-R whole | "
             "ratio | rel. diff whole |")
        echo("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for r in fam_rows:
            echo(f"| {r['size']} | {r['n']} | {r['m']} | {r['d']} | {1e6 * r['rcr']:.4g} | "
                 f"{1e6 * r['matrix_r']:.4g} | {r['matrix_r'] / r['rcr']:.3g} | "
                 f"{r['rel_diff']:.1e} | {r['cond']:.1e} | {r['res_rcr']:.1e} | "
                 f"{r['res_matrix_r']:.1e} | {1e6 * r['rcr_full']:.4g} | "
                 f"{1e6 * r['matrix_r_full']:.4g} | "
                 f"{r['matrix_r_full'] / r['rcr_full']:.3g} | {r['rel_diff_full']:.1e} |")
        for a, b, what in (("rcr", "matrix_r", "acceleration solve"),
                           ("rcr_full", "matrix_r_full", "whole evaluation")):
            for nmin in (0, 100):
                if sum(r["n"] >= nmin for r in fam_rows) >= 2:
                    echo(f"{what}: fitted exponents in n (n >= {nmin}): RCR "
                         f"{fit(fam_rows, a, nmin=nmin):.2f}, Matrix-R "
                         f"{fit(fam_rows, b, nmin=nmin):.2f}")
            if len(fam_rows) >= 2:
                x = crossover(fam_rows, a, b)
                faster = [r["n"] for r in fam_rows if r[a] < r[b]]
                echo(f"{what}: crossover of the fitted power laws: n = {x:.3g}; RCR "
                     f"measured faster from n = {min(faster) if faster else None}")
    if out:
        os.makedirs(out, exist_ok=True)
        keys = list(rows[0])
        with open(os.path.join(out, "scaling.csv"), "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=keys)
            w.writeheader()
            w.writerows(rows)
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, 2, figsize=(12.0, 4.8), sharey=True)
        for ax, suffix, what in ((axes[0], "", "acceleration solve (consistent state)"),
                                 (axes[1], "_full", "whole evaluation (RK4 stage)")):
            for fam, mk in zip(families, "os^v"):
                sel = [r for r in rows if r["family"] == fam]
                n = [r["n"] for r in sel]
                for key, ls, lab in (("rcr", "-", "RCR"), ("matrix_r", "--", "Matrix-R")):
                    key += suffix
                    ax.loglog(n, [r[key] for r in sel], ls, marker=mk,
                              label=f"{lab}, {fam} (slope {fit(sel, key):.2f})")
            ax.set_xlabel("number of relative coordinates n")
            ax.set_title(what)
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=8)
        axes[0].set_ylabel("wall time per evaluation (s)")
        fig.suptitle("closed loops: RCR (seed 004) vs Matrix-R, one core")
        fig.tight_layout()
        fig.savefig(os.path.join(out, "scaling.png"), dpi=120)
        plt.close(fig)
        echo(f"wrote {os.path.join(out, 'scaling.csv')} and {os.path.join(out, 'scaling.png')}")
    return rows
