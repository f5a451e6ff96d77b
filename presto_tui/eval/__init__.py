"""Graded evaluation (`presto-tui eval`): tasks, graders, methods, paired statistics and figures.

- `tasks`: a task file (JSONL, one item a line) or the built-in set, generated from a seed;
- `graders`: how an answer is read from a response and judged (exact text, number, multiple
  choice letter, regular expression, Python unit tests);
- `sandbox`: the `python` grader's runs: the code in a program host (`confine`: in bubblewrap
  where it works; `cgroup`: limits for its whole process tree), the tests in a runner it cannot
  reach (`_child`: both processes' code, sent to them, never imported here);
- `methods`: the method language of `--methods` (`lowtemp`, `bon:4`, `powermh+stream`, ...),
  each method a `SamplerParams`;
- `paired`: accuracy intervals and the paper's paired TOST (eq. 23), from statsmodels;
- `runner`: every (item, method) session through the engine loop or Ray, graded as it ends;
- `resume`: the run log a long run writes as sessions finish, and `--resume` from it;
- `report` and `figures`: the tables and the two plots of appendix E.8;
- `frontier` and `frontier_report`: `--frontier`, every method over a range of its budget,
  quality against time, the Pareto fronts and the speedup at equal quality.

Nothing here imports Textual or the views; the sampling runtime never imports this package.
"""
