"""The widgets the screens are made of: each draws the state it is handed and holds no sampling logic.

Their styles are in `widgets.tcss` (the app loads it): colours of their parts come from the
`$mh-*` theme variables (`palette.py`) through component classes.
"""
