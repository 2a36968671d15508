"""Fixtures shared by the test files."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def tls_certs(tmp_path):
    """A CA and a service certificate it signed for 127.0.0.1 and localhost
    (``scripts/tls-certs.sh``): ``(ca, cert, key)`` paths; ``client.crt`` and ``client.key``,
    a client certificate the CA signed, are beside ``ca``."""
    d = tmp_path / "tls"
    r = subprocess.run(
        [str(ROOT / "scripts" / "tls-certs.sh"), str(d)], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    return d / "ca.crt", d / "service.crt", d / "service.key"
