"""The `deltamerge` command: inspect a dataset's loads, state, table histories and schemas, and load
once from the shell. It sits at the edge beside the operators: it imports the loading core, nothing
imports it, and it never imports Airflow.

- `parser`: the command line (argparse only, so that ``--help`` is fast)
- `commands`: what each command does, returning JSON-ready data
- `dataset`: a dataset's tables as the read commands read them (delta-rs, no Spark)
- `render`: the tables `rich` draws, or JSON
"""
