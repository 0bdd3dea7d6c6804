"""Semi-recursive equations with the loop closures kept as constraints and solved with their
Lagrange multipliers, Baumgarte-stabilised (seed 000 eqs 58-63): ``"multipliers"`` (SR-I,
centre-of-mass reference points) and ``"multipliers-origin"`` (SR-II, global origin).

The open-tree terms (mass matrix ``M`` and ``tau = M zdd - Q`` over all relative
coordinates ``z``) are those of :mod:`workbench.formulations.semirecursive`; the closure
``Phi(z, t) = 0`` enters through its Jacobian and multipliers instead of the projection
matrix ``R`` (:mod:`workbench.formulations.multipliers.kernels`)."""

from workbench.formulations.interface import FORM_COM, FORM_ORIGIN, Formulation

MULT_COM = Formulation(
    name="multipliers", code=FORM_COM, family="multipliers",
    label="semi-recursive (SR-I) with Lagrange multipliers and Baumgarte stabilisation",
    statics_formulation="sr-com", keeps_states=False, checkpointing=False)
MULT_ORIGIN = Formulation(
    name="multipliers-origin", code=FORM_ORIGIN, family="multipliers",
    label="semi-recursive (SR-II) with Lagrange multipliers and Baumgarte stabilisation",
    statics_formulation="sr-origin", keeps_states=False, checkpointing=False)
