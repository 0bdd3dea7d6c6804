"""Global Matrix-R formulation in natural coordinates (seed 001's global baseline,
``"global"``): points and unit vectors of every body, constant sparse mass matrix."""

from workbench.formulations.interface import FORM_GLOBAL, Formulation

NATURAL = Formulation(
    name="global", code=FORM_GLOBAL, family="natural",
    label="global Matrix-R formulation in natural coordinates (points and unit vectors)",
    statics_formulation="sr-com", keeps_states=False, checkpointing=False)
