"""Flat-array layer shared by every formulation: the compiled-array layout
(:mod:`~workbench.kernels.layout`), the tree recursions, point kinematics, constraints,
applied forces and inverse dynamics (:mod:`~workbench.kernels.tree`), their forward tangents
(:mod:`~workbench.kernels.tangents`), their first reverse-mode kernels
(:mod:`~workbench.kernels.cotangents`), objective measures (:mod:`~workbench.kernels.measures`),
small dense linear algebra (:mod:`~workbench.kernels.linalg`) and kernel status codes
(:mod:`~workbench.kernels.status`).  Numba ``njit(cache=True)`` kernels over the arrays of a
:class:`~workbench.compiled.CompiledModel`; nothing here raises or allocates Python objects.

Suffix legend of kernel names (one kernel family per quantity):

=========  ==========================================================================
suffix     meaning
=========  ==========================================================================
(none)     the value at one state
``_t``     forward tangent: the directional derivative along one direction
           (``dz, dzd, dzdd, dp``) of the same quantity
``_b``     the value for a *batch* of ``B`` directions at once (columns of a block)
``_tb``    forward tangent of a batch of directions
``_r``     reverse mode: the transpose of the ``_t`` kernel (vector-Jacobian
           product, :mod:`~workbench.kernels.cotangents`)
``_ts``    tangent of a point force given by its three scalar components
``_g``     the same quantity in the global natural-coordinate formulation
           (:mod:`workbench.formulations.natural`)
=========  ==========================================================================
"""
