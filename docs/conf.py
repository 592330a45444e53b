"""Sphinx settings of the documentation site (scripts/docs.sh builds it, strict): the README is its
overview, docs/*.md its pages, dags_examples/README.md the example DAGs' page, all Markdown read by
MyST as they are on GitHub. The source folder is the repository, so that the README's links into
docs/ and the pages' links back to it resolve as they do there."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = ["README.md", "docs/*.md", "dags_examples/README.md"]

project = "airflow-provider-deltamerge"
root_doc = "docs/index"
extensions = ["myst_parser"]
source_suffix = {".md": "markdown"}
include_patterns = PAGES
# Every other folder of the repository (virtualenvs, build output, the code) is not walked at all.
exclude_patterns = sorted(
    p.name for p in ROOT.iterdir() if p.is_dir() and p.name not in ("docs", "dags_examples")
)

# Headings get GitHub's anchors, so `PAGE.md#a-heading` links work on the site as they do on GitHub;
# a link to an anchor or page that does not exist is a warning, and the build is strict.
myst_heading_anchors = 4
# Code blocks without a language (command output, tables of figures) are shown as they are.
highlight_language = "none"

html_theme = "furo"
html_title = project
html_show_sourcelink = False
html_copy_source = False
