"""Turns NumPy arrays, torch CPU tensors and buffer-protocol objects into what the native
module takes: an address, an element count and a dtype name, after checking everything a
collective needs (CPU memory, contiguous, a supported dtype, writable when written).

No data is copied: the collective works on the caller's memory. The owning objects are
passed along as `keep` so the native Worker holds them until the collective is done.
"""

import sys

import numpy

from tributary._tributary import InvalidArgument

# NumPy and torch spellings of the dtypes Tributary reduces.
_NUMPY_DTYPES = {"float32", "float64", "float16", "int8", "uint8", "int32", "int64"}
_TORCH_DTYPES = {
    "torch.float32": "float32",
    "torch.float64": "float64",
    "torch.float16": "float16",
    "torch.bfloat16": "bfloat16",
    "torch.int8": "int8",
    "torch.uint8": "uint8",
    "torch.int32": "int32",
    "torch.int64": "int64",
}
SUPPORTED_DTYPES = ("float32", "float64", "float16", "bfloat16", "int8", "uint8", "int32", "int64")
ITEMSIZE = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "int8": 1, "uint8": 1,
            "int32": 4, "int64": 8}


def invalid(message):
    """An InvalidArgument raised from Python, shaped like the native ones."""
    error = InvalidArgument("invalid argument: " + message)
    error.code = "invalid argument"
    return error


class Buffer:
    """Contiguous CPU memory of `count` elements of `dtype`, owned by `owner`."""

    __slots__ = ("address", "count", "dtype", "owner")

    def __init__(self, address, count, dtype, owner):
        self.address = address
        self.count = count
        self.dtype = dtype
        self.owner = owner

    @property
    def nbytes(self):
        return self.count * ITEMSIZE[self.dtype]


def _is_torch_tensor(x):
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _from_tensor(t, name, writable):
    if t.device.type != "cpu":
        raise invalid(
            f"{name} is a {t.device.type} tensor; this build of tributary runs collectives on "
            "CPU tensors only (it was built without CUDA support): move it with .cpu()")
    if str(t.layout) != "torch.strided":
        raise invalid(f"{name} has layout {t.layout}; only dense (strided) tensors are supported")
    dtype = _TORCH_DTYPES.get(str(t.dtype))
    if dtype is None:
        raise invalid(f"{name} has dtype {t.dtype}; supported: {', '.join(SUPPORTED_DTYPES)}")
    if not t.is_contiguous():
        raise invalid(
            f"{name} is not contiguous (strides {tuple(t.stride())} for shape {tuple(t.shape)}); "
            "collectives work in place on contiguous memory: pass .contiguous() and copy back")
    return Buffer(t.data_ptr(), t.numel(), dtype, t)


def _from_ndarray(a, name, writable):
    if a.dtype.name not in _NUMPY_DTYPES:
        raise invalid(f"{name} has dtype {a.dtype}; supported: {', '.join(sorted(_NUMPY_DTYPES))}"
                      " (bfloat16 through torch tensors)")
    if not a.flags["C_CONTIGUOUS"]:
        raise invalid(f"{name} is not C-contiguous (strides {a.strides}); pass "
                      "numpy.ascontiguousarray(...) and copy back")
    if writable and not a.flags["WRITEABLE"]:
        raise invalid(f"{name} is read-only, but this collective writes it")
    return Buffer(a.__array_interface__["data"][0], a.size, a.dtype.name, a)


def as_buffer(x, name="tensor", writable=True):
    """The Buffer behind `x`, or InvalidArgument / TypeError saying why it cannot be used."""
    if _is_torch_tensor(x):
        return _from_tensor(x, name, writable)
    if isinstance(x, numpy.ndarray):
        return _from_ndarray(x, name, writable)
    try:
        view = memoryview(x)
    except TypeError:
        raise TypeError(f"{name} must be a NumPy array, a torch tensor or a buffer; got "
                        f"{type(x).__name__}") from None
    buf = _from_ndarray(numpy.asarray(view), name, writable)
    buf.owner = (x, buf.owner)
    return buf


def same_kind(a, b, a_name, b_name):
    """Raises unless a and b hold the same dtype."""
    if a.dtype != b.dtype:
        raise invalid(f"{b_name} has dtype {b.dtype} but {a_name} has {a.dtype}")


def expect_count(buf, want, name, why):
    if buf.count != want:
        raise invalid(f"{name} has {buf.count} elements; {why} needs {want}")


def empty_like(buf, count):
    """A new array of `count` elements of buf's kind (a torch tensor for a tensor)."""
    owner = buf.owner[1] if isinstance(buf.owner, tuple) else buf.owner
    if _is_torch_tensor(owner):
        return owner.new_empty((count,))
    return numpy.empty((count,), dtype=buf.dtype)
