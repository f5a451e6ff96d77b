"""lm-eval's own command line with presto-tui's model registered:

    python -m presto_tui.lmeval run --model presto-tui --model_args method=powermh+stream,steps=8 \\
        --tasks my_task --include_path tasks/

(`lm-eval --model presto-tui` alone cannot find the model: lm-eval discovers a model
only by importing the module that registers it, and it has no plug-in entry point.)
"""

from __future__ import annotations

from lm_eval.__main__ import cli_evaluate

import presto_tui.lmeval.model  # noqa: F401  (registers "presto-tui")

if __name__ == "__main__":
    cli_evaluate()
