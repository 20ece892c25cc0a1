"""Hello, Stampede: a producer task puts frames, a tracker gets the freshest one."""

import numpy as np

import stampede

with stampede.Runtime() as rt:
    frames = rt.create_channel("camera/frames")
    camera = rt.task(virtual_time=0)
    out = camera.attach_output(frames)
    tracker = rt.task(virtual_time=stampede.INFINITY)  # inherits timestamps from what it gets
    inp = tracker.attach_input(frames)
    for ts in range(3):
        out.put(ts, np.full((4, 4), ts, dtype=np.uint8))
        camera.set_virtual_time(ts + 1)
    item = inp.get(stampede.NEWEST_UNSEEN)  # the freshest frame, skipping the rest
    print(item.ts, item.array().mean())  # 2 2.0 — a read-only, zero-copy view
    inp.consume_until(item.ts)  # frames 0..2 are garbage now
    print(frames.stats()["live_items"], rt.ts_min)  # 0 3
