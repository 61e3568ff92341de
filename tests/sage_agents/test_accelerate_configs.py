"""The shipped accelerate configs load with accelerate's own parser and say what their names promise."""

from pathlib import Path

import pytest
from accelerate.commands.config.config_args import ClusterConfig

CONFIGS = Path(__file__).resolve().parents[2] / "configs" / "accelerate"
EXPECTED = {
    "ddp.yaml": ("MULTI_GPU", None),
    "fsdp.yaml": ("FSDP", None),
    "zero2.yaml": ("DEEPSPEED", 2),
    "zero3.yaml": ("DEEPSPEED", 3),
}


def test_the_configs_the_readme_names_are_shipped():
    assert sorted(p.name for p in CONFIGS.glob("*.yaml")) == sorted(EXPECTED)
    readme = (CONFIGS.parents[1] / "README.md").read_text()
    for name in EXPECTED:
        assert f"configs/accelerate/{name}" in readme


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_config_parses_and_leaves_precision_to_the_train_config(name):
    config = ClusterConfig.from_yaml_file(CONFIGS / name)
    distributed_type, zero_stage = EXPECTED[name]
    assert str(config.distributed_type).split(".")[-1] == distributed_type
    assert str(config.mixed_precision) in ("no", "PrecisionType.NO")  # TrainConfig.mixed_precision decides
    if zero_stage is not None:
        assert config.deepspeed_config["zero_stage"] == zero_stage
    if distributed_type == "FSDP":
        assert config.fsdp_config["fsdp_state_dict_type"] == "FULL_STATE_DICT"  # model/ loads with from_pretrained
