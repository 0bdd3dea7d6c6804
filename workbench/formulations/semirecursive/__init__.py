"""Semi-recursive Matrix-R formulation (seed 001), both reference points: SR-I (centre of mass,
RTdyn0, ``"sr-com"``) and SR-II (global origin, RTdyn1, ``"sr-origin"``)."""

from workbench.formulations.interface import FORM_COM, FORM_ORIGIN, Formulation

SR_COM = Formulation(
    name="sr-com", code=FORM_COM, family="semirecursive",
    label="semi-recursive, centre-of-mass reference points (SR-I, RTdyn0)",
    statics_formulation="sr-com", keeps_states=True, checkpointing=True)
SR_ORIGIN = Formulation(
    name="sr-origin", code=FORM_ORIGIN, family="semirecursive",
    label="semi-recursive, global-origin reference point (SR-II, RTdyn1)",
    statics_formulation="sr-origin", keeps_states=True, checkpointing=True)
