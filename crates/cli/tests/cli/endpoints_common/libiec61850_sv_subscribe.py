#!/usr/bin/env python3
"""Receive SV frames with libiec61850's own SVSubscriber (through the
pyiec61850-ng bindings, which ship the compiled C library), filtering on one
APPID as a relay configured for one stream does: the frames are decoded by
another IEC 61850 stack, not by hoptrace.

Usage: libiec61850_sv_subscribe.py IFACE APPID SECONDS
Prints "ready" once listening, then after SECONDS one JSON document:
{"messages": N, "streams": {"SVID": {"count": n, "conf_rev": [...],
"smp_cnt_first": a, "smp_cnt_last": b}}} (the bindings do not fill the
message's APPID: the filter shows in which svIDs arrive).
"""
import json
import os
import socket
import sys
import threading
import time

from pyiec61850.sv import SVSubscriber

iface, app_id, seconds = sys.argv[1], int(sys.argv[2], 0), float(sys.argv[3])
lock = threading.Lock()
streams = {}


def on_message(msg):
    key = msg.sv_id
    with lock:
        s = streams.setdefault(
            key, {"count": 0, "conf_rev": [], "smp_cnt_first": msg.smp_cnt}
        )
        s["count"] += 1
        if msg.conf_rev not in s["conf_rev"]:
            s["conf_rev"].append(msg.conf_rev)
        s["smp_cnt_last"] = msg.smp_cnt


def own_packet_socket_bound_to(ifindex):
    """True once this process holds an AF_PACKET socket bound to ifindex:
    /proc/net/packet (this namespace's packet sockets) lists each socket's
    interface and inode, /proc/self/fd names the inodes this process owns."""
    owned = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            owned.add(target[len("socket:["):-1])
    with open("/proc/net/packet") as f:
        next(f)
        for line in f:
            cols = line.split()
            if int(cols[4]) == ifindex and cols[8] in owned:
                return True
    return False


sub = SVSubscriber(iface)
sub.set_app_id(app_id)
sub.set_listener(on_message)
sub.start()
# The receiver's thread opens and binds its socket after start() returns:
# "ready" waits for that socket, not for a guessed time.
ifindex = socket.if_nametoindex(iface)
deadline = time.monotonic() + 20
while not own_packet_socket_bound_to(ifindex):
    if time.monotonic() > deadline:
        sys.exit(f"libiec61850 opened no packet socket on {iface} within 20 s")
    time.sleep(0.01)
print("ready", flush=True)
time.sleep(seconds)
sub.stop()
with lock:
    print(json.dumps({"messages": sum(s["count"] for s in streams.values()), "streams": streams}))
