"""The app's full screens.

`round.py` is the round view the chat (`chat.py`) and the replay (`replay.py`) share, which holds
two parts for its tree pane: `tree_mode.py` and `baseline_mode.py`.  The screens it opens take the
data they show, never the screen that opens them: the overview, the chains of a prompt, two
sessions compared, a node's ratio per token, a chain's history.  Their styles are in `screens.tcss`.
"""
