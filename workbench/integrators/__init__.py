"""Time integration: the implicit trapezoidal rule with Newton-Raphson on the step residual of
the formulation in use (:func:`simulate`, :class:`SimulationResult`)."""

from workbench.integrators.simulation import SimulationResult, simulate

__all__ = ["simulate", "SimulationResult"]
