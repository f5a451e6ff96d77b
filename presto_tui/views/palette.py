"""The app's colours for MH classes and the realized path, as theme variables (no Textual here).

Two encodings must survive everywhere a node is drawn: its class (foreground
colour and symbol) and whether it lies on the realized path (a background
band and the ▶ marker); selection is a third, separate channel (a cursor in
the gutter, bold and underline).  None of them overwrites another.

The class colours follow Okabe and Ito's palette, chosen to stay distinct
under red-green colour blindness: accept is blue, reject vermillion,
uncertain yellow, deferred reddish purple.  Each has a lighter variant for
dark themes and a darker one for light themes (contrast of at least about
4.5:1 on the theme's surface), and the path band is a neutral tint of the
foreground, so it never shifts a class colour's hue.

`PrestoApp.get_theme_variable_defaults` publishes these as `$mh-*` CSS
variables; the style sheets (widgets/widgets.tcss, screens/screens.tcss, dialogs/dialogs.tcss)
refer to them.
"""

from __future__ import annotations

# name -> (on dark themes, on light themes)
COLOURS: dict[str, tuple[str, str]] = {
    "mh-accept": ("#56B4E9", "#0061A0"),
    "mh-reject": ("#FF8C5A", "#B2420A"),
    "mh-uncertain": ("#F0E442", "#7A6200"),
    "mh-deferred": ("#E08BC0", "#9E3D7A"),
    "mh-live": ("#7FD8C4", "#00735A"),
    "mh-path": ("#FFFFFF 12%", "#000000 10%"),  # a neutral band: keeps every class colour's hue
    "mh-cursor": ("#FFFFFF", "#000000"),
}


def theme_variables(dark: bool) -> dict[str, str]:
    return {name: pair[0 if dark else 1] for name, pair in COLOURS.items()}
