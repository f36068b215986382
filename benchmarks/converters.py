"""Which libraries turn PDF, HTML and DOCX files into document text: a small measurement.

Generated files, so that what each converter should keep is known: a PDF of several pages, an
HTML page with navigation, a footer and a script around headed sections, and a DOCX with
headings, paragraphs and a table (made with fpdf2 and python-docx, the ``test`` extra). Every
paragraph holds one planted sentence ("Fact 17: ..."); the page's boilerplate holds marked
sentences ("Chrome ...") that should not become facts.

The pypdf, beautifulsoup4+markdownify and mammoth rows run factweave's own readers
(:mod:`agent.web.converters`); the others are called here the way their documentation shows.
Per converter it reports the median seconds per file, the characters of text it kept, how many
planted sentences survive whole, how many headings come out as Markdown headings (what the
knowledge web reads a heading path from), boilerplate sentences leaked, and the installed size of
the library with everything it pulls in (MB, and MB new to factweave's own dependencies).

The candidates need not be installed in the project's environment: ``--site DIR`` adds a folder
made with ``pip install --target DIR ...`` at the end of the import path (so the project's own
packages win), e.g.::

    pip install --target /tmp/convbench pypdf trafilatura beautifulsoup4 markdownify \\
        'markitdown[pdf,docx]' python-docx mammoth
    PYTHONPATH=. .venv/bin/python benchmarks/converters.py --site /tmp/convbench

Prints a table and writes ``benchmarks/results/converters.json``.
"""
from __future__ import annotations

import argparse
import io
import json
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
SECTIONS = 24  # headed sections per file, one planted sentence each (two per PDF page)


def planted(i: int) -> str:
    return f"Fact {i}: the lighthouse of Port Varel number {i} was painted blue in {1900 + i}."


def section_titles(i: int) -> tuple[str, str]:
    return f"Chapter {i // 4}", f"Section {i}"


# --- generated inputs -------------------------------------------------------------------------

def make_html(folder: Path) -> Path:
    body = []
    for i in range(SECTIONS):
        chapter, section = section_titles(i)
        if i % 4 == 0:
            body.append(f"<h2>{chapter}</h2>")
        body.append(f"<h3>{section}</h3><p>{planted(i)} Some <a href='/x'>linked</a> and "
                    f"<em>stressed</em> words follow.</p>")
        if i % 6 == 5:
            body.append("<ul><li>a listed item</li><li>another item</li></ul>")
            body.append("<table><tr><th>key</th><th>value</th></tr><tr><td>depth</td><td>12 m</td></tr></table>")
    page = (
        "<!doctype html><html><head><title>Port Varel lighthouses</title>"
        "<script>var chrome = 'Chrome script text';</script><style>p {color: red}</style></head><body>"
        "<nav><a href='/'>Chrome home</a> | <a href='/about'>Chrome about</a></nav>"
        "<header>Chrome site banner.</header><main><article><h1>Port Varel lighthouses</h1>"
        + "".join(body)
        + "</article></main><aside>Chrome related links.</aside><footer>Chrome copyright 2026.</footer></body></html>"
    )
    path = folder / "page.html"
    path.write_text(page, encoding="utf-8")
    return path


def make_docx(folder: Path) -> Path:
    import docx

    document = docx.Document()
    document.add_heading("Port Varel lighthouses", level=1)
    for i in range(SECTIONS):
        chapter, section = section_titles(i)
        if i % 4 == 0:
            document.add_heading(chapter, level=2)
        document.add_heading(section, level=3)
        document.add_paragraph(planted(i) + " Some stressed words follow.")
        if i % 6 == 5:
            table = document.add_table(rows=2, cols=2)
            for r, row in enumerate((("key", "value"), ("depth", "12 m"))):
                for c, text in enumerate(row):
                    table.cell(r, c).text = text
    path = folder / "report.docx"
    document.save(path)
    return path


def make_pdf(folder: Path) -> Path:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=11)
    for i in range(SECTIONS):
        if i % 2 == 0:
            pdf.add_page()
        pdf.multi_cell(0, 6, planted(i) + " Some more words follow on the same line of the page.")
        pdf.ln(4)
    path = folder / "report.pdf"
    pdf.output(str(path))
    return path


# --- candidates -------------------------------------------------------------------------------

def pypdf_text(path: Path) -> str:  # what factweave reads a PDF with
    from agent.web.converters import read_pdf

    return read_pdf(path).text


def markitdown_text(path: Path) -> str:
    from markitdown import MarkItDown

    return MarkItDown(enable_plugins=False).convert(str(path)).text_content


def trafilatura_text(path: Path) -> str:
    import trafilatura

    return trafilatura.extract(path.read_text(encoding="utf-8"), output_format="markdown",
                               include_formatting=True, include_tables=True) or ""


def bs4_markdownify_text(path: Path) -> str:  # what factweave reads HTML with
    from agent.web.converters import read_html

    return read_html(path).text


def python_docx_text(path: Path) -> str:
    import docx

    lines = []
    for paragraph in docx.Document(str(path)).paragraphs:
        style = paragraph.style.name if paragraph.style is not None else ""
        level = re.fullmatch(r"Heading (\d)", style)
        lines.append(("#" * int(level.group(1)) + " " if level else "") + paragraph.text)
    return "\n\n".join(lines)  # tables are elsewhere in python-docx's model: left out here


def mammoth_text(path: Path) -> str:  # what factweave reads DOCX with: mammoth, then the HTML route
    from agent.web.converters import read_docx

    return read_docx(path).text


CANDIDATES: dict[str, list[tuple[str, Callable[[Path], str], list[str]]]] = {
    "pdf": [("pypdf", pypdf_text, ["pypdf"]),
            ("markitdown[pdf]", markitdown_text, ["markitdown[pdf]"])],
    "html": [("trafilatura", trafilatura_text, ["trafilatura"]),
             ("beautifulsoup4+markdownify", bs4_markdownify_text, ["beautifulsoup4", "markdownify"]),
             ("markitdown", markitdown_text, ["markitdown"])],
    "docx": [("python-docx", python_docx_text, ["python-docx"]),
             ("mammoth+bs4+markdownify", mammoth_text, ["mammoth", "beautifulsoup4", "markdownify"]),
             ("markitdown[docx]", markitdown_text, ["markitdown[docx]"])],
}


# --- installed size ---------------------------------------------------------------------------

def _name(text: str) -> str:
    return re.sub(r"[-_.]+", "-", text).lower()


def closure(requirements: list[str]) -> set[str]:
    """The installed distributions ``requirements`` need, transitively (extras followed)."""
    from packaging.requirements import Requirement

    seen: set[str] = set()
    todo = [(Requirement(r), "") for r in requirements]
    while todo:
        req, extra = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": extra}):
            continue
        name = _name(req.name)
        try:
            dist = metadata.distribution(req.name)
        except metadata.PackageNotFoundError:
            continue
        extras = sorted(req.extras) or [""]
        key = f"{name}[{','.join(extras)}]"
        if key in seen:
            continue
        seen.add(key)
        for sub in dist.requires or []:
            for wanted in extras:
                todo.append((Requirement(sub), wanted))
    return {key.split("[")[0] for key in seen}


def megabytes(names: set[str]) -> float:
    total = 0
    for name in names:
        dist = metadata.distribution(name)
        for file in dist.files or []:
            located = Path(str(dist.locate_file(file)))
            if located.is_file():
                total += located.stat().st_size
    return round(total / 1e6, 1)


def base_dependencies() -> set[str]:
    try:
        requires = metadata.distribution("factweave").requires or []
    except metadata.PackageNotFoundError:
        return set()
    return closure([r for r in requires if "extra ==" not in r])


# --- measurement ------------------------------------------------------------------------------

_CHROME = re.compile(r"Chrome")
_MD_HEADING = re.compile(r"^#{1,6} ", re.MULTILINE)


def measure(convert: Callable[[Path], str], path: Path, repeats: int) -> dict:
    convert(path)  # imports and first-call caches out of the timing
    times, text = [], ""
    for _ in range(repeats):
        started = time.perf_counter()
        text = convert(path)
        times.append(time.perf_counter() - started)
    flat = " ".join(text.split()).replace("\\", "")
    return {
        "seconds": round(statistics.median(times), 4),
        "chars": len(text),
        "planted": sum(planted(i) in flat for i in range(SECTIONS)),
        "headings": len(_MD_HEADING.findall(text)),
        "chrome": len(_CHROME.findall(text)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--site", action="append", default=[], help="extra folder of installed packages (last on the path)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", type=Path, default=RESULTS / "converters.json")
    args = parser.parse_args()
    sys.path.extend(args.site)
    base = base_dependencies()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        files = {"pdf": make_pdf(Path(tmp)), "html": make_html(Path(tmp)), "docx": make_docx(Path(tmp))}
        for kind, candidates in CANDIDATES.items():
            for name, convert, requirements in candidates:
                needed = closure(requirements)
                row = {"format": kind, "library": name, "bytes_in": files[kind].stat().st_size,
                       "mb": megabytes(needed), "mb_new": megabytes(needed - base),
                       "packages": len(needed), "packages_new": len(needed - base)}
                try:
                    with io.StringIO() as sink:  # some libraries print warnings to stdout
                        stdout, sys.stdout = sys.stdout, sink
                        try:
                            row.update(measure(convert, files[kind], args.repeats))
                        finally:
                            sys.stdout = stdout
                except ImportError as exc:
                    row["error"] = f"not installed ({exc.name})"
                rows.append(row)
    header = (f"{'format':<6} {'library':<28} {'s/file':>8} {'chars':>6} {'planted':>8} {'headings':>8} "
              f"{'chrome':>6} {'MB':>6} {'MB new':>6} {'pkgs new':>8}")
    print(header)
    print("-" * len(header))
    for r in rows:
        if "error" in r:
            print(f"{r['format']:<6} {r['library']:<28} {r['error']}")
            continue
        print(f"{r['format']:<6} {r['library']:<28} {r['seconds']:>8.4f} {r['chars']:>6} "
              f"{r['planted']:>3}/{SECTIONS:<4} {r['headings']:>8} {r['chrome']:>6} {r['mb']:>6.1f} "
              f"{r['mb_new']:>6.1f} {r['packages_new']:>8}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"sections": SECTIONS, "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
