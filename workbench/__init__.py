"""workbench: semi-recursive Matrix-R multibody dynamics with exact design sensitivities."""

from .errors import (AssemblyError, ModelError, NewtonConvergenceError, NonFiniteError,
                     SensitivityError, SimulationError, SingularConfigurationError, UnitError, UnknownNameError,
                     WorkbenchError)
from .model import Model, TimeFunction
from .simulate import SimulationResult, simulate
from .statics import EquilibriumResult, at_equilibrium, equilibrium
from . import catalog
from .io import load_model, model_to_dict, save_json

__all__ = ["Model", "TimeFunction", "simulate", "SimulationResult", "WorkbenchError",
           "ModelError", "UnknownNameError", "UnitError", "SimulationError", "AssemblyError",
           "SingularConfigurationError", "NewtonConvergenceError", "NonFiniteError", "SensitivityError"]
__all__ += ["catalog", "load_model", "model_to_dict", "save_json"]
__all__ += ["equilibrium", "at_equilibrium", "EquilibriumResult"]
__version__ = "0.1.0"
