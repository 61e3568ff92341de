"""examples/reskill_within_step.py: the within-step comparison of a ReSkill test's arms."""

import importlib.util
from pathlib import Path

spec = importlib.util.spec_from_file_location(
    "reskill_within_step", Path(__file__).parents[2] / "examples" / "reskill_within_step.py"
)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)


def test_a_new_arm_that_wins_every_step_is_significant_and_one_that_matches_is_not():
    observed, expected, p = module.within_step_test([(8, 6, 8, 0)] * 3)
    assert (observed, expected) == (18, 9.0) and p < 0.001
    observed, expected, p = module.within_step_test([(8, 3, 8, 3)] * 3)
    assert (observed, expected) == (9, 9.0) and 0.4 < p < 0.7


def test_easy_steps_given_to_the_new_arm_do_not_count_for_it():
    # Pooled, the new arm wins 8/16 vs 8/32; within steps, it did exactly as well as the old arm.
    steps = [(14, 7, 2, 1), (2, 1, 14, 7), (0, 0, 16, 0)]
    observed, expected, p = module.within_step_test(steps)
    assert observed == 8 and expected == 8.0 and p > 0.3
