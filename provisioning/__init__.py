"""Provisioning sender hosts: run the Ansible playbook, verify slot source binding over SSH, the probe endpoint."""
