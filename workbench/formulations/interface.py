"""The formulation seam: what a formulation provides to the integrator and to the
sensitivity sweeps, and the options every formulation shares.

A formulation is a subpackage of :mod:`workbench.formulations` with one
:class:`Formulation` object per variant, registered in :data:`workbench.formulations.REGISTRY`.
See ``docs/formulations.md`` for how to add one and for the table mapping each paper equation
to the function that implements it.
"""

from __future__ import annotations

from dataclasses import dataclass

#: tolerance and iteration limit of the position problem Phi(z) = 0 (every formulation)
POS_TOL = 1e-12
POS_MAXIT = 30

#: integer codes passed to the numba kernels (``form``)
FORM_COM = 0      # SR-I, RTdyn0: centre of mass of each body as reference point
FORM_ORIGIN = 1   # SR-II, RTdyn1: global origin as reference point
FORM_GLOBAL = 2   # global Matrix-R formulation in natural coordinates


@dataclass(frozen=True)
class Formulation:
    """One formulation variant behind the seam: its name, the integer ``code`` its kernels
    take, and what the layers above need to know of it.

    ``family`` names the kernel family that implements it; each layer above keeps one entry
    per family, never one per formulation name (``FAMILY_RUNS`` in
    :mod:`workbench.integrators.simulation`, ``FAMILY_SWEEPS`` in
    :mod:`workbench.sensitivities.sweeps`):

    * to the integrator (:mod:`workbench.integrators.simulation`): the fixed-step implicit
      trapezoidal rule on the family's step residual (semi-recursive: ``R^T tau(z, zd, zdd)
      = 0``, seed 001 eq 29; natural coordinates: the same residual with a constant mass
      matrix), the consistent state after each step (position, velocity and acceleration
      problems through ``Theta_z = [Phi_z; B]``), energy and the kernel status;
    * to the sensitivity sweeps (:mod:`workbench.sensitivities`): the exact step Jacobians
      ``K = dr/dZ``, ``C = dr/dV``, ``Mbar = dr/dA``, ``P = dr/drho`` and the measure
      partials by blocks of rows (semi-recursive:
      :func:`~workbench.formulations.semirecursive.step_jacobians.step_jacobian_block`;
      natural: :func:`~workbench.formulations.natural.step_jacobians.step_jacobians_g`),
      which the generic recursions :func:`~workbench.sensitivities.sweeps.direct_block` and
      :func:`~workbench.sensitivities.sweeps.adjoint_block` consume.

    ``statics_formulation``: the formulation whose statics (equilibrium, stiffness) serve
    this one (the same configuration space); ``keeps_states``: the integrator can keep each
    step's converged state for the sweeps; ``checkpointing``: the adjoint may recompute
    segments of the trajectory (requires bit-exact restarts of the integrator)."""

    name: str
    code: int
    family: str
    label: str
    statics_formulation: str
    keeps_states: bool
    checkpointing: bool
