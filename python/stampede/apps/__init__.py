"""The seeds' applications (docs/APPLICATIONS.md), written on Stampede's Python API with NumPy only.

Layout:

- :mod:`stampede.apps.scenes` — synthetic cameras: deterministic scenes of people walking across a
  textured background, with ground truth, and a ``Pacer``-paced :class:`~stampede.apps.scenes.Camera`.
- :mod:`stampede.apps.vision` — pure NumPy pieces (background subtraction, blobs, colour histograms).
- :mod:`stampede.apps.common` — named tasks, stage counters, progress lines, the run loop, the summary.
- :mod:`stampede.apps.kiosk` — the Smart Kiosk: digitizer → low-fi tracker → dynamically created
  hi-fi trackers that re-analyse past frames by timestamp → decision (join) → display.
- :mod:`stampede.apps.colour_tracker` — digitizer → background subtraction → histogram → tracker.
- :mod:`stampede.apps.motion_mixer` — several cameras, a motion detector each, a mixer joining them
  by timestamp and picking the camera with the most motion.
- :mod:`stampede.apps.conference` — the videoconference: participant processes, a mixer joining
  their frames by exact timestamp into a composite every display shows.

Each application runs with ``python -m stampede.apps.<name> --headless --seconds 10`` and ends its
output with one JSON line (docs/APPLICATIONS.md).
"""
