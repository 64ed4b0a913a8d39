"""The ``inferlab`` command line."""
