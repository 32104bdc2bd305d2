# Writes wire messages with Python's msgpack library, as a controller
# written in Python would (the README's one-liner): each message from
# the JSON's shape, times as timezone-aware datetimes. Output: the
# messages, each as a 4-byte big-endian length and its bytes.
import datetime
import struct
import sys

import msgpack

utc = datetime.timezone.utc
t0 = datetime.datetime(2026, 10, 1, 2, 3, 4, 500000, tzinfo=utc)
messages = [
    {"kind": "episode_start", "agent": "py-bot", "episode_id": "py-1",
     "start": {"start_time": t0, "location": "lab 2", "language_instruction": "stack the cups",
               "metadata": {"operator": "py", "n": 3, "gains": [0.5, 1.25], "nested": {"ok": True, "none": None}}}},
    {"kind": "step", "agent": "py-bot", "episode_id": "py-1",
     "step": {"index": 0, "timestamp": t0,
              "observation": {"state": [0.1, -0.2, 3.0],
                              "image": {"dtype": "image", "encoding": "jpeg", "bytes": b"\xff\xd8\xff\x00"},
                              "label": "cup"},
              "action": [0.0, 0.5, -0.4],
              "reward": 0, "discount": 1.0, "is_first": True, "is_last": False, "is_terminal": False,
              "annotations": {"entities": ["red cup", "blue cup"], "tool": "gripper",
                              "events": [{"subject": "red cup", "predicate": "on", "object": "blue cup",
                                          "confidence": 0.75, "embedding": [0.25, -0.5, 1.0, 2]}]}}},
    {"kind": "steps", "agent": "py-bot", "episode_id": "py-1",
     "steps": [{"index": 1, "timestamp": t0 + datetime.timedelta(seconds=1), "action": [0.5, 0.5, -0.4], "reward": 0.5},
               {"index": 2, "timestamp": t0 + datetime.timedelta(seconds=1.5), "action": [1, 0.5, -0.4], "reward": 1}]},
    {"kind": "episode_end", "agent": "py-bot", "episode_id": "py-1",
     "end": {"end_time": t0 + datetime.timedelta(seconds=2), "success": True, "reward_sum": 1.5, "steps": 1}},
]
out = sys.stdout.buffer
for m in messages:
    b = msgpack.packb(m, datetime=True)
    out.write(struct.pack(">I", len(b)))
    out.write(b)
