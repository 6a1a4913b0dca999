"""What a run writes besides the store: result files (`sinks`: JSONL rows with evidence,
CSV and Parquet tables), the README's metric table (`catalogue`) and the validity cards
(`validity_cards`)."""
