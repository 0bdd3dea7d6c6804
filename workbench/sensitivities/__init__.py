"""Exact design sensitivities of a simulated trajectory: the direct and adjoint sweeps
(:mod:`~workbench.sensitivities.sweeps`, generic over formulations) and the driver
(:func:`sensitivity`, :class:`SensitivityResult`, :func:`objective_values`,
:func:`measure_values`)."""

from workbench.sensitivities.driver import (SensitivityResult, measure_values, objective_values,
                                            sensitivity)

__all__ = ["sensitivity", "SensitivityResult", "objective_values", "measure_values"]
