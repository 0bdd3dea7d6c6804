"""Applications on the public API: the command line (:mod:`~workbench.apps.cli`), the
reproduced paper tables (:mod:`~workbench.apps.reports`, :mod:`~workbench.apps.buggy_reports`),
the benchmark (:mod:`~workbench.apps.bench`) and vehicle preparation
(:mod:`~workbench.apps.vehicle`)."""
