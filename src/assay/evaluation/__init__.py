"""A whole evaluation run: `runner.evaluate` resolves the metrics, scores the samples chunk
by chunk (`chunks.score_chunk`, here or on a Ray cluster: `scale`), and summarises and
gates the results (`runner.Evaluation`); `safety_scores` combines metric averages into the
dashboard's indices."""
