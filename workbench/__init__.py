"""workbench: multibody dynamics with exact design sensitivities.

Public API (everything a user needs; the subpackages are the layers behind it, see
``docs/architecture.md``)::

    from workbench import Model, load_model, simulate, sensitivity, equilibrium, objectives,
    catalog
"""

# first, before any kernel is defined: the kernels' cache entries carry a stamp of the
# whole package's sources (a change in one file recompiles its callers in others)
from workbench._numba_cache import install as _install_cache_stamps

_install_cache_stamps()

from workbench import objectives  # noqa: E402
from workbench.compiled import CompiledModel, compile_model
from workbench.errors import (AssemblyError, ModelError, NewtonConvergenceError, NonFiniteError,
                              SensitivityError, SimulationError, SingularConfigurationError,
                              UnitError, UnknownNameError, WorkbenchError)
from workbench.formulations import REGISTRY as FORMULATIONS
from workbench.integrators import SimulationResult, simulate
from workbench.maneuvers import maneuver
from workbench.model import catalog
from workbench.model.builder import Model
from workbench.model.elements import GROUND, TimeFunction
from workbench.model.files import load_model, model_from_dict
from workbench.model.serialize import model_to_dict, save_json
from workbench.sensitivities import (SensitivityResult, measure_values, objective_values,
                                     sensitivity)
from workbench.statics import (EquilibriumResult, StaticResult, at_equilibrium, equilibrium,
                               static_responses)

__all__ = [
    "Model", "TimeFunction", "GROUND", "load_model", "model_from_dict", "model_to_dict",
    "save_json", "catalog", "CompiledModel", "compile_model", "FORMULATIONS", "objectives",
    "simulate", "SimulationResult", "equilibrium", "at_equilibrium", "EquilibriumResult",
    "static_responses", "StaticResult", "sensitivity", "SensitivityResult", "objective_values",
    "measure_values", "maneuver",
    "WorkbenchError", "ModelError", "UnknownNameError", "UnitError", "SimulationError",
    "AssemblyError", "SingularConfigurationError", "NewtonConvergenceError", "NonFiniteError",
    "SensitivityError",
]
__version__ = "0.1.0"
