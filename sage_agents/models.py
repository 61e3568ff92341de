"""Models without downloads: a tiny causal LM + word-level tokenizer built locally, or any HF LM by path.

The tokenizer is word-level (``tokenizers.models.WordLevel``) over the env vocabulary: the words of the env's
domain (:meth:`sage_envs.domain.Domain.vocabulary`; for ALFWorld the command words and messages of every
grammar its games speak, the wheel's ``alfred.twl2`` and the official games', object / receptacle names and
goal templates), the skill DSL keywords, digits and punctuation. A word that
follows a space is a separate token with a leading ``▁`` (as in SentencePiece), so
``decode(encode(text)) == text.lower()`` for in-vocabulary text, including the newlines and indentation of
skill definitions. Nothing here touches the Hugging Face Hub.
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tokenizers import Regex, Tokenizer, decoders, normalizers, pre_tokenizers
from tokenizers.models import WordLevel

from sage_envs.registration import DEFAULT_ENV_ID

PAD, EOS, BOS, UNK = "<pad>", "<eos>", "<bos>", "<unk>"
SPECIAL_TOKENS = (PAD, EOS, BOS, UNK)

# Words of the skill DSL and of the prompt layout (sage_agents.policy), always in the vocabulary.
DSL_WORDS = (
    "skill call for in if not then else return stop break end each while contains done fail "
    "obj place recep src dst target tool thing item loc name args arg params "
    "task history observation action actions skills admissible commands program guidance description "
)
PUNCTUATION = "( ) , : . ; ' \" { } [ ] _ - + = * / ! ? # < > | @ & % $ ~ `"
# A small built-in corpus so that a tokenizer built with no texts can still spell commands and messages.
BUILTIN_TEXT = (
    "go to open close take from move put in on use heat cool clean slice with examine look inventory help "
    "you are in the middle of a room . looking quickly around you , you see a and nothing happens . "
    "you arrive at is closed open you pick up the put it your task to put some clean hot cool "
    "find two examine under desklamp floorlamp is empty carrying not anything invalid action defined "
    "skill version error turn won failed "
)


def domain_texts(env_id: str) -> list[str]:
    """The vocabulary texts of ``env_id``'s domain (:meth:`~sage_envs.domain.Domain.vocabulary`).

    [] for a registered env whose entry point names no domain (a test double, a third-party env).

    Raises:
        sage_envs.error.InvalidConfigError: ``env_id`` is not registered.
    """
    import sage_envs
    from sage_envs.error import NoDomainError

    try:
        return sage_envs.domain_class(env_id).vocabulary()
    except NoDomainError:
        return []


def _pipeline() -> tuple[Any, Any, Any]:
    """(normalizer, pre-tokenizer, decoder) of the word-level tokenizer."""
    normalizer = normalizers.Lowercase()
    pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(r"\n"), behavior="isolated"),  # newlines are tokens
            pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="never", split=True),  # " go" -> "▁go"
            pre_tokenizers.Split(Regex(r"▁?\d|[^a-z\d▁]"), behavior="isolated"),  # digits, punctuation, "_"
        ]
    )
    decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.Fuse()])
    return normalizer, pre_tokenizer, decoder


def build_tokenizer(
    texts: Iterable[str] = (),
    *,
    env_id: str | None = DEFAULT_ENV_ID,
    include_alfworld: bool = True,
    min_frequency: int = 1,
    max_vocab: int = 8192,
):
    """Build a word-level ``PreTrainedTokenizerFast`` from ``texts`` plus the built-in env vocabulary.

    Args:
        texts: extra texts (observations, tasks, expert actions) whose words join the vocabulary.
        env_id: the env whose domain vocabulary (:func:`domain_texts`) joins; None = no domain's.
        include_alfworld: False leaves the domain vocabulary out (its name from before domains offered one:
            the same as ``env_id=None``).
        min_frequency: drop words of ``texts`` seen fewer times (built-in words are always kept).
        max_vocab: keep at most this many tokens (most frequent first).

    Returns:
        A ``transformers.PreTrainedTokenizerFast`` with ``<pad>``, ``<eos>``, ``<bos>``, ``<unk>``; no chat
        template.
    """
    from transformers import PreTrainedTokenizerFast

    normalizer, pre_tokenizer, decoder = _pipeline()

    def words(text: str) -> list[str]:
        return [w for w, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(text))]

    counts: Counter[str] = Counter()
    for text in texts:  # each word in both forms: "go" (line start) and "▁go" (after a space)
        for word in words(text):
            bare = word.lstrip("▁")
            counts.update([bare, "▁" + bare] if bare and bare != "\n" else [word])
    counts = Counter({w: c for w, c in counts.items() if c >= min_frequency})
    base = [BUILTIN_TEXT, DSL_WORDS, PUNCTUATION, " ".join(str(d) for d in range(10))]
    base.append(" ".join("abcdefghijklmnopqrstuvwxyz"))  # one-letter names (``for r in receptacles``)
    base += domain_texts(env_id) if env_id is not None and include_alfworld else []
    for text in base:  # every base word in both forms: "go" (line start) and "▁go" (after a space)
        for word in words(text) + words(text.replace("\n", " ")):
            bare = word.lstrip("▁")
            if bare:
                counts[bare] += 10**6
                counts["▁" + bare] += 10**6
    counts["▁"] += 10**6  # indentation is a run of "▁"
    counts["\n"] += 10**6
    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS)}
    for word, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        if len(vocab) >= max_vocab:
            break
        vocab.setdefault(word, len(vocab))

    backend = Tokenizer(WordLevel(vocab, unk_token=UNK))
    backend.normalizer, backend.pre_tokenizer, backend.decoder = normalizer, pre_tokenizer, decoder
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token=PAD, eos_token=EOS, bos_token=BOS, unk_token=UNK
    )
    tokenizer.padding_side = "left"  # decoder-only generation
    return tokenizer


def build_tiny_model(
    tokenizer_or_texts: Any = (),
    *,
    hidden: int = 128,
    layers: int = 4,
    heads: int = 4,
    kv_heads: int = 2,
    intermediate: int | None = None,
    max_positions: int = 4096,
    seed: int = 0,
    arch: str = "llama",
    env_id: str | None = DEFAULT_ENV_ID,
):
    """Build a randomly initialised tiny causal LM (1-20M parameters) and its tokenizer, offline.

    Args:
        tokenizer_or_texts: a tokenizer, or texts for :func:`build_tokenizer`.
        hidden: hidden size.
        layers: transformer blocks.
        heads: attention heads.
        kv_heads: key/value heads (grouped-query attention).
        intermediate: MLP width; default ``4 * hidden`` (the default model has ~1.1M parameters).
        max_positions: longest sequence.
        seed: torch seed used for the initial weights.
        arch: ``"llama"`` (LlamaForCausalLM) or ``"qwen2"`` (Qwen2ForCausalLM). Llama is the default because
            ``AutoTokenizer`` maps a ``qwen2`` folder to ``Qwen2Tokenizer`` and would rebuild (break) the
            word-level tokenizer; :func:`load_policy` loads either correctly.
        env_id: the env whose domain vocabulary a tokenizer built here knows (:func:`build_tokenizer`).

    Returns:
        ``(model, tokenizer)``.
    """
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    tokenizer = tokenizer_or_texts
    if not hasattr(tokenizer_or_texts, "convert_tokens_to_ids"):
        tokenizer = build_tokenizer(tokenizer_or_texts, env_id=env_id)
    config_cls, model_cls = {
        "qwen2": (Qwen2Config, Qwen2ForCausalLM),
        "llama": (LlamaConfig, LlamaForCausalLM),
    }[arch]
    config = config_cls(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=intermediate or 4 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=max_positions,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.bos_token_id,
    )
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = model_cls(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model, tokenizer


def load_policy(path: str | os.PathLike, *, dtype: Any = None, device: str | None = None):
    """Load any Hugging Face causal LM and its tokenizer from a local folder (never the Hub).

    A LoRA adapter folder (``adapter_config.json``, e.g. a checkpoint's ``model/`` of a ``lora_r > 0`` run) is
    loaded onto its base model (the local folder named by ``base_model_name_or_path``) with peft's
    ``PeftModel.from_pretrained`` and merged: the result is a plain model for inference.

    Args:
        path: a folder written by ``save_pretrained`` (model + tokenizer, or a peft adapter + tokenizer).
        dtype: torch dtype (or its name, or ``"auto"``) to load in (default: the checkpoint's).
        device: move the model there (default: stay on CPU).

    Returns:
        ``(model, tokenizer)``; the tokenizer pads on the left and has a pad token.
    """
    from transformers import AutoModelForCausalLM

    path = _local_folder(path)
    adapter_config = path / "adapter_config.json"
    if adapter_config.is_file():
        from peft import PeftModel

        base = json.loads(adapter_config.read_text()).get("base_model_name_or_path") or ""
        if not Path(base).is_dir():
            raise FileNotFoundError(
                f"the LoRA adapter in {str(path)!r} names base model {base!r}, which is not a local folder; set "
                "base_model_name_or_path in its adapter_config.json to the base model's folder."
            )
        model, tokenizer = load_policy(base, dtype=dtype)
        if (path / "tokenizer_config.json").is_file():
            tokenizer = _load_tokenizer(path)
        model = PeftModel.from_pretrained(model, path, local_files_only=True).merge_and_unload()
    else:
        tokenizer = _load_tokenizer(path)
        kwargs = {"local_files_only": True}
        if dtype is not None:
            kwargs["dtype"] = dtype
        model = AutoModelForCausalLM.from_pretrained(path, **kwargs)
    if device is not None:
        model.to(device)
    return model, tokenizer


def _local_folder(path: str | os.PathLike) -> Path:
    """``path`` as a ``Path``, or a FileNotFoundError when it is not a local folder (a Hub name, a typo)."""
    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(
            f"model path {str(path)!r} is not a local folder; pass a directory written by save_pretrained "
            "(sage_agents never downloads from the Hub)."
        )
    return path


def _load_tokenizer(path: Path) -> Any:
    """The tokenizer saved in ``path``, padding on the left, with a pad token."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    config_file = path / "tokenizer_config.json"
    declared = json.loads(config_file.read_text()).get("tokenizer_class", "") if config_file.exists() else ""
    if declared in ("TokenizersBackend", "PreTrainedTokenizerFast") and (path / "tokenizer.json").exists():
        # A generic tokenizer.json (e.g. ours): load it as is; AutoTokenizer may swap in the model's class.
        tokenizer = PreTrainedTokenizerFast.from_pretrained(path, local_files_only=True)
    else:
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    return tokenizer


def count_parameters(model: Any) -> int:
    """Number of trainable parameters."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def describe_model(path: str | os.PathLike) -> str:
    """A readable name of the local model folder ``path``, read from its files (nothing is loaded).

    E.g. ``"LlamaForCausalLM, 3 layers, hidden 128, 1.1M parameters"``: the architecture, layers and hidden size
    from ``config.json``, and the parameter count from the ``*.safetensors`` headers (left out when the folder
    has none; tied weights are stored, and counted, once).
    """
    folder = Path(path)
    config_file = folder / "config.json"
    if not config_file.is_file():
        raise FileNotFoundError(f"{str(folder)!r} has no config.json; pass a folder written by save_pretrained.")
    config = json.loads(config_file.read_text())
    parts = [(config.get("architectures") or [config.get("model_type", "unknown model")])[0]]
    if "num_hidden_layers" in config:
        parts.append(f"{config['num_hidden_layers']} layers")
    if "hidden_size" in config:
        parts.append(f"hidden {config['hidden_size']}")
    count = 0
    for weights in sorted(folder.glob("*.safetensors")):
        with weights.open("rb") as f:
            header = json.loads(f.read(int.from_bytes(f.read(8), "little")))  # safetensors: u64 length + JSON
        for name, tensor in header.items():
            if name != "__metadata__":
                count += math.prod(tensor["shape"])
    if count:
        scale, unit = next((s, u) for s, u in ((1e9, "B"), (1e6, "M"), (1e3, "K"), (1, "")) if count >= s)
        parts.append(f"{count / scale:.1f}{unit} parameters")
    return ", ".join(parts)
