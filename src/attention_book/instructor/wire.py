"""The grader's data format: values as bytes, read back under hard bounds (issue 19).

Everything that travels between the grader and a submission's kernel (the inputs of a hidden
test, the answer's values) uses this small format instead of ``torch.save``/``torch.load``: a
zip archive with compressed members, views with zero or overlapping strides and nested lists
that share their elements can each make a reader spend gigabytes or hours on a few kilobytes.
Here a value is a tree written out in full, so a reply can never be bigger than its bytes:

========  =====================================================================================
tag       payload
========  =====================================================================================
``N``     ``None``
``T F``   ``True`` / ``False``
``I``     an int that fits 64 bits (8 bytes, little-endian, signed)
``J``     a larger int: length (2 bytes) and at most ``MAX_DIGITS`` decimal digits
``D``     a float (8 bytes); ``C`` a complex number (2 x 8 bytes)
``S``     a str: length (4 bytes) and UTF-8 bytes
``L U``   a list / a tuple: count (4 bytes) and the items
``M``     a dict with str keys: count (4 bytes) and (key, value) pairs
``X``     a tensor: dtype code (1 byte), number of dimensions (1 byte), each size (8 bytes), then
          exactly ``numel x itemsize`` raw bytes in C order (contiguous, little-endian)
``Y``     a torch dtype: its name (a str), one of the dtypes tensors may have
``O``     a value that is not data (a module, a function, ...): its type name (a str)
========  =====================================================================================

:func:`decode` checks every bound *before* it allocates: the total size, the nesting depth, the
number of items, the length of each string, the number of dimensions, and that a tensor's bytes
are exactly ``numel x itemsize`` and present. A decoded tensor owns a fresh contiguous storage of
exactly that size (:func:`check_tensor` verifies it, and refuses any view whose strides are zero,
overlap or address more than its storage holds). A value that breaks a bound raises
:class:`WireError`; the grader then scores the test 0 and flags the submission.

Frames (:func:`write_frame`, :func:`read_frame`) carry one value over a pipe: a magic word, the
call's nonce, the length, the bytes; reading stops at the length limit and at the deadline.
"""

from __future__ import annotations

import math
import os
import re
import select
import struct
import sys
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

__all__ = ["WireError", "Bounds", "Opaque", "encode", "decode", "check_tensor", "write_frame", "read_frame",
           "read_header", "read_exactly", "drain", "MAGIC", "DEFAULT_BOUNDS"]

MAGIC = b"ABW1"
MAX_DIGITS = 400
_HEADER = struct.Struct("<4sQQ")  # magic, nonce, payload length
_INT_DIGITS = re.compile(rb"-?[0-9]+")
MAX_DIM = 2**40  # one size of a tensor (the bytes bound the product; this bounds each factor)


class WireError(ValueError):
    """A value that is not in the format or breaks one of its bounds."""


@dataclass(frozen=True)
class Bounds:
    max_bytes: int = 64 * 1024 * 1024  # the whole value
    max_depth: int = 32  # nested lists/tuples/dicts
    max_items: int = 200_000  # every value counts one (a tensor counts one)
    max_str: int = 1024 * 1024  # characters of one string
    max_ndim: int = 16


DEFAULT_BOUNDS = Bounds()


@dataclass(frozen=True)
class Opaque:
    """A value the kernel cannot send back as data (a module, a function, ...): its type only."""

    type_name: str
    text: str = ""


def _dtypes():
    import torch

    return [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32,
            torch.int16, torch.int8, torch.uint8, torch.bool, torch.complex64, torch.complex128]


# ------------------------------------------------------------------------------------------------
# Writing
# ------------------------------------------------------------------------------------------------


def encode(value: Any, bounds: Bounds = DEFAULT_BOUNDS, strict: bool = True) -> bytes:
    """``value`` as bytes. ``strict``: anything but data raises TypeError (the grader's inputs);
    otherwise it becomes an :class:`Opaque` with its type name (the kernel's answers)."""
    parts: List[bytes] = []
    _encode(value, parts, bounds, strict, 0, [0])
    data = b"".join(parts)
    if len(data) > bounds.max_bytes:
        raise WireError(f"the value takes {len(data)} bytes, more than {bounds.max_bytes}")
    return data


def _encode(value: Any, out: List[bytes], bounds: Bounds, strict: bool, depth: int, count: List[int]) -> None:
    count[0] += 1
    if count[0] > bounds.max_items:
        raise WireError(f"more than {bounds.max_items} items")
    if depth > bounds.max_depth:
        raise WireError(f"nested deeper than {bounds.max_depth}")
    import torch

    if value is None:
        out.append(b"N")
    elif value is True or value is False:
        out.append(b"T" if value else b"F")
    elif type(value) is int:
        if -(2 ** 63) <= value < 2 ** 63:
            out.append(b"I" + struct.pack("<q", value))
        else:
            digits = str(value).encode("ascii")
            if len(digits) > MAX_DIGITS:
                raise WireError(f"an int with more than {MAX_DIGITS} digits")
            out.append(b"J" + struct.pack("<H", len(digits)) + digits)
    elif type(value) is float:
        out.append(b"D" + struct.pack("<d", value))
    elif type(value) is complex:
        out.append(b"C" + struct.pack("<dd", value.real, value.imag))
    elif type(value) is str:
        _text(b"S", value, out, bounds)
    elif isinstance(value, torch.Tensor) and type(value) in (torch.Tensor, torch.nn.Parameter):
        out.append(_tensor_bytes(value, bounds))
    elif type(value) in (list, tuple):
        out.append((b"L" if type(value) is list else b"U") + struct.pack("<I", len(value)))
        for item in value:
            _encode(item, out, bounds, strict, depth + 1, count)
    elif type(value) is dict:
        out.append(b"M" + struct.pack("<I", len(value)))
        for key, item in value.items():
            if type(key) is not str:
                raise TypeError(f"dict keys must be str, got {type(key).__name__}")
            _text(b"S", key, out, bounds)
            _encode(item, out, bounds, strict, depth + 1, count)
    elif isinstance(value, torch.dtype) and value in _dtypes():
        _text(b"Y", str(value).replace("torch.", ""), out, bounds)
    elif isinstance(value, Opaque):
        _text(b"O", value.type_name, out, bounds)
    elif strict:
        raise TypeError(f"only tensors and plain data travel to a kernel, got {type(value).__name__}")
    else:
        _text(b"O", type(value).__name__, out, bounds)


def _text(tag: bytes, text: str, out: List[bytes], bounds: Bounds) -> None:
    if len(text) > bounds.max_str:
        raise WireError(f"a string longer than {bounds.max_str} characters")
    data = text.encode("utf-8", "surrogatepass")
    out.append(tag + struct.pack("<I", len(data)) + data)


def _tensor_bytes(value, bounds: Bounds) -> bytes:
    import torch

    codes = _dtypes()
    if value.layout != torch.strided or value.is_quantized or value.device.type == "meta":
        raise WireError(f"a {value.layout} tensor is not data")
    if value.dtype not in codes:
        raise WireError(f"tensors of dtype {value.dtype} are not data here")
    if value.dim() > bounds.max_ndim:
        raise WireError(f"a tensor with more than {bounds.max_ndim} dimensions")
    size = value.numel() * value.element_size()
    if size > bounds.max_bytes:  # before .contiguous() materialises an expanded view
        raise WireError(f"a tensor of {size} bytes, more than {bounds.max_bytes}")
    if sys.byteorder != "little":  # pragma: no cover - every platform torch ships for
        raise WireError("big-endian machines are not supported")
    # copied into a fresh 1-D tensor: a "contiguous" tensor with size-1 dimensions may still have
    # strides other than 1, which a byte view refuses
    flat = torch.empty(value.numel(), dtype=value.dtype).copy_(value.detach().to("cpu").reshape(-1))
    raw = flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""
    head = b"X" + bytes([codes.index(value.dtype), value.dim()]) + struct.pack(f"<{value.dim()}Q", *value.shape)
    return head + raw


# ------------------------------------------------------------------------------------------------
# Reading
# ------------------------------------------------------------------------------------------------


class _Reader:
    def __init__(self, data, bounds: Bounds):
        self.data = memoryview(data)
        self.pos = 0
        self.bounds = bounds
        self.items = 0

    def take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.data):
            raise WireError("the value is cut short")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def unpack(self, fmt: str):
        size = struct.calcsize(fmt)
        return struct.unpack(fmt, self.take(size))

    def text(self) -> str:
        (length,) = self.unpack("<I")
        if length > 4 * self.bounds.max_str:
            raise WireError(f"a string longer than {self.bounds.max_str} characters")
        try:
            text = bytes(self.take(length)).decode("utf-8")
        except UnicodeDecodeError:
            raise WireError("a string that is not UTF-8") from None
        if len(text) > self.bounds.max_str:
            raise WireError(f"a string longer than {self.bounds.max_str} characters")
        return text

    def value(self, depth: int) -> Any:
        self.items += 1
        if self.items > self.bounds.max_items:
            raise WireError(f"more than {self.bounds.max_items} items")
        if depth > self.bounds.max_depth:
            raise WireError(f"nested deeper than {self.bounds.max_depth}")
        tag = bytes(self.take(1))
        if tag == b"N":
            return None
        if tag in (b"T", b"F"):
            return tag == b"T"
        if tag == b"I":
            return self.unpack("<q")[0]
        if tag == b"J":
            (length,) = self.unpack("<H")
            if length > MAX_DIGITS:
                raise WireError(f"an int with more than {MAX_DIGITS} digits")
            digits = bytes(self.take(length))
            if not _INT_DIGITS.fullmatch(digits):
                raise WireError("a malformed int")
            return int(digits)
        if tag == b"D":
            return self.unpack("<d")[0]
        if tag == b"C":
            real, imag = self.unpack("<dd")
            return complex(real, imag)
        if tag == b"S":
            return self.text()
        if tag == b"O":
            return Opaque(self.text()[:200])
        if tag == b"Y":
            import torch

            name = self.text()
            dtype = getattr(torch, name, None) if name.isidentifier() else None
            if dtype not in _dtypes():
                raise WireError(f"unknown dtype {name[:40]!r}")
            return dtype
        if tag in (b"L", b"U"):
            (count,) = self.unpack("<I")
            if count > len(self.data) - self.pos:  # every item takes at least one byte
                raise WireError("a list longer than its bytes")
            items = [self.value(depth + 1) for _ in range(count)]
            return items if tag == b"L" else tuple(items)
        if tag == b"M":
            (count,) = self.unpack("<I")
            if count > len(self.data) - self.pos:
                raise WireError("a dict longer than its bytes")
            out: Dict[str, Any] = {}
            for _ in range(count):
                if bytes(self.take(1)) != b"S":
                    raise WireError("a dict key that is not a str")
                key = self.text()
                out[key] = self.value(depth + 1)
            return out
        if tag == b"X":
            return self.tensor()
        raise WireError(f"unknown tag {tag!r}")

    def tensor(self):
        import torch

        codes = _dtypes()
        code, ndim = self.unpack("<BB")
        if code >= len(codes):
            raise WireError("a tensor of an unknown dtype")
        if ndim > self.bounds.max_ndim:
            raise WireError(f"a tensor with more than {self.bounds.max_ndim} dimensions")
        shape = self.unpack(f"<{ndim}Q") if ndim else ()
        if any(size > MAX_DIM for size in shape):  # an empty tensor could otherwise ask for 2**63 rows
            raise WireError(f"a tensor with a size above {MAX_DIM}")
        dtype = codes[code]
        itemsize = torch.empty((), dtype=dtype).element_size()
        numel = math.prod(shape) if shape else 1
        nbytes = numel * itemsize
        if nbytes > len(self.data) - self.pos:  # checked before anything is allocated
            raise WireError(f"a tensor of shape {tuple(shape)} needs {nbytes} bytes, the value has "
                            f"{len(self.data) - self.pos} left")
        raw = self.take(nbytes)
        if numel == 0:
            return torch.empty(tuple(shape), dtype=dtype)
        if dtype == torch.bool:
            flat = torch.frombuffer(bytearray(raw), dtype=torch.uint8) != 0
        else:
            flat = torch.frombuffer(bytearray(raw), dtype=dtype)
        result = flat.reshape(tuple(shape))
        check_tensor(result)
        return result


def decode(data, bounds: Bounds = DEFAULT_BOUNDS) -> Any:
    """The value in ``data`` (bytes), or WireError when it breaks a bound or the format."""
    if len(data) > bounds.max_bytes:
        raise WireError(f"the value takes {len(data)} bytes, more than {bounds.max_bytes}")
    reader = _Reader(data, bounds)
    try:
        value = reader.value(0)
    except WireError:
        raise
    except (ArithmeticError, ValueError, TypeError, RuntimeError, MemoryError, struct.error) as error:
        # whatever the bytes make a library raise is still a reply that breaks the format: flagged
        raise WireError(f"a malformed value ({type(error).__name__})") from None
    if reader.pos != len(reader.data):
        raise WireError("bytes left after the value")
    return value


def check_tensor(value) -> None:
    """Refuse a tensor whose view addresses more than its storage holds, or whose strides are zero
    or overlap (``zeros(1).expand(5e8)`` is 4 bytes of storage posing as 2 GB)."""
    import torch

    if not isinstance(value, torch.Tensor):
        raise WireError(f"expected a tensor, got {type(value).__name__}")
    if value.layout != torch.strided:
        raise WireError(f"a {value.layout} tensor is not data")
    if value.numel() == 0:
        return
    for size, stride in zip(value.shape, value.stride()):
        if size > 1 and stride == 0:
            raise WireError("a tensor with a zero stride (an expanded view)")
    expected = 1  # dims of size > 1 ordered by stride must tile the storage like a contiguous block
    for stride, size in sorted((abs(st), s) for s, st in zip(value.shape, value.stride()) if s > 1):
        if stride != expected:
            raise WireError("a tensor whose strides overlap or leave gaps")
        expected *= size
    last = value.storage_offset() + sum((s - 1) * abs(st) for s, st in zip(value.shape, value.stride()))
    needed = (last + 1) * value.element_size()
    if value.untyped_storage().nbytes() < needed:
        raise WireError(f"a tensor view addresses {needed} bytes of a {value.untyped_storage().nbytes()}-byte storage")


# ------------------------------------------------------------------------------------------------
# Frames over pipes
# ------------------------------------------------------------------------------------------------


def write_frame(fd: int, nonce: int, payload: bytes, deadline: Optional[float] = None) -> None:
    """Write one frame to ``fd`` (non-blocking aware): TimeoutError past ``deadline``."""
    data = memoryview(_HEADER.pack(MAGIC, nonce, len(payload)) + payload)
    while data:
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("the other side does not read")
            _, ready, _ = select.select([], [fd], [], min(remaining, 1.0))
            if not ready:
                continue
        try:
            written = os.write(fd, data)
        except BlockingIOError:
            continue
        data = data[written:]


def read_header(fd: int, deadline: float) -> Tuple[int, int]:
    """Read a frame's header from ``fd``: ``(nonce, payload length)``; WireError if it does not
    start with the magic word (TimeoutError, EOFError as :func:`read_exactly`)."""
    magic, nonce, length = _HEADER.unpack(read_exactly(fd, _HEADER.size, deadline))
    if magic != MAGIC:
        raise WireError("the reply does not start with the format's magic word")
    return nonce, length


def read_frame(fd: int, nonce: int, limit: int, deadline: float) -> bytes:
    """Read one frame from ``fd``: its nonce must be ``nonce`` and its payload at most ``limit``
    bytes; nothing beyond the frame's declared length is read. TimeoutError past ``deadline``,
    WireError for a frame that is not ours or too long, EOFError when the writer is gone."""
    got, length = read_header(fd, deadline)
    if got != nonce:
        raise WireError("the reply answers another call")
    if length > limit:
        raise WireError(f"the reply takes {length} bytes, more than {limit}")
    return read_exactly(fd, length, deadline)


def read_exactly(fd: int, count: int, deadline: float) -> bytes:
    chunks: List[bytes] = []
    need = count
    while need:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("no complete reply in time")
        ready, _, _ = select.select([fd], [], [], min(remaining, 1.0))
        if not ready:
            continue
        try:
            chunk = os.read(fd, min(need, 1 << 20))
        except BlockingIOError:
            continue
        if not chunk:
            raise EOFError("the kernel closed its end")
        chunks.append(chunk)
        need -= len(chunk)
    return b"".join(chunks)


def drain(fd: int, limit: int = 64 * 1024 * 1024) -> int:
    """Read and drop whatever is waiting in ``fd`` (non-blocking); at most ``limit`` bytes."""
    dropped = 0
    while dropped < limit:
        ready, _, _ = select.select([fd], [], [], 0)
        if not ready:
            break
        try:
            chunk = os.read(fd, 1 << 20)
        except BlockingIOError:
            break
        if not chunk:
            break
        dropped += len(chunk)
    return dropped
