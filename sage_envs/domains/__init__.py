"""Domain plug-ins of the chain env (see :mod:`sage_envs.domain`): one subpackage per domain."""
