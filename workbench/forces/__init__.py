"""Force laws evaluated by the kernels: the tire (:mod:`~workbench.forces.tire`, rigid disc on
a road profile with regularised friction; :mod:`~workbench.forces.tire_mf`, the same contact
with the Magic Formula 5.2 law of :mod:`~workbench.forces.magic_formula`, and the choice of law
per tire) and their exact tangents.  Springs, dampers, joint springs and loads are evaluated
in :func:`workbench.kernels.tree.applied_forces`."""
