#!/usr/bin/env python3
"""Converts IDX (MNIST, Fashion-MNIST) or CIFAR-10 binary files to the .npy files that
`towerps-launch --dataset npy --data-dir OUT` reads: x_train.npy, y_train.npy, x_test.npy,
y_test.npy. Only the Python standard library is needed (no NumPy).

  scripts/to_npy.py idx --data-dir /usr/share/datasets/fashion-mnist --out D
  scripts/to_npy.py idx --train-images A --train-labels B --test-images C --test-labels E --out D
  scripts/to_npy.py cifar10 --data-dir DIR_WITH_data_batch_1.bin --out D

x is written as uint8 [N, H, W] (IDX) or [N, 3, 32, 32] (CIFAR-10), or as float32 pixel / 255
with --dtype float32; y as int64 [N].
"""
import argparse
import array
import gzip
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


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("format", choices=["idx", "cifar10"])
    parser.add_argument("--data-dir")
    parser.add_argument("--train-images")
    parser.add_argument("--train-labels")
    parser.add_argument("--test-images")
    parser.add_argument("--test-labels")
    parser.add_argument("--dtype", choices=["uint8", "float32"], default="uint8")
    parser.add_argument("--out", required=True, help="directory for the four .npy files")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    (convert_idx if args.format == "idx" else convert_cifar10)(args)


if __name__ == "__main__":
    main()
