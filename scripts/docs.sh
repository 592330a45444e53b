#!/usr/bin/env bash
# Builds the documentation site (Sphinx with MyST, docs/conf.py) from README.md, docs/*.md and
# dags_examples/README.md into build/docs, strict: any warning (a broken link or anchor, a page missing
# from docs/index.md's navigation) fails it. Reads nothing from the network. Run by scripts/test.sh;
# needs the .venv that scripts/setup.sh makes.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${DOCS_OUT:-build/docs}
.venv/bin/python -m sphinx -E -W --keep-going -q -c docs -b html . "$out"
# The site's home is docs/index.html (pages keep their repository paths); the folder's index leads there.
echo '<!doctype html><meta http-equiv="refresh" content="0; url=docs/index.html">' >"$out/index.html"
echo "docs: $out/index.html"
