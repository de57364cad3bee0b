"""Order of the examples in the gallery (sphinx-gallery ``within_subsection_order``).

A module, not a class in ``conf.py``, so that the configuration stays
picklable (Sphinx caches it between builds).
"""

import os

from sphinx_gallery.sorting import FileNameSortKey

ORDER = (
    "plot_quick_start.py",
    "plot_privacy_utility.py",
    "plot_grid_search_budget.py",
    "plot_coherent_power.py",
)


class ExampleOrder(FileNameSortKey):
    """The examples in ``ORDER`` first, in that order, then the others by name."""

    def __call__(self, filename):
        name = os.path.basename(str(filename))
        rank = ORDER.index(name) if name in ORDER else len(ORDER)
        return f"{rank:03d}{name}"
