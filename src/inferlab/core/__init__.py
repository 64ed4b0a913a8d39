"""The roofline core: op graph of one step, op timing, phases, memory and cost."""
