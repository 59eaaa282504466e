"""Reads a safetensors file with the standard library only, checking it as attn's loader does.

load(path) returns (metadata, tensors): the "__metadata__" strings, and for each tensor name
(dtype, shape, raw little-endian bytes), in the order of the data in the file. The attn.checksum
(docs/checkpoints.md) is verified when asked, since pure-Python FNV-1a is slow on large files.
rewrite(path, out, replacements) copies a file attn wrote with some tensors' bytes replaced
(bench/parity_vs_torch.py writes a PyTorch-trained model so for attn-translate).
add_checksum(path, out) copies a file another tool wrote (or rewrote) with attn.checksum added,
which attn's programs require of every checkpoint (in pure Python: about a minute a gigabyte).

    python3 tests/train/safetensors_read.py [--verify] FILE   # names, dtypes and shapes
    python3 tests/train/safetensors_read.py --add-checksum FILE OUT
"""

import json
import os
import struct
import sys

DTYPE_SIZES = {
    "F32": 4, "F64": 8, "I32": 4, "I64": 8, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1,
    "I8": 1, "I16": 2, "U8": 1, "U16": 2, "U32": 4, "U64": 8, "BOOL": 1,
}
MAX_HEADER_BYTES = 100_000_000
CHECKSUM_FIELD = b'"attn.checksum":"'


class FormatError(ValueError):
    pass


def fnv1a64(data, state=0xCBF29CE484222325):
    for byte in data:
        state = ((state ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return state


def _reject_duplicates(pairs):
    keys = [key for key, _ in pairs]
    if len(keys) != len(set(keys)):
        raise FormatError("the header names a key twice")
    return dict(pairs)


def _count(value):
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def load(path, verify_checksum=False, require_checksum=False):
    """(metadata, {name: (dtype, shape, bytes)}); raises FormatError (message starts with path)."""
    def fail(what):
        raise FormatError(f"{path}: {what}")

    with open(path, "rb") as f:
        contents = f.read()
    if len(contents) < 8:
        fail(f"truncated: the file has {len(contents)} bytes, less than the 8-byte header length")
    (header_size,) = struct.unpack("<Q", contents[:8])
    if header_size > MAX_HEADER_BYTES:
        fail(f"the header length is {header_size} bytes, more than {MAX_HEADER_BYTES}")
    if header_size > len(contents) - 8:
        fail(f"truncated: the header length says {header_size} bytes, the file has {len(contents) - 8}")
    header_bytes = contents[8:8 + header_size]
    data = contents[8 + header_size:]
    try:
        header = json.loads(header_bytes.decode("utf-8"), object_pairs_hook=_reject_duplicates)
    except (UnicodeDecodeError, ValueError) as error:
        fail(f"the header is not valid JSON: {error}")
    if not isinstance(header, dict):
        fail("the header must be a JSON object")

    metadata = header.pop("__metadata__", {})
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        fail("__metadata__ must be an object mapping strings to strings")

    entries = []
    for name, entry in header.items():
        if not isinstance(entry, dict) or set(entry) != {"dtype", "shape", "data_offsets"}:
            fail(f"tensor '{name}': expected an object with dtype, shape and data_offsets")
        dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
        if dtype not in DTYPE_SIZES:
            fail(f"tensor '{name}': unknown dtype {dtype!r}")
        if not isinstance(shape, list) or not all(_count(n) for n in shape):
            fail(f"tensor '{name}': shape must be an array of non-negative integers")
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(_count(n) for n in offsets)):
            fail(f"tensor '{name}': data_offsets must be two non-negative integers")
        size = DTYPE_SIZES[dtype]
        for n in shape:
            size *= n
        if offsets[1] - offsets[0] != size:
            fail(f"tensor '{name}': dtype {dtype} and shape {shape} make {size} bytes, "
                 f"data_offsets {offsets} hold {offsets[1] - offsets[0]}")
        entries.append((offsets[0], offsets[1], name, dtype, shape))

    entries.sort(key=lambda e: (e[0], e[1]))
    end = 0
    for begin, stop, name, _, _ in entries:
        if begin != end:
            fail(f"tensor '{name}' starts at {begin}, expected {end} (overlap or hole)")
        end = stop
    if end != len(data):
        fail(f"the header says {end} bytes of tensor data, the file has {len(data)}")

    if "attn.checksum" in metadata:
        if verify_checksum:
            at = header_bytes.find(CHECKSUM_FIELD) + len(CHECKSUM_FIELD)
            written = header_bytes[at:at + 16].decode("ascii", "replace")
            if at < len(CHECKSUM_FIELD) or written != metadata["attn.checksum"]:
                fail('attn.checksum must be written as "attn.checksum":"<16 lowercase hex digits>"')
            zeroed = header_bytes[:at] + b"0" * 16 + header_bytes[at + 16:]
            computed = f"{fnv1a64(data, fnv1a64(zeroed)):016x}"
            if computed != metadata["attn.checksum"]:
                fail("checksum mismatch: the file is corrupted")
    elif require_checksum:
        fail("no attn.checksum in the metadata")

    tensors = {name: (dtype, shape, data[begin:stop]) for begin, stop, name, dtype, shape in entries}
    return metadata, tensors


def rewrite(path, out, replacements):
    """A copy of the attn file `path` at `out` with the bytes of some tensors replaced
    (replacements: {name: bytes}, each exactly as long as the tensor's) and attn.checksum
    recomputed. The header is kept byte for byte: same names, dtypes, shapes and order."""
    load(path, require_checksum=True)  # checks the structure
    with open(path, "rb") as f:
        contents = bytearray(f.read())
    (header_size,) = struct.unpack("<Q", contents[:8])
    header_bytes = bytes(contents[8:8 + header_size])
    header = json.loads(header_bytes.decode("utf-8"))
    start = 8 + header_size
    for name, data in replacements.items():
        if name not in header or name == "__metadata__":
            raise FormatError(f"{path}: no tensor '{name}'")
        begin, end = header[name]["data_offsets"]
        if len(data) != end - begin:
            raise FormatError(f"{path}: tensor '{name}' has {end - begin} bytes, the replacement {len(data)}")
        contents[start + begin:start + end] = data
    at = header_bytes.find(CHECKSUM_FIELD) + len(CHECKSUM_FIELD)
    zeroed = header_bytes[:at] + b"0" * 16 + header_bytes[at + 16:]
    checksum = f"{fnv1a64(bytes(contents[start:]), fnv1a64(zeroed)):016x}".encode()
    contents[8 + at:8 + at + 16] = checksum
    with open(out, "wb") as f:
        f.write(contents)


def add_checksum(path, out):
    """A copy of the safetensors file `path` at `out` with attn.checksum added, as attn's writer
    places it (docs/checkpoints.md): the header rewritten on one line, `__metadata__` first with
    the checksum as its first entry, padded with spaces to a multiple of 8 bytes; the tensors'
    entries and the data section kept as they were. A file that has a checksum is refused: it
    would be blessed whether or not it matches."""
    metadata, _ = load(path)  # checks the structure
    if "attn.checksum" in metadata:
        raise FormatError(f"{path}: already has an attn.checksum (--verify checks it)")
    with open(path, "rb") as f:
        contents = f.read()
    (header_size,) = struct.unpack("<Q", contents[:8])
    header = json.loads(contents[8:8 + header_size].decode("utf-8"))
    header.pop("__metadata__", None)
    fields = {"attn.checksum": "0" * 16, **dict(sorted(metadata.items()))}
    text = json.dumps({"__metadata__": fields, **header}, separators=(",", ":"), ensure_ascii=False)
    try:
        header_bytes = text.encode("utf-8")
    except UnicodeEncodeError as error:  # a lone surrogate that JSON let through
        raise FormatError(f"{path}: the header is not valid UTF-8: {error}") from None
    header_bytes += b" " * (-len(header_bytes) % 8)
    data = contents[8 + header_size:]
    at = header_bytes.find(CHECKSUM_FIELD) + len(CHECKSUM_FIELD)
    checksum = f"{fnv1a64(data, fnv1a64(header_bytes)):016x}".encode()
    header_bytes = header_bytes[:at] + checksum + header_bytes[at + 16:]
    temporary = f"{out}.tmp"  # then renamed: OUT may be FILE itself, which a failed write must not cut
    with open(temporary, "wb") as f:
        f.write(struct.pack("<Q", len(header_bytes)) + header_bytes + data)
    os.replace(temporary, out)


def main(argv):
    usage = "\n".join(line.strip() for line in __doc__.strip().splitlines()[-2:])
    if argv[:1] == ["--add-checksum"]:
        if len(argv) != 3:
            print(usage, file=sys.stderr)
            return 2
        try:
            add_checksum(argv[1], argv[2])
        except (OSError, FormatError) as error:
            print(error, file=sys.stderr)
            return 1
        return 0
    verify = "--verify" in argv
    paths = [a for a in argv if a != "--verify"]
    if len(paths) != 1:
        print(usage, file=sys.stderr)
        return 2
    try:
        metadata, tensors = load(paths[0], verify_checksum=verify)
    except (OSError, FormatError) as error:
        print(error, file=sys.stderr)
        return 1
    for key, value in sorted(metadata.items()):
        print(f"# {key} = {value}")
    for name, (dtype, shape, _) in tensors.items():
        print(f"{name}\t{dtype}\t{shape}")
    if verify:
        print("# checksum: " + ("ok" if "attn.checksum" in metadata else "absent"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
