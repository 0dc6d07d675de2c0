"""torch tensors and numpy arrays as ferry_tensor views (no copy): the
pointer, the dtype, shape and element strides, and how many bytes from the
pointer on the view reaches, which the library checks every access
against."""

from __future__ import annotations

import ctypes as C
from typing import Any, Dict, Optional, Tuple

from . import _abi

# Names the package accepts for a2a dtypes, beside torch and numpy dtypes.
_NAMED: Dict[str, int] = {
    "fp8": _abi.DTYPE_FP8, "float8_e4m3fn": _abi.DTYPE_FP8, "float8_e5m2": _abi.DTYPE_FP8,
    "bf16": _abi.DTYPE_BF16, "bfloat16": _abi.DTYPE_BF16,
    "fp16": _abi.DTYPE_FP16, "float16": _abi.DTYPE_FP16, "half": _abi.DTYPE_FP16,
    "fp32": _abi.DTYPE_FP32, "float32": _abi.DTYPE_FP32, "float": _abi.DTYPE_FP32,
    "int32": _abi.DTYPE_INT32, "uint32": _abi.DTYPE_UINT32, "uint8": _abi.DTYPE_UINT8,
}
_SIZES = {_abi.DTYPE_FP8: 1, _abi.DTYPE_BF16: 2, _abi.DTYPE_FP16: 2, _abi.DTYPE_FP32: 4, _abi.DTYPE_INT32: 4,
          _abi.DTYPE_UINT32: 4, _abi.DTYPE_UINT8: 1}


def dtype_code(dtype: Any) -> Optional[int]:
    """FERRY_DTYPE_* of a torch dtype, a numpy dtype or a name; None when
    ferry has no such element type. torch.uint8 and numpy uint8 are
    FERRY_DTYPE_UINT8, which the library takes wherever fp8 is expected
    (fp8 data as a uint8 view, for torch builds without float8)."""
    if dtype is None:
        return None
    name = str(dtype)
    if name.startswith("torch."):
        name = name[len("torch."):]
    if name in _NAMED:
        return _NAMED[name]
    return None


def dtype_size(code: int) -> int:
    return _SIZES[code]


def tensor(obj: Any, name: str) -> Tuple[Any, Any]:
    """(ferry_tensor, keep) for a torch tensor or numpy array; keep must
    live until the call that reads the view returned. A TypeError or
    ValueError names the argument."""
    t = _abi.Tensor()
    keep = obj
    if hasattr(obj, "data_ptr") and hasattr(obj, "stride"):  # torch
        shape, strides = tuple(obj.shape), tuple(obj.stride())
        ptr, dt = obj.data_ptr(), obj.dtype
        dev = obj.device
        if dev.type == "cuda":
            t.memory, t.device = _abi.MEMORY_CUDA, dev.index or 0
        elif dev.type != "cpu":
            raise ValueError("%s: ferry takes CPU or CUDA tensors, got device %s" % (name, dev))
        itemsize = obj.element_size()
    elif hasattr(obj, "__array_interface__"):  # numpy and friends
        ai = obj.__array_interface__
        shape = tuple(ai["shape"])
        itemsize = obj.dtype.itemsize
        st = ai.get("strides")
        if st is not None and any(s % itemsize for s in st):
            raise ValueError("%s: strides that are not whole elements" % name)
        strides = tuple(s // itemsize for s in st) if st is not None else _packed(shape)
        ptr, dt = ai["data"][0], obj.dtype
        if ai["data"][1]:
            keep = obj  # read-only arrays are fine for inputs; the library writes outputs only
    else:
        raise TypeError("%s: expected a torch tensor or numpy array, got %s" % (name, type(obj).__name__))
    code = dtype_code(dt)
    if code is None:
        raise ValueError("%s: dtype %s has no ferry element type (fp8 as uint8 or float8, bf16, fp16, fp32, "
                         "int32, uint32)" % (name, dt))
    if len(shape) > _abi.TENSOR_MAX_DIMS:
        raise ValueError("%s: %d dimensions, at most %d" % (name, len(shape), _abi.TENSOR_MAX_DIMS))
    if any(s < 0 for s in strides):
        raise ValueError("%s: negative strides" % name)
    t.data = ptr or None
    t.dtype = code
    t.ndim = len(shape)
    for i, (n, s) in enumerate(zip(shape, strides)):
        t.shape[i], t.strides[i] = n, s
    # Bytes from data to one past the last element the view reaches.
    if all(n > 0 for n in shape):
        t.nbytes = (sum((n - 1) * s for n, s in zip(shape, strides)) + 1) * itemsize
    else:
        t.nbytes = 0
    return t, keep


def _packed(shape: Tuple[int, ...]) -> Tuple[int, ...]:
    out = []
    acc = 1
    for n in reversed(shape):
        out.append(acc)
        acc *= n
    return tuple(reversed(out))


def ref(t: Optional[Any]) -> Any:
    """A pointer argument for a ferry_tensor, or NULL."""
    return None if t is None else C.byref(t)
