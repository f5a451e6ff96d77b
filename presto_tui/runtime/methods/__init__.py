"""The built-in sampling methods, one module each, every one exporting its `Method` as `METHOD`
(`runtime/core/method.py` says what a method declares; `runtime/core/registry.py` finds them and
the plugins).  `chain.py` is what every MH chain method shares; `samples.py` what the methods that
answer with one of their samples share."""
