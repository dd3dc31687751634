#!/usr/bin/env python3
"""Converts IDX (MNIST, Fashion-MNIST) or CIFAR-10 binary files to the .npy files that
`towerps-launch --dataset npy --data-dir OUT` reads: x_train.npy, y_train.npy, x_test.npy,
y_test.npy. Only the Python standard library is needed (no NumPy).

  scripts/to_npy.py idx --data-dir /usr/share/datasets/fashion-mnist --out D
  scripts/to_npy.py idx --train-images A --train-labels B --test-images C --test-labels E --out D
  scripts/to_npy.py cifar10 --data-dir DIR_WITH_data_batch_1.bin --out D
  scripts/to_npy.py criteo --data-dir DIR_WITH_train.txt_AND_test.txt --out D

x is written as uint8 [N, H, W] (IDX) or [N, 3, 32, 32] (CIFAR-10), or as float32 pixel / 255
with --dtype float32; y as int64 [N].

criteo reads Criteo click logs as `--dataset criteo` does and writes what that dataset gives a
model: x_dense_<split>.npy (float32 [N, 13], log(1 + max(x, 0)), used as they are),
x_ids_<split>.npy (int64 [N, 26]: each field's value hashed as worker/data/criteo_reader.h does,
FNV-1a of the field's byte and the value, then SplitMix64's finalizer; the int64's bits are the
id) and y_<split>.npy (int64 [N]). The same job then trains on the same numbers either way.
"""
import argparse
import array
import gzip
import math
import os
import struct
import sys


def open_maybe_gz(path):
    with open(path, "rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    return gzip.open(path, "rb") if gz else open(path, "rb")


def read_idx(path):
    """(dims, bytes) of an unsigned-byte IDX file, plain or gzip."""
    with open_maybe_gz(path) as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] != 0x08:
        sys.exit(f"to_npy: {path}: not an unsigned-byte IDX file")
    rank = data[3]
    dims = list(struct.unpack(">" + "I" * rank, data[4:4 + 4 * rank]))
    body = data[4 + 4 * rank:]
    count = 1
    for d in dims:
        count *= d
    if len(body) != count:
        sys.exit(f"to_npy: {path}: dimensions {dims} need {count} bytes, the file holds {len(body)}")
    return dims, body


def find(data_dir, base):
    for name in (base + ".gz", base):
        path = os.path.join(data_dir, name)
        if os.path.exists(path):
            return path
    sys.exit(f"to_npy: {data_dir} has neither {base}.gz nor {base}")


def write_npy(path, descr, shape, payload):
    """Writes a version 1.0 .npy file: magic, header dict padded to 64 bytes, C-order data."""
    dims = ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "")
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, dims)
    pad = 64 - (10 + len(header) + 1) % 64
    header = header + " " * (pad % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1"))
        f.write(payload)


def write_split(out, split, shape, pixels, labels, dtype):
    if dtype == "float32":
        values = array.array("f", (p / 255.0 for p in pixels))
        if sys.byteorder != "little":
            values.byteswap()
        write_npy(os.path.join(out, f"x_{split}.npy"), "<f4", shape, values.tobytes())
    else:
        write_npy(os.path.join(out, f"x_{split}.npy"), "|u1", shape, bytes(pixels))
    ys = array.array("q", labels)
    if sys.byteorder != "little":
        ys.byteswap()
    write_npy(os.path.join(out, f"y_{split}.npy"), "<i8", [len(labels)], ys.tobytes())
    print(f"to_npy: {split}: x {shape} {dtype}, y [{len(labels)}] int64")


def convert_idx(args):
    names = {
        "train_images": "train-images-idx3-ubyte", "train_labels": "train-labels-idx1-ubyte",
        "test_images": "t10k-images-idx3-ubyte", "test_labels": "t10k-labels-idx1-ubyte",
    }
    paths = {}
    for key, base in names.items():
        given = getattr(args, key)
        if given:
            paths[key] = given
        elif args.data_dir:
            paths[key] = find(args.data_dir, base)
        else:
            sys.exit(f"to_npy: give --data-dir or --{key.replace('_', '-')}")
    for split in ("train", "test"):
        dims, pixels = read_idx(paths[f"{split}_images"])
        ldims, labels = read_idx(paths[f"{split}_labels"])
        if len(dims) != 3 or len(ldims) != 1 or dims[0] != ldims[0]:
            sys.exit(f"to_npy: {split}: images {dims} and labels {ldims} do not match")
        write_split(args.out, split, dims, pixels, list(labels), args.dtype)


def convert_cifar10(args):
    if not args.data_dir:
        sys.exit("to_npy: cifar10 needs --data-dir")
    record = 1 + 3 * 32 * 32
    splits = {"train": [f"data_batch_{i}.bin" for i in range(1, 6)], "test": ["test_batch.bin"]}
    for split, files in splits.items():
        pixels, labels = bytearray(), []
        for name in files:
            with open(os.path.join(args.data_dir, name), "rb") as f:
                data = f.read()
            if len(data) % record:
                sys.exit(f"to_npy: {name}: {len(data)} bytes is not a whole number of records")
            for r in range(0, len(data), record):
                labels.append(data[r])
                pixels += data[r + 1:r + record]
        write_split(args.out, split, [len(labels), 3, 32, 32], pixels, labels, args.dtype)


MASK64 = (1 << 64) - 1


def criteo_id(field, value):
    """CriteoCategoricalId (worker/data/criteo_reader.cc): FNV-1a 64 of the field's byte then
    the value's bytes, then the SplitMix64 finalizer; as a signed int64 (its bits)."""
    h = 0xCBF29CE484222325
    for byte in bytes([field]) + value:
        h = ((h ^ byte) * 0x100000001B3) & MASK64
    h = ((h ^ (h >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    h = ((h ^ (h >> 27)) * 0x94D049BB133111EB) & MASK64
    h ^= h >> 31
    return h - (1 << 64) if h >> 63 else h


def convert_criteo(args):
    if not args.data_dir:
        sys.exit("to_npy: criteo needs --data-dir with train.txt and test.txt")
    for split in ("train", "test"):
        path = os.path.join(args.data_dir, f"{split}.txt")
        dense, ids, labels = array.array("f"), array.array("q"), array.array("q")
        with open(path, "rb") as f:
            for number, line in enumerate(f, 1):
                fields = line.rstrip(b"\r\n").split(b"\t")
                if len(fields) != 40 or fields[0] not in (b"0", b"1"):
                    sys.exit(f"to_npy: {path}:{number}: not a Criteo line with a label "
                             f"({len(fields)} fields)")
                labels.append(int(fields[0]))
                for v in fields[1:14]:
                    dense.append(math.log1p(max(int(v), 0)) if v else 0.0)
                for c, v in enumerate(fields[14:]):
                    ids.append(criteo_id(c, v))
        for a in (dense, ids, labels):
            if sys.byteorder != "little":
                a.byteswap()
        n = len(labels)
        write_npy(os.path.join(args.out, f"x_dense_{split}.npy"), "<f4", [n, 13], dense.tobytes())
        write_npy(os.path.join(args.out, f"x_ids_{split}.npy"), "<i8", [n, 26], ids.tobytes())
        write_npy(os.path.join(args.out, f"y_{split}.npy"), "<i8", [n], labels.tobytes())
        print(f"to_npy: {split}: x_dense [{n}, 13] float32, x_ids [{n}, 26] int64, y [{n}] int64")


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("format", choices=["idx", "cifar10", "criteo"])
    parser.add_argument("--data-dir")
    parser.add_argument("--train-images")
    parser.add_argument("--train-labels")
    parser.add_argument("--test-images")
    parser.add_argument("--test-labels")
    parser.add_argument("--dtype", choices=["uint8", "float32"], default="uint8")
    parser.add_argument("--out", required=True, help="directory for the four .npy files")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    {"idx": convert_idx, "cifar10": convert_cifar10, "criteo": convert_criteo}[args.format](args)


if __name__ == "__main__":
    main()
