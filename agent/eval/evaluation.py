"""One evaluation run from settings: load the model once, open the dataset's knowledge, build
the methods and the judge on that model, answer, score, report.

Example (not run: needs a model and the data sets)::

    from agent.eval.evaluation import run_evaluation
    from agent.settings import load_settings

    report = run_evaluation("popqa", settings=load_settings(model="smollm2-135m"), limit=10)
    print(report.markdown())
    report.write(Path("runs"))
"""
from __future__ import annotations

import os
import platform
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..baselines.web_rag import ListedFactsReader
from ..errors import FactweaveError
from ..knowledge.kamel import majority_objects, relation_objects
from ..llm.client import LocalChat, OpenAIChat, chat_client_from_env
from ..models import resolve_engine
from ..rerank import Reranker
from .datasets import data_path, load_questions
from .judge import AnswerJudge
from .knowledge import open_knowledge
from .methods import (CONVERSATIONAL, KAMEL_ONLY, METHODS, AgentMethod, LLMOnlyMethod, MajorityMethod, RCDMethod, ReFactXMethod,
                      VanillaSetMethod, WebRAGMethod, default_methods)
from .kgd import VARIANTS as KGD_VARIANTS
from .kgd import KGDMethod, QuestionChunks
from .report import EvalReport, file_stem, run_tags
from .resume import RowLog
from .run import evaluate_methods
from .wordings import read_wordings, reworded

if TYPE_CHECKING:
    from ..llm.client import ChatClient
    from ..models import LoadedModel
    from ..settings import Settings
    from .knowledge import EvalKnowledge

# Methods that read the dataset's knowledge (llm-only reads none, so its runs build no web).
_NEEDS_KNOWLEDGE = frozenset({"refactx", "web-rag", "agent"})


def judge_client(loaded: LoadedModel, *, base_url: str | None = None, model: str | None = None) -> ChatClient:
    """The judge's chat model: the OpenAI-compatible endpoint at ``base_url`` (``model``, else the
    first one it serves; key from OPENAI_API_KEY), else OpenAI's ``model`` (key required), else
    the local model already loaded."""
    if base_url:
        return chat_client_from_env(model=model, base_url=base_url)
    if model:
        return OpenAIChat(model)
    return LocalChat(loaded)


def open_methods(names: Sequence[str], loaded: LoadedModel, settings: Settings,
                 knowledge: EvalKnowledge | None, *, kamel_root: Path | None = None,
                 split: str = "dev", kgd: KGDOptions | None = None, seed: int = 0) -> list[Any]:
    """The methods ``names`` (in :data:`METHODS` order) on ``loaded``, over ``knowledge``; the
    KAMEL-only methods take their candidates from ``kamel_root`` (every split) and the majority
    from a split other than ``split``; the KGD family (``agent.eval.kgd``) runs with ``kgd``."""
    # lazy: pulls torch (the CLI imports this module at start)
    from ..decoding import FactGenerator

    unknown = [n for n in names if n not in METHODS]
    if unknown:
        raise FactweaveError(f"unknown method {unknown[0]!r}; choose from {', '.join(METHODS)}")
    if kamel_root is None and KAMEL_ONLY & set(names):
        raise FactweaveError(f"{sorted(KAMEL_ONLY & set(names))[0]} answers from a KAMEL relation's objects: "
                             "use it with `factweave eval kamel`")
    kb = knowledge.kb if knowledge is not None else None
    generator = FactGenerator(loaded.model, loaded.tokenizer, kb, beams=settings.beams,
                              max_new_tokens=settings.max_tokens, steps=loaded.steps)
    if getattr(loaded.steps, "engine", None) == "remote":
        loaded.steps.server_tree = kb  # the server's --index must hold this KB (its sessions send no facts)
    set_generator = None
    if {"rcd", "rcd-static", "vd"} & set(names):
        # lazy: pulls torch (the CLI imports this module at start)
        from ..baselines.rcd import AnswerSetGenerator

        set_generator = AnswerSetGenerator(loaded.model, loaded.tokenizer, beams=settings.beams)
    candidates: dict[str, list[str]] = {}
    if {"rcd", "rcd-static"} & set(names):
        assert kamel_root is not None  # checked above (KAMEL_ONLY)
        candidates = relation_objects(kamel_root)
    methods: list[Any] = []
    if KGD_VARIANTS.keys() & set(names):
        methods_kgd = _kgd_methods(names, loaded, settings, knowledge, kgd or KGDOptions(), seed)
    for name in (n for n in METHODS if n in names):
        if name in KGD_VARIANTS:
            methods.append(methods_kgd[name])
            continue
        if name == "llm-only":
            methods.append(LLMOnlyMethod(generator))
        elif name == "refactx":
            methods.append(ReFactXMethod(generator))
        elif name == "web-rag":
            assert knowledge is not None  # the caller opens it for these methods (_NEEDS_KNOWLEDGE)
            methods.append(WebRAGMethod(ListedFactsReader(generator), knowledge.web, k=settings.k))
        elif name == "agent":
            assert knowledge is not None  # the caller opens it for these methods (_NEEDS_KNOWLEDGE)
            methods.append(AgentMethod(_agent(generator, knowledge, settings, loaded)))
        elif name in ("rcd", "rcd-static"):
            assert set_generator is not None  # made above for these methods
            methods.append(RCDMethod(set_generator, candidates, static=name == "rcd-static"))
        elif name == "vd":
            assert set_generator is not None  # made above for these methods
            methods.append(VanillaSetMethod(set_generator))
        else:
            assert kamel_root is not None  # checked above (KAMEL_ONLY)
            methods.append(MajorityMethod(majority_objects(kamel_root, "dev" if split == "train" else "train")))
    return methods


@dataclass(frozen=True)
class KGDOptions:
    """Knowledge-guided decoding settings of a run: ``samples`` > 1 scores best-of-n; ``chunks``:
    top chunks per question; ``nli_model``: a cross-encoder (Hugging Face id or folder) for
    ``kgd-nli``, else the local model judges; ``max_tokens``: the short answer's limit."""

    samples: int = 1
    chunks: int = 3
    nli_model: str | None = None
    max_tokens: int = 32
    top_m: int = 4
    weight: float = 2.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _kgd_methods(names: Sequence[str], loaded: LoadedModel, settings: Settings, knowledge: EvalKnowledge | None,
                 options: KGDOptions, seed: int) -> dict[str, Any]:
    # lazy: agent.baselines pulls torch, agent.embeddings numpy (the CLI imports this module at start)
    from ..baselines.kgd import CachedEncoder, EntailmentScorer, SimilarityScorer, load_judge
    from ..embeddings import Embedder

    wanted = [KGD_VARIANTS[n] for n in names if n in KGD_VARIANTS]
    encoder = CachedEncoder(knowledge.web.embedder if knowledge is not None else Embedder(settings.embedder))
    chunks = QuestionChunks(encoder, knowledge.web if knowledge is not None else None, n=options.chunks, k=settings.k)
    scorers: dict[str, Any] = {}
    if any(v.scorer == "similarity" for v in wanted):
        scorers["similarity"] = SimilarityScorer(encoder)
    if any(v.scorer == "entailment" for v in wanted):
        scorers["entailment"] = EntailmentScorer(load_judge(options.nli_model, loaded))
    return {v.name: KGDMethod(loaded, v, chunks, scorers.get(v.scorer or ""), max_new_tokens=options.max_tokens,
                              samples=options.samples, seed=seed, top_m=options.top_m, weight=options.weight)
            for v in wanted}


def _agent_tree(settings: Settings) -> str:
    """The agent's tree order in an evaluation: the settings' ``both`` or ``kb-first`` (a single
    tree is not the agent: ``kb`` alone is refactx)."""
    return settings.tree if settings.tree in ("both", "kb-first") else "both"


def _agent(generator: Any, knowledge: EvalKnowledge, settings: Settings, loaded: LoadedModel) -> Any:
    # lazy: FactAgent and agent.runtime pull torch (the CLI imports this module at start)
    from ..pipeline import FactAgent
    from ..runtime import open_chat

    chat = open_chat(settings, loaded)
    reranker = Reranker(chat) if settings.effective_rerank() else None
    return FactAgent(generator, knowledge.web, reranker, options=settings.agent_options(tree=_agent_tree(settings)),
                     chat=chat)


def run_evaluation(dataset: str, *, settings: Settings, data: str | Path | None = None,
                   methods: Sequence[str] | None = None, limit: int | None = 20, split: str = "dev",
                   batch_size: int = 4, judge: bool = True, judge_base_url: str | None = None,
                   judge_model: str | None = None, seed: int = 0, progress: bool = True,
                   loaded: LoadedModel | None = None, kgd: KGDOptions | None = None,
                   out_dir: Path | None = None, kind: str | None = None, half: str | None = None,
                   wording: Path | None = None, on_progress: Callable[[int], None] | None = None) -> EvalReport:
    """Evaluate ``methods`` on ``limit`` questions of ``dataset`` (stratified, seeded) with the
    model and agent settings of ``settings`` (``loaded``: reuse a model already loaded;
    ``kind``: kamel-chat's follow-ups or two-hop chains only; ``half``: the questions of the dev
    or the test half only, :mod:`agent.eval.halves`; ``wording``: a file of the questions in a
    model's words, :mod:`agent.eval.wordings`).

    With ``out_dir``, every finished question is saved there at once
    (:class:`~agent.eval.resume.RowLog`), a run with the same settings asks only the questions
    that are missing, and the report is written there (:meth:`EvalReport.write`), after which
    the log is removed.
    """
    import numpy as np
    import torch

    started = time.perf_counter()
    methods = tuple(methods) if methods else default_methods(dataset)
    if dataset == "kamel-chat" and set(methods) - set(CONVERSATIONAL):
        raise FactweaveError(f"{sorted(set(methods) - set(CONVERSATIONAL))[0]} does not take a conversation; "
                             f"kamel-chat compares {', '.join(CONVERSATIONAL)}")
    if dataset != "kamel" and KAMEL_ONLY & set(methods):
        raise FactweaveError(f"{sorted(KAMEL_ONLY & set(methods))[0]} answers from a KAMEL relation's objects: "
                             "use it with `factweave eval kamel`")
    kgd = kgd or KGDOptions()
    path = data_path(dataset, data)
    questions = load_questions(dataset, path, limit=limit, split=split, seed=seed, kind=kind, half=half)
    if not questions:
        raise FactweaveError(f"no {dataset} questions in {path}")
    reworded_by = None
    if wording is not None:
        questions = reworded(questions, read_wordings(wording), wording)
        reworded_by = {"file": str(wording), "model": questions[0].meta["wording"]}
    names = [m for m in METHODS if m in methods]
    uses_kgd = bool(KGD_VARIANTS.keys() & set(names))
    run_settings: dict[str, Any] = {
        "data": str(path), "split": split if dataset == "kamel" else None, "limit": limit,
        **({"kind": kind} if kind else {}), **({"half": half} if half else {}),
        **({"wording": reworded_by} if reworded_by else {}),
        "web_reachable": (sum(bool(q.meta.get("in_web")) for q in questions)
                          if dataset == "kamel-chat" else None),
        "questions": len(questions), "methods": names,
        "model": settings.model, "device": settings.device or "cpu", "dtype": settings.dtype or "default",
        "engine": loaded.engine if loaded is not None else resolve_engine(
            settings.engine, settings.model, device=settings.device, device_map=settings.device_map),
        "beams": settings.beams, "max_tokens": settings.max_tokens, "batch_size": batch_size, "seed": seed,
        "agent": {"tree": _agent_tree(settings), "k": settings.k, "rerank": settings.effective_rerank(), "max_rounds": settings.max_rounds,
                  "max_subqueries": settings.max_subqueries, "checks": settings.checks,
                  "hop_by_hop": settings.hop_by_hop},
        "kgd": kgd.as_dict() if uses_kgd else None,
        "judge": ({"kind": "endpoint" if judge_base_url else ("openai" if judge_model else "local"),
                   "model": judge_model or None} if judge else None),
    }
    log = done = None
    if out_dir is not None:
        log = RowLog.open(out_dir, file_stem(dataset, settings.model, *run_tags(run_settings)),
                          {**run_settings, "dataset": dataset, "question_ids": [q.id for q in questions]})
        done = log.rows()
        if done and progress:
            import sys

            print(f"Resuming: {len(done)} answers saved in {log.path}", file=sys.stderr)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    if loaded is None:
        # lazy: pulls torch (the CLI imports this module at start)
        from ..runtime import load_settings_model

        loaded = load_settings_model(settings)
    knowledge = None
    kamel_chunks = dataset == "kamel" and any(KGD_VARIANTS[n].chunks for n in names if n in KGD_VARIANTS)
    if _NEEDS_KNOWLEDGE & set(methods) or kamel_chunks:
        # Conversations read the KAMEL knowledge as `eval kamel` does: the whole folder as the KB
        # tree, the dev split's triples as the web (the demo web for the bundled KB).
        knowledge = open_knowledge("kamel" if dataset == "kamel-chat" else dataset, path, settings,
                                   loaded.tokenizer, split="dev" if dataset == "kamel-chat" else split,
                                   model_name=settings.model, progress=progress)
    try:
        built = open_methods(methods, loaded, settings, knowledge, kamel_root=path if dataset == "kamel" else None,
                             split=split, kgd=kgd, seed=seed)
        client = judge_client(loaded, base_url=judge_base_url, model=judge_model) if judge else None
        ready = time.perf_counter()
        results = evaluate_methods(built, questions, judge=AnswerJudge(client) if client else None,
                                   batch_size=batch_size, on_progress=on_progress, done=done,
                                   on_row=log.append if log is not None else None)
    finally:
        if knowledge is not None:
            knowledge.close()
    if client is not None:
        run_settings["judge"]["model"] = client.name
    run_settings["knowledge"] = knowledge.describe() if knowledge is not None else None
    meta = {"setup_seconds": round(ready - started, 1), "machine": {
        "platform": platform.platform(), "cpus": os.cpu_count(), "torch_threads": torch.get_num_threads()}}
    if done:
        meta["resumed_rows"] = len(done)
    report = EvalReport(dataset, settings.model, run_settings, results, time.perf_counter() - started, meta)
    if log is not None:
        assert out_dir is not None  # the log is opened only with one
        report.write(out_dir)
        log.remove()
    return report
