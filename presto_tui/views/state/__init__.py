"""What the app shows and everything computed from it, without Textual (an import-linter contract).

The reducer (`reducer.py`: `AppState` folds the events of live sessions and of traces alike, with
`baseline.py` for the baselines' sessions), the layout of a round's tree, the overview's series,
search, a chain's history, a node's ratio per token and in named terms, two sessions compared, the
text of a chain as it evolved, the words of a baseline's panels, and the exports.  Screens and
widgets draw these; tests check them without an app.
"""
