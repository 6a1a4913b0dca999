"""spaCy's layers multiplying their matrices through numpy's BLAS: the same parses, faster.

thinc, the layer library under spaCy, multiplies matrices with blis on one thread
(``NumpyOps.gemm``). In ``en_core_web_sm`` those products are most of a parse: the shared
``tok2vec`` (four maxout layers over every token) and the parser's precomputed first
layer. numpy's ``matmul`` calls the BLAS numpy was built with (OpenBLAS in the wheels),
which uses every core the process may use (``OPENBLAS_NUM_THREADS`` or
``OMP_NUM_THREADS`` bound it) and faster kernels. On 2 cores (an AMD EPYC) a parse
without the entity recogniser takes 0.52-0.63 of its time on the dev texts (200 RAG
samples' passages and answers: 4.44 s against 7.77 s; ``benchmarks/parse_speed.py``),
and the entity recogniser about 0.7 of its. Two Python threads parsing half the texts each,
on one BLAS thread each, were no faster than one (the rest of a parse holds the GIL).

`use_blas_gemm` gives every layer of a loaded pipeline `BlasGemmOps`, thinc's numpy
backend with only ``gemm`` replaced, where numpy's BLAS is OpenBLAS, MKL or Accelerate
(`FAST_BLAS`; a numpy on a reference BLAS keeps thinc's blis). The parser's transition
loop keeps thinc's own single-threaded routine (it multiplies one small batch of states
at a time, without the GIL). The products differ from blis's in the order of their sums
only, by about 3e-6 on the token vectors. On the 8,292 dev texts of
``benchmarks/parse_speed.py`` every annotation (tags, lemmas, dependencies, sentence
bounds, entities) was the same, and ``tests/test_pipeline_gemm.py`` holds that on the
shipped examples and 40 news articles.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy

__all__ = ["FAST_BLAS", "blas_gemm_ops", "numpy_blas", "use_blas_gemm"]

#: the BLAS libraries numpy may be built with whose products beat thinc's blis (a
#: reference BLAS, as some Linux distributions link by default, would not)
FAST_BLAS = ("openblas", "mkl", "accelerate")


def numpy_blas() -> str:
    """The name of the BLAS numpy was built with, lower-cased ("scipy-openblas" for the
    wheels); "" where numpy does not say."""
    try:
        config = numpy.show_config(mode="dicts")
        return str(config["Build Dependencies"]["blas"]["name"]).lower()
    except (TypeError, KeyError, ValueError):
        return ""


def blas_gemm_ops() -> Any:
    """A `BlasGemmOps` (thinc's ``NumpyOps`` whose ``gemm`` is numpy's ``matmul``); the
    class is made on first use, so that importing this module does not import thinc."""
    return _ops_class()()


@functools.cache
def _ops_class() -> type:
    from thinc.api import NumpyOps

    class BlasGemmOps(NumpyOps):
        """thinc's numpy backend, its matrix products through numpy's ``matmul``."""

        def gemm(
            self,
            x: numpy.ndarray,
            y: numpy.ndarray,
            out: numpy.ndarray | None = None,
            trans1: bool = False,
            trans2: bool = False,
        ) -> numpy.ndarray:
            # matmul writes into ``out`` when given and returns it (else a new array)
            return numpy.matmul(x.T if trans1 else x, y.T if trans2 else y, out=out)

    return BlasGemmOps


def use_blas_gemm(nlp: Any) -> int:
    """Give every layer of each component of pipeline ``nlp`` that runs on thinc's numpy
    backend one `BlasGemmOps` (components on another backend, a GPU's, keep theirs),
    where numpy's BLAS is one of `FAST_BLAS` (`numpy_blas`; else the pipeline is left as
    it is); returns the number of layers given it."""
    if not any(name in numpy_blas() for name in FAST_BLAS):
        return 0
    from thinc.api import Model, NumpyOps

    ops = blas_gemm_ops()
    given = 0
    for _, component in nlp.pipeline:
        model = getattr(component, "model", None)
        if not isinstance(model, Model):
            continue
        for layer in model.walk():
            if type(layer.ops) is NumpyOps:
                layer.ops = ops
                given += 1
    return given
