#!/usr/bin/python3
"""Lift QEMU's I/O throttle on one drive through the QMP socket.

    qmp-unthrottle.py SOCKET DRIVE

The lab throttles the "USB stick" only while a scenario measures; lifting
it afterwards lets writeback drain in seconds so the guest shuts down
cleanly instead of waiting minutes on a 4 MB/s disk.
"""
import json
import socket
import sys


def qmp_command(sock_file, execute, arguments=None):
    msg = {"execute": execute}
    if arguments is not None:
        msg["arguments"] = arguments
    sock_file.write(json.dumps(msg) + "\n")
    sock_file.flush()
    while True:
        reply = json.loads(sock_file.readline())
        if "return" in reply:
            return reply["return"]
        if "error" in reply:
            raise RuntimeError(f"{execute}: {reply['error'].get('desc')}")
        # anything else is an asynchronous event: skip it


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    path, drive = sys.argv[1:]
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(10)
        s.connect(path)
        f = s.makefile("rw")
        json.loads(f.readline())  # greeting
        qmp_command(f, "qmp_capabilities")
        limits = {k: 0 for k in ("bps", "bps_rd", "bps_wr",
                                 "iops", "iops_rd", "iops_wr")}
        qmp_command(f, "block_set_io_throttle", {"device": drive, **limits})
    return 0


if __name__ == "__main__":
    sys.exit(main())
