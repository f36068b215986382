"""Re-ranking retrieved facts with an LLM, per question type (the FCKW GPT re-ranker).

Example (not run: needs a model or an OpenAI endpoint)::

    from agent.llm import chat_client_from_env
    from agent.rerank import Candidate, Reranker

    result = Reranker(chat_client_from_env()).rerank(question, candidates)
    result.selected, result.used_fallback, result.reason
"""
from __future__ import annotations

from .qtype import (
    CALCULATION,
    INFERENCE,
    PLAIN,
    QuestionType,
    QuestionTypeRules,
    detect_question_type,
)
from .reranker import (
    Candidate,
    FactLike,
    Reranker,
    RerankResult,
    parse_fact_numbers,
    says_none,
)

__all__ = [
    "CALCULATION",
    "INFERENCE",
    "PLAIN",
    "Candidate",
    "FactLike",
    "QuestionType",
    "QuestionTypeRules",
    "RerankResult",
    "Reranker",
    "detect_question_type",
    "parse_fact_numbers",
    "says_none",
]
