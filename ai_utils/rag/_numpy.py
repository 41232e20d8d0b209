"""The one place the RAG stores import numpy, so `import ai_utils.rag` stays free of it until a store is built."""

from __future__ import annotations

import numpy
import numpy.typing

np = numpy
npt = numpy.typing

__all__ = ["np", "npt"]
