"""Text from PDF, HTML and DOCX files, with the page offsets that facts point back to.

Each reader returns a :class:`Converted`: a title (when the file names one), the text the
knowledge web decomposes, and for a PDF where each page starts in that text. HTML and DOCX come
out as Markdown, so their headings are found the same way as a Markdown file's
(:func:`agent.web.documents.heading_paths`) and a fact keeps its heading path.

Which libraries, by measurement (``benchmarks/converters.py``: generated files of 24 headed
sections with one planted sentence each; median seconds per file on a busy 2-core machine, MB
installed with everything pulled in, and MB new to factweave's own dependencies)::

    format library                      s/file  planted headings chrome     MB MB new
    pdf    pypdf                        0.0100    24/24        0      0    4.1    4.1
    pdf    markitdown[pdf]              0.1977    24/24        0      0  223.3  107.8
    html   trafilatura                  0.0058    24/24       31      0   59.7   51.5
    html   beautifulsoup4+markdownify   0.0065    24/24       31      0    1.8    1.5
    html   markitdown                   0.0804    24/24       31      5  165.6   88.6
    docx   python-docx                  0.0354    24/24       31      0   14.7   14.3
    docx   mammoth+bs4+markdownify      0.2733    24/24       31      0    2.3    1.9
    docx   markitdown[docx]             0.3502    24/24       31      0  178.0  100.9

("chrome": marked sentences of the page's menu, banner, aside and footer leaked into the text.)

- **PDF: pypdf.** Pure Python, 4 MB, and it gives the text page by page, which is what a
  fact's page number needs (markitdown's pdfminer route returns one text without pages, pulls in
  onnxruntime and magika, and was 20x slower).
- **HTML: beautifulsoup4 + markdownify.** As fast as trafilatura (both under 10 ms), every
  sentence and heading kept, 1.5 MB new instead of 50 (trafilatura brings lxml, dateparser,
  justext, ...).
  trafilatura's strength, finding the main text of an arbitrary page, is approximated by
  dropping ``nav``/``header``/``footer``/``aside``/``script``/``style`` (no boilerplate leaked
  here; markitdown leaked the navigation and footer).
- **DOCX: mammoth**, to HTML, then the HTML route above. Pure Python (0.4 MB more than the HTML
  route); Word's heading styles become Markdown headings and tables are kept. python-docx was
  faster (0.04 s against 0.27 s for a 37 kB file) but needs lxml (14 MB) and leaves tables and
  headings to hand-written code. A document a person uploads takes well under a second either way.
- **PPTX: not read.** Neither library reads it; markitdown does, at about 100 MB of new
  dependencies.

A file a library cannot read (corrupt, truncated, another format under the suffix) is an
:class:`~agent.errors.InputError` naming the file in one line, never a traceback; a PDF without a
text layer (a scan) says so and says to OCR it first.

**Budgets** against files made to exhaust memory or time (a "bomb" small on disk): a PDF of more
than :data:`MAX_PDF_PAGES` pages or more than :data:`MAX_TEXT_CHARS` characters of text is
refused (pages are counted before any is read; pypdf itself caps what one FlateDecode stream
may inflate to, and from 6.16.1 on bounds the other text-extraction paths crafted files were
found to exhaust: ``/ToUnicode`` maps, xref and content streams, font widths); a DOCX whose parts would unpack to more than :data:`MAX_DOCX_UNPACKED`
bytes, or more than :data:`MAX_DOCX_RATIO` times their packed size, is refused from its zip
directory before anything is unpacked.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from ..errors import FactweaveError, InputError

# pypdf logs what it repairs in a damaged file as warnings; with no logging set up, Python would
# print them bare to stderr beside the one-line error. A program that sets up logging still sees them.
logging.getLogger("pypdf").addHandler(logging.NullHandler())

#: Elements around a page's content (menus, banners, footers, code) left out of its text.
BOILERPLATE = ("head", "script", "style", "noscript", "template", "nav", "header", "footer", "aside")
#: Markup kept as plain text: links keep their words, images and emphasis marks go.
PLAIN = ("a", "img", "em", "i", "strong", "b", "u", "span")
#: Between two pages' text: a blank line, so no sentence is glued across a page break.
PAGE_BREAK = "\n\n"
#: The budgets (see the module docstring).
MAX_PDF_PAGES = 2000
MAX_TEXT_CHARS = 20_000_000
MAX_DOCX_UNPACKED = 64 * 1024 * 1024
MAX_DOCX_RATIO = 200


@dataclass(frozen=True)
class Converted:
    """A file's text; ``pages`` holds where each page starts in it (page 1 first), PDF only."""

    title: str | None
    text: str
    pages: tuple[int, ...] = ()


def _unreadable(path: Path, kind: str, error: Exception) -> InputError:
    reason = (str(error).strip().splitlines() or [""])[0]
    detail = f"{type(error).__name__}: {reason}" if reason else type(error).__name__
    return InputError(path, None, f"not a readable {kind} file ({detail[:200]})")


def read_pdf(path: Path) -> Converted:
    """The text of every page, pages joined by :data:`PAGE_BREAK`, and where each starts."""
    from pypdf import PdfReader

    try:
        reader = PdfReader(path)
        if reader.is_encrypted and not reader.decrypt(""):
            raise InputError(path, None, "encrypted PDF: remove its password first")
        count = len(reader.pages)
        if count > MAX_PDF_PAGES:
            raise InputError(path, None, f"{count:,} pages: over the {MAX_PDF_PAGES:,} pages one PDF may have; "
                                         "split it")
        texts, size = [], 0
        for page in reader.pages:
            texts.append(page.extract_text() or "")
            size += len(texts[-1])
            if size > MAX_TEXT_CHARS:
                raise InputError(path, None, f"more than {MAX_TEXT_CHARS:,} characters of text by page "
                                             f"{len(texts)}: over the budget of one file; split it")
    except FactweaveError:
        raise
    except Exception as error:  # a corrupt file can fail anywhere inside the parser
        raise _unreadable(path, "PDF", error) from None
    if not texts:
        raise InputError(path, None, "the PDF has no pages")
    if not any(text.strip() for text in texts):
        raise InputError(path, None, f"no text layer in {len(texts)} page(s): a scanned PDF? OCR it first "
                                     "(e.g. ocrmypdf) and add the result")
    pages, parts, offset = [], [], 0
    for text in texts:
        pages.append(offset)
        parts.append(text)
        offset += len(text) + len(PAGE_BREAK)
    return Converted(None, PAGE_BREAK.join(parts), tuple(pages))


def html_to_markdown(html: str | bytes) -> tuple[str | None, str]:
    """The ``<title>`` (or None) and the page's text as Markdown: headings as ``#`` lines, lists
    and tables kept, boilerplate elements dropped. Bytes are decoded by the page's own charset."""
    from bs4 import BeautifulSoup
    from markdownify import MarkdownConverter

    soup = BeautifulSoup(html, "html.parser")
    title = soup.title.get_text(" ", strip=True) if soup.title else None
    for tag in soup(list(BOILERPLATE)):
        tag.decompose()
    converter = MarkdownConverter(heading_style="ATX", strip=list(PLAIN), escape_asterisks=False,
                                  escape_underscores=False, escape_misc=False, bullets="-")
    return title or None, converter.convert_soup(soup)


def read_html(path: Path) -> Converted:
    try:
        title, text = html_to_markdown(path.read_bytes())
    except Exception as error:
        raise _unreadable(path, "HTML", error) from None
    return Converted(title, text)


def read_docx(path: Path) -> Converted:
    """Word's text through mammoth's HTML (heading styles become headings); images are not read."""
    import mammoth

    no_images = mammoth.images.img_element(lambda image: {})
    _check_zip_budget(path)
    try:
        with path.open("rb") as f:
            html = mammoth.convert_to_html(f, convert_image=no_images).value
        _, text = html_to_markdown(html)
    except Exception as error:  # not a zip, or a zip without word/document.xml, ...
        raise _unreadable(path, "DOCX", error) from None
    return Converted(None, text)


def zip_sizes(path: Path) -> tuple[int, int] | None:
    """What the members of a zip file (a DOCX) declare they unpack to, and take packed, read from
    its directory (nothing is inflated; ``zipfile`` reads no member past its declared size); None
    when it is no readable zip."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as archive:
            infos = archive.infolist()
    except (zipfile.BadZipFile, OSError):
        return None
    return sum(i.file_size for i in infos), sum(i.compress_size for i in infos)


def _check_zip_budget(path: Path) -> None:
    """Refuse a DOCX whose parts would unpack beyond the budgets; a file that is no zip is left
    to the reader's own error."""
    sizes = zip_sizes(path)
    if sizes is None:
        return
    unpacked, packed = sizes[0], max(1, sizes[1])
    if unpacked > MAX_DOCX_UNPACKED or unpacked > MAX_DOCX_RATIO * packed:
        raise InputError(path, None, f"its parts unpack to {unpacked:,} bytes ({unpacked // packed:,}x their packed "
                                     f"size): over the budget of one DOCX ({MAX_DOCX_UNPACKED:,} bytes, "
                                     f"{MAX_DOCX_RATIO}x)")
