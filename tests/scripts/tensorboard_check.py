"""An independent reader of TensorBoard event files, for tests of towerps --logdir.

Usage: tensorboard_check.py LOGDIR RUN=TAG[,TAG...] ...

Reads every events.out.tfevents.* file under LOGDIR/RUN with its own TFRecord framing code,
checks both masked CRC-32Cs of every record (python3-crc32c), and decodes each record with the
protobuf library (python3-protobuf) from message descriptors built here after TensorFlow's
event.proto and summary.proto. Exits 0 when the first record is file_version "brain.Event:2" and
every TAG named for RUN appears at least twice, with increasing steps and finite values
(histograms: counts that add up to their num); prints what it read. It shares no code with the
C++ writer (common/event_writer.cc).
"""
import glob
import math
import os
import struct
import sys

import crc32c
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

F = descriptor_pb2.FieldDescriptorProto


def _messages():
    """Event, Summary, Summary.Value and HistogramProto, with TensorFlow's field numbers."""
    fdp = descriptor_pb2.FileDescriptorProto(name="tb_check.proto", package="tbcheck",
                                             syntax="proto3")

    def message(name, fields):
        m = fdp.message_type.add(name=name)
        for fname, number, ftype, label, type_name in fields:
            f = m.field.add(name=fname, number=number, type=ftype, label=label)
            if type_name:
                f.type_name = type_name
        return m

    opt, rep = F.LABEL_OPTIONAL, F.LABEL_REPEATED
    message("HistogramProto", [
        ("min", 1, F.TYPE_DOUBLE, opt, None), ("max", 2, F.TYPE_DOUBLE, opt, None),
        ("num", 3, F.TYPE_DOUBLE, opt, None), ("sum", 4, F.TYPE_DOUBLE, opt, None),
        ("sum_squares", 5, F.TYPE_DOUBLE, opt, None),
        ("bucket_limit", 6, F.TYPE_DOUBLE, rep, None), ("bucket", 7, F.TYPE_DOUBLE, rep, None)])
    message("Value", [
        ("tag", 1, F.TYPE_STRING, opt, None), ("simple_value", 2, F.TYPE_FLOAT, opt, None),
        ("histo", 5, F.TYPE_MESSAGE, opt, ".tbcheck.HistogramProto")])
    message("Summary", [("value", 1, F.TYPE_MESSAGE, rep, ".tbcheck.Value")])
    message("Event", [
        ("wall_time", 1, F.TYPE_DOUBLE, opt, None), ("step", 2, F.TYPE_INT64, opt, None),
        ("file_version", 3, F.TYPE_STRING, opt, None),
        ("summary", 5, F.TYPE_MESSAGE, opt, ".tbcheck.Summary")])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    factory = message_factory.MessageFactory(pool)
    return factory.GetPrototype(pool.FindMessageTypeByName("tbcheck.Event"))


Event = _messages()


def masked(data):
    c = crc32c.crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def records(path):
    with open(path, "rb") as f:
        data = f.read()
    pos = 0
    while pos < len(data):
        if len(data) - pos < 12:
            sys.exit(f"{path}: a record header is cut off at byte {pos}")
        header = data[pos:pos + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", data[pos + 8:pos + 12])
        if length_crc != masked(header):
            sys.exit(f"{path}: bad length CRC at byte {pos}")
        body = data[pos + 12:pos + 12 + length]
        if len(body) != length or len(data) < pos + 16 + length:
            sys.exit(f"{path}: a record is cut off at byte {pos}")
        (body_crc,) = struct.unpack("<I", data[pos + 12 + length:pos + 16 + length])
        if body_crc != masked(body):
            sys.exit(f"{path}: bad data CRC at byte {pos}")
        yield body
        pos += 16 + length


def read_run(run_dir):
    """{tag: [(step, value or histogram)]} over every event file of a run, in file order."""
    files = sorted(glob.glob(os.path.join(run_dir, "events.out.tfevents.*")))
    if not files:
        sys.exit(f"{run_dir}: no event files")
    tags = {}
    for path in files:
        for i, body in enumerate(records(path)):
            event = Event()
            event.ParseFromString(body)
            if i == 0:
                if event.file_version != "brain.Event:2":
                    sys.exit(f"{path}: first record is not file_version brain.Event:2")
                continue
            if event.wall_time < 1.5e9:
                sys.exit(f"{path}: wall_time {event.wall_time} is not a Unix time")
            for v in event.summary.value:
                item = v.histo if v.HasField("histo") else v.simple_value
                tags.setdefault(v.tag, []).append((event.step, item))
    return tags


def main():
    logdir, wanted = sys.argv[1], sys.argv[2:]
    for spec in wanted:
        run, tag_list = spec.split("=", 1)
        tags = read_run(os.path.join(logdir, run))
        for tag in tag_list.split(","):
            points = tags.get(tag, [])
            steps = [s for s, _ in points]
            if len(points) < 2:
                sys.exit(f"{run}: {tag} has {len(points)} point(s); tags: {sorted(tags)}")
            if any(b <= a for a, b in zip(steps, steps[1:])):
                sys.exit(f"{run}: {tag} steps do not increase: {steps}")
            for step, item in points:
                if isinstance(item, float):
                    if not math.isfinite(item):
                        sys.exit(f"{run}: {tag} at step {step} is {item}")
                elif abs(sum(item.bucket) - item.num) > 0.5 or len(item.bucket) != len(
                        item.bucket_limit):
                    sys.exit(f"{run}: histogram {tag} at step {step} does not add up")
            last = points[-1][1]
            shown = last if isinstance(last, float) else f"histogram of {last.num:.0f}"
            print(f"{run} {tag}: {len(points)} points, steps {steps[0]}..{steps[-1]}, "
                  f"last {shown}")
    print("tensorboard files ok")


if __name__ == "__main__":
    main()
