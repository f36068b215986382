"""One settings object for the whole product: model, knowledge, backends, agent and server.

Sources, first match wins: arguments (the command line's options), environment variables
(``FACTWEAVE_<NAME>``; the OpenAI and Pinecone ones keep their usual names), a TOML file, the
defaults below. The file is ``--config PATH``, else ``$FACTWEAVE_CONFIG``, else
``./factweave.toml``, else ``~/.config/factweave/config.toml``; it holds the same names as
top-level keys::

    model = "qwen2.5-coder-0.5b"
    tree = "both"
    graph_uri = "bolt://localhost:7687"
    vectors = "pinecone"
    pinecone_index = "facts"

Secrets (graph password, API keys) are best left to the environment; they are never printed
(``Settings.public()`` masks them).

Example (not run: reads the environment and the settings file)::

    from agent.settings import load_settings

    settings = load_settings(tree="question")     # overrides > env > file > defaults
    settings.model, settings.web_dir(), settings.openai_base_url
"""
from __future__ import annotations

import os
from contextvars import ContextVar
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict, TomlConfigSettingsSource

from .errors import FactweaveError, first_validation_error
from .models import DEFAULT_MODEL, default_cache_dir
from .pipeline.agent_options import AgentOptions
from .pipeline.conversation import MAX_CHARS, MAX_TURNS

ENV_PREFIX = "FACTWEAVE_"
_config_file: ContextVar[Path | None] = ContextVar("factweave_config_file", default=None)


def _env(*names: str) -> AliasChoices:
    """Accept the field by name (arguments, file) and by each of ``names`` (environment)."""
    return AliasChoices(*names)


#: Why ``engine = "vllm"`` is refused for the agent (the settings, ``--engine`` of its commands).
VLLM_IS_FOR_SERVE = ("vllm serves a model under ReFactX's rule (`factweave serve --engine vllm`, in vLLM's own "
                     "environment: README, Install); the agent runs on transformers, llama.cpp or remote (--engine remote "
                     "--engine-url URL: that server)")


class Settings(BaseSettings):
    """Every setting, with its environment variable in the description (docs/configuration.md has the table)."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid", populate_by_name=True,
                                      validate_default=True)

    # model and generation
    model: str = Field(DEFAULT_MODEL, description="Preset, Hugging Face folder or Hub id (FACTWEAVE_MODEL).")
    device: str | None = Field(None, description="cpu, cuda, cuda:1, mps (FACTWEAVE_DEVICE); default cpu.")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] | None = Field(
        None, description="Weights dtype (FACTWEAVE_DTYPE); default float32 on CPU, the model's own on GPU.")
    device_map: str | None = Field(None, description="transformers device_map, e.g. auto (FACTWEAVE_DEVICE_MAP).")
    engine: Literal["auto", "transformers", "llama.cpp", "remote"] = Field(
        "auto", description="What computes the logits (FACTWEAVE_ENGINE): transformers, llama.cpp (a preset's "
                                    "GGUF file; the [llama] extra), remote (a shared vLLM server at engine_url "
                                    "writes the replies) or auto (llama.cpp for a preset on the CPU where "
                                    "installed).")
    engine_url: str | None = Field(None, description="The remote engine's address (FACTWEAVE_ENGINE_URL): a "
                                                     "server started with `factweave serve --engine vllm`.")
    engine_key: SecretStr | None = Field(None, description="Its bearer key (FACTWEAVE_ENGINE_KEY).")
    beams: int = Field(1, ge=1, le=16, description="Beam search width (FACTWEAVE_BEAMS).")
    max_tokens: int = Field(160, ge=1, le=8192, description="Most tokens generated per attempt (FACTWEAVE_MAX_TOKENS).")
    cache: Path | None = Field(None, description="Converted models and indexes (FACTWEAVE_CACHE); default ~/.cache/factweave.")

    # knowledge base (the global fact tree)
    kb: Path | None = Field(None, description="Knowledge source for the KB fact tree (FACTWEAVE_KB); default the demo KB.")
    index: Path | None = Field(None, description="A prebuilt index file for the KB (FACTWEAVE_INDEX).")
    inverse: bool = Field(False, description="Add inverse facts to the KB tree (FACTWEAVE_INVERSE).")
    pg_dsn: SecretStr | None = Field(None, description="PostgreSQL holding the KB tree (FACTWEAVE_PG_DSN), e.g. "
                                                       "'host=127.0.0.1 dbname=facts'; unset: the tree is a file.")
    pg_index: str = Field("kb", description="Name of the KB tree in that database (FACTWEAVE_PG_INDEX).")

    # knowledge web and its backends
    web: Path | None = Field(None, description="Knowledge-web folder (FACTWEAVE_WEB); default the demo web, "
                                               "built on first use.")
    graph_uri: str | None = Field(None, description="Bolt URI of Neo4j 5 / ArcadeDB (FACTWEAVE_GRAPH_URI); "
                                                    "default an embedded server.")
    graph_user: str = Field("neo4j", description="Graph user (FACTWEAVE_GRAPH_USER).")
    graph_password: SecretStr | None = Field(None, description="Graph password (FACTWEAVE_GRAPH_PASSWORD).")
    graph_database: str | None = Field(None, description="Graph database name (FACTWEAVE_GRAPH_DATABASE).")
    vectors: Literal["local", "pinecone"] | None = Field(
        None, description="Vector backend (FACTWEAVE_VECTORS); default as the web was built, else local.")
    pinecone_index: str | None = Field(None, description="Pinecone index name (FACTWEAVE_PINECONE_INDEX); "
                                                         "the key is PINECONE_API_KEY.")
    pinecone_namespace: str | None = Field(None, description="Namespace prefix (FACTWEAVE_PINECONE_NAMESPACE).")
    pinecone_host: str | None = Field(None, description="Pinecone index host (FACTWEAVE_PINECONE_HOST).")
    embedder: str | None = Field(None, description="sentence-transformers model (FACTWEAVE_EMBEDDER); "
                                                   "default the packaged all-MiniLM-L6-v2.")

    # chat model for re-ranking and sub-queries (OpenAI-compatible, else the local model)
    openai_base_url: str | None = Field(None, validation_alias=_env("openai_base_url", "FACTWEAVE_OPENAI_BASE_URL",
                                                                    "OPENAI_BASE_URL"),
                                        description="OpenAI-compatible endpoint (OPENAI_BASE_URL).")
    openai_api_key: SecretStr | None = Field(None, validation_alias=_env("openai_api_key",
                                                                         "FACTWEAVE_OPENAI_API_KEY", "OPENAI_API_KEY"),
                                             description="Its key (OPENAI_API_KEY).")
    llm_model: str | None = Field(None, description="Chat model name at that endpoint (FACTWEAVE_LLM_MODEL); "
                                                    "default gpt-4o-mini at OpenAI, the first one served elsewhere.")

    # the agent
    tree: Literal["kb", "question", "both", "kb-first"] = Field(
        "both", description="Fact tree while generating (FACTWEAVE_TREE): kb, question, both (question, then kb) "
                            "or kb-first (kb, then retrieval and the question tree).")
    rerank: bool | None = Field(None, description="Let the chat model pick the retrieved facts (FACTWEAVE_RERANK); "
                                                  "unset: only with an OpenAI-compatible endpoint (with the local "
                                                  "model re-ranking lost answers and recall when measured).")
    k: int = Field(10, ge=1, le=200, description="Facts retrieved per query (FACTWEAVE_K).")
    max_rounds: int = Field(0, ge=0, le=5, description="Sub-query rounds when the facts found do not suffice "
                                                       "(FACTWEAVE_MAX_ROUNDS; 0: none, measured not to "
                                                       "pay with the local models).")
    max_subqueries: int = Field(2, ge=0, le=10, description="Sub-queries per round (FACTWEAVE_MAX_SUBQUERIES).")
    rewrite: Literal["auto", "chat", "rules"] = Field(
        "auto", description="How a follow-up is made standalone: auto (the chat model when it is an "
                            "OpenAI-compatible endpoint, else rules), chat or rules (FACTWEAVE_REWRITE).")
    max_hops: int = Field(3, ge=0, le=10, description="Bridge entities searched while generating, per attempt "
                                                     "(multi-hop chaining; 0: none) (FACTWEAVE_MAX_HOPS).")
    checks: bool = Field(True, description="Prove that the fact holding an answer says what the question asks "
                                           "(a triple's relation, a statement judged by the local model) before "
                                           "the answer stands (FACTWEAVE_CHECKS).")
    hop_by_hop: bool = Field(True, description="A question asked through a relative or role that no attempt "
                                               "proved is asked again hop by hop: who fills the role, then the "
                                               "question of them (FACTWEAVE_HOP_BY_HOP).")
    max_history_turns: int = Field(MAX_TURNS, ge=0, le=64, description="Earlier turns of a conversation a "
                                   "follow-up is read with, at every door (FACTWEAVE_MAX_HISTORY_TURNS).")
    max_history_chars: int = Field(MAX_CHARS, ge=0, le=64_000, description="Characters of those turns at most, "
                                   "the newest kept (FACTWEAVE_MAX_HISTORY_CHARS).")

    @field_validator("engine", mode="before")
    @classmethod
    def _not_vllm(cls, value: Any) -> Any:
        if isinstance(value, str) and value.strip().lower() == "vllm":
            raise ValueError(VLLM_IS_FOR_SERVE)
        return value

    def agent_options(self, **changes: Any) -> AgentOptions:
        """The agent's options these settings fix (:class:`~agent.pipeline.agent_options.AgentOptions`):
        the effective tree, k and the fact-finding settings; ``changes`` override fields (a UI
        session's tree and k)."""
        options = AgentOptions(tree=self.effective_tree(), k=self.k, max_rounds=self.max_rounds,
                               max_subqueries=self.max_subqueries, rewrite=self.rewrite, max_hops=self.max_hops,
                               checks=self.checks, hop_by_hop=self.hop_by_hop, max_history_turns=self.max_history_turns,
                               max_history_chars=self.max_history_chars)
        return replace(options, **changes)

    # the server
    host: str = Field("127.0.0.1", description="Address `factweave serve` binds (FACTWEAVE_HOST).")
    port: int = Field(8000, ge=1, le=65535, description="Its port (FACTWEAVE_PORT).")
    api_key: SecretStr | None = Field(None, description="Bearer key clients must send (FACTWEAVE_API_KEY); "
                                                        "unset: none.")
    max_request_bytes: int = Field(65536, ge=256, description="Largest request body (FACTWEAVE_MAX_REQUEST_BYTES).")
    max_concurrency: int = Field(2, ge=1, le=64, description="Answers generated at once (FACTWEAVE_MAX_CONCURRENCY).")
    max_queue: int = Field(8, ge=0, le=1024, description="Requests waiting beyond those; more get HTTP 429 "
                                                        "(FACTWEAVE_MAX_QUEUE).")
    allowed_hosts: list[str] = Field(default_factory=list, description="Host names requests may name beyond "
                                     "loopback and IP addresses (FACTWEAVE_ALLOWED_HOSTS, a JSON list).")
    cors_origins: list[str] = Field(default_factory=list, description="Web-page origins that may call the server "
                                    "(FACTWEAVE_CORS_ORIGINS, a JSON list); others get HTTP 403.")
    max_reply_tokens: int = Field(2048, ge=1, le=131072, description="Largest `max_tokens` a request may ask; more "
                                                                     "gets HTTP 400 (FACTWEAVE_MAX_REPLY_TOKENS).")

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
                                   env_settings: PydanticBaseSettingsSource,
                                   dotenv_settings: PydanticBaseSettingsSource,
                                   file_secret_settings: PydanticBaseSettingsSource):
        path = _config_file.get()
        sources = [init_settings, env_settings]
        if path is not None:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=path))
        return tuple(sources)

    def web_dir(self) -> Path:
        """The knowledge-web folder: ``web``, else the demo web in the cache."""
        return Path(self.web).expanduser() if self.web else self.cache_dir() / "webs" / "demo"

    def cache_dir(self) -> Path:
        return Path(self.cache).expanduser() if self.cache else default_cache_dir()

    def uses_demo_web(self) -> bool:
        return self.web is None

    def effective_rerank(self) -> bool:
        """``rerank``, or when unset whether a chat endpoint is configured: with the local model
        (qwen2.5-coder-0.5b) the prompt re-ranker cost the agent 33 points of PopQA exact match and
        the scoring re-ranker 14-22 points of recall@5 (``benchmarks/web_retrieval.py``)."""
        if self.rerank is not None:
            return self.rerank
        return bool(self.openai_base_url or self.openai_api_key)

    def effective_tree(self) -> str:
        """``tree``, except that a KB of one's own with no web of one's own answers from the KB:
        the demo web holds the demo KB's facts, not yours."""
        if self.kb is not None and self.web is None:
            return "kb"
        return self.tree

    def public(self) -> dict[str, Any]:
        """The settings as plain data with secrets masked (for logs, traces and ``factweave config``)."""
        data = self.model_dump(mode="json")
        for name, value in data.items():
            if isinstance(getattr(self, name), SecretStr):
                data[name] = "***" if value else None
        return data


def config_path(explicit: str | Path | None = None) -> Path | None:
    """The configuration file to read (see the module docstring); None when there is none."""
    given = explicit or os.environ.get(f"{ENV_PREFIX}CONFIG")
    if given:
        path = Path(given).expanduser()
        if not path.is_file():
            raise FactweaveError(f"configuration file {path} not found")
        return path
    for candidate in (Path("factweave.toml"), Path.home() / ".config" / "factweave" / "config.toml"):
        if candidate.is_file():
            return candidate
    return None


def load_settings(config: str | Path | None = None, **overrides: Any) -> Settings:
    """Settings from ``overrides`` (None values are skipped), the environment and the file."""
    path = config_path(config)
    token = _config_file.set(path)
    try:
        return Settings(**{name: value for name, value in overrides.items() if value is not None})
    except ValidationError as exc:
        where, what = first_validation_error(exc.errors())
        origin = f" (file {path})" if path else ""
        raise FactweaveError(f"setting {where or 'settings'}: {what}{origin}") from None
    except (OSError, ValueError) as exc:  # an unreadable or malformed TOML file
        raise FactweaveError(f"configuration file {path}: {exc}") from None
    finally:
        _config_file.reset(token)
