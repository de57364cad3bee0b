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
byte, after a UTF-8 byte order mark, after ``,``, ``\\n`` or ``\\r``; after
the ``sep`` given, ``;`` or a tab, instead of ``,``: ``--sep``);
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

The same pass finds a line ended by a lone carriage return (``b"\\r"`` not
followed by ``b"\\n"``, outside a quoted cell): pandas reads it as a line
break, Dask does not cut there, and takes every byte up to the first
``b"\\n"`` for the header it puts before each later block (review 101 F1: a
header line ended by a lone CR made the first row a part of that header,
read once more per block; a file of such lines only was one block, read
whole by a thread, whatever its size, beyond the memory plan).
"""

import numpy as np

#: Bytes read at a time: the scan holds one block and the positions of its
#: quotes and line breaks with a few arrays of their runs (under 48 MiB in
#: all, in a block of only quotes or line breaks), never more of the file.
SCAN_BLOCK = 2**20

_QUOTE, _NEWLINE, _CR = 34, 10, 13
_BOM = b"\xef\xbb\xbf"


def _cell_starts(sep):
    """The bytes after which a quote starts a cell: ``sep`` (one ASCII
    character: ``,``, ``;``, a tab), ``\\n``, ``\\r``, as a table by byte."""
    table = np.zeros(256, dtype=bool)
    table[[ord(sep), _NEWLINE, _CR]] = True
    return table


def scan(path, block=SCAN_BLOCK):
    """``(quoted_break, unterminated)`` for the CSV file ``path``: whether a
    line break (``b"\\n"``) lies inside a quoted cell, and whether the file
    ends inside one (pandas' "EOF inside string"). The whole file is read,
    a block at a time into one buffer; one with no quote at
    ``bytearray.find``'s speed (memchr), as is every block of one that
    neither holds a quote nor starts inside a quoted cell."""
    return scan_lines(path, block)[:2]


def scan_lines(path, block=SCAN_BLOCK, sep=","):
    """:func:`scan`'s ``(quoted_break, unterminated)`` and ``lone_cr``:
    whether a line of ``path`` ends in a carriage return that no
    ``b"\\n"`` follows, outside a quoted cell (where pandas' reading, not
    Dask's cutting, ends a line), in the same pass; ``sep``: the character
    between cells, after which a quote opens a quoted cell."""
    with open(path, "rb", buffering=0) as f:
        # pandas skips a byte order mark: the first cell starts after it
        state = _State(len(_BOM) if f.read(len(_BOM)) == _BOM else 0,
                       _cell_starts(sep))
        f.seek(0)
        buffer, held, dropped = bytearray(block), 0, 0
        while True:
            with memoryview(buffer) as view:
                read = f.readinto(view[held:])
            end = held + read
            # a run of quotes is never cut: those ending the block wait for
            # the next (unless the file ends)
            keep = end if not read else _before_quotes(buffer, end)
            if keep:
                state.feed(buffer, keep)
                state.offset += dropped  # the quotes left out of its run
                dropped = 0
            if not read:  # a lone CR ends the file: no LF follows it
                return state.found, state.inside, state.lone | state.cr_last
            held = end - keep
            buffer[:held] = buffer[keep:end]
            if held == len(buffer):  # a block of quotes only, one run: it
                # reads by its first quote's place and its length's parity
                dropped += held - 2 + held % 2
                held = 2 - held % 2
                if held == len(buffer):  # a block of 1 or 2 bytes
                    buffer.extend(bytes(2))


def _before_quotes(buffer, end):
    """Where the run of quotes that ends ``buffer[:end]`` starts (``end``
    where it ends in another byte)."""
    keep = end
    while keep and buffer[keep - 1] == _QUOTE:
        if end - keep == 64:  # a long run: at NumPy's speed
            other = np.flatnonzero(np.frombuffer(buffer, np.uint8, end) != _QUOTE)
            return int(other[-1]) + 1 if len(other) else 0
        keep -= 1
    return keep


class _State:
    """The tokenizer's state between blocks: ``inside`` a quoted cell or not,
    and where the next block starts (whether a cell starts there)."""

    def __init__(self, first_cell, cell_start):
        self.inside = self.found = False
        self.cell_start = cell_start  # :func:`_cell_starts`
        #: a lone CR outside a quoted cell; the last byte fed is a CR there
        self.lone = self.cr_last = False
        #: the file's offset where its first cell starts, the next block's
        self.first_cell, self.offset = first_cell, 0
        self.previous = None  # the byte before the next block

    def feed(self, buffer, end):
        """Scan the bytes ``buffer[:end]`` (not ending in a quote, unless the
        file does); ``found`` where a line break in them lies inside a quoted
        cell."""
        self.lone |= self.cr_last and buffer[0] != _NEWLINE
        # the CRs that no LF follows (one ending the block waits for the
        # next block's first byte): none in a file of LF or CR LF lines
        lone = None
        if not self.lone and buffer.find(b"\r", 0, end) >= 0:
            codes = np.frombuffer(buffer, np.uint8, end)
            lone = np.flatnonzero(codes[:-1] == _CR)
            lone = lone[codes[lone + 1] != _NEWLINE]
            lone = lone if len(lone) else None
        if buffer.find(b'"', 0, end) < 0:
            self.found |= self.inside and buffer.find(b"\n", 0, end) >= 0
            # no quote: every CR outside a cell, or every one inside
            self.lone |= lone is not None and not self.inside
        else:
            self.found |= self._quotes(np.frombuffer(buffer, np.uint8, end), lone)
        self.offset += end
        self.previous = buffer[end - 1]
        self.cr_last = self.previous == _CR and not self.inside

    def _quotes(self, codes, lone):
        # the quotes and line breaks (and the CRs ``lone`` that no LF
        # follows), one search; runs of consecutive quotes in groups: a
        # group is a run (its first quote and those after it), a line break
        # or a CR
        marks = (codes == _QUOTE) | (codes == _NEWLINE)
        if lone is not None:
            marks[lone] = True
        special = np.flatnonzero(marks)
        quote = codes[special] == _QUOTE
        follows = np.empty(len(special), dtype=bool)  # a quote after a quote
        follows[0] = False
        np.equal(special[1:] - special[:-1], 1, out=follows[1:])
        follows[1:] &= quote[:-1]
        follows &= quote
        groups = np.flatnonzero(~follows)
        where, quote = special[groups], quote[groups]
        odd = quote & (np.diff(groups, append=len(special)) & 1).astype(bool)
        # a run starts a cell after a comma or a line break (or the file)
        cell_start = self.cell_start[codes[where - 1]]
        if where[0] == 0:  # the byte before it ended the last block
            cell_start[0] = (self.previous is None
                             or bool(self.cell_start[self.previous]))
        cell_start |= where == self.first_cell - self.offset
        # the state after each group: the parity of the toggles since the
        # last reset (the count of toggles is nondecreasing: the one at the
        # last reset is the largest at a reset so far), or since the block
        # began, from the state then (counted as a toggle)
        count = np.cumsum(odd & cell_start, dtype=np.int32)  # < 2**31 bytes
        count += self.inside
        since = np.maximum.accumulate(np.where(odd > cell_start, count, 0))
        after = ((count - since) & 1).astype(bool)
        self.inside = bool(after[-1])
        byte = codes[where]
        if lone is not None:  # one outside a cell
            self.lone |= bool(((byte == _CR) & ~after).any())
        # a line break is inside where the state after it (the one before) is
        return bool((after & (byte == _NEWLINE)).any())
