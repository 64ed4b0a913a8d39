"""Inputs: the typed, frozen :class:`~inferlab.inputs.deployment.Deployment` and
:class:`~inferlab.inputs.workload.Workload` that every entry point parses into.

The package sits above specs, core, techniques and engines and below phases, serving,
planning, validation and the CLI; its modules are imported by name (nothing here), so
that importing the workload does not load the deployment's specs.
"""
