"""Between numpy dtypes and the safetensors dtype names the C++ library uses."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from . import _core

# safetensors name -> numpy dtype. Sub-byte types (F4, F6_*) have no packed
# numpy form: ml_dtypes stores them one per byte, so they are not listed.
_NUMPY_OF: dict[str, np.dtype] = {
    "BOOL": np.dtype(np.bool_),
    "U8": np.dtype(np.uint8),
    "I8": np.dtype(np.int8),
    "F8_E5M2": np.dtype(ml_dtypes.float8_e5m2),
    "F8_E4M3": np.dtype(ml_dtypes.float8_e4m3fn),
    "F8_E8M0": np.dtype(ml_dtypes.float8_e8m0fnu),
    "F8_E4M3FNUZ": np.dtype(ml_dtypes.float8_e4m3fnuz),
    "F8_E5M2FNUZ": np.dtype(ml_dtypes.float8_e5m2fnuz),
    "I16": np.dtype(np.int16),
    "U16": np.dtype(np.uint16),
    "F16": np.dtype(np.float16),
    "BF16": np.dtype(ml_dtypes.bfloat16),
    "I32": np.dtype(np.int32),
    "U32": np.dtype(np.uint32),
    "F32": np.dtype(np.float32),
    "C64": np.dtype(np.complex64),
    "F64": np.dtype(np.float64),
    "I64": np.dtype(np.int64),
    "U64": np.dtype(np.uint64),
}
_NAME_OF: dict[np.dtype, str] = {dtype: name for name, dtype in _NUMPY_OF.items()}
DTYPE_NAMES: tuple[str, ...] = tuple(_core._dtype_names())


def dtype_name(dtype: Any) -> str:
    """The safetensors name ("F32", "BF16") of a numpy dtype, or of a name given in any case."""
    if isinstance(dtype, str):
        upper = dtype.upper()
        if upper in DTYPE_NAMES:
            return upper
    try:
        return _NAME_OF[np.dtype(dtype)]
    except (KeyError, TypeError) as e:
        from .errors import UnsupportedError

        raise UnsupportedError(f"reshard has no dtype for {dtype!r}") from e


def numpy_dtype(name: str) -> np.dtype:
    """The numpy dtype of a safetensors dtype name; UnsupportedError for sub-byte types."""
    try:
        return _NUMPY_OF[name]
    except KeyError as e:
        from .errors import UnsupportedError

        raise UnsupportedError(f"dtype {name} has no numpy form (sub-byte elements are packed)") from e
