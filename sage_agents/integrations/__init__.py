"""Adapters that train the SageChain envs with other libraries' trainers.

- :mod:`.trl`: TRL's ``GRPOTrainer`` through its ``rollout_func`` (``TrainConfig.backend="trl"``; docs/agents.md).

Nothing is imported here, so ``import sage_agents.integrations`` stays light; import the submodule you use.
"""
