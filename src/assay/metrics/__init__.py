"""Metrics: the base every metric derives from (`assay.metrics.base`), the registry that
finds them by name and suite (`assay.metrics.registry`), and the built-in families, one
module (or subpackage) per family beside them.

Importing this package loads nothing: the registry imports every module of it on its
first lookup (`assay.metrics.registry.load_builtin`), and each family registers its
metrics with ``@register``. A new family is a new module here.
"""
