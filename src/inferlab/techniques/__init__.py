"""Techniques: each a transformation of the op graph (or of the step model)."""
