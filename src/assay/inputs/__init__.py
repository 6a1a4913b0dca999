"""Reading datasets into samples: file formats (`formats`: JSONL, CSV, JSON; `parquet`;
`otlp`: OpenTelemetry trace exports), records into validated samples (`records`), local
files and URLs cut into pieces (`locations`), the one entry point (`read.read_samples`),
and traces recorded in-process (`tracing`).

What the readers accept, and what they reject, is in `assay.inputs.records`."""
