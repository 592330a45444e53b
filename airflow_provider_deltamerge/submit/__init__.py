"""What spark-submit runs: the job that loads a request, and how a process exits."""
