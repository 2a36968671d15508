"""Chameleon's admitted set on real packets: `latnet chameleon verify --emulated` runs the
cross-check's scenario (tag-stack source routing, strict-priority queues, token-bucket
senders, best-effort background) in network namespaces through latnet-switch. Needs root."""

from __future__ import annotations

import json
import os

import pandas as pd
import pytest

from latnet.chameleon import STALL_ATTEMPTS
from latnet.cli import main

#: Runs on the machine's clock: `make py-test` runs these tests alone (scripts/py-test.sh).
pytestmark = pytest.mark.realtime

if os.geteuid() != 0:
    pytest.skip("emulation needs root (CI runs it as root)", allow_module_level=True)


def test_admitted_set_on_real_packets_meets_every_deadline(tmp_path, capsys):
    """A k = 4 fat-tree (one server per edge switch: 20 switches, 8 hosts), 12 requests, four
    queues so best-effort background from every host runs under the admitted flows, the
    phase that aligns the first bursts at the most loaded queue, ten times slower than real
    time. Every packet the simulator sends is sent on real packets too (same emission
    instants), each one arrives (a wrong tag would be a `no-route` drop), through the
    switches its path names, within its deadline. A phase the machine stalled (by more than a
    quarter of the tightest deadline) is run again; one still stalled after the attempts has
    its deadlines printed, not judged."""
    out = tmp_path / "verify"
    argv = ["chameleon", "verify", "--k", "4", "--hosts-per-edge", "1", "--queues", "4"]
    argv += ["--tries", "12", "--duration-ms", "30", "--phases", "aligned-0"]
    argv += ["--emulated", "--dilation", "10", "--out", str(out)]
    code = main(argv)
    text = capsys.readouterr().out
    print(text)
    doc = json.loads((out / "verify.json").read_text())
    (sim,) = doc["check"]["phases"]
    (emu,) = doc["emulated"]
    late = emu["attempts"]
    assert 1 <= len(late) <= STALL_ATTEMPTS and emu["stall_ns"] > 0, emu
    assert all(ns > emu["stall_ns"] for ns in late[:-1]), emu
    assert emu["stalled"] == (min(late) > emu["stall_ns"]), emu
    assert code == 0 or emu["stalled"], text
    assert doc["check"]["background_flows"] == 8
    assert sim["sent"] > 100 and emu["sent"] == sim["sent"], (sim, emu)
    assert emu["received"] == emu["sent"] and emu["lost"] == 0, emu
    # every transmission on its embedding's port, and at a switch in its queue
    assert emu["misrouted"] == 0, emu
    if not emu["stalled"]:
        assert emu["deadline_violations"] == 0 and emu["max_e2e_over_deadline"] <= 1.0, emu
    assert "emulated (real packets, 10 times slower" in text
    # the frames took the controller's paths: each admitted flow's hops, switch by switch
    hops = pd.read_csv(out / "aligned-0" / "hops.csv")
    for e in doc["embeddings"]:
        took = hops[hops["flow"] == e["name"]]
        assert not took.empty, e["name"]
        first = took[took["seq"] == took["seq"].min()].sort_values("hop")
        assert list(first["node"]) == e["path"], (e["name"], list(first["node"]), e["path"])


def test_emulated_verify_refuses_bad_arguments_before_building_anything(tmp_path, capsys):
    argv = ["chameleon", "verify", "--k", "4", "--hosts-per-edge", "1", "--tries", "2"]
    assert main([*argv, "--emulated", "--dilation", "0", "--out", str(tmp_path)]) == 2
    assert "--dilation" in capsys.readouterr().err
    assert main([*argv, "--phases", "sideways", "--emulated", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert 'unknown phase "sideways"' in err and "aligned-0" in err
    # without --tries the whole admitted set (hundreds of flows) would be a sender each
    argv = ["chameleon", "verify", "--k", "4", "--phases", "sync", "--emulated"]
    assert main([*argv, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--emulated:" in err and "--tries" in err, err
    assert not any(tmp_path.iterdir())
