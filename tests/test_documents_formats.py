"""PDF, HTML and DOCX documents: their text, the page or heading path a fact keeps, and one-line
errors for a scanned or corrupt file. The files are made here (fpdf2, python-docx, a string)."""
from __future__ import annotations

import os
import subprocess
import sys
import zipfile

import pytest
from conftest import REPO

from agent.errors import FactweaveError, InputError
from agent.web.decompose import SentenceDecomposer
from agent.web.documents import chunk_document, heading_paths, read_documents
from agent.web.retrieval import FactHit, source_line

PAGE_ONE = "Quillon Vale is a lighthouse on the coast of Brisk. The tower was built in 1871."
PAGE_TWO = "The lamp of Quillon Vale was designed by Asha Merrow. The light reaches 30 kilometres."

PAGE = """<!doctype html><html><head><title>Setup guide</title><script>var x = "script text";</script></head>
<body><nav><a href="/">Menu home</a></nav><main>
<h1>Setup guide</h1><p>Factweave runs on <a href="/os">three systems</a>.</p>
<h2>Install</h2><p>Installing takes <em>two</em> minutes.</p>
<h3>Linux</h3><p>On Linux the package is called factweave-cli.</p>
<table><tr><th>system</th><th>size</th></tr><tr><td>Linux</td><td>12 MB</td></tr></table>
<h2>Upgrade</h2><p>Upgrading keeps every web.</p>
</main><footer>Footer copyright 2026.</footer></body></html>"""

NOTES = """# Setup guide

Factweave runs on three systems.

## Install

```
# not a heading: inside code
```

### Linux

On Linux the package is called factweave-cli.

Upgrade
-------

Upgrading keeps every web.
"""


def make_pdf(path, pages):
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=11)
    for text in pages:
        pdf.add_page()
        pdf.multi_cell(0, 6, text)
    pdf.output(str(path))
    return path


def make_scanned_pdf(path):
    """Two pages without a text layer, as a scanner makes them (here: blank)."""
    from pypdf import PdfWriter

    writer = PdfWriter()
    writer.add_blank_page(595, 842)
    writer.add_blank_page(595, 842)
    writer.write(path)
    return path


def make_docx(path):
    import docx

    document = docx.Document()
    document.add_heading("Harbour report", level=1)
    document.add_paragraph("Brisk is a harbour town in Velland.")
    document.add_heading("Lighthouses", level=2)
    document.add_paragraph("Quillon Vale guards the northern entrance of the harbour.")
    table = document.add_table(rows=2, cols=2)
    for r, row in enumerate((("name", "built"), ("Quillon Vale", "1871"))):
        for c, text in enumerate(row):
            table.cell(r, c).text = text
    document.save(path)
    return path


def facts_of(doc):
    """The sentence decomposer's facts of ``doc`` with the page and heading each would keep."""
    decomposer = SentenceDecomposer()
    return [(f.text, doc.page_at(f.start), doc.heading_at(f.start))
            for chunk in chunk_document(doc, 120) for f in decomposer.decompose(doc.title, doc.text, chunk)]


def test_pdf_text_and_pages(tmp_path):
    (doc,) = read_documents([make_pdf(tmp_path / "report.pdf", [PAGE_ONE, PAGE_TWO])])
    assert doc.title == "report" and doc.source == "report.pdf"
    assert " ".join(doc.text.split()) == f"{PAGE_ONE} {PAGE_TWO}"
    assert len(doc.pages) == 2 and doc.pages[0] == 0
    pages = {text: page for text, page, _ in facts_of(doc)}
    assert pages == {
        "Quillon Vale is a lighthouse on the coast of Brisk.": 1,
        "The tower was built in 1871.": 1,
        "The lamp of Quillon Vale was designed by Asha Merrow.": 2,
        "The light reaches 30 kilometres.": 2,
    }
    assert doc.heading_at(0) is None  # a PDF has pages, no heading paths


def test_html_text_and_heading_paths(tmp_path):
    path = tmp_path / "guide.html"
    path.write_text(PAGE, encoding="utf-8")
    (doc,) = read_documents([path])
    assert doc.title == "Setup guide" and doc.source == "guide.html" and doc.pages == ()
    # the page's words, links and emphasis as plain text; menus, scripts and footers left out
    assert "Factweave runs on three systems." in doc.text and "Installing takes two minutes." in doc.text
    assert "| Linux | 12 MB |" in doc.text
    assert not any(word in doc.text for word in ("Menu home", "script text", "Footer", "<", "*"))
    headings = {text: heading for text, _, heading in facts_of(doc)}
    assert headings["On Linux the package is called factweave-cli."] == "Setup guide > Install > Linux"
    assert headings["Upgrading keeps every web."] == "Setup guide > Upgrade"
    assert headings["Factweave runs on three systems."] == "Setup guide"


def test_markdown_heading_paths(tmp_path):
    path = tmp_path / "notes.md"
    path.write_text(NOTES, encoding="utf-8")
    (doc,) = read_documents([path])
    assert doc.title == "Setup guide"
    assert [p for _, p in doc.headings] == ["Setup guide", "Setup guide > Install", "Setup guide > Install > Linux",
                                            "Setup guide > Upgrade"]  # not the line inside code
    linux = doc.text.index("On Linux")
    assert doc.heading_at(linux) == "Setup guide > Install > Linux"
    assert doc.heading_at(doc.text.index("Upgrading")) == "Setup guide > Upgrade"
    assert doc.page_at(linux) is None
    assert heading_paths("No heading here.") == ()
    assert heading_paths("Intro.\n\n## Deep first\n\n# Top\n")[1] == (23, "Top")  # a shallower one closes the deeper


def test_docx_text_headings_and_table(tmp_path):
    (doc,) = read_documents([make_docx(tmp_path / "harbour.docx")])
    assert doc.title == "Harbour report" and doc.source == "harbour.docx"
    assert "Brisk is a harbour town in Velland." in doc.text
    assert "| Quillon Vale | 1871 |" in doc.text
    at = doc.text.index("Quillon Vale guards")
    assert doc.heading_at(at) == "Harbour report > Lighthouses"


def test_scanned_pdf_is_one_clear_line(tmp_path):
    path = make_scanned_pdf(tmp_path / "scan.pdf")
    with pytest.raises(InputError) as error:
        list(read_documents([path]))
    message = str(error.value)
    assert message.startswith(f"{path}: no text layer") and "OCR it first" in message
    assert "\n" not in message


@pytest.mark.parametrize("name, content, kind", [
    ("broken.pdf", b"%PDF-1.4\n1 0 obj << /Type /Catalog", "PDF"),
    ("truncated.pdf", None, "PDF"),
    ("broken.docx", b"PK\x03\x04 not really a zip", "DOCX"),
    ("other.docx", "zip", "DOCX"),
])
def test_corrupt_file_is_one_line_naming_it(tmp_path, name, content, kind):
    path = tmp_path / name
    if content is None:  # a real PDF cut in half
        whole = make_pdf(tmp_path / "whole.pdf", [PAGE_ONE, PAGE_TWO]).read_bytes()
        path.write_bytes(whole[: len(whole) // 2])
    elif content == "zip":  # a zip, but not a Word document
        with zipfile.ZipFile(path, "w") as z:
            z.writestr("hello.txt", "hello")
    else:
        path.write_bytes(content)
    with pytest.raises(InputError) as error:
        list(read_documents([path]))
    message = str(error.value)
    assert message.startswith(f"{path}: ") and "\n" not in message
    assert f"not a readable {kind} file" in message or "no text layer" in message or "no pages" in message


def test_broken_pdf_prints_nothing_beside_its_error(tmp_path):
    """pypdf's repair warnings stay out of stderr in a program without logging set up (pytest sets
    logging up, hence a child process)."""
    path = tmp_path / "broken.pdf"
    path.write_bytes(b"%PDF-1.4\n1 0 obj << /Type /Catalog")
    code = ("import sys; from agent.errors import FactweaveError; from agent.web.documents import read_documents\n"
            "try:\n    list(read_documents([sys.argv[1]]))\nexcept FactweaveError as error:\n    print(error)")
    done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120, check=True)
    assert done.stderr == "" and done.stdout.startswith(f"{path}: not a readable PDF file")


def test_unknown_suffix_lists_the_formats(tmp_path):
    (tmp_path / "slides.pptx").write_bytes(b"PK")
    with pytest.raises(FactweaveError, match=r"slides\.pptx: unsupported document file .*\.pdf, \.html, \.htm, \.docx"):
        list(read_documents([tmp_path / "slides.pptx"]))


def test_folder_reads_every_format_in_order(tmp_path):
    make_pdf(tmp_path / "a.pdf", [PAGE_ONE])
    (tmp_path / "b.HTML").write_text(PAGE, encoding="utf-8")
    make_docx(tmp_path / "c.docx")
    (tmp_path / "d.pptx").write_bytes(b"PK")  # not a document: skipped in a folder
    assert [d.source for d in read_documents([tmp_path])] == ["a.pdf", "b.HTML", "c.docx"]


def test_source_line_names_page_and_heading():
    span = {"start": 120, "end": 198}
    assert source_line({"title": "report", "source": "report.pdf", "page": 4, **span}) == "report, page 4 [120:198]"
    assert source_line({"title": "Setup guide", "heading": "Setup guide > Install > Linux", **span}) \
        == "Setup guide, Install > Linux [120:198]"
    assert source_line({"title": "Setup guide", "heading": "Setup guide", **span}) == "Setup guide [120:198]"
    assert source_line({"title": "notes", "heading": "Install > Linux", **span}) == "notes, Install > Linux [120:198]"
    assert source_line({"title": "Mira Quell", **span}) == "Mira Quell [120:198]"  # as before
    assert source_line({"source": "rows.jsonl:1"}) == "rows.jsonl:1"
    hit = FactHit("f1", "text", "document", 1.0, 1.0, 1, [], {"title": "report", "page": 2, **span})
    assert hit.source == "report, page 2 [120:198]" and hit.as_dict()["source_line"] == hit.source
    triple = FactHit("f2", "text", "triple", 1.0, 1.0, 1, [], {"source": "facts.tsv:3", "page": 2})
    assert triple.source == "facts.tsv:3"


def test_render_shows_page_and_heading():
    from ui.render import provenance_line

    line = provenance_line({"provenance": {"kind": "document", "title": "report", "source": "report.pdf", "page": 4,
                                           "start": 120, "end": 198}})
    assert line == "document report, page 4, characters 120-198 (report.pdf)"
    line = provenance_line({"provenance": {"kind": "document", "title": "Setup guide", "source": "guide.html",
                                           "heading": "Setup guide > Install", "start": 1, "end": 9}})
    assert line == "document Setup guide, under Setup guide > Install, characters 1-9 (guide.html)"


def test_uploads_take_the_new_formats_checked_whole(tmp_path):
    from agent.web.uploads import kind_of, read_uploads

    pdf = make_pdf(tmp_path / "report.pdf", [PAGE_ONE, PAGE_TWO])
    html = tmp_path / "guide.htm"
    html.write_text(PAGE, encoding="utf-8")
    docx_file = make_docx(tmp_path / "harbour.docx")
    assert {kind_of(p) for p in (pdf, html, docx_file)} == {"documents"}
    batch = read_uploads([pdf, html, docx_file])
    assert [d.title for d in batch.documents] == ["report", "Setup guide", "Harbour report"]
    assert batch.documents[0].pages[0] == 0 and batch.documents[1].headings
    scan = make_scanned_pdf(tmp_path / "scan.pdf")
    with pytest.raises(FactweaveError, match=r"^scan\.pdf: no text layer") as error:
        read_uploads([pdf, scan])  # one bad file rejects the upload, named without its folder
    assert str(tmp_path) not in str(error.value)
    with pytest.raises(FactweaveError, match=r"report\.pdf: .* over the upload limit"):
        read_uploads([pdf], max_bytes=100)


@pytest.fixture()
def open_web(tmp_path, graph, graph_server, embedder):
    from agent.web.web import KnowledgeWeb

    opened = []

    def _open(name: str = "web") -> KnowledgeWeb:
        web = KnowledgeWeb.open(tmp_path / name, embedder=embedder, graph_uri=graph_server.uri,
                                graph_user=graph_server.user, graph_password=graph_server.password,
                                graph_database=graph_server.database)
        opened.append(web)
        return web

    yield _open
    for web in opened:
        web.close()


def test_web_keeps_page_and_heading(tmp_path, open_web):
    pdf = make_pdf(tmp_path / "report.pdf", [PAGE_ONE, PAGE_TWO])
    html = tmp_path / "guide.html"
    html.write_text(PAGE, encoding="utf-8")
    docx_file = make_docx(tmp_path / "harbour.docx")
    web = open_web()
    report = web.add_documents(read_documents([pdf, html, docx_file]), SentenceDecomposer(), progress=False)
    assert report.documents == 3
    lamp = web.search("Who designed the lamp of Quillon Vale?", k=3).hits[0]
    assert lamp.text == "The lamp of Quillon Vale was designed by Asha Merrow."
    assert lamp.provenance["page"] == 2 and "heading" not in lamp.provenance
    assert lamp.source.startswith("report, page 2 [")
    linux = web.search("What is the package called on Linux?", k=3).hits[0]
    assert linux.text == "On Linux the package is called factweave-cli."
    assert linux.provenance["heading"] == "Setup guide > Install > Linux" and "page" not in linux.provenance
    assert linux.source.startswith("Setup guide, Install > Linux [")
    stored = {f.text: f.source for f in web.facts()}  # the fact index's view keeps them too
    assert stored["The lamp of Quillon Vale was designed by Asha Merrow."].startswith("report, page 2 [")


def test_pdf_and_docx_bombs_are_refused_in_one_line_before_they_are_unpacked(tmp_path, monkeypatch):
    """Files small on disk made to exhaust memory or time: a PDF of 2,001 (blank) pages, a PDF
    whose text is over the budget, a DOCX whose document part inflates 1000x."""
    import time

    from pypdf import PdfWriter

    from agent.web import converters

    many = tmp_path / "many.pdf"
    writer = PdfWriter()
    for _ in range(converters.MAX_PDF_PAGES + 1):
        writer.add_blank_page(200, 200)
    writer.write(many)
    with pytest.raises(InputError, match=r"many.pdf: 2,001 pages: over the 2,000 pages one PDF may have"):
        list(read_documents([many]))
    monkeypatch.setattr(converters, "MAX_TEXT_CHARS", 100)  # a budget the second page below passes
    with pytest.raises(InputError, match=r"report.pdf: more than 100 characters of text by page 2"):
        list(read_documents([make_pdf(tmp_path / "report.pdf", [PAGE_ONE, PAGE_TWO])]))
    bomb = tmp_path / "bomb.docx"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        archive.writestr("word/document.xml", "<w:document>" + " " * 10_000_000 + "</w:document>")
    assert bomb.stat().st_size < 100_000
    started = time.perf_counter()
    with pytest.raises(InputError, match=r"bomb.docx: its parts unpack to 10,000,\d+ bytes .*over the budget"):
        list(read_documents([bomb]))
    assert time.perf_counter() - started < 5  # refused from the zip's directory, nothing inflated
    (doc,) = read_documents([make_docx(tmp_path / "fine.docx")])  # an ordinary DOCX is read as before
    assert doc.text


def test_the_pdf_reader_required_has_the_known_text_extraction_dos_fixes():
    """The second security review's request: ``pypdf>=6,<8`` let an install keep a release whose
    ``extract_text()`` (the path every uploaded PDF takes) a crafted file can keep busy for long or
    fill memory with; fixes came in 6.7.1, 6.9.1, 6.9.2, 6.10.x, 6.12.0 to 6.16.1. The floor
    admits none before the last of them, and the pypdf installed here is within it."""
    import pypdf
    from packaging.requirements import Requirement

    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib

    declared = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    (spec,) = [Requirement(line).specifier for line in declared if Requirement(line).name == "pypdf"]
    assert not any(spec.contains(old) for old in ("6.0.0", "6.7.0", "6.9.1", "6.15.0", "6.16.0")), spec
    assert spec.contains("6.16.1") and spec.contains(pypdf.__version__), (spec, pypdf.__version__)
