"""Semi-recursive penalty formulation of seed 003 (Callejo, Narayanan, García de Jalón,
Norris): all relative coordinates of the spanning tree integrated by the implicit
trapezoidal rule, the loops closed by the position-level penalty ``Phi_z^T alpha Phi``
(eq 14), Newton-Raphson with the tangent of eq 20 whose ``J = -dQ/d[z; zd]`` is evaluated
four ways (dense or coloured central differences, dense or compressed exact forward-mode
tangents), then the velocity and acceleration projections of eqs 24-26
(:mod:`workbench.formulations.penalty.kernels`; the column groups and the structural
pattern: :mod:`workbench.formulations.penalty.sparsity`).

The open-tree terms are those of :mod:`workbench.formulations.semirecursive` with the
global origin as reference point (SR-II, the seed's "origin-point" Cartesian velocities)."""

from workbench.formulations.interface import FORM_ORIGIN, Formulation

PENALTY = Formulation(
    name="penalty", code=FORM_ORIGIN, family="penalty",
    label="semi-recursive (SR-II) with penalty loop closure and velocity/acceleration "
          "projections (seed 003)",
    statics_formulation="sr-origin", keeps_states=False, checkpointing=False)
