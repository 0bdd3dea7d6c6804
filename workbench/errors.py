"""Typed exceptions raised by the workbench.

Every error names the model element involved and, during a simulation, the time
at which it happened, so that a failed run can be diagnosed without a debugger.
"""

from __future__ import annotations


class WorkbenchError(Exception):
    """Base class of every error raised by the workbench."""


class ModelError(WorkbenchError, ValueError):
    """The model description is invalid (inconsistent data, bad values)."""


class UnknownNameError(ModelError, KeyError):
    """A model refers to a body, point, joint, parameter or model that does not exist."""

    def __init__(self, kind: str, name: str, known=()):
        self.kind = kind
        self.name = name
        self.known = sorted(known)
        hint = f"; known: {', '.join(self.known[:12])}" if self.known else ""
        super().__init__(f"unknown {kind} {name!r}{hint}")

    def __str__(self) -> str:  # KeyError would otherwise quote the message
        return self.args[0]


class UnitError(ModelError):
    """A value carries a unit that does not match the dimension of its field."""


class SimulationError(WorkbenchError, RuntimeError):
    """Base class of the errors raised while solving the equations of motion."""

    def __init__(self, message: str, time: float | None = None):
        self.time = time
        if time is not None:
            message = f"t = {time:.6g} s: {message}"
        super().__init__(message)


class AssemblyError(SimulationError):
    """The position problem (closure constraints) has no solution near the guess."""

    def __init__(self, message: str, time: float | None = None, residual: float = float("nan"),
                 constraints=()):
        self.residual = residual
        self.constraints = list(constraints)
        super().__init__(message, time)


class SingularConfigurationError(SimulationError):
    """The leading matrix Theta_z = [Phi_z; B] lost rank: the chosen degrees of freedom
    no longer determine the configuration (a singular position of the mechanism)."""

    def __init__(self, message: str, time: float | None = None, joints=(),
                 suggested_dof=()):
        self.joints = list(joints)
        #: coordinates that determine the configuration where the run stopped (best
        #: conditioned there; empty when the mechanism itself is singular there)
        self.suggested_dof = list(suggested_dof)
        super().__init__(message, time)


class NewtonConvergenceError(SimulationError):
    """The Newton-Raphson iteration of an implicit step did not converge."""

    def __init__(self, message: str, time: float | None = None, residual: float = float("nan"),
                 iterations: int = 0):
        self.residual = residual
        self.iterations = iterations
        super().__init__(message, time)


class NonFiniteError(SimulationError, FloatingPointError):
    """A NaN or infinite value appeared in the state, or would appear in a force element
    (``element`` names it, e.g. a spring of zero length whose direction is undefined)."""

    def __init__(self, message: str, time: float | None = None, element: str | None = None):
        self.element = element
        super().__init__(message, time)


class SensitivityError(SimulationError):
    """The trajectory cannot be differentiated as computed: the discrete sensitivities need
    one trapezoidal step per output interval, and the integrator had to sub-step or merge
    steps (next to a singular configuration, or where Newton failed at the full step)."""

    def __init__(self, message: str, time: float | None = None, step: int = -1):
        self.step = step
        super().__init__(message, time)


class StudyError(WorkbenchError):
    """An optimisation study cannot start or cannot go on: bad study input (bounds, option
    values), an existing recording that would be overwritten, a recording that cannot be
    resumed, a baseline design whose analysis fails, or too many failed designs in a row.
    The message names the study, the option or the design."""


class OptionError(WorkbenchError, ValueError):
    """A run option has a value that cannot work (a time step that is not positive, an end
    time before the start or shorter than one step); the message names the option."""
