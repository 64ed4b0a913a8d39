"""Serving under load: an in-flight-batching engine simulated request by request."""
