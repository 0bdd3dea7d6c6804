"""Model description: the :class:`~workbench.model.builder.Model` builder
(:mod:`~workbench.model.builder`) and its elements (:mod:`~workbench.model.elements`), model
files in TOML/JSON (:mod:`~workbench.model.files`, :mod:`~workbench.model.serialize`), units
(:mod:`~workbench.model.units`) and the catalog of shipped models
(:mod:`~workbench.model.catalog`, files in ``workbench/model/data/``).

This face imports nothing: the elements and units sit below the compiled layer, the builder
(whose ``Model.compile()`` calls :func:`workbench.compiled.compile_model`) and the catalog above
it.  The public names are re-exported by :mod:`workbench`."""
