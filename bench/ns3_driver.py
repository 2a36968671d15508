"""ns-3 side of bench/ns3_cbr_chain.py: one run of the UDP CBR switch chain, results as JSON.

Runs under the ns-3 venv's python (bench/.venv-ns3, PyPI ``ns3`` 3.44), not latnet's:

    bench/.venv-ns3/bin/python bench/ns3_driver.py '<json config>'

The config (written by ns3_cbr_chain.py) has ``switches``, ``flows``, ``sim_ns`` (sending
time), ``drain_ns``, ``rate`` and ``delay`` (ns-3 attribute strings), ``queue_packets``,
``payload`` (UDP payload bytes), ``interval_ns`` and ``start_ns`` (one per flow). Prints one
JSON object on the last line of stdout: delivered packets per flow, executed events and the
import, setup and run wall times (seconds), measured separately.
"""

import json
import sys
import time

T0 = time.perf_counter()
from ns import ns  # noqa: E402  (timed: the import alone takes 10-17 s)

IMPORT_S = time.perf_counter() - T0


def main() -> None:
    cfg = json.loads(sys.argv[1])
    t_setup = time.perf_counter()
    n_sw, n_fl, payload = cfg["switches"], cfg["flows"], cfg["payload"]

    srcs = ns.NodeContainer()
    srcs.Create(n_fl)
    dsts = ns.NodeContainer()
    dsts.Create(n_fl)
    sws = ns.NodeContainer()
    sws.Create(n_sw)
    ns.InternetStackHelper().InstallAll()

    # Every link: point-to-point, same rate and delay, a DropTail device queue on each side.
    p2p = ns.PointToPointHelper()
    p2p.SetDeviceAttribute("DataRate", ns.StringValue(cfg["rate"]))
    p2p.SetChannelAttribute("Delay", ns.StringValue(cfg["delay"]))
    p2p.SetQueue(
        "ns3::DropTailQueue<Packet>",
        "MaxSize",
        ns.QueueSizeValue(ns.QueueSize(f"{cfg['queue_packets']}p")),
    )
    addr = ns.Ipv4AddressHelper()
    tch = ns.TrafficControlHelper()
    subnet = [0]
    qdiscs_left = []

    def link(a, b):
        devs = p2p.Install(a, b)
        k = subnet[0]
        subnet[0] += 1
        addr.SetBase(ns.Ipv4Address(f"10.{k // 256}.{k % 256}.0"), ns.Ipv4Mask("/24"))
        ifs = addr.Assign(devs)
        # Assign installs FqCoDel as root queue disc on both devices: remove it (DropTail only).
        tch.Uninstall(devs)
        for i in range(2):
            dev = devs.Get(i)
            tc = dev.GetNode().GetObject[ns.TrafficControlLayer]()
            if tc.GetRootQueueDiscOnDevice(dev):
                qdiscs_left.append(k)
        return ifs

    for i in range(1, n_sw):
        link(sws.Get(i - 1), sws.Get(i))
    dst_addrs = []
    for f in range(n_fl):
        link(srcs.Get(f), sws.Get(0))
        dst_addrs.append(link(sws.Get(n_sw - 1), dsts.Get(f)).GetAddress(1))
    if qdiscs_left:
        raise SystemExit(f"queue discs still installed on links {qdiscs_left}")
    ns.Ipv4GlobalRoutingHelper.PopulateRoutingTables()

    sim_end = ns.NanoSeconds(cfg["sim_ns"])
    sinks = []
    for f in range(n_fl):
        port = 20000 + f
        dst = ns.InetSocketAddress(dst_addrs[f], port).ConvertTo()
        client = ns.UdpClientHelper(dst)
        client.SetAttribute("MaxPackets", ns.UintegerValue(0))  # unlimited
        client.SetAttribute("Interval", ns.TimeValue(ns.NanoSeconds(cfg["interval_ns"])))
        client.SetAttribute("PacketSize", ns.UintegerValue(payload))
        apps = client.Install(srcs.Get(f))
        apps.Start(ns.NanoSeconds(cfg["start_ns"][f]))
        apps.Stop(sim_end)  # StopApplication is scheduled first: no packet at sim_end itself
        any_port = ns.InetSocketAddress(ns.Ipv4Address.GetAny(), port).ConvertTo()
        sink = ns.PacketSinkHelper("ns3::UdpSocketFactory", any_port).Install(dsts.Get(f))
        sink.Start(ns.Seconds(0))
        sinks.append(sink.Get(0))

    ns.Simulator.Stop(ns.NanoSeconds(cfg["sim_ns"] + cfg["drain_ns"]))
    setup_s = time.perf_counter() - t_setup

    t_run = time.perf_counter()
    c_run = time.process_time()
    ns.Simulator.Run()
    run_s = time.perf_counter() - t_run
    run_cpu_s = time.process_time() - c_run

    events = int(ns.Simulator.GetEventCount())
    rx_bytes = [int(ns.DynamicCast[ns.PacketSink](s).GetTotalRx()) for s in sinks]
    ns.Simulator.Destroy()
    out = {
        "import_s": IMPORT_S,
        "setup_s": setup_s,
        "run_s": run_s,
        "run_cpu_s": run_cpu_s,
        "events": events,
        "delivered": [b // payload for b in rx_bytes],
        "rx_bytes": rx_bytes,
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
