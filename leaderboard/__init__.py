"""Evaluation of registered agents on fixed chains, results files and the rendered LEADERBOARD.md."""
