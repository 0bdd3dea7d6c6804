"""The speed controller's drive-torque law (pure numba functions of the field array ``p``)
and its exact directional derivative; the kernels of both formulation families call them
(:func:`workbench.kernels.tree.applied_forces`, :func:`workbench.kernels.tangents.
speed_control_t`, :func:`workbench.formulations.natural.kernels.speed_control_forces`).

With the gain ``K = p[f]`` and the saturation ``T_max = p[f + 1]``::

    T = T_max tanh(u),   u = K (v_set - v) / T_max

(proportional for small errors, smoothly saturated at ``+-T_max``, no integral state).
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def drive_torque(p, f, vset, v):
    """``T`` of the controller whose gain and saturation are the fields ``f, f + 1``."""
    tmax = p[f + 1]
    return tmax * np.tanh(p[f] * (vset - v) / tmax)


@njit(cache=True)
def drive_torque_dir(p, dp, f, vset, v, dvset, dv):
    """``(T, dT)`` along the field direction ``dp`` and the tangents ``dvset``, ``dv`` of
    the set and measured speeds: with ``eps = v_set - v``, ``dT = dT_max tanh u + T_max
    (1 - tanh^2 u) du``, ``du = (dK eps + K deps) / T_max - K eps dT_max / T_max^2``."""
    gain, tmax, dgain, dtmax = p[f], p[f + 1], dp[f], dp[f + 1]
    eps = vset - v
    tu = np.tanh(gain * eps / tmax)
    du = (dgain * eps + gain * (dvset - dv)) / tmax - gain * eps * dtmax / (tmax * tmax)
    return tmax * tu, dtmax * tu + tmax * (1.0 - tu * tu) * du
