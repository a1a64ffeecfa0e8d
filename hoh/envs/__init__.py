"""Role environments: each role's attempts in an environment of Harbor's (`--env docker|podman|NAME`), the
Runtime outside it. `pool.py` (one per role for a session, and a crash's leftovers), `executor.py` (one
attempt: in, run, out), `supervise.py` (the CLI's process there, watched through `exec`), `transfer.py` (what
goes in and what may come back), `install.py` (the supervisor and the harness's program), `harbor_env.py`
(Harbor's classes and the event loop their coroutines run on). Harbor is imported only when an environment
other than `local` is asked for."""
