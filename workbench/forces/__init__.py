"""Force laws evaluated by the kernels: the tire (:mod:`~workbench.forces.tire`, rigid disc on
a road profile with regularised friction) and their exact tangents.  Springs, dampers, joint
springs and loads are evaluated in :func:`workbench.kernels.tree.applied_forces`."""
