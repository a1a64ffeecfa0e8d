"""hoh inside a Harbor task environment: the part of the Harbor agent that runs there.

`python3 -m hoh.taskrun` drives a hoh build on the task's working directory loop by loop under
the task's time budget, exports every finished loop's frozen candidate as an artifact, and keeps
a summary Harbor collects. It needs only hoh's core dependencies (Python ≥ 3.11), never Harbor:
the host side that uploads and starts it is `hoh.harbor`.
"""
