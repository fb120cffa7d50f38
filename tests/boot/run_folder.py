"""A run folder named by an environment variable, for the boot tests:
each test module skips when its variable is unset (make test-unit)."""
import os

import pytest


class RunFolder:
    def __init__(self, env_var):
        self.path = os.environ.get(env_var)
        self.skip = pytest.mark.skipif(not self.path, reason=f"{env_var} not set")

    def read(self, name):
        # The console may hold bytes that are not UTF-8 (firmware noise).
        with open(os.path.join(self.path, name), errors="replace") as f:
            return f.read()

    def status(self):
        return dict(line.split("=", 1) for line in self.read("status.txt").splitlines())

    def params(self):
        """The scenario's variables as the run resolved them."""
        return dict(line.split("=", 1) for line in self.read("params-resolved.env").splitlines()
                    if "=" in line and not line.startswith("#"))
