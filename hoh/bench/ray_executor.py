"""Run trials on a Ray cluster: `--executor ray [--ray-address ADDR]` (`pip install 'hoh[ray]'`).

Each trial is one Ray task (`num_cpus` = --ray-cpus-per-trial) calling the same `run_trial` the
local executor calls, so the records are the same. At most --jobs trials are in flight. Every
node needs hoh (and the harness CLIs) installed, and OUT must be a path every node sees (a
shared filesystem): trials write their workspaces there. A record that comes back but is not
visible on this machine is written here too, so the run's results are complete either way.

Without --ray-address, Ray's own rules apply: `RAY_ADDRESS`, else the latest local cluster,
else a new local instance that lives as long as this run. A Ray already initialised in this
process (a test, a notebook) is used as it is and left running.
"""

from __future__ import annotations

import os
from typing import Any

from ..errors import UsageError
from .executors import Executor, OnDone, OnStart
from .results import TrialPaths, write_record
from .trial import TrialSpec, base_record, run_trial

INSTALL_HINT = "pip install 'hoh[ray]'"


def _ray():
    try:
        import ray
    except ImportError:
        raise UsageError(f"--executor ray needs Ray: {INSTALL_HINT}") from None
    return ray


class RayExecutor(Executor):
    name = "ray"

    def __init__(self, jobs: int = 1, address: str | None = None, cpus_per_trial: float = 1.0, **options: Any):
        super().__init__(jobs, **options)
        self.address, self.cpus_per_trial = address, cpus_per_trial

    def run(self, specs: list[TrialSpec], on_start: OnStart, on_done: OnDone) -> list[dict[str, Any]]:
        ray = _ray()
        started_here = not ray.is_initialized()
        if started_here:
            options: dict[str, Any] = {}
            if self.address is None and "RAY_ADDRESS" not in os.environ:
                options["_node_ip_address"] = "127.0.0.1"  # a local instance serves this machine only
            try:
                ray.init(address=self.address, include_dashboard=False, log_to_driver=False, **options)
            except (ConnectionError, ValueError, RuntimeError) as err:
                where = self.address or "the default address"
                raise UsageError(f"cannot start or reach Ray at {where}: {err}") from None
        remote = ray.remote(num_cpus=self.cpus_per_trial, max_retries=0)(run_trial)
        queue = list(enumerate(specs))
        pending: dict[Any, int] = {}
        results: dict[int, dict[str, Any]] = {}
        try:
            while queue or pending:
                while queue and len(pending) < self.jobs:
                    i, spec = queue.pop(0)
                    on_start(spec)
                    pending[remote.remote(spec)] = i
                done, _ = ray.wait(list(pending), num_returns=1)
                for ref in done:
                    i = pending.pop(ref)
                    results[i] = self._collect(ray, ref, specs[i])
                    on_done(specs[i], results[i])
        finally:
            if started_here:
                ray.shutdown()
        return [results[i] for i in range(len(specs))]

    @staticmethod
    def _collect(ray, ref, spec: TrialSpec) -> dict[str, Any]:
        """The trial's record; a Ray-level failure (a worker lost) becomes an error record."""
        paths = TrialPaths(spec.root)
        try:
            record = ray.get(ref)
        except Exception as err:  # noqa: BLE001 - ray wraps every failure in its own types
            record = {**base_record(spec.task, spec.config, spec.labels), "outcome": "error",
                      "error": f"ray task failed: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"}
            paths.root.mkdir(parents=True, exist_ok=True)
            write_record(paths, record)
            return record
        if not paths.record.exists():
            paths.root.mkdir(parents=True, exist_ok=True)
            write_record(paths, record)
        return record
