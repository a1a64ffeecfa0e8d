"""Role transcripts: what one role attempt said, thought, ran and got back, and its export.

    reader.py   an attempt directory → Transcript (entries mapped by each harness adapter, `event_entries`);
                a loop's attempts (`attempts_of`), the live ones included
    atif.py     transcripts → Harbor's Agent Trajectory Interchange Format (`hoh export atif`), also laid out
                as a Harbor jobs folder for `harbor view`

The entry record and the shared line reader live with the adapters (`hoh/harness/entries.py`), which own the
wire formats.
"""

from __future__ import annotations

from .reader import AttemptRef, EntryKind, Transcript, TranscriptEntry, attempts_of, read_transcript

__all__ = ["AttemptRef", "EntryKind", "Transcript", "TranscriptEntry", "attempts_of", "read_transcript"]
