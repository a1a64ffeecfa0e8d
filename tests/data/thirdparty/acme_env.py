"""A third party's Harbor environment, chosen as `--env acme_env:AcmeDocker` (tests/test_envs.py): Harbor's
Docker environment under another name, so hoh treats it as any provider of its own (a cloud sandbox's way:
the key goes in, what comes back is scrubbed)."""

from harbor.environments.docker.docker import DockerEnvironment


class AcmeDocker(DockerEnvironment):
    pass
