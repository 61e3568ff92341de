from tests.sage_agents.conftest import tiny  # noqa: F401  (offline settings and the shared tiny model)
