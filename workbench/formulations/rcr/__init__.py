"""Recursive coordinate reduction (seed 004, Critchley and Anderson), issue 27 (docs/rcr.md):

* the O(n) articulated-body forward dynamics of the open tree
  (:mod:`workbench.formulations.rcr.tree`, seed 004 eqs 7-22); Python entry point
  :func:`tree_accelerations` (``zdd = M^-1 Q`` of the spanning tree, closures ignored);
* the O(n + m) acceleration solve of closed-loop models by RCR, with arbitrary coordinate
  selection (ACS) and loops coupled through shared coordinates on a common base
  (:mod:`workbench.formulations.rcr.loops`, :mod:`workbench.formulations.rcr.topology`,
  seed 004 eqs 23-102); Python entry points :class:`LoopSolver` and
  :func:`loop_accelerations` (a consistent state in, ``zdd`` out).

* the position and velocity problems in RCR form and the explicit RK4 integrator through
  them (:mod:`workbench.formulations.rcr.closure`);
* the formulation ``"rcr"`` (:data:`RCR`): ``simulate(..., formulation="rcr")`` integrates
  the model's own degrees of freedom through the O(n + m) evaluation (the trapezoidal rule
  by Newton steps, :mod:`workbench.integrators.trapezoidal_rcr`, or RK4), the other
  coordinates being the loops' dependents (ACS).

``LoopSolver(cm, "reverse")``: the loop-reversal fallback of GCL (a loop whose trailing
dependents are singular is worked the other way); ``LoopSolver.simulate_rk4(...,
reselect=1e-3)``: the dependents selected again (pivoted) when a pivot degrades during a
run.  Drives (``Model.drive``) are prescribed coordinates (hybrid dynamics): set from
``f(t)``, never dependents nor integrated (``LoopSolver.prescribed``).  Not built: GCL
with fictitious joints and different bases, O(n + m) gradients (docs/rcr.md)."""

from __future__ import annotations

import numpy as np

from workbench.errors import SingularConfigurationError
from workbench.formulations.interface import FORM_ORIGIN, Formulation

#: the formulation ``"rcr"`` (family ``"rcr"``: its run is the trapezoidal rule by Newton
#: steps on the O(n + m) evaluation, :mod:`workbench.integrators.trapezoidal_rcr`, or the
#: explicit RK4 rule through :meth:`LoopSolver.solve`;
#: :func:`workbench.integrators.simulation.FAMILY_RUNS`)
RCR = Formulation(
    name="rcr", code=FORM_ORIGIN, family="rcr",
    label="recursive coordinate reduction (seed 004): O(n + m) forward dynamics of the "
          "closed loops, trapezoidal rule by Newton steps or explicit RK4",
    statics_formulation="sr-origin", keeps_states=False, checkpointing=False)


def tree_accelerations(cm, t, z, zd):
    """``zdd = M(z)^-1 Q(t, z, zd)`` of the open tree of the compiled model ``cm`` by the
    O(n) articulated-body recursion (closures, drives and cut joints ignored).

    Raises :class:`~workbench.errors.SingularConfigurationError` naming the coordinate whose
    pivot ``b^T IA b`` is not positive (no inertia outboard of that joint along its
    axis)."""
    from workbench.formulations.rcr import tree as RT
    from workbench.formulations.semirecursive import matrixr as MR

    ma = cm.arrays
    z = np.ascontiguousarray(z, dtype=float)
    zd = np.ascontiguousarray(zd, dtype=float)
    n = cm.n
    if z.shape != (n,) or zd.shape != (n,):
        raise ValueError(f"tree_accelerations: z and zd need {n} entries, got "
                         f"{z.shape} and {zd.shape}")
    ws = MR.make_workspace(ma, n)
    aw = RT.make_aba_workspace(ma)
    zdd = np.zeros(n)
    bad = RT.forward_dynamics(ma, ma.p, float(t), z, zd, ws, aw, zdd)
    if bad >= 0:
        joints = cm.joints_of_coordinates([bad])
        raise SingularConfigurationError(
            f"model {cm.name!r}: the articulated-body pivot of coordinate "
            f"{cm.coord_names[bad]!r} (joint {', '.join(joints)}) is not positive: no "
            f"inertia outboard of the joint along its axis, the mass matrix is singular",
            float(t), joints)
    return zdd


class LoopSolver:
    """RCR of a closed-loop model (seed 004 eqs 23-102,
    :mod:`workbench.formulations.rcr.loops`; position and velocity problems,
    :mod:`workbench.formulations.rcr.closure`): the loop structure and the work arrays, built
    once, then in O(n + m) :meth:`accelerations` per consistent state, :meth:`solve` (a
    whole evaluation from the independent coordinates) and :meth:`simulate_rk4`.

    ``dependents``: ``None`` (the trailing ``m_i`` coordinates of every loop, plain RCR),
    ``"auto"`` (the trailing set where it is valid at ``z0``, otherwise the nearest valid
    set from the end of each loop, by the pivot test) or coordinate names / indices
    (arbitrary coordinate selection, ACS); ``z0``: the
    configuration at which the loops' ranks are taken (default ``cm.z_guess``);
    ``pivot_tol``: a dependent's pivot ``a^T R a`` below ``pivot_tol * a^T a`` is singular."""

    def __init__(self, cm, dependents=None, z0=None, pivot_tol=1e-10):
        from workbench.formulations.rcr import tree as RT
        from workbench.formulations.semirecursive import matrixr as MR

        self.cm = cm
        ma = cm.arrays
        self.ws = MR.make_workspace(ma, cm.n)
        self.aw = RT.make_aba_workspace(ma)
        self.pivot_tol = float(pivot_tol)
        self.select_dependents(cm.z_guess if z0 is None else z0, dependents)

    def select_dependents(self, z0, dependents):
        """Build (or rebuild) the loop structure with ``dependents`` (as the constructor's)
        at the configuration ``z0``, its loop workspace, :attr:`dependent` and
        :attr:`independent`: the re-selection of a run whose pivot degrades."""
        from workbench.formulations.rcr import loops as RL
        from workbench.formulations.rcr.topology import loop_structure

        cm = self.cm
        self.structure = loop_structure(cm, z0, dependents, pivot_tol=self.pivot_tol)
        self.lw = RL.make_loop_workspace(cm.arrays, self.structure)
        self._paths = None
        ls = self.structure
        own = set()
        for lo in range(ls.l_fa.shape[0]):
            a, b = ls.l_coord_ptr[lo], ls.l_coord_ptr[lo + 1]
            own |= {int(c) for c, st in zip(ls.lc_coord[a:b], ls.lc_status[a:b])
                    if st == RL.ST_OWN}
        #: the driven coordinates (prescribed by drives: ``z = f(t)``, no unknowns)
        self.prescribed = np.flatnonzero(ls.coord_drive >= 0).astype(np.int64)
        pres = set(self.prescribed.tolist())
        #: the dependent coordinates (own dependents of the loops) and the independent ones
        #: (every other coordinate that is not driven: the state of :meth:`simulate_rk4`)
        self.dependent = np.array(sorted(own), dtype=np.int64)
        self.independent = np.array([c for c in range(cm.n) if c not in own and c not in pres],
                                    dtype=np.int64)

    @property
    def paths(self):
        """The loops' frame paths ``(ptr, frames)`` of the position problem
        (:func:`workbench.formulations.rcr.topology.loop_paths`, built on first use)."""
        if self._paths is None:
            from workbench.formulations.rcr.topology import loop_paths
            self._paths = loop_paths(self.cm, self.structure)
        return self._paths

    def _raise(self, kind, bad, t, residual=None):
        from workbench.errors import AssemblyError
        from workbench.formulations.rcr import loops as RL

        cm = self.cm
        joints = cm.joints_of_coordinates([bad])
        name = cm.coord_names[bad]
        if kind == "position":
            raise AssemblyError(
                f"model {cm.name!r}: the RCR position problem of the loop with dependent "
                f"{name!r} (joint {', '.join(joints)}) did not converge (residual "
                f"{residual:.3g}): the loop cannot close near the guess", float(t),
                residual)
        kind = int(self.lw.fail[0]) if kind is None else kind
        if kind == RL.FAIL_DEPENDENT:
            what = (f"the RCR pivot of dependent coordinate {name!r} (joint "
                    f"{', '.join(joints)}) is singular (relative pivot "
                    f"{self.lw.piv[0]:.2e} < {self.pivot_tol:.0e}): the dependent set "
                    "does not span its loop's closure here; choose other dependents (ACS)")
        elif kind == RL.FAIL_OUTBOARD:
            what = (f"the ACS matrix of the outboard independent coordinates is not "
                    f"positive definite at {name!r} (joint {', '.join(joints)})")
        elif kind == 4:   # closure.FAIL_POSITION (not imported: it compiles the module)
            what = (f"the RCR position problem is singular at dependent {name!r} (joint "
                    f"{', '.join(joints)}): the dependent set does not span its loop's "
                    "closure here")
        else:
            what = (f"the articulated-body pivot of coordinate {name!r} (joint "
                    f"{', '.join(joints)}) is not positive")
        raise SingularConfigurationError(f"model {cm.name!r}: {what}", float(t), joints)

    def solve(self, t, z, zd, pos_tol=1e-12, pos_maxit=30):
        """A whole RCR evaluation in O(n + m) (the tolerance and iteration limit of the
        position problem default to Matrix-R's ``POS_TOL``, ``POS_MAXIT``)
        (:func:`workbench.formulations.rcr.closure.forward_dynamics`): ``z``, ``zd`` with
        their independent entries set (the dependent entries of ``z`` are the Newton
        guess) -> the consistent ``(z, zd)`` and ``zdd`` (new arrays)."""
        from workbench.formulations.rcr import closure as RC

        cm = self.cm
        ma = cm.arrays
        z = np.array(z, dtype=float)
        zd = np.array(zd, dtype=float)
        zdd = np.zeros(cm.n)
        lp_ptr, lp_fr = self.paths
        st, bad, val = RC.forward_dynamics(ma, ma.p, float(t), z, zd, zdd, self.structure,
                                           lp_ptr, lp_fr, self.ws, self.aw, self.lw,
                                           self.pivot_tol, float(pos_tol), int(pos_maxit))
        if st == RC.ST_POSITION:
            self._raise("position", bad, t, val)
        if st == RC.ST_SINGULAR:
            self._raise(None, bad, t)
        return z, zd, zdd

    def simulate_rk4(self, t_end, dt, z0=None, zd0=None, t0=0.0, pos_tol=1e-12,
                     pos_maxit=30, reselect=None):
        """Explicit RK4 of the independent coordinates through :meth:`solve`
        (:func:`workbench.formulations.rcr.closure.integrate_rk4`) from ``(z0, zd0)``
        (default: the model's guess and initial rates; the independent entries are the
        initial state).  Returns ``dict(t, z, zd, zdd, reselections)`` (one row per step).

        ``reselect`` (a relative pivot, e.g. 1e-3): when the smallest relative dependent
        pivot of a row falls below it, the dependents are selected again at that row
        (``dependents="pivoted"``, :func:`~workbench.formulations.rcr.topology.loop_structure`)
        and the run continues from the row's state with the new independent coordinates
        (the state is the same, only the coordinates integrated change).
        ``reselections``: ``{"time", "step", "pivot", "coordinate", "from", "to"}`` per
        change (dependent coordinate names)."""
        from workbench.formulations.rcr import closure as RC

        cm = self.cm
        ma = cm.arrays
        nsteps = int(round((t_end - t0) / dt))
        z0 = np.array(cm.z_guess if z0 is None else z0, dtype=float)
        zd0 = np.array(cm.zd_guess if zd0 is None else zd0, dtype=float)
        T = np.zeros(nsteps + 1)
        Z = np.zeros((nsteps + 1, cm.n))
        ZD = np.zeros_like(Z)
        ZDD = np.zeros_like(Z)
        rtol = 0.0 if reselect is None else float(reselect)
        changes = []
        k0 = 0
        while True:
            lp_ptr, lp_fr = self.paths
            st, step, t, bad = RC.integrate_rk4(
                ma, ma.p, float(t0) + k0 * float(dt), float(dt), nsteps - k0, z0, zd0,
                self.independent, self.structure, lp_ptr, lp_fr, self.ws, self.aw, self.lw,
                self.pivot_tol, float(pos_tol), int(pos_maxit), T[k0:], Z[k0:], ZD[k0:],
                ZDD[k0:], rtol)
            if st != RC.ST_RESELECT:
                break
            k0 += step
            piv = float(self.lw.piv[0])
            old = [cm.coord_names[c] for c in self.dependent]
            self.select_dependents(Z[k0], "pivoted")
            new = [cm.coord_names[c] for c in self.dependent]
            if new == old:
                # the best-conditioned set is the one in use: go on without monitoring
                rtol = 0.0
            else:
                changes.append({"time": float(T[k0]), "step": int(k0), "pivot": piv,
                                "coordinate": cm.coord_names[bad], "from": old, "to": new})
            z0 = Z[k0].copy()
            zd0 = ZD[k0].copy()
        if st == RC.ST_POSITION:
            self._raise("position", bad, t, float("nan"))
        if st == RC.ST_SINGULAR:
            self._raise(None, bad, t)
        return {"t": T, "z": Z, "zd": ZD, "zdd": ZDD, "reselections": changes}

    def raise_for_status(self, st, bad, t):
        """Raise the typed error of a status of the RCR kernels
        (:func:`workbench.formulations.rcr.closure.forward_dynamics`: ``ST_POSITION``
        -> :class:`~workbench.errors.AssemblyError`, ``ST_SINGULAR`` ->
        :class:`~workbench.errors.SingularConfigurationError`, each naming the coordinate
        and its joint) at time ``t``; nothing for ``OK``."""
        from workbench.formulations.rcr import closure as RC

        if st == RC.ST_POSITION:
            self._raise("position", bad, t, float("nan"))
        if st == RC.ST_SINGULAR:
            self._raise(None, bad, t)

    @property
    def min_pivot(self):
        """The smallest relative dependent pivot of the last evaluation and its coordinate
        name (pivot monitoring: 1 = orthogonal to the later dependents, 0 = singular)."""
        c = int(self.lw.piv[1])
        return float(self.lw.piv[0]), (self.cm.coord_names[c] if c >= 0 else None)

    def accelerations(self, t, z, zd, out=None):
        """``zdd`` at the consistent state ``(t, z, zd)``.  Raises
        :class:`~workbench.errors.SingularConfigurationError` naming the coordinate of a
        failed pivot (a dependent set that does not span its loop's closure, or an
        articulated-body pivot that is not positive)."""
        from workbench.formulations.rcr import loops as RL

        cm = self.cm
        ma = cm.arrays
        n = cm.n
        z = np.ascontiguousarray(z, dtype=float)
        zd = np.ascontiguousarray(zd, dtype=float)
        if z.shape != (n,) or zd.shape != (n,):
            raise ValueError(f"LoopSolver: z and zd need {n} entries, got {z.shape} and "
                             f"{zd.shape}")
        zdd = np.zeros(n) if out is None else out
        bad = RL.forward_dynamics(ma, ma.p, float(t), z, zd, self.structure, self.ws,
                                  self.aw, self.lw, zdd, self.pivot_tol)
        if bad >= 0:
            self._raise(None, bad, t)
        return zdd


def loop_accelerations(cm, t, z, zd, dependents=None, pivot_tol=1e-10):
    """RCR accelerations ``zdd`` of the closed-loop model ``cm`` at the consistent state
    ``(t, z, zd)`` (one-shot :class:`LoopSolver`; the loops' ranks are taken at ``z``)."""
    return LoopSolver(cm, dependents, z0=z, pivot_tol=pivot_tol).accelerations(t, z, zd)
