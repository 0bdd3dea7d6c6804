"""The formulation seam: every registered formulation is served by every layer through its
family, and an unknown name is a typed error naming the choices (before any work)."""

from __future__ import annotations

import pytest

import workbench as wb
from workbench.errors import ModelError
from workbench.formulations import REGISTRY, UnknownFormulationError, get
from workbench.integrators.simulation import FAMILY_RUNS
from workbench.sensitivities.sweeps import FAMILY_SWEEPS

#: families that simulate but have no sensitivity sweeps yet (refused by name, tested below)
SIMULATION_ONLY = {"multipliers"}


def test_every_registered_formulation_has_an_integrator_and_sweeps_for_its_family():
    assert set(REGISTRY) == {"sr-com", "sr-origin", "global", "global-partitioned",
                             "multipliers", "multipliers-origin", "penalty", "rcr"}
    for family in {f.family for f in REGISTRY.values()}:
        codes = [f.code for f in REGISTRY.values() if f.family == family]
        assert len(set(codes)) == len(codes)        # a family's kernels tell them apart
    for name, f in REGISTRY.items():
        assert f.name == name
        assert f.family in FAMILY_RUNS
        assert (f.family in FAMILY_SWEEPS) != (f.family in SIMULATION_ONLY)
        # the statics of a formulation are those of a registered one with statics
        assert REGISTRY[f.statics_formulation].family == "semirecursive"


@pytest.mark.parametrize("name", sorted(n for n, f in REGISTRY.items()
                                        if f.family in SIMULATION_ONLY))
def test_a_simulation_only_formulation_simulates_and_refuses_gradients(name):
    res = wb.simulate("five-bar", t_end=0.01, dt=1e-3, formulation=name)
    assert res.formulation == name and res.steps == 10
    with pytest.raises(ValueError, match="no design sensitivities yet"):
        wb.sensitivity("five-bar", t_end=0.01, dt=1e-3, formulation=name)


def test_an_unknown_formulation_is_a_typed_error_naming_the_choices():
    with pytest.raises(UnknownFormulationError) as exc:
        get("gcl")
    assert "gcl" in str(exc.value) and "sr-com" in str(exc.value)
    assert isinstance(exc.value, ModelError) and isinstance(exc.value, ValueError)
    with pytest.raises(UnknownFormulationError):
        wb.simulate("pendulum", t_end=0.01, dt=1e-3, formulation="gcl")
    with pytest.raises(UnknownFormulationError):
        wb.sensitivity("pendulum", t_end=0.01, dt=1e-3, formulation="gcl")


def test_a_formulation_without_checkpointing_refuses_checkpoint_steps():
    assert not get("global").checkpointing and get("sr-com").checkpointing
    with pytest.raises(ValueError, match="checkpoint"):
        wb.sensitivity("five-bar", t_end=0.01, dt=1e-3, formulation="global",
                       checkpoint_steps=5)


def test_state_terms_refuses_a_formulation_of_another_family_naming_it():
    from workbench.formulations.semirecursive.state import state_terms
    cm = wb.catalog.load("pendulum").compile()
    with pytest.raises(ModelError, match="'global'.*natural family"):
        state_terms(cm, formulation="global")
