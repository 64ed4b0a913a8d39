"""Efficiency profiles: how far below datasheet peak real kernels run, fitted to measurements."""
