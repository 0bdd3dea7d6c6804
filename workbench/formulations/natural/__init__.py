"""Global Matrix-R formulation in natural coordinates (seed 001's global baseline,
``"global"``): points and unit vectors of every body, constant sparse mass matrix; and
coordinate partitioning on the same kernels (seed 000 eqs 2-8, ``"global-partitioned"``:
:mod:`workbench.formulations.natural.partition`)."""

from workbench.formulations.interface import FORM_GLOBAL, Formulation

NATURAL = Formulation(
    name="global", code=FORM_GLOBAL, family="natural",
    label="global Matrix-R formulation in natural coordinates (points and unit vectors)",
    statics_formulation="sr-com", keeps_states=False, checkpointing=False)

PARTITIONED = Formulation(
    name="global-partitioned", code=FORM_GLOBAL, family="partitioned",
    label="coordinate partitioning in natural coordinates (independent natural coordinates "
          "by pivoted elimination of Phi_q, re-selected when the dependent block degrades)",
    statics_formulation="sr-com", keeps_states=False, checkpointing=False)
