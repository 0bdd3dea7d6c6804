"""Single-state evaluations of the semi-recursive Matrix-R formulation: consistent position
and velocity, projected mass matrix and forces (seed 001 eqs 42-44; Algorithm 1, lines 2-3)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workbench.errors import AssemblyError, ModelError
from workbench.formulations import POS_MAXIT, POS_TOL, get
from workbench.formulations.semirecursive import matrixr as MR
from workbench.formulations.status import raise_for_status


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
    fm = get(formulation)
    if fm.family != "semirecursive":
        raise ModelError(f"state_terms: the {formulation!r} formulation has its own state "
                         f"kernels ({fm.family} family); use a semi-recursive formulation "
                         f"('sr-com' or 'sr-origin')")
    form = fm.code
    zi = cm.zi0 if zi is None else np.asarray(zi, dtype=float)
    zdi = cm.zdi0 if zdi is None else np.asarray(zdi, dtype=float)
    z0 = cm.z_guess if z_guess is None else np.asarray(z_guess, dtype=float)
    out = MR.evaluate_state(cm.arrays, cm.arrays.p, form, float(t), zi, zdi, z0, POS_TOL,
                            POS_MAXIT)
    raise_for_status(cm, out.status, t, out.err, out.bad, f"model {cm.name!r}")
    return StateTerms(out.z, out.zd, out.zddb, out.R, out.Md, out.tau, out.Mbar, out.Qbar)


def assemble(cm, t: float = 0.0) -> StateTerms:
    """Consistent initial configuration: raises :class:`AssemblyError` naming the
    constraints that could not be satisfied."""
    try:
        return state_terms(cm, t)
    except AssemblyError as exc:
        raise AssemblyError(f"model {cm.name!r} cannot be assembled from the initial guess "
                            f"with the degrees of freedom {list(cm.dof_names)} fixed: {exc}",
                            t, exc.residual, exc.constraints) from None

