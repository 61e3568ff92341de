import pytest

from sage_agents.models import build_tiny_model, build_tokenizer, count_parameters, load_policy

SKILL = (
    "skill heat_then_place(obj, place):\n    go to microwave 1\n    heat {obj} with microwave 1\n"
    "    go to {place}\n    move {obj} to {place}\ncall heat_then_place(apple 1, countertop 12)"
)


def test_tokenizer_round_trips_commands_and_skills(tiny):
    _, tok = tiny
    for text in ["go to countertop 1", "take apple 1 from countertop 2", SKILL, "call f()", "look"]:
        ids = tok(text, add_special_tokens=False).input_ids
        assert tok.unk_token_id not in ids, text
        assert tok.decode(ids) == text
    assert tok("go to x<eos>").input_ids[-1] == tok.eos_token_id
    assert tok.padding_side == "left"


@pytest.mark.parametrize("grammar", ["wheel", "official"])
def test_tokenizer_speaks_every_command_grammar(tiny, grammar):
    """Both put forms and the texts of both grammars' files tokenize without <unk> (official: "{lend.name}")."""
    from sage_envs.domains.alfworld.scenes import COMMAND_GRAMMARS

    _, tok = tiny
    feedback = {
        "wheel": "You move the apple 1 to the countertop 1.",
        "official": "You put the apple 1 in/on the countertop 1.",
    }
    for text in [feedback[grammar], COMMAND_GRAMMARS[grammar].grammar.read_text(), "You arrive at loc 12."]:
        ids = tok(text, add_special_tokens=False).input_ids
        assert tok.unk_token_id not in ids, [tok.decode([i]) for i in ids if i == tok.unk_token_id]
    put = "put apple 1 in/on countertop 1"
    assert tok.decode(tok(put, add_special_tokens=False).input_ids) == put


def test_tokenizer_learns_words_from_texts():
    tok = build_tokenizer(["the zorblax 3 is here"], include_alfworld=False)
    ids = tok("zorblax 3", add_special_tokens=False).input_ids
    assert tok.unk_token_id not in ids
    assert tok("a frobnicator").input_ids[-1] == tok.unk_token_id  # unknown words map to <unk>


def test_default_tiny_model_size(tiny):
    model, tok = build_tiny_model(tiny[1])  # defaults: hidden 128, 4 layers
    assert 1_000_000 < count_parameters(model) < 20_000_000
    assert model.config.vocab_size == len(tok)


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_save_and_load_by_local_path(tmp_path, tiny, arch):
    from transformers import AutoTokenizer

    model, tok = build_tiny_model(tiny[1], hidden=32, layers=1, heads=2, kv_heads=1, arch=arch)
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    loaded, tok2 = load_policy(tmp_path)
    assert type(loaded).__name__ == type(model).__name__
    assert tok2.decode(tok2(SKILL).input_ids) == SKILL
    sd, sd2 = model.state_dict(), loaded.state_dict()
    assert all((sd[k] == sd2[k]).all() for k in sd)
    if arch == "llama":  # AutoTokenizer keeps the word-level pipeline for llama folders
        assert AutoTokenizer.from_pretrained(tmp_path).decode(tok2(SKILL).input_ids) == SKILL


def test_load_policy_refuses_hub_names():
    with pytest.raises(FileNotFoundError, match="never downloads"):
        load_policy("Qwen/Qwen2.5-0.5B-Instruct")
