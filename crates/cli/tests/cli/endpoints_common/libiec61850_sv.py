#!/usr/bin/env python3
"""Publish SV frames with libiec61850's own SVPublisher (through the
pyiec61850-ng bindings, which ship the compiled C library): the frames are
encoded by another IEC 61850 stack, not by hoptrace.

Usage: libiec61850_sv.py IFACE COUNT SVID APPID
"""
import sys
import time

from pyiec61850.sv import SVPublisher

iface, count, sv_id, app_id = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4], 0)
with SVPublisher(iface) as pub:
    pub.set_sv_id(sv_id)
    pub.set_app_id(app_id)
    pub.set_smp_rate(4000)
    pub.start()
    for n in range(count):
        # 8 INT32 values (4 currents, 4 voltages) like a 9-2LE merging unit.
        pub.publish_samples([n, -n, 2 * n, -2 * n, 1000 + n, 2000 + n, 3000 + n, 4000 + n])
        time.sleep(0.0005)
print(f"published {count} samples of {sv_id} with libiec61850 on {iface}")
