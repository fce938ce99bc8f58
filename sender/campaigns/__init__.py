"""Campaigns: a sequence of steps to an audience of leads, declared in a file (see docs/campaigns.md).

This package holds what needs no service: the campaign file (`spec`), its durations, merge-field templates and
pacing keys, and the leads CSV. The ledger's rules and the CLI build on it.
"""
