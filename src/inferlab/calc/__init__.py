"""The unit-checked calculator behind ``inferlab calc``: :mod:`.syntax` parses an expression
into a :mod:`.tree`, :mod:`.evaluator` evaluates it against the unit registry and the catalog."""
