"""Capacity planning: which configuration serves a traffic within its SLOs at the lowest cost."""
