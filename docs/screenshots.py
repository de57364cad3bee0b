"""Screenshots of the built documentation, taken with headless Chromium.

So that the next reader can see the site without building it, this keeps
pictures of four pages in ``docs/_static/screenshots/``: the landing page,
the quick start, one gallery example and the benchmarks page. It builds
nothing: build the HTML first, then point it at the output::

    .venv/bin/sphinx-build -E -W -b html docs docs/_build/html
    .venv/bin/python docs/screenshots.py docs/_build/html

Needs a Chromium (Debian: ``apt-get install chromium``; playwright's own
browser download is not needed) and Pillow (a matplotlib dependency), which
shrinks each picture to a 256-colour PNG of at most ``--max-kb``.

The pages are shot from a temporary copy of the build, which is left as it
is, with the network off (Chromium resolves no host): the build serves its
own MathJax (``sphinx-mathjax-offline``, in ``_static/mathjax``), so the
formulas render offline as a reader on a closed network sees them, and a
page that still loads a script from the network is refused. A page named
``page.html#anchor`` is shown from that anchor on. ``--pages`` shoots other
pages (to check the whole site by eye) into ``--out``::

    .venv/bin/python docs/screenshots.py docs/_build/html --out /tmp/shots \
        --pages privacy.html api.html
"""

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

DOCS = Path(__file__).resolve().parent

#: The pictures kept in the repository: output name -> page of the build.
PAGES = {
    "landing": "index.html",
    "quick_start": "auto_examples/plot_quick_start.html",
    # from its printed table and figure on
    "gallery_example": "auto_examples/plot_privacy_utility.html#the-curves",
    "benchmarks": "benchmarks.html",
}

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "chrome")
#: A ``<script>`` loaded from the network (a CDN's MathJax, for one).
REMOTE_SCRIPT = re.compile(r'<script[^>]*\ssrc="(?:https?:)?//[^"]*"[^>]*>')


def remote_scripts(html):
    """The ``<script>`` tags of a page that load from the network: none in an
    offline build.

    >>> remote_scripts('<script defer src="_static/mathjax/tex-chtml.js">')
    []
    >>> remote_scripts('<script src="https://cdn.example/mathjax.js">')
    ['<script src="https://cdn.example/mathjax.js">']
    """
    return REMOTE_SCRIPT.findall(html)


def find_browser(name=None):
    for candidate in [name] if name else BROWSERS:
        path = shutil.which(candidate)
        if path:
            return path
    sys.exit("screenshots: no Chromium found: apt-get install chromium "
             "(or give --browser)")


#: For ``page.html#anchor``: headless Chromium shoots a blank page when the
#: URL has a fragment, so the copy leaves out what precedes the anchor in
#: the article instead (the navbar and sidebars stay), as if scrolled to it.
SKIP_TO_ANCHOR = """<script>
document.addEventListener("DOMContentLoaded", function () {
  var node = document.getElementById(%r);
  while (node && node.tagName !== "ARTICLE") {
    while (node.previousElementSibling) node.previousElementSibling.remove();
    node = node.parentElement;
  }
});
</script>
"""


def prepared_copy(html_dir, pages):
    """A temporary copy of ``html_dir`` whose ``pages`` (``page.html`` or
    ``page.html#anchor``) start at their anchor; a page that loads a script
    from the network is refused (offline, it would not render)."""
    tmp = Path(tempfile.mkdtemp(prefix="dppca-screenshots-"))
    copy = tmp / "html"
    shutil.copytree(html_dir, copy)
    for page in pages:
        name, _, anchor = page.partition("#")
        path = copy / name
        text = path.read_text(encoding="utf-8")
        remote = remote_scripts(text)
        if remote:
            shutil.rmtree(tmp, ignore_errors=True)
            sys.exit(f"screenshots: {name} loads scripts from the network, "
                     f"which an offline reader cannot: {', '.join(remote)}")
        if anchor:
            text = text.replace("</head>", SKIP_TO_ANCHOR % anchor + "</head>", 1)
        path.write_text(text, encoding="utf-8")
    return tmp, copy


def shoot(browser, url, out, width, height):
    command = [
        browser, "--headless", "--no-sandbox", "--disable-gpu",
        "--hide-scrollbars", "--allow-file-access-from-files",
        "--force-device-scale-factor=1", f"--window-size={width},{height}",
        # the network off: no host resolves, as on a closed network
        "--host-resolver-rules=MAP * ~NOTFOUND",
        # time for MathJax and the theme's scripts to finish
        "--virtual-time-budget=30000", f"--screenshot={out}", url,
    ]
    subprocess.run(command, check=True, capture_output=True, timeout=180)


def shrink(path, max_kb):
    """Re-encode as a 256-colour PNG; halve the size until under ``max_kb``."""
    from PIL import Image

    image = Image.open(path).convert("RGB")
    while True:
        small = image.quantize(colors=256, method=Image.Quantize.MEDIANCUT)
        small.save(path, optimize=True)
        if path.stat().st_size <= max_kb * 1024 or image.width < 400:
            return
        image = image.resize((image.width * 3 // 4, image.height * 3 // 4),
                             Image.Resampling.LANCZOS)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("html_dir", type=Path, help="the built HTML directory")
    parser.add_argument("--out", type=Path, default=DOCS / "_static" / "screenshots")
    parser.add_argument("--pages", nargs="+", metavar="PAGE.html",
                        help="shoot these pages instead (named after the page)")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=1600)
    parser.add_argument("--max-kb", type=int, default=300)
    parser.add_argument("--browser", help="the Chromium executable")
    args = parser.parse_args(argv)

    html_dir = args.html_dir.resolve()
    if not (html_dir / "index.html").is_file():
        sys.exit(f"screenshots: {html_dir} has no index.html: build the docs "
                 "first (sphinx-build -b html docs DIR)")
    pages = (
        {page.partition("#")[0].removesuffix(".html").replace("/", "_"): page
         for page in args.pages}
        if args.pages else PAGES
    )
    files = {page.partition("#")[0] for page in pages.values()}
    missing = sorted(page for page in files if not (html_dir / page).is_file())
    if missing:
        sys.exit(f"screenshots: not in the build: {', '.join(missing)}")
    browser = find_browser(args.browser)

    tmp, html_dir = prepared_copy(html_dir, set(pages.values()))
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        for name, page in pages.items():
            out = args.out / f"{name}.png"
            url = (html_dir / page.partition("#")[0]).as_uri()
            shoot(browser, url, out, args.width, args.height)
            shrink(out, args.max_kb)
            print(f"{out} ({out.stat().st_size // 1024} KB) <- {page}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
