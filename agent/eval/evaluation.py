"""One evaluation run from settings: load the model once, open the dataset's knowledge, build
the methods and the judge on that model, answer, score, report.

Example::

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
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import FactweaveError
from .datasets import data_path, load_questions
from .judge import AnswerJudge
from .methods import (KAMEL_ONLY, METHODS, AgentMethod, LLMOnlyMethod, MajorityMethod, RCDMethod, ReFactXMethod,
                      VanillaSetMethod, WebRAGMethod, default_methods, web_rag_generator)
from .report import EvalReport
from .run import evaluate_methods

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
    from ..llm.client import LocalChat, OpenAIChat, chat_client_from_env

    if base_url:
        return chat_client_from_env(model=model, base_url=base_url)
    if model:
        return OpenAIChat(model)
    return LocalChat(loaded)


def open_methods(names: Sequence[str], loaded: LoadedModel, settings: Settings,
                 knowledge: EvalKnowledge | None, *, kamel_root: Path | None = None,
                 split: str = "dev") -> list[Any]:
    """The methods ``names`` (in :data:`METHODS` order) on ``loaded``, over ``knowledge``; the
    KAMEL-only methods take their candidates from ``kamel_root`` (every split) and the majority
    from a split other than ``split``."""
    from ..decoding import FactGenerator

    unknown = [n for n in names if n not in METHODS]
    if unknown:
        raise FactweaveError(f"unknown method {unknown[0]!r}; choose from {', '.join(METHODS)}")
    if kamel_root is None and KAMEL_ONLY & set(names):
        raise FactweaveError(f"{sorted(KAMEL_ONLY & set(names))[0]} answers from a KAMEL relation's objects: "
                             "use it with `factweave eval kamel`")
    kb = knowledge.kb if knowledge is not None else None
    generator = FactGenerator(loaded.model, loaded.tokenizer, kb, beams=settings.beams,
                              max_new_tokens=settings.max_tokens)
    set_generator = None
    if {"rcd", "rcd-static", "vd"} & set(names):
        from ..decoding.rcd import AnswerSetGenerator

        set_generator = AnswerSetGenerator(loaded.model, loaded.tokenizer, beams=settings.beams)
    candidates: dict[str, list[str]] = {}
    if {"rcd", "rcd-static"} & set(names):
        from ..knowledge.kamel import relation_objects

        candidates = relation_objects(kamel_root)
    methods: list[Any] = []
    for name in (n for n in METHODS if n in names):
        if name == "llm-only":
            methods.append(LLMOnlyMethod(generator))
        elif name == "refactx":
            methods.append(ReFactXMethod(generator))
        elif name == "web-rag":
            methods.append(WebRAGMethod(web_rag_generator(generator), knowledge.web, k=settings.k))
        elif name == "agent":
            methods.append(AgentMethod(_agent(generator, knowledge, settings, loaded)))
        elif name in ("rcd", "rcd-static"):
            methods.append(RCDMethod(set_generator, candidates, static=name == "rcd-static"))
        elif name == "vd":
            methods.append(VanillaSetMethod(set_generator))
        else:
            from ..knowledge.kamel import majority_objects

            methods.append(MajorityMethod(majority_objects(kamel_root, "dev" if split == "train" else "train")))
    return methods


def _agent(generator: Any, knowledge: EvalKnowledge, settings: Settings, loaded: LoadedModel) -> Any:
    from ..agent import FactAgent
    from ..rerank import Reranker
    from ..runtime import open_chat

    chat = open_chat(settings, loaded)
    return FactAgent(generator, knowledge.web, Reranker(chat) if settings.rerank else None, tree="both",
                     k=settings.k, max_rounds=settings.max_rounds, max_subqueries=settings.max_subqueries,
                     chat=chat)


def run_evaluation(dataset: str, *, settings: Settings, data: str | Path | None = None,
                   methods: Sequence[str] | None = None, limit: int | None = 20, split: str = "dev",
                   batch_size: int = 4, judge: bool = True, judge_base_url: str | None = None,
                   judge_model: str | None = None, seed: int = 0, progress: bool = True,
                   loaded: LoadedModel | None = None,
                   on_progress: Callable[[int], None] | None = None) -> EvalReport:
    """Evaluate ``methods`` on the first ``limit`` questions of ``dataset`` with the model and
    agent settings of ``settings`` (``loaded``: reuse a model already loaded)."""
    import numpy as np
    import torch

    started = time.perf_counter()
    methods = tuple(methods) if methods else default_methods(dataset)
    if dataset != "kamel" and KAMEL_ONLY & set(methods):
        raise FactweaveError(f"{sorted(KAMEL_ONLY & set(methods))[0]} answers from a KAMEL relation's objects: "
                             "use it with `factweave eval kamel`")
    path = data_path(dataset, data)
    questions = load_questions(dataset, path, limit=limit, split=split)
    if not questions:
        raise FactweaveError(f"no {dataset} questions in {path}")
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    if loaded is None:
        from ..runtime import load_settings_model

        loaded = load_settings_model(settings)
    knowledge = None
    if _NEEDS_KNOWLEDGE & set(methods):
        from .knowledge import open_knowledge

        knowledge = open_knowledge(dataset, path, settings, loaded.tokenizer, split=split,
                                   model_name=settings.model, progress=progress)
    try:
        built = open_methods(methods, loaded, settings, knowledge, kamel_root=path if dataset == "kamel" else None,
                             split=split)
        client = judge_client(loaded, base_url=judge_base_url, model=judge_model) if judge else None
        ready = time.perf_counter()
        results = evaluate_methods(built, questions, judge=AnswerJudge(client) if client else None,
                                   batch_size=batch_size, on_progress=on_progress)
    finally:
        if knowledge is not None:
            knowledge.close()
    run_settings = {
        "data": str(path), "split": split if dataset == "kamel" else None, "limit": limit,
        "questions": len(questions), "methods": [m.name for m in built],
        "model": settings.model, "device": settings.device or "cpu", "dtype": settings.dtype or "default",
        "beams": settings.beams, "max_tokens": settings.max_tokens, "batch_size": batch_size, "seed": seed,
        "agent": {"tree": "both", "k": settings.k, "rerank": settings.rerank, "max_rounds": settings.max_rounds,
                  "max_subqueries": settings.max_subqueries},
        "judge": ({"kind": "endpoint" if judge_base_url else ("openai" if judge_model else "local"),
                   "model": client.name} if client else None),
        "knowledge": knowledge.describe() if knowledge is not None else None,
    }
    meta = {"setup_seconds": round(ready - started, 1), "machine": {
        "platform": platform.platform(), "cpus": os.cpu_count(), "torch_threads": torch.get_num_threads()}}
    return EvalReport(dataset, settings.model, run_settings, results, time.perf_counter() - started, meta)
