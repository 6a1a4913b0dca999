"""The vocabulary every layer shares: a `Sample` and its steps, a `MetricResult`, the run's
configuration, statistics, redaction of secrets, JSON documents and their output, the
optional extras, HTTP details and the version. It imports nothing else of Assay."""
