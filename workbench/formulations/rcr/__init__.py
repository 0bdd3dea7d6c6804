"""Recursive coordinate reduction (seed 004, Critchley and Anderson), issue 27: so far only
its first part, the O(n) articulated-body forward dynamics of the open tree
(:mod:`workbench.formulations.rcr.tree`, seed 004 eqs 7-22).  The closed-loop method (RCR,
ACS, GCL) is not built, and no formulation ``"rcr"`` is registered (docs/rcr.md).

:func:`tree_accelerations` is the Python entry point: ``zdd = M^-1 Q`` of a compiled
model's spanning tree, its closures ignored."""

from __future__ import annotations

import numpy as np

from workbench.errors import SingularConfigurationError


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
