"""Engines that generate proposals: synthetic, transformers, vLLM; choosing and starting them."""
