"""Opening the pieces together from settings: a model, the KB index, a knowledge web, a chat
client, and the agent that joins them."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import FactweaveError
from .index.files import open_index
from .index.postgres import PostgresFactIndex
from .knowledge.kamel import demo_kamel_root
from .llm.client import chat_client_from_env
from .models import DEFAULT_MODEL, LoadedModel, default_cache_dir, load_model
from .pipeline.uploaded import UploadedOverlay
from .rerank import Reranker
from .settings import load_settings
from .web.decompose import LLMDecomposer, SentenceDecomposer
from .web.demo import build_demo_web, demo_web_ready
from .web.web import KnowledgeWeb
from .web.workspace import Workspace, pending_work

if TYPE_CHECKING:
    from .decoding.generate import FactGenerator
    from .index.base import FactTree
    from .pipeline import FactAgent
    from .llm.client import ChatClient
    from .settings import Settings

__all__ = ["DEFAULT_MODEL", "load_settings_model", "open_agent", "open_chat", "open_generator", "open_web",
           "upload_decomposer"]


def open_generator(model: str = DEFAULT_MODEL, kb: str | Path | None = None, *, index: str | Path | None = None,
                   inverse: bool = False, beams: int = 1, max_new_tokens: int = 160, device: str | None = None,
                   dtype: str | None = None, cache_dir: Path | None = None, progress: bool = True,
                   loaded: LoadedModel | None = None, with_index: bool = True, pg_dsn: str | None = None,
                   pg_index: str = "kb") -> FactGenerator:
    """A ready :class:`FactGenerator`: ``model`` (preset, folder or HF id; or an already
    ``loaded`` one) over the knowledge source ``kb`` (default: the bundled demo KB), its index
    cached under ``cache_dir`` (``with_index=False``: no KB index, per-call trees only). With
    ``pg_dsn``, the index is the one named ``pg_index`` in that PostgreSQL database instead
    (built beforehand with ``factweave index build --backend postgres``).

    >>> gen = open_generator("smollm2-135m")                      # doctest: +SKIP
    >>> gen.answer("What is the original language of Kalakalappu 2?").answer   # doctest: +SKIP
    """
    # lazy: decoding pulls torch and transformers (~3 s), which web commands that load no model
    # (stats, remove, build without an LLM decomposer) never need
    from .decoding.generate import FactGenerator

    cache_dir = cache_dir or default_cache_dir()
    loaded = loaded or load_model(model, device=device, dtype=dtype, cache_dir=cache_dir)
    fact_index: FactTree | None = None
    if with_index and pg_dsn:
        fact_index = PostgresFactIndex.open(pg_dsn, pg_index, tokenizer=loaded.tokenizer)
    elif with_index:
        fact_index = open_index(kb or demo_kamel_root(), loaded.tokenizer, cache_dir, index_path=index,
                                inverse=inverse, model_name=loaded.name, progress=progress)
    return FactGenerator(loaded.model, loaded.tokenizer, fact_index, beams=beams, max_new_tokens=max_new_tokens,
                         steps=loaded.steps)


def load_settings_model(settings: Settings) -> LoadedModel:
    """The model ``settings`` name, on their device and dtype; with ``engine = "remote"``, its
    replies written by the server at ``engine_url`` (:mod:`agent.decoding.remote`; the model stays
    for the reading of questions), checked to read tokens as the model does."""
    if settings.engine != "remote":
        return load_model(settings.model, device=settings.device, dtype=settings.dtype,
                          device_map=settings.device_map, cache_dir=settings.cache_dir(), engine=settings.engine)
    from .decoding.remote import remote_engine_from
    from .models import TOKEN_SAMPLES

    key = settings.engine_key.get_secret_value() if settings.engine_key else None
    engine = remote_engine_from(settings.engine_url, None, key)  # before minutes of loading
    loaded = load_model(settings.model, device=settings.device, dtype=settings.dtype, device_map=settings.device_map,
                        cache_dir=settings.cache_dir(), engine="transformers")
    engine.check_tokens(loaded.tokenizer, TOKEN_SAMPLES)
    loaded.steps, loaded.engine = engine, "remote"
    return loaded


def open_web(settings: Settings, *, progress: bool = True, create: bool = False,
             build_demo: bool = True, recover: bool = True) -> KnowledgeWeb:
    """The knowledge web ``settings`` name. The demo web (no ``web`` set) is built on first use
    (unless not ``build_demo``); another folder must hold a web already, unless ``create``.
    ``recover``: finish an upload or a removal cut short (:meth:`Workspace.recover`; every door
    opens the web here; the UI recovers with its own overlay)."""
    folder = settings.web_dir()
    if not create:
        _check_web_exists(settings)
    password = settings.graph_password.get_secret_value() if settings.graph_password else None
    web = KnowledgeWeb.open(folder, embedder=settings.embedder, graph_uri=settings.graph_uri,
                            graph_user=settings.graph_user, graph_password=password,
                            graph_database=settings.graph_database, vectors=settings.vectors,
                            pinecone_index=settings.pinecone_index, pinecone_namespace=settings.pinecone_namespace,
                            pinecone_host=settings.pinecone_host)
    if build_demo and settings.uses_demo_web() and not demo_web_ready(folder):
        try:
            if progress:
                print(f"Building the demo knowledge web in {folder} (first use; about two minutes)...",
                      file=sys.stderr)
            build_demo_web(web, progress=progress)
        except BaseException:
            web.close()
            raise
    if recover:
        Workspace(web, decomposer=lambda: upload_decomposer(settings)).recover()
    return web


def upload_decomposer(settings: Settings, chat: ChatClient | None = None) -> LLMDecomposer | SentenceDecomposer:
    """What makes an upload's documents into facts: the chat model at the OpenAI-compatible
    endpoint the settings give (``chat``: that client, already open), else sentences (the local
    model on a CPU is slow)."""
    if settings.openai_base_url or settings.openai_api_key:
        return LLMDecomposer(chat if chat is not None else open_chat(settings))
    return SentenceDecomposer()


def _check_web_exists(settings: Settings) -> None:
    folder = settings.web_dir()
    if not settings.uses_demo_web() and not (folder / "web.json").exists():
        raise FactweaveError(f"no knowledge web in {folder}; build one with `factweave web build --web {folder}`")


def open_chat(settings: Settings, local: LoadedModel | str | None = None) -> ChatClient:
    """The chat model for re-ranking and sub-queries: the OpenAI-compatible endpoint or key the
    settings give, else the local model (``local``: reuse an already loaded one)."""
    key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
    return chat_client_from_env(model=settings.llm_model, base_url=settings.openai_base_url, api_key=key,
                                local_model=local if local is not None else settings.model)


def open_agent(settings: Settings | None = None, *, progress: bool = True,
               loaded: LoadedModel | None = None) -> FactAgent:
    """The agent ``settings`` describe (default: :func:`agent.settings.load_settings`), ready to
    answer; close it (or use ``with``) to stop the web's embedded graph server.

    Example (not run: needs a model and a knowledge web)::

        from agent.runtime import open_agent
        from agent.settings import load_settings

        with open_agent(load_settings(model="smollm2-135m")) as agent:
            reply = agent.answer("Where was Laurie Graff born?")
            reply.answer, [f["text"] for f in reply.facts]
    """
    from .pipeline import FactAgent  # lazy, like FactGenerator in open_generator

    settings = settings or load_settings()
    tree = settings.effective_tree()
    if tree != "kb":
        _check_web_exists(settings)  # before minutes of model loading
    owned = loaded is None
    loaded = loaded or load_settings_model(settings)
    generator = open_generator(settings.model, settings.kb, index=settings.index, inverse=settings.inverse,
                               beams=settings.beams, max_new_tokens=settings.max_tokens,
                               cache_dir=settings.cache_dir(), progress=progress, loaded=loaded,
                               with_index=tree != "question",
                               pg_dsn=settings.pg_dsn.get_secret_value() if settings.pg_dsn else None,
                               pg_index=settings.pg_index)
    if getattr(loaded.steps, "engine", None) == "remote":
        loaded.steps.server_tree = generator.index  # the server's --index: the KB (sessions on it send no facts)
    web = None
    try:
        web = open_web(settings, progress=progress) if tree != "kb" else None
        if web is None and pending_work(settings.web_dir()):  # an upload or removal cut short: finished
            open_web(settings, progress=progress, build_demo=False).close()
        # What the UI, `web add` and `web remove` change in the web's uploads, stated as it is at each answer.
        uploads = UploadedOverlay(generator, settings.web_dir()) if generator.index is not None else None
        rerank = settings.effective_rerank()
        chat = open_chat(settings, loaded) if tree != "kb" and (rerank or settings.max_rounds) else None
        reranker = Reranker(chat) if rerank and chat is not None else None
        agent = FactAgent(uploads.generator() if uploads else generator, web, reranker,
                          options=settings.agent_options(), chat=chat,
                          latest=uploads.generator if uploads else None)
    except BaseException:
        if web is not None:
            web.close()
        generator.close()
        raise
    agent.on_close(generator.close)  # the KB index's PostgreSQL pool or memory map
    if owned and loaded.steps is not None:
        agent.on_close(loaded.steps.close)  # the engine's contexts (llama.cpp)
    if web is not None:
        agent.on_close(web.close)
    return agent
