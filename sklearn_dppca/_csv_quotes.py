"""Which line breaks of a CSV file lie inside a quoted cell, as pandas'
tokenizer reads the file, found by a scan in blocks of bytes.

``dppca fit --dask`` (and ``transform --dask``) has Dask cut an uncompressed
CSV file into blocks of bytes at line breaks (``b"\\n"``), without knowing
quotes: a quoted cell that holds a line break parses in memory, but a block
that starts just past that break starts inside the cell and fails (or, in
principle, reads wrong). Whether it does depends on where the blocks fall,
that is on the bytes of every row before it, so before the charge the CLI
refuses every such file, wherever its break falls (:func:`scan`): a refusal
that depends on that row's content only, as a missing value's does.

The state is pandas' (its C tokenizer with the defaults the CLI reads with:
``quotechar='"'``, ``doublequote=True``, no escape or comment character). A
quote opens a quoted cell only at the start of a cell (the file's first
byte, after a UTF-8 byte order mark, after ``,``, ``\\n`` or ``\\r``);
inside one, ``""`` is a quote and a lone ``"`` closes it; elsewhere a quote
is a character of the cell (``5" wide``). Counting every quote's parity is
not enough: ``x"y,"a<line break>b"`` holds a quoted line break that the
count misses. The scan works on runs of consecutive quotes instead (a run
cannot hold a line break): a run that starts a cell, or that starts inside a
quoted cell, toggles the state once per quote; a run in the middle of an
unquoted cell is characters and leaves it outside. Each run is thus the
identity, a toggle, or (a run of odd length in the middle of a cell: inside
it closes the cell and the rest is text) a reset to "outside", and the state
after each run is a cumulative count with NumPy, a block at a time.
"""

import numpy as np

#: Bytes read at a time: the scan holds one block, its mask of quotes and
#: the positions of its quotes and line breaks (at most 8 bytes per byte of
#: the block in all, in a block of only quotes or line breaks).
SCAN_BLOCK = 2**20

_QUOTE, _NEWLINE, _CR, _COMMA = 34, 10, 13, 44
_BOM = b"\xef\xbb\xbf"


def scan(path, block=SCAN_BLOCK):
    """``(quoted_break, unterminated)`` for the CSV file ``path``: whether a
    line break (``b"\\n"``) lies inside a quoted cell, and whether the file
    ends inside one (pandas' "EOF inside string"). The whole file is read,
    a block at a time; one with no quote at ``bytes.find``'s speed (memchr),
    as is every block of one that neither holds a quote nor starts inside a
    quoted cell."""
    with open(path, "rb") as f:
        # pandas skips a byte order mark: the first cell starts after it
        state = _State(len(_BOM) if f.read(len(_BOM)) == _BOM else 0)
        f.seek(0)
        found = False
        for data in _blocks(f, block):
            found |= state.feed(data)
    return found, state.inside


def _blocks(f, block):
    """The bytes of the file ``f``, ``block`` at a time; a block never ends
    in a quote but the file's last (a run of quotes is never cut)."""
    carry = b""
    while True:
        more = f.read(block)
        if not more:
            if carry:
                yield carry
            return
        data = carry + more if carry else more
        keep = len(data.rstrip(b'"'))
        if keep:
            yield data[:keep]
        carry = data[keep:]


class _State:
    """The tokenizer's state between blocks: ``inside`` a quoted cell or not,
    and where the next block starts (whether a cell starts there)."""

    def __init__(self, first_cell):
        self.inside = False
        #: the file's offset where its first cell starts, the next block's
        self.first_cell, self.offset = first_cell, 0
        self.previous = None  # the byte before the next block

    def feed(self, data):
        """Scan the bytes ``data`` (not ending in a quote, unless the file
        does); True where a line break in them lies inside a quoted cell."""
        if data.find(b'"') < 0:
            found = self.inside and data.find(b"\n") >= 0
        else:
            found = self._quotes(np.frombuffer(data, dtype=np.uint8))
        self.offset += len(data)
        self.previous = data[-1]
        return found

    def _quotes(self, codes):
        quotes = np.flatnonzero(codes == _QUOTE)
        # runs of consecutive quotes: where each starts, whether its length is odd
        heads = np.flatnonzero(np.diff(quotes, prepend=-2) != 1)
        starts = quotes[heads]
        odd = np.diff(heads, append=len(quotes)) % 2 == 1
        before = codes[np.maximum(starts - 1, 0)]
        cell_start = (before == _COMMA) | (before == _NEWLINE) | (before == _CR)
        if starts[0] == 0:  # the byte before it ended the last block
            cell_start[0] = self.previous in (None, _COMMA, _NEWLINE, _CR)
        cell_start |= starts == self.first_cell - self.offset
        toggle, reset = odd & cell_start, odd & ~cell_start
        # the state after each run: the toggles since the last reset (or,
        # with none, since the block began, from the state then)
        count = np.cumsum(toggle)
        last = np.maximum.accumulate(np.where(reset, np.arange(len(starts)), -1))
        since = np.where(last >= 0, count[np.maximum(last, 0)], 0)
        after = ((count - since) % 2 == 1) ^ ((last < 0) & self.inside)
        # a line break lies inside where the state after the run before it does
        breaks = np.flatnonzero(codes == _NEWLINE)
        run = np.searchsorted(starts, breaks) - 1
        inside = np.where(run >= 0, after[np.maximum(run, 0)], self.inside)
        self.inside = bool(after[-1])
        return bool(inside.any())
