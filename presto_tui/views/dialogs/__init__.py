"""Modal dialogs: help, sampler settings, go to a round, export, confirming a quit (`dialogs.tcss`)."""
