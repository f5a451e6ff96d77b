"""lm-evaluation-harness drives presto-tui.

`presto_tui.lmeval.model` holds `PrestoLM`, an lm-eval model registered as
"presto-tui" when that module is imported: its `generate_until` runs every
request of an evaluation as a chain of one method (PowerMH with a PreSTO rule,
a baseline, ...) on one engine.  `presto-tui lm-eval` runs lm-eval tasks
through it for several methods and prints lm-eval's own table for each;
`python -m presto_tui.lmeval` is lm-eval's own command line with the model
registered.  This package needs the optional extra `lmeval` (lm-eval itself);
only `model` and `__main__` import it.
"""
