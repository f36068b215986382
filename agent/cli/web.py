"""``factweave web ...``: build, search and inspect a knowledge web (mirrors :class:`KnowledgeWeb`)."""
from __future__ import annotations

import json
from pathlib import Path

import click

from ..errors import FactweaveError
from ..knowledge.loaders import load_facts
from ..rerank.reranker import Candidate, Reranker
from ..settings import load_settings
from ..web.decompose import LLMDecomposer, SentenceDecomposer
from ..web.demo import build_demo_web
from ..web.documents import read_documents
from ..web.workspace import Workspace


def default_web_dir() -> Path:
    """``$FACTWEAVE_WEB``, else the demo web in the cache (``<cache>/webs/demo``)."""
    return load_settings().web_dir()


def _web_options(f):
    options = [
        click.option("--web", "web_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
                     help="The web's folder (default: $FACTWEAVE_WEB or the demo web, ~/.cache/factweave/webs/demo)."),
        click.option("--graph-uri", default=None,
                     help="Bolt URI of a Neo4j 5 (or ArcadeDB) server; default: an embedded server "
                          "started for the command, data in the web's folder."),
        click.option("--graph-user", default=None,
                     help="Graph user (default neo4j); the password is read from $FACTWEAVE_GRAPH_PASSWORD."),
        click.option("--graph-database", default=None, help="Database name on the graph server (default: its default)."),
        click.option("--vectors", type=click.Choice(["local", "pinecone"]), default=None,
                     help="Vector backend (default: as built, else local). Pinecone reads PINECONE_API_KEY."),
        click.option("--pinecone-index", default=None, help="Pinecone index name."),
        click.option("--pinecone-namespace", default=None, help="Namespace prefix inside the index."),
        click.option("--pinecone-host", default=None, help="Index host (skips the describe call)."),
        click.option("--embedder", default=None,
                     help="sentence-transformers model (default: the packaged all-MiniLM-L6-v2)."),
    ]
    for opt in reversed(options):
        f = opt(f)
    return f


def web_settings(web_dir: Path | None, **options):
    """The settings for a web command: its options over the environment and the config file."""
    return load_settings(web=web_dir, **options)


def _open_web(web_dir: Path | None, *, create: bool = False, recover: bool = True, **options):
    """The web for a command; ``options`` are the :func:`_web_options` values, by name. The demo
    web is built first when it is the one asked for and not built yet; an upload or a removal cut
    short is finished (``recover``; see :func:`agent.runtime.open_web`)."""
    # lazy: agent.runtime pulls torch (CLI start stays fast)
    from ..runtime import open_web

    return open_web(web_settings(web_dir, **options), create=create, build_demo=not create, recover=recover)


def _llm_options(f):
    options = [
        click.option("--llm-model", default=None,
                     help="Chat model: a name at --base-url / OPENAI_BASE_URL (or OpenAI when "
                          "OPENAI_API_KEY is set), else a local preset (default: the demo model)."),
        click.option("--base-url", default=None, help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1."),
    ]
    for opt in reversed(options):
        f = opt(f)
    return f


def _chat_client(llm_model, base_url):
    # lazy: agent.runtime pulls torch (CLI start stays fast)
    from ..runtime import open_chat

    return open_chat(load_settings(llm_model=llm_model, openai_base_url=base_url))


def remote_llm_configured(base_url: str | None) -> bool:
    settings = load_settings(openai_base_url=base_url)
    return bool(settings.openai_base_url or settings.openai_api_key)


@click.group("web")
def web_group() -> None:
    """The knowledge web: atomic facts and keywords in a graph, keyword embeddings in a vector index.

    \b
    Example:
      factweave web build                      # the bundled demo corpus
      factweave web search "Who was the first president of the association which published Journal of Psychotherapy Integration?"
    """


@web_group.command("build")
@click.argument("docs", nargs=-1, type=click.Path(exists=True, path_type=Path))
@click.option("--triples", "triples", multiple=True, type=click.Path(exists=True, path_type=Path),
              help="Triples to add as facts (TSV, JSONL, N-Triples or a KAMEL folder); repeatable.")
@click.option("--inverse/--no-inverse", default=False, help="With --triples: add inverse facts too.")
@click.option("--decomposer", type=click.Choice(["auto", "llm", "sentences"]), default="auto", show_default=True,
              help="How documents become atomic facts. auto: llm when an OpenAI-compatible endpoint is "
                   "configured, else sentences (the local model on a CPU is slow and splits sentences).")
@click.option("--chunk-size", type=click.IntRange(100, 20000), default=None, help="Characters per chunk (800).")
@click.option("--llm-concurrency", type=click.IntRange(1, 64), default=None,
              help="--decomposer llm: chunks sent to the chat model at a time (default: 4 to an "
                   "OpenAI-compatible endpoint, 1 to the local model).")
@_web_options
@_llm_options
@click.option("--json", "as_json", is_flag=True, help="Print the build report as JSON.")
def web_build(docs, triples, inverse, decomposer, chunk_size, llm_concurrency, web_dir, llm_model, base_url, as_json,
              **web_options) -> None:
    """Add documents (text, Markdown, JSON, JSONL files or folders) and triples to a web.

    Adding what is already there changes nothing; an interrupted build resumes where it stopped.
    Without DOCS or --triples, builds the demo web: the bundled demo corpus (196 MuSiQue
    paragraphs) and the demo KB's dev triples.

    \b
    Example:
      factweave web build notes/ corpus.json --web my-web
      factweave web build --triples facts.tsv --web my-web
    """
    if decomposer == "auto":
        decomposer = "llm" if remote_llm_configured(base_url) else "sentences"
    reports = {}
    with _open_web(web_dir, create=True, **web_options) as web:
        if chunk_size:
            web.settings.chunk_size = chunk_size
        if not docs and not triples:
            reports.update(build_demo_web(web))
        if docs:
            chosen = (LLMDecomposer(_chat_client(llm_model, base_url), concurrency=llm_concurrency)
                      if decomposer == "llm" else SentenceDecomposer())
            reports["documents"] = web.add_documents(read_documents(docs), chosen).as_dict()
            reports["documents"]["decomposer"] = chosen.fingerprint
        for path in triples:
            reports[f"triples:{path}"] = web.add_triples(load_facts(path, inverse=inverse), source=path.name).as_dict()
        reports["stats"] = web.stats()
        reports["web"] = str(web.folder)
    if as_json:
        click.echo(json.dumps(reports, indent=2))
        return
    for name, report in reports.items():
        if name in ("stats", "web"):
            continue
        if report["chunks"] or report["documents"]:
            what = f"{report['documents']} documents, {report['chunks']} chunks ({report['chunks_skipped']} already stored)"
        else:
            what = f"{report['facts'] + report['facts_skipped']} triples ({report['facts_skipped']} already stored)"
        click.echo(f"{name}: {what}, {report['facts']} facts written, "
                   f"{report['keywords_new']} new keywords in {report['seconds']:.1f} s")
    stats = reports["stats"]
    click.echo(f"web {reports['web']}: " + ", ".join(f"{k} {v}" for k, v in stats.items()))


@web_group.command("search")
@click.argument("question")
@click.option("-k", "k", type=click.IntRange(1, 200), default=10, show_default=True, help="Facts to return.")
@click.option("--rerank/--no-rerank", default=False, show_default=True,
              help="Let the chat model pick the relevant facts (fallback: the top 3).")
@click.option("--method", type=click.Choice(["graph", "keywords"]), default="graph", show_default=True,
              help="graph: personalized PageRank over the keyword-fact graph; keywords: the paper's route "
                   "(cos + weight x degree).")
@click.option("--degree-weight", type=click.FloatRange(0), default=None,
              help="--method keywords: weight of the degree in cos + weight x degree (default 0.1; the paper's is 1).")
@click.option("--subqueries", type=click.IntRange(0, 10), default=0, show_default=True,
              help="Most sub-queries the fact-finding loop may issue when keywords stay uncovered.")
@_web_options
@_llm_options
@click.option("--json", "as_json", is_flag=True, help="Print hits (and the re-ranking) as JSON.")
def web_search(question, k, rerank, method, degree_weight, subqueries, web_dir, llm_model, base_url, as_json, **web_options) -> None:
    """Find the facts of a web that answer QUESTION: a table of score parts, fact and source.

    \b
    Example:
      factweave web search "Who founded Zorblax Station?" --web my-web -k 5 --rerank
    """
    folder = web_dir or default_web_dir()
    if not (folder / "web.json").exists():
        raise FactweaveError(f"no knowledge web in {folder}; build one with `factweave web build`")
    client = _chat_client(llm_model, base_url) if (rerank or subqueries) else None
    with _open_web(web_dir, **web_options) as web:
        options = {"method": method, **({} if degree_weight is None else {"degree_weight": degree_weight})}
        result = web.find_facts(question, k, client=client, max_subqueries=subqueries, **options)
    reranked = None
    if rerank:
        reranked = Reranker(client).rerank(question, [Candidate(h.id, h.text, h.score) for h in result.hits])
    if as_json:
        data = result.as_dict()
        if reranked is not None:
            data["rerank"] = {"question_type": reranked.question_type, "used_fallback": reranked.used_fallback,
                              "reason": reranked.reason, "selected": [c.id for c in reranked.selected]}
        click.echo(json.dumps(data, indent=2, ensure_ascii=False))
        return
    _print_hits(result, reranked)


def _print_hits(result, reranked) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console(highlight=False)
    picked = {c.id for c in reranked.selected} if reranked is not None else set()
    table = Table(title=escape(f"keywords: {', '.join(result.keywords)}"), show_lines=False)
    for col in ("#", "score", "cos", "ppr", "pas", "lex", "deg", "fact", "source"):
        table.add_column(col, overflow="fold")
    for i, hit in enumerate(result.hits, 1):
        mark = "*" if hit.id in picked else ""
        table.add_row(f"{i}{mark}", f"{hit.score:.3f}", f"{hit.cosine:.3f}", f"{hit.ppr:.3f}", f"{hit.passage:.3f}",
                      f"{hit.lexical:.3f}", str(hit.degree), escape(hit.text), escape(hit.source))
    console.print(table)
    if result.subqueries:
        console.print(escape("sub-queries: " + "; ".join(result.subqueries)))
    if not result.hits:
        console.print("No fact found: no stored keyword is close to the question's keywords.")
    if reranked is not None:
        how = f"fallback to the top 3 ({reranked.reason})" if reranked.used_fallback else "picked by the model"
        console.print(escape(f"re-ranker: {reranked.question_type} question; {len(reranked.selected)} fact(s) {how} (*)"))


@web_group.command("add")
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--decomposer", type=click.Choice(["auto", "llm", "sentences"]), default="auto", show_default=True,
              help="How documents become atomic facts (as for `web build`).")
@_web_options
@_llm_options
@click.option("--json", "as_json", is_flag=True, help="Print the upload report as JSON.")
def web_add(files, decomposer, web_dir, llm_model, base_url, as_json, **web_options) -> None:
    """Upload FILES into a web as the chat UI does: triples (.tsv, .nt, .jsonl) or documents
    (.txt, .md, .json, .jsonl, .pdf, .html, .docx). Every file is read whole first: a bad row
    anywhere names its file and line and adds nothing. The facts become stated by every agent on
    the web, from the whole-KB tree too; a file added again replaces its earlier version; an upload
    cut short (a failure, a kill) is completed by the next add or remove.

    \b
    Example:
      factweave web add facts.tsv report.pdf --web my-web
    """
    if decomposer == "auto":
        decomposer = "llm" if remote_llm_configured(base_url) else "sentences"

    def make_decomposer():
        return LLMDecomposer(_chat_client(llm_model, base_url)) if decomposer == "llm" else SentenceDecomposer()

    # (an upload cut short is finished by this one first, with the decomposer chosen here)
    with _open_web(web_dir, create=True, recover=False, **web_options) as web:
        report = Workspace(web, decomposer=make_decomposer).add_files(list(files))
        report["stats"] = web.stats()
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        click.echo(f"added {report['files']}: {report['new_facts']} fact(s) in {report['seconds']:.1f} s")


@web_group.command("remove")
@click.argument("sources", nargs=-1, required=True)
@_web_options
@click.option("--json", "as_json", is_flag=True, help="Print the counts removed as JSON.")
def web_remove(sources, web_dir, as_json, **web_options) -> None:
    """Remove what SOURCES brought into a web: their documents, chunks and facts, the keywords no
    other fact mentions, their vectors, and their uploaded facts (`web add`, the UI). A source is
    named as it was added (notes.md, corpus.json, triples.tsv). A removal cut short is finished by
    the next one.

    \b
    Example:
      factweave web remove notes.md triples.tsv --web my-web
    """
    folder = web_dir or default_web_dir()
    if not (folder / "web.json").exists():
        raise FactweaveError(f"no knowledge web in {folder}; build one with `factweave web build`")
    from ..runtime import upload_decomposer  # lazy: agent.runtime pulls torch

    settings = web_settings(web_dir, **web_options)
    with _open_web(web_dir, **web_options) as web:
        # (a pending upload is applied first, as every door applies it)
        report = Workspace(web, decomposer=lambda: upload_decomposer(settings)).remove_sources(list(sources))
        report["stats"] = web.stats()
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        click.echo(f"removed {report.get('documents', 0)} document(s), {report.get('chunks', 0)} chunk(s), "
                   f"{report.get('facts', 0)} fact(s) and {report.get('keywords', 0)} keyword(s) of "
                   f"{', '.join(report['sources'])}" + (" (an earlier removal was finished first)"
                                                        if report.get("resumed") else "")
                   + (f"; dropped from the pending upload: {', '.join(report['pending_dropped'])}"
                      if report.get("pending_dropped") else ""))
        if report.get("pending"):
            click.echo(report["pending"], err=True)


@web_group.command("stats")
@_web_options
@click.option("--json", "as_json", is_flag=True)
def web_stats(web_dir, as_json, **web_options) -> None:
    """Count the documents, chunks, facts, keywords and edges of a web.

    \b
    Example:
      factweave web stats --web my-web
    """
    folder = web_dir or default_web_dir()
    if not (folder / "web.json").exists():
        raise FactweaveError(f"no knowledge web in {folder}; build one with `factweave web build`")
    with _open_web(web_dir, **web_options) as web:
        stats = web.stats()
    if as_json:
        click.echo(json.dumps(stats, indent=2))
    else:
        for name, value in stats.items():
            click.echo(f"{name}\t{value}")
