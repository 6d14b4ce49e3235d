"""A machine fingerprint from a manifest's environment: stable key, named differences."""

from mhabench.results.fingerprint import Fingerprint

ENVIRONMENT = {
    "device_name": "NVIDIA H100 80GB HBM3",
    "driver_version": "580.159.04",
    "torch": "2.11.0+cu130",
    "cuda": "13.0",
    "cudnn": 91900,
    "cpu_model": "Intel Xeon",
    "threads": 16,
    "git_commit": "abc",  # not part of the fingerprint: the code under test, not the machine
}


def test_key_ignores_the_code_and_follows_the_machine() -> None:
    same = Fingerprint.of({**ENVIRONMENT, "git_commit": "def"})
    assert Fingerprint.of(ENVIRONMENT).key == same.key
    upgraded = Fingerprint.of({**ENVIRONMENT, "torch": "2.13.0+cu130"})
    assert upgraded.key != same.key
    assert same.differences(upgraded) == {"torch": ("2.11.0+cu130", "2.13.0+cu130")}


def test_missing_fields_are_none_and_left_out_of_the_description() -> None:
    cpu = Fingerprint.of({"torch": "2.13.0+cpu", "cpu_model": "AMD EPYC", "threads": 2})
    assert cpu.device_name is None and cpu.cudnn is None
    assert cpu.describe() == "torch 2.13.0+cpu, cpu_model AMD EPYC, threads 2"
