"""ns-3 side of bench/ns3_tcp_dumbbell.py: TCP dumbbells in ns-3 3.44, results as JSON.

Runs under the ns-3 venv's python (bench/.venv-ns3, PyPI ``ns3`` 3.44), not latnet's:

    bench/.venv-ns3/bin/python bench/ns3_tcp_driver.py '<json list of configs>'

Each config (written by ns3_tcp_dumbbell.py) describes one dumbbell: ``n`` BulkSend flows
from left hosts to right hosts, ``access_rate`` / ``access_delay`` links to two routers joined
by a ``rate`` / ``delay`` bottleneck; ``cc`` (an ns-3 TCP type), ``ecn``, ``queue``
(``fifo`` or ``red-step`` with ``limit`` and ``k`` packets), ``sim_s``, ``starts_s``,
``measure`` (hook retransmission and sojourn-time traces) or not (a bare run for
timing, like the reference script with its 100-packet device queue). Prints one JSON object
per config on its own line, prefixed ``RESULT ``: per-flow bytes received, retransmissions,
bottleneck drops, sojourn-time samples summary, events, and the CPU and wall time of
``Simulator::Run`` alone (the import of ns-3 is timed apart).
"""

import json
import sys
import time

T0 = time.perf_counter()
import cppyy  # noqa: E402  (ns-3's python bindings are cppyy; used for C++ trace sinks)
from ns import ns  # noqa: E402  (timed: the import alone takes 10-17 s)

IMPORT_S = time.perf_counter() - T0

# Trace sinks in C++ (a python callback per packet would dominate the run time).
cppyy.cppdef(
    r"""
#include "ns3/core-module.h"
#include "ns3/network-module.h"
#include "ns3/internet-module.h"
#include "ns3/applications-module.h"
#include "ns3/traffic-control-module.h"
#include <vector>
#include <map>
namespace latnet_bench {
std::map<const ns3::TcpSocketBase*, uint64_t> g_retx;
std::vector<int64_t> g_sojourn_ns;
void OnRetx(ns3::Ptr<const ns3::Packet>, const ns3::TcpHeader&, const ns3::Address&,
            const ns3::Address&, ns3::Ptr<const ns3::TcpSocketBase> s) {
  g_retx[ns3::PeekPointer(s)]++;
}
void OnSojourn(ns3::Time t) { g_sojourn_ns.push_back(t.GetNanoSeconds()); }
void HookSocket(ns3::Ptr<ns3::Application> app) {
  ns3::Ptr<ns3::BulkSendApplication> b = ns3::DynamicCast<ns3::BulkSendApplication>(app);
  ns3::Ptr<ns3::Socket> s = b->GetSocket();
  if (s) { s->TraceConnectWithoutContext("Retransmission", ns3::MakeCallback(&OnRetx)); }
}
void HookLater(ns3::Ptr<ns3::Application> app, double at) {
  ns3::Simulator::Schedule(ns3::Seconds(at), &HookSocket, app);
}
uint64_t Retx(ns3::Ptr<ns3::Application> app) {
  ns3::Ptr<ns3::BulkSendApplication> b = ns3::DynamicCast<ns3::BulkSendApplication>(app);
  ns3::Ptr<ns3::Socket> s = b->GetSocket();
  if (!s) return 0;
  auto it = g_retx.find(ns3::DynamicCast<ns3::TcpSocketBase>(s).operator->());
  return it == g_retx.end() ? 0 : it->second;
}
void HookSojourn(ns3::Ptr<ns3::QueueDisc> q) {
  q->TraceConnectWithoutContext("SojournTime", ns3::MakeCallback(&OnSojourn));
}
void Reset() { g_retx.clear(); g_sojourn_ns.clear(); }
// --trace: flow 0's received bytes every 100 ms, its cwnd and its retransmission times
std::vector<std::pair<double, uint64_t>> g_rx;
std::vector<std::pair<double, uint32_t>> g_cwnd;
std::vector<double> g_retx_t;
void OnCwnd(uint32_t, uint32_t n) { g_cwnd.push_back({ns3::Simulator::Now().GetSeconds(), n}); }
void OnRetxT(ns3::Ptr<const ns3::Packet>, const ns3::TcpHeader&, const ns3::Address&,
             const ns3::Address&, ns3::Ptr<const ns3::TcpSocketBase>) {
  g_retx_t.push_back(ns3::Simulator::Now().GetSeconds());
}
void TraceSocket(ns3::Ptr<ns3::Application> app) {
  ns3::Ptr<ns3::Socket> s = ns3::DynamicCast<ns3::BulkSendApplication>(app)->GetSocket();
  if (!s) return;
  s->TraceConnectWithoutContext("CongestionWindow", ns3::MakeCallback(&OnCwnd));
  s->TraceConnectWithoutContext("Retransmission", ns3::MakeCallback(&OnRetxT));
}
void SampleRx(ns3::Ptr<ns3::Application> sink) {
  g_rx.push_back({ns3::Simulator::Now().GetSeconds(),
                  ns3::DynamicCast<ns3::PacketSink>(sink)->GetTotalRx()});
  ns3::Simulator::Schedule(ns3::Seconds(0.1), &SampleRx, sink);
}
void TraceLater(ns3::Ptr<ns3::Application> app, ns3::Ptr<ns3::Application> sink, double at) {
  ns3::Simulator::Schedule(ns3::Seconds(at), &TraceSocket, app);
  ns3::Simulator::Schedule(ns3::Seconds(0.1), &SampleRx, sink);
}
void ResetTrace() { g_rx.clear(); g_cwnd.clear(); g_retx_t.clear(); }
}
"""
)
LB = cppyy.gbl.latnet_bench


def percentile(sorted_vals: list, q: float) -> float | None:
    if not sorted_vals:
        return None
    i = min(len(sorted_vals) - 1, max(0, int(round(q * (len(sorted_vals) - 1)))))
    return sorted_vals[i]


def run(cfg: dict) -> dict:
    t_setup = time.perf_counter()
    LB.Reset()
    n = cfg["n"]
    ns.Config.SetDefault("ns3::TcpL4Protocol::SocketType", ns.StringValue("ns3::" + cfg["cc"]))
    ns.Config.SetDefault("ns3::TcpSocket::SegmentSize", ns.UintegerValue(1448))
    ns.Config.SetDefault("ns3::TcpSocket::SndBufSize", ns.UintegerValue(4 << 20))
    ns.Config.SetDefault("ns3::TcpSocket::RcvBufSize", ns.UintegerValue(4 << 20))
    ns.Config.SetDefault("ns3::TcpSocket::InitialCwnd", ns.UintegerValue(10))
    ns.Config.SetDefault("ns3::TcpSocket::DelAckCount", ns.UintegerValue(2))
    ns.Config.SetDefault("ns3::TcpCubic::HyStart", ns.BooleanValue(False))
    ns.Config.SetDefault(
        "ns3::TcpSocketBase::UseEcn", ns.StringValue("On" if cfg["ecn"] else "Off")
    )
    ns.Config.SetDefault(
        "ns3::TcpSocketState::EnablePacing", ns.BooleanValue(cfg["cc"] == "TcpBbr")
    )

    left = ns.NodeContainer()
    left.Create(n)
    right = ns.NodeContainer()
    right.Create(n)
    routers = ns.NodeContainer()
    routers.Create(2)
    stack = ns.InternetStackHelper()
    stack.Install(left)
    stack.Install(right)
    stack.Install(routers)

    access = ns.PointToPointHelper()
    access.SetDeviceAttribute("DataRate", ns.StringValue(cfg["access_rate"]))
    access.SetChannelAttribute("Delay", ns.StringValue(cfg["access_delay"]))
    bott = ns.PointToPointHelper()
    bott.SetDeviceAttribute("DataRate", ns.StringValue(cfg["rate"]))
    bott.SetChannelAttribute("Delay", ns.StringValue(cfg["delay"]))
    q = cfg["queue"]
    measure = cfg["measure"]
    # Measured runs: the queue is a queue disc over a 1-packet device queue (so its sojourn
    # time is traced); timing runs: the reference script's 100-packet device DropTail.
    dev_q = "1p" if measure or q["kind"] != "fifo" else f"{q['limit']}p"
    bott.SetQueue("ns3::DropTailQueue<Packet>", "MaxSize", ns.QueueSizeValue(ns.QueueSize(dev_q)))

    addr = ns.Ipv4AddressHelper()
    tch_none = ns.TrafficControlHelper()
    bdev = bott.Install(routers.Get(0), routers.Get(1))
    addr.SetBase(ns.Ipv4Address("10.255.0.0"), ns.Ipv4Mask("255.255.255.0"))
    addr.Assign(bdev)
    # Ipv4AddressHelper.Assign installs FqCoDel on every device: remove it everywhere.
    tch_none.Uninstall(bdev)
    qdisc = None
    if dev_q == "1p":
        tch = ns.TrafficControlHelper()
        if q["kind"] == "fifo":
            tch.SetRootQueueDisc(
                "ns3::FifoQueueDisc", "MaxSize", ns.QueueSizeValue(ns.QueueSize(f"{q['limit']}p"))
            )
        else:
            # Step marking at K packets: RED with QW = 1 (instantaneous queue), MinTh = K - 1,
            # MaxTh = K and Gentle off (avg >= K: forced mark; gentle RED would ramp the
            # probability from 1/LInterm up to 1 between K and 2K), marking, not dropping.
            tch.SetRootQueueDisc(
                "ns3::RedQueueDisc",
                "MaxSize",
                ns.QueueSizeValue(ns.QueueSize(f"{q['limit']}p")),
                "Gentle",
                ns.BooleanValue(False),
                "UseEcn",
                ns.BooleanValue(True),
                "UseHardDrop",
                ns.BooleanValue(False),
                "QW",
                ns.DoubleValue(1.0),
                "MinTh",
                ns.DoubleValue(q["k"] - 1),
                "MaxTh",
                ns.DoubleValue(q["k"]),
            )
        qdiscs = tch.Install(bdev.Get(0))
        qdisc = qdiscs.Get(0)
    right_ifs = []
    for i in range(n):
        d = access.Install(left.Get(i), routers.Get(0))
        addr.SetBase(ns.Ipv4Address(f"10.1.{i}.0"), ns.Ipv4Mask("255.255.255.0"))
        addr.Assign(d)
        tch_none.Uninstall(d)
        d = access.Install(right.Get(i), routers.Get(1))
        addr.SetBase(ns.Ipv4Address(f"10.2.{i}.0"), ns.Ipv4Mask("255.255.255.0"))
        right_ifs.append(addr.Assign(d))
        tch_none.Uninstall(d)
    ns.Ipv4GlobalRoutingHelper.PopulateRoutingTables()

    port = 5000
    sim_s = cfg["sim_s"]
    apps, sinks = [], []
    for i in range(n):
        dst = ns.InetSocketAddress(right_ifs[i].GetAddress(0), port).ConvertTo()
        bs = ns.BulkSendHelper("ns3::TcpSocketFactory", dst)
        bs.SetAttribute("MaxBytes", ns.UintegerValue(0))
        a = bs.Install(left.Get(i))
        start = cfg["starts_s"][i]
        a.Start(ns.Seconds(start))
        a.Stop(ns.Seconds(sim_s))
        apps.append(a.Get(0))
        sh = ns.PacketSinkHelper(
            "ns3::TcpSocketFactory",
            ns.InetSocketAddress(ns.Ipv4Address.GetAny(), port).ConvertTo(),
        )
        s = sh.Install(right.Get(i))
        s.Start(ns.Seconds(0.0))
        s.Stop(ns.Seconds(sim_s))
        sinks.append(s.Get(0))
        if measure:
            LB.HookLater(a.Get(0), start + 1e-6)
    if measure and qdisc is not None:
        LB.HookSojourn(qdisc)
    if cfg.get("trace"):
        LB.ResetTrace()
        LB.TraceLater(apps[0], sinks[0], cfg["starts_s"][0] + 2e-6)

    ns.Simulator.Stop(ns.Seconds(sim_s))
    setup_s = time.perf_counter() - t_setup
    w0, c0 = time.perf_counter(), time.process_time()
    ns.Simulator.Run()
    run_wall, run_cpu = time.perf_counter() - w0, time.process_time() - c0
    events = ns.Simulator.GetEventCount()

    rx = [ns.DynamicCast[ns.PacketSink](s).GetTotalRx() for s in sinks]
    retx = [int(LB.Retx(a)) for a in apps] if measure else None
    drops = None
    if qdisc is not None:
        st = qdisc.GetStats()
        drops = int(st.nTotalDroppedPackets)
        marks = int(st.nTotalMarkedPackets)
    else:
        marks = None
    soj = sorted(int(v) for v in LB.g_sojourn_ns) if measure else []
    trace = None
    if cfg.get("trace"):
        cw = [(p.first, int(p.second)) for p in LB.g_cwnd]
        rt = [float(t) for t in LB.g_retx_t]
        trace, prev, k = [], 0, 0
        for p in LB.g_rx:
            t, rxb = float(p.first), int(p.second)
            while k + 1 < len(cw) and cw[k + 1][0] <= t:
                k += 1
            trace.append(
                {
                    "t_s": round(t, 3),
                    "goodput_mbps": (rxb - prev) * 8 / 0.1 / 1e6,
                    "cwnd": cw[k][1] if cw and cw[0][0] <= t else 0,
                    "retransmits": sum(1 for x in rt if t - 0.1 < x <= t),
                }
            )
            prev = rxb
    ns.Simulator.Destroy()
    return {
        "trace": trace,
        "name": cfg["name"],
        "rx_bytes": [int(v) for v in rx],
        "retransmits": retx,
        "bottleneck_drops": drops,
        "ce_marks": marks,
        "sojourn_ns": {
            "count": len(soj),
            "p50": percentile(soj, 0.5),
            "p90": percentile(soj, 0.9),
            "p99": percentile(soj, 0.99),
        },
        "events": int(events),
        "setup_s": setup_s,
        "run_wall_s": run_wall,
        "run_cpu_s": run_cpu,
        "import_s": IMPORT_S,
    }


def main() -> None:
    for cfg in json.loads(sys.argv[1]):
        print("RESULT " + json.dumps(run(cfg)), flush=True)


if __name__ == "__main__":
    main()
