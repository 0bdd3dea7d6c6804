"""Status codes returned by the numba kernels of every formulation (turned into typed
exceptions by :func:`workbench.formulations.status.raise_for_status`)."""

OK = 0
ST_NEWTON = 1
ST_SINGULAR = 2
ST_POSITION = 3
ST_NONFINITE = 4
ST_MASS = 5
ST_ZERO_SPRING = 6  # a point-to-point spring has zero length (bad = spring index)
ST_NEAR_SINGULAR = 7  # a step failed next to a singular configuration (value = rho)

