"""Any local Hugging Face causal LM trains: random-init Qwen2, Qwen3, Llama; chat template or not; LoRA or not."""

import json

import pytest
import torch

from sage_agents.config import TrainConfig
from sage_agents.models import build_tokenizer, load_policy
from sage_agents.trainer import Trainer
from tests.sage_agents.fake_env import FAST_TRAIN, FakeChainEnv

CHAT_TEMPLATE = (  # ChatML-like, as Qwen's: role markers are special tokens
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
FAST = dict(FAST_TRAIN, save_every=0)


def save_random_lm(folder, arch, chat_template=False, dtype=torch.float32):
    """A tiny random-init ``arch`` model + tokenizer saved like a real checkpoint (no download)."""
    from transformers import (
        LlamaConfig,
        LlamaForCausalLM,
        Qwen2Config,
        Qwen2ForCausalLM,
        Qwen3Config,
        Qwen3ForCausalLM,
    )

    tokenizer = build_tokenizer()
    if chat_template:
        tokenizer.add_tokens(["<|im_start|>", "<|im_end|>"], special_tokens=True)
        tokenizer.chat_template = CHAT_TEMPLATE
    config_cls, model_cls = {
        "llama": (LlamaConfig, LlamaForCausalLM),
        "qwen2": (Qwen2Config, Qwen2ForCausalLM),
        "qwen3": (Qwen3Config, Qwen3ForCausalLM),
    }[arch]
    config = config_cls(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        max_position_embeddings=2048,
        tie_word_embeddings=arch != "qwen3",  # both layouts: tied (Llama, Qwen2 small) and untied head
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.bos_token_id,
    )
    torch.manual_seed(0)
    model = model_cls(config).to(dtype)
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    return folder


def named(trainer):
    model = trainer.accelerator.unwrap_model(trainer.model)
    return {n: p.detach().clone() for n, p in model.named_parameters()}, {
        n for n, p in model.named_parameters() if p.requires_grad
    }


@pytest.mark.parametrize("arch", ["llama", "qwen2", "qwen3"])
@pytest.mark.parametrize("chat", [False, True], ids=["plain", "chat"])
@pytest.mark.parametrize("lora", [0, 4], ids=["full", "lora"])
def test_random_init_causal_lm_trains(tmp_path, arch, chat, lora):
    folder = save_random_lm(tmp_path / arch, arch, chat)
    # LoRA's B starts at zero, so A gets no gradient until B has moved: three steps move every adapter matrix.
    steps = 3 if lora else 1
    cfg = TrainConfig(**FAST, model_path=str(folder), output_dir=str(tmp_path / "run"), total_steps=steps, lora_r=lora)
    assert load_policy(folder)[0].config.model_type == arch
    trainer = Trainer(cfg, env_fn=lambda: FakeChainEnv(easy=True))
    assert trainer.policy.use_chat_template == chat
    before, trainable = named(trainer)
    trainer.train()
    after, _ = named(trainer)
    turn = trainer.last_rollouts[0].turns[0]
    assert ("<|im_start|>" in trainer.tokenizer.decode(turn.prompt_ids)) == chat
    assert trainable and all(p.dtype == torch.float32 for p in after.values())
    unchanged = sorted(n for n in trainable if torch.equal(before[n], after[n]))
    assert not unchanged, unchanged
    if lora:
        assert all("lora_" in n for n in trainable)
        frozen = [n for n in before if n not in trainable]
        assert frozen and all(torch.equal(before[n], after[n]) for n in frozen)
    else:
        assert trainable == set(before)
    trainer.close()


def test_lora_checkpoint_is_a_peft_adapter_that_loads_onto_its_base(tmp_path):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    folder = save_random_lm(tmp_path / "base", "qwen3")
    cfg = TrainConfig(
        **{**FAST, "save_every": 1},
        model_path=str(folder),
        output_dir=str(tmp_path / "run"),
        total_steps=2,
        lora_r=4,
        lora_target_modules=["q_proj", "v_proj"],
        beta=0.1,  # the reference is the base model: the adapter switched off
        gradient_checkpointing=True,
    )
    trainer = Trainer(cfg, env_fn=lambda: FakeChainEnv(easy=True))
    history = trainer.train()
    assert history[-1]["losses/kl"] >= 0
    ckpt = trainer.latest_checkpoint() / "model"
    adapter = json.loads((ckpt / "adapter_config.json").read_text())
    assert adapter["base_model_name_or_path"] == str(folder.resolve())
    assert sorted(adapter["target_modules"]) == ["q_proj", "v_proj"]
    assert not (ckpt / "model.safetensors").exists()  # the adapter alone, not the base again

    trained = trainer.accelerator.unwrap_model(trainer.model).eval()
    ids = torch.tensor([trainer.policy.encode("go to box 1")])
    with torch.no_grad():
        expected = trained(input_ids=ids).logits
        base = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True)
        peft_model = PeftModel.from_pretrained(base, ckpt).eval()
        assert torch.allclose(peft_model(input_ids=ids).logits, expected, atol=1e-5)
        merged, tokenizer = load_policy(ckpt)  # what the evaluator and make_policy_agent call
        assert not isinstance(merged, PeftModel)
        assert torch.allclose(merged(input_ids=ids).logits, expected, atol=1e-5)
        assert tokenizer.padding_side == "left"

    resumed = Trainer(
        TrainConfig(**{**cfg.to_dict(), "total_steps": 3, "resume": True}), env_fn=lambda: FakeChainEnv(easy=True)
    )
    assert resumed.step == 2
    a = {n: p for n, p in trained.named_parameters() if "lora_" in n}
    b = {n: p for n, p in resumed.accelerator.unwrap_model(resumed.model).named_parameters() if "lora_" in n}
    assert a.keys() == b.keys() and all(torch.equal(a[n], b[n]) for n in a)


def test_load_policy_names_a_missing_adapter_base(tmp_path):
    (tmp_path / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "Qwen/Qwen3-0.6B"}))
    with pytest.raises(FileNotFoundError, match="not a local folder"):
        load_policy(tmp_path)


@pytest.mark.parametrize("dtype, expected", [("float32", torch.float32), ("auto", torch.bfloat16)])
def test_a_bf16_checkpoint_trains_in_float32_master_weights_by_default(tmp_path, dtype, expected):
    folder = save_random_lm(tmp_path / "bf16", "qwen2", dtype=torch.bfloat16)
    cfg = TrainConfig(**FAST, model_path=str(folder), output_dir=str(tmp_path / "run"), total_steps=1, dtype=dtype)
    trainer = Trainer(cfg, env_fn=lambda: FakeChainEnv(easy=True))
    assert {p.dtype for p in trainer.model.parameters()} == {expected}
    trainer.close()


def test_gradient_checkpointing_gives_the_same_gradient(tiny, tmp_path):
    import copy

    model, tok = tiny
    grads = []
    for flag in (False, True):
        cfg = TrainConfig(**FAST, output_dir=str(tmp_path / str(flag)), gradient_checkpointing=flag)
        trainer = Trainer(cfg, model=copy.deepcopy(model), tokenizer=tok, env_fn=lambda: FakeChainEnv(easy=True))
        rows, _ = trainer.build_rows(trainer.rollout())
        trainer.model.train()
        trainer.accumulate_gradients(rows, trainer.loss_weights(rows))
        grads.append([p.grad.clone() for p in trainer.model.parameters()])
    assert any(g.abs().sum() > 0 for g in grads[0])
    for a, b in zip(*grads, strict=True):
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-7)
