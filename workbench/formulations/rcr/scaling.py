"""Scaling of the O(n) tree recursion against the dense path (a measurement, not a test).

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

from workbench.formulations.rcr import tree as RT
from workbench.formulations.semirecursive import matrixr as MR
from workbench.kernels import tree as K
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
