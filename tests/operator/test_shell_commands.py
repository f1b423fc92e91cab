"""``register.py ssh|exec|cp`` over real SSH into real leases: embedded backend and Docker."""

from __future__ import annotations

import pytest
from shellflow import exec_cp_ssh_journey, host_key_mismatch_journey


def test_exec_cp_and_ssh_reach_an_embedded_lease(subnet, tmp_path):
    exec_cp_ssh_journey(subnet, tmp_path)


def test_a_lease_with_another_host_key_gets_no_command_or_file(subnet, tmp_path):
    host_key_mismatch_journey(subnet, tmp_path)


@pytest.mark.docker
def test_exec_cp_and_ssh_reach_a_docker_lease(docker_subnet, tmp_path):
    exec_cp_ssh_journey(docker_subnet, tmp_path)


@pytest.mark.docker
def test_a_docker_lease_with_another_host_key_gets_no_command_or_file(docker_subnet, tmp_path):
    host_key_mismatch_journey(docker_subnet, tmp_path)
