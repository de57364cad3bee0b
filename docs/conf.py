"""Sphinx configuration of the sklearn_dppca documentation.

Build, from the repository root, with no warnings allowed::

    .venv/bin/sphinx-build -E -W -b html docs docs/_build/html

(``-E`` re-reads every page, so that changed docstrings and newly reachable
intersphinx inventories are picked up; the examples are re-run only when
they change.)

The build runs every example of ``examples/`` (sphinx-gallery) and writes
``docs/auto_examples/`` and ``docs/gen_modules/``; both are generated.
"""

import builtins
import re
import sys
from pathlib import Path

from docutils import nodes
from sphinx.util import logging
from threadpoolctl import threadpool_limits

DOCS = Path(__file__).resolve().parent
# Document the checkout these docs belong to, not whichever sklearn_dppca is
# installed (an editable install of another worktree, an older release).
sys.path.insert(0, str(DOCS.parent))
sys.path.insert(0, str(DOCS / "_ext"))  # gallery_order

import sklearn_dppca  # noqa: E402 (from the checkout above)

logger = logging.getLogger(__name__)

# -- Project -----------------------------------------------------------------
project = "sklearn_dppca"
author = "the sklearn_dppca developers"
copyright = "the sklearn_dppca developers"  # noqa: A001 (Sphinx's name)
version = release = sklearn_dppca.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.intersphinx",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
    # MathJax served from the built docs' _static/, not a CDN: the formulas
    # render offline (a closed research network)
    "sphinx-mathjax-offline",
]

templates_path = ["_templates"]
exclude_patterns = ["_build", "_templates", "_ext", "**.ipynb_checkpoints"]
root_doc = "index"

# Every cross-reference must resolve: a broken one is a warning, and -W makes
# it an error. (References into projects whose inventory could not be loaded
# at all are the one exception; see "Intersphinx" below.)
nitpicky = True

# -- HTML --------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"sklearn_dppca {release}"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    # The navbar lists the root toctree's short titles (docs/index.rst): five
    # fit on one row; the guides and the reference are the user guide's
    # section navigation.
    "header_links_before_dropdown": 5,
    # "On this page" appears once, on the right: pages have no ``contents::``.
    "secondary_sidebar_items": ["page-toc"],
}
# Pages without sub-pages have no section navigation to show.
html_sidebars = {"index": [], "install": [], "benchmarks": []}
html_static_path = []
html_show_sourcelink = False

# -- API reference: autodoc, autosummary, numpydoc ---------------------------
autosummary_generate = True
autodoc_default_options = {"member-order": "bysource"}
autodoc_typehints = "signature"

numpydoc_show_class_members = False  # the autosummary templates list members
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = True
numpydoc_xref_ignore = "all"  # link only the names below, never free words
numpydoc_xref_aliases = {
    # numpydoc's defaults cover None, bool, int, float, str, dict, tuple,
    # list, callable, ndarray, array-like and RandomState.
    "Generator": ":class:`numpy.random.Generator`",
    "numpy.random.Generator": ":class:`numpy.random.Generator`",
    "numpy.random.RandomState": ":class:`numpy.random.RandomState`",
    "Bunch": "sklearn.utils.Bunch",
    "BudgetAccountant": "sklearn_dppca.BudgetAccountant",
    "PrivatePCA": "sklearn_dppca.PrivatePCA",
    "ComplexGaussPCA": "sklearn_dppca.ComplexGaussPCA",
    "CoherentPowerPCA": "sklearn_dppca.CoherentPowerPCA",
    "AuditResult": "sklearn_dppca.audit.AuditResult",
}

# Inherited scikit-learn methods (get_params, set_output, ...) are not
# documented here: their docstrings link into scikit-learn's own pages.
def _skip_sklearn_members(app, what, name, obj, skip, options):
    owner = getattr(obj, "fget", obj)  # a property's getter
    module = getattr(owner, "__module__", None) or ""
    if module == "sklearn" or module.startswith("sklearn."):
        return True
    return None


# numpydoc types such as ``ndarray of shape (n_components_, n_features)`` are
# reST text, where ``n_components_`` is a reference to a target that does
# not exist. Escape a trailing underscore in the type part of the
# ``name : type`` lines of the docstrings (before numpydoc reads them).
_PARAM_LINE = re.compile(r"^(\s*[\w*][\w*, ]* : )(.+)$")
_TRAILING_UNDERSCORE = re.compile(r"\b(\w*[A-Za-z0-9])_(?=[\s,)\]]|$)")


def _escape_type_underscores(app, what, name, obj, options, lines):
    for i, line in enumerate(lines):
        match = _PARAM_LINE.match(line)
        if match and "`" not in match.group(2):
            head, kind = match.groups()
            lines[i] = head + _TRAILING_UNDERSCORE.sub(r"\1\\_", kind)


# -- Gallery -----------------------------------------------------------------
# The examples run inside this process. Their matrices are small: one BLAS
# thread is as fast, and immune to OpenBLAS's spinning thread pool, which
# made them ten times slower on a busy 2-core machine.
threadpool_limits(limits=1, user_api="blas")

sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "within_subsection_order": "gallery_order.ExampleOrder",
    "backreferences_dir": "gen_modules/backreferences",
    "doc_module": ("sklearn_dppca",),
    "remove_config_comments": True,
    "matplotlib_animations": False,
    "min_reported_time": 1,
}

# -- Intersphinx -------------------------------------------------------------
# The inventories are fetched from the web. Each project gets three
# locations, tried in order (intersphinx's own fallback mechanism):
#
# 1. the live inventory (``None``);
# 2. the copy intersphinx saved under the doctree directory the last time it
#    fetched one (``__intersphinx_cache__/<name>_objects.inv``), whatever
#    its age: stale but real, and it resolves references the same way;
# 3. an empty inventory written by this file.
#
# Intersphinx reports a location that fails as long as a later one works at
# the INFO level, not as a warning. When a project ends up with the empty
# inventory (offline, never fetched), ``_note_offline_projects`` says so, and
# ``_unlink_offline_reference`` turns the references *into that project
# only* (its top-level modules, or an explicit ``name:`` inventory prefix)
# into plain text instead of "reference target not found" warnings: they
# stay unlinked and unchecked.
# Every other broken reference still fails the build. Online, everything is
# checked.
INTERSPHINX_PROJECTS = {
    # name: (base URL, top-level names whose references belong to it)
    "python": (
        "https://docs.python.org/3/",
        frozenset(dir(builtins)) | frozenset(sys.stdlib_module_names),
    ),
    "numpy": ("https://numpy.org/doc/stable/", frozenset({"numpy"})),
    "scipy": ("https://docs.scipy.org/doc/scipy/", frozenset({"scipy"})),
    "sklearn": ("https://scikit-learn.org/stable/", frozenset({"sklearn"})),
    "matplotlib": (
        "https://matplotlib.org/stable/",
        frozenset({"matplotlib", "mpl_toolkits"}),
    ),
}
intersphinx_mapping = {
    name: (url, None) for name, (url, _) in INTERSPHINX_PROJECTS.items()
}
intersphinx_timeout = 10

_EMPTY_INVENTORY = "# Sphinx inventory version 1\n# Project: (none)\n# Version: 0\n"


def _add_inventory_fallbacks(app, config):
    """Give each intersphinx project its saved copy and an empty one as fallbacks."""
    doctrees = Path(app.doctreedir)
    doctrees.mkdir(parents=True, exist_ok=True)
    empty = doctrees / "intersphinx_empty_objects.inv"
    empty.write_text(_EMPTY_INVENTORY)
    saved = doctrees / "__intersphinx_cache__"
    config.intersphinx_mapping = {
        name: (url, (None, str(saved / f"{name}_objects.inv"), str(empty)))
        for name, (url, _) in INTERSPHINX_PROJECTS.items()
    }


def _note_offline_projects(app):
    """Find the projects that got the empty inventory, and say so."""
    from sphinx.ext.intersphinx import InventoryAdapter

    inventories = InventoryAdapter(app.builder.env)
    named = inventories.named_inventory
    app._dppca_offline = {
        name for name in INTERSPHINX_PROJECTS if not named.get(name)
    }
    for name in sorted(app._dppca_offline):
        url = INTERSPHINX_PROJECTS[name][0]
        logger.info(
            "intersphinx: no inventory for %r (%s unreachable and never "
            "fetched): references into it are left unlinked and unchecked.",
            name,
            url,
        )
        # Forget the empty inventory, so that the next build fetches again.
        inventories.cache.pop(url, None)


def _unlink_offline_reference(app, env, node, contnode):
    """Resolve a reference into a project whose inventory is missing as plain text."""
    offline = getattr(app, "_dppca_offline", ())
    if not offline:
        return None
    target = node.get("reftarget", "")
    prefix, colon, _ = target.partition(":")
    if colon and prefix in offline:  # explicit inventory: ``python:float``
        text = contnode.astext()
        if not text.startswith(f"{prefix}:"):
            return contnode
        plain = contnode.deepcopy()
        plain.children = []
        plain += nodes.Text(text[len(prefix) + 1 :])
        return plain
    if node.get("refdomain") == "py":
        top = target.lstrip("~.").split(".")[0]
        if any(top in INTERSPHINX_PROJECTS[name][1] for name in offline):
            return contnode
    return None


def setup(app):
    # Before intersphinx validates the mapping (priority 800) ...
    app.connect("config-inited", _add_inventory_fallbacks, priority=400)
    # ... and after it loads the inventories (priority 500).
    app.connect("builder-inited", _note_offline_projects, priority=900)
    # After intersphinx and the domains have tried to resolve it (priority 500).
    app.connect("missing-reference", _unlink_offline_reference, priority=900)
    app.connect("autodoc-skip-member", _skip_sklearn_members)
    # Before numpydoc parses the docstrings (priority 500).
    app.connect("autodoc-process-docstring", _escape_type_underscores, priority=100)
