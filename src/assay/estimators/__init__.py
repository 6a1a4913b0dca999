"""Offline estimators of the judged metrics' questions, used when no judge is configured:
is a sentence supported by its evidence (`offline`), does an answer agree with its
reference (`agreement`). They read embeddings and parses the engine computed, and the
learned heads of `assay.models`."""
