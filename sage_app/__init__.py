"""The application layer: the ``sage`` command line and the demo pipeline, above every library package.

Imports point down: ``sage_envs`` <- ``sage_agents`` <- ``leaderboard`` <- ``sage_app``. The CLI and the demo use
all three; nothing below imports them.
"""
