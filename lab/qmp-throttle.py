#!/usr/bin/python3
"""Set QEMU's write throttle on one drive through the QMP socket.

    qmp-throttle.py SOCKET DRIVE BPS_WRITE      (0 lifts the throttle)

The "USB stick" boots unthrottled and the guest asks for the throttle
only while it measures: laying out files at full speed first and
draining writeback at full speed afterwards turns minutes on a 4 MB/s
disk into seconds.
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
    usage = __doc__.strip().splitlines()[2].strip()
    if len(sys.argv) != 4:
        print("usage: " + usage, file=sys.stderr)
        return 2
    path, drive, bps = sys.argv[1:]
    if not bps.isdigit():
        print(f"qmp-throttle: BPS_WRITE must be a byte count, got {bps!r}",
              file=sys.stderr)
        return 2
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(10)
        s.connect(path)
        f = s.makefile("rw")
        json.loads(f.readline())  # greeting
        qmp_command(f, "qmp_capabilities")
        limits = {k: 0 for k in ("bps", "bps_rd", "iops", "iops_rd", "iops_wr")}
        limits["bps_wr"] = int(bps)
        qmp_command(f, "block_set_io_throttle", {"device": drive, **limits})
    return 0


if __name__ == "__main__":
    sys.exit(main())
