"""Fields of a file's bytes read eight bytes at a time, in numpy.

A bulk reader knows where each field starts and ends; these helpers read a field as whole
64-bit words instead of byte by byte: the eight bytes at any offset are one element of an
unaligned big-endian view of the buffer, so a short field is one gather. Big-endian, so
that comparing words compares the bytes in order (strcmp order, for text without NUL),
and so that the last byte of a field is the low byte of the word that ends at it, which
is how :func:`decimals` reads the digits of a number (the usual SIMD-within-a-register
steps: digits in pairs, fours, eights).
"""

from __future__ import annotations

import numpy as np

_U = np.uint64
_ONES = _U(0x0101010101010101)
_HIGH = _U(0x8080808080808080)
_LOW7 = _U(0x7F7F7F7F7F7F7F7F)
_ZEROS = _U(0x3030303030303030)          # '0' in every byte
_DOTS = _U(0x1E1E1E1E1E1E1E1E)           # '.' ^ '0'
_PLUS_9 = _U(0x7676767676767676)         # a byte above 9 carries into its high bit
# _KEEP[k]: the low k bytes of a word
_KEEP = np.array([(1 << (8 * k)) - 1 for k in range(9)], dtype=np.uint64)
_TOP = ~_KEEP[::-1]                        # _TOP[k]: the high k bytes
_POW10 = np.array([10**k for k in range(17)], dtype=np.uint64)
_POW10F = np.array([float(10**k) for k in range(17)])
_MINUS, _PLUS = ord("-"), ord("+")
MAX_DECIMAL_BYTES = 16                  # sign, digits and dot in two words
_MAX_DIGITS = 15                        # below 2**53: digits / 10**k is then correctly rounded


class WordView:
    """The eight bytes at each offset of ``a``, as big-endian uint64, at any offset from
    -16 to len(a) - 1 (bytes outside the buffer read as zero)."""

    def __init__(self, a: np.ndarray, reach: int = 16):
        self.size = len(a)
        self.reach = reach
        self.limit = len(a) - 8                       # the last offset with 8 bytes in the buffer
        self.inner = np.ndarray(shape=(max(self.limit + 1, 0),), dtype=">u8", buffer=a, strides=(1,)) \
            if self.limit >= 0 else None
        lo = max(self.limit - reach, 0)
        edge = np.concatenate((np.zeros(reach, np.uint8), a[:reach + 8], np.zeros(8, np.uint8)))
        tail = np.concatenate((a[lo:], np.zeros(reach + 8, np.uint8)))
        self._head = np.ndarray(shape=(len(edge) - 7,), dtype=">u8", buffer=edge, strides=(1,))
        self._tail = np.ndarray(shape=(len(tail) - 7,), dtype=">u8", buffer=tail, strides=(1,))
        self._tail_from = lo

    def at(self, offsets: np.ndarray) -> np.ndarray:
        """The word starting at each offset (int64 array)."""
        if self.inner is None:
            out = np.zeros(len(offsets), dtype=np.uint64)
        else:
            out = self.inner[np.minimum(np.maximum(offsets, 0), self.limit)].astype(np.uint64)
        low = offsets < 0
        if low.any():
            out[low] = self._head[offsets[low] + self.reach]
        high = offsets > self.limit
        if high.any():
            out[high] = self._tail[offsets[high] - self._tail_from]
        return out


def _bytes_0_to_8(n: np.ndarray) -> np.ndarray:
    return np.minimum(np.maximum(n, 0), 8)


def _keep_low(word: np.ndarray, n: np.ndarray) -> np.ndarray:
    return word & _KEEP[_bytes_0_to_8(n)]


def words(view: WordView, starts: np.ndarray, ends: np.ndarray, width: int) -> np.ndarray:
    """Each span as ``width`` words, zero padded (spans of at most 8 * width bytes)."""
    lens = ends - starts
    out = np.empty((len(starts), width), dtype=np.uint64)
    for j in range(width):
        # the eight bytes from the span's j-th, keeping the span's own (the high ones); a
        # span with none left reads at its end, within the view's reach, and keeps nothing
        left = _bytes_0_to_8(lens - 8 * j)
        out[:, j] = view.at(np.minimum(starts + 8 * j, ends)) & _TOP[left]
    return out


def _eight_digits(x: np.ndarray) -> np.ndarray:
    """The number written by the 8 bytes (each 0-9, most significant first)."""
    x = ((x >> _U(8)) & _U(0x00FF00FF00FF00FF)) * _U(10) + (x & _U(0x00FF00FF00FF00FF))
    x = ((x >> _U(16)) & _U(0x0000FFFF0000FFFF)) * _U(100) + (x & _U(0x0000FFFF0000FFFF))
    return (x >> _U(32)) * _U(10000) + (x & _U(0xFFFFFFFF))


def _zero_bytes(y: np.ndarray) -> np.ndarray:
    """The high bit of each byte of y that is zero (exact: no carry crosses a byte)."""
    return ~(((y & _LOW7) + _LOW7) | y) & _HIGH


def decimals(a: np.ndarray, view: WordView, starts: np.ndarray, ends: np.ndarray, dot: bool
             ) -> tuple[np.ndarray, np.ndarray]:
    """(value, ok) of spans read as [+-]digits[.digits] (no dot unless ``dot``) of at most
    15 digits and 16 bytes: the digits as an integer over a power of ten (both exact, so
    one correctly rounded division: what ``float`` gives). ok is False for any other span
    (exponents, nan, underscores, longer ones), for the caller to read otherwise. The
    buffer must be ASCII."""
    lens = ends - starts
    first = a[np.minimum(starts, len(a) - 1)]
    negative = first == _MINUS
    signed = negative | (first == _PLUS)
    n = lens - signed                               # bytes of digits and dot
    lo = _keep_low(view.at(ends - 8), n)
    hi = _keep_low(view.at(ends - 16), n - 8)
    # bytes outside the number read '0' (which changes no number), then each byte minus '0'
    lo = (lo | (_ZEROS & ~_KEEP[_bytes_0_to_8(n)])) ^ _ZEROS
    hi = (hi | (_ZEROS & ~_KEEP[_bytes_0_to_8(n - 8)])) ^ _ZEROS
    dot_lo, dot_hi = _zero_bytes(lo ^ _DOTS), _zero_bytes(hi ^ _DOTS)
    # every byte a digit but the dots: a byte above 9 sets its high bit when 0x76 is added
    ok = (((lo + _PLUS_9) & _HIGH) == dot_lo) & (((hi + _PLUS_9) & _HIGH) == dot_hi)
    dots = np.bitwise_count(dot_lo) + np.bitwise_count(dot_hi)
    ok &= (dots <= int(dot)) & (n <= MAX_DECIMAL_BYTES) & (n - dots >= 1) & (n - dots <= _MAX_DIGITS)
    # the dot read as a 0 digit: 16 digits at most, exact in uint64
    lo &= ~((dot_lo >> _U(7)) * _U(0xFF))
    hi &= ~((dot_hi >> _U(7)) * _U(0xFF))
    whole = _eight_digits(hi) * _U(10**8) + _eight_digits(lo)
    # digits after the dot: the dot's byte index from the right (one bit set, or none)
    frac = np.where(dot_lo != 0, np.bitwise_count(dot_lo - _U(1)) // 8,
                    np.where(dot_hi != 0, 8 + np.bitwise_count(dot_hi - _U(1)) // 8, 0)).astype(np.int64)
    frac = np.where(ok & (dots > 0), frac, 0)
    scale = _POW10[frac]
    after = whole % scale
    mant = np.where(dots > 0, (whole - after) // _U(10) + after, whole)
    value = mant.astype(np.float64) / _POW10F[frac]
    return np.where(negative, -value, value), ok
