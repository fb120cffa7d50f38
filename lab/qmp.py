#!/usr/bin/python3
"""Talk to a running lab guest's QEMU through its QMP socket.

    qmp.py throttle SOCKET DRIVE BPS_WRITE   set a drive's write throttle
                                             (0 lifts it)
    qmp.py pcs SOCKET SYSTEM_MAP SAMPLES MS  sample every vCPU's program
                                             counter SAMPLES times, MS apart
    qmp.py nmi SOCKET                        inject an NMI into every vCPU
    qmp.py reset SOCKET                      reset the machine (-no-reboot:
                                             QEMU exits); for tests

throttle: the "USB stick" boots unthrottled and the guest asks for the
throttle only while it measures: laying out files at full speed first and
draining writeback at full speed afterwards turns minutes on a 4 MB/s
disk into seconds.

pcs and nmi: a guest that went silent cannot be asked anything through
its agent.  pcs reads the vCPUs' registers from QEMU itself (HMP "info
registers -a") and prints, per vCPU, how often it was idle (HLT), in user
space, or in each kernel function (SYSTEM_MAP): a livelock shows as the
reclaim or lock function a CPU never leaves.  nmi then reaches the kernel
even on a CPU spinning with interrupts off; the lab boots with
unknown_nmi_panic and panic_print (run-scenario.sh), so the NMI turns a
hang into a panic that prints every task and the memory state.
"""
import bisect
import collections
import json
import re
import socket
import sys
import time


class Qmp:
    """One QMP session; command() returns a command's "return" value."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(10)
        try:
            self.sock.connect(path)
        except OSError:
            self.sock.close()
            raise
        self.file = self.sock.makefile("rw")
        json.loads(self.file.readline())  # greeting
        self.command("qmp_capabilities")

    def command(self, execute, arguments=None):
        msg = {"execute": execute}
        if arguments is not None:
            msg["arguments"] = arguments
        self.file.write(json.dumps(msg) + "\n")
        self.file.flush()
        while True:
            line = self.file.readline()
            if not line:
                raise RuntimeError(f"{execute}: QEMU closed the socket")
            reply = json.loads(line)
            if "return" in reply:
                return reply["return"]
            if "error" in reply:
                raise RuntimeError(f"{execute}: {reply['error'].get('desc')}")
            # anything else is an asynchronous event: skip it

    def close(self):
        self.file.close()
        self.sock.close()


def throttle(q, drive, bps):
    limits = {k: 0 for k in ("bps", "bps_rd", "iops", "iops_rd", "iops_wr")}
    limits["bps_wr"] = int(bps)
    q.command("block_set_io_throttle", {"device": drive, **limits})


# Section bounds in System.map, not functions: an address past a
# section's last function would be named after its end marker.
SECTION_MARKER = re.compile(r"^(_[se]?text|_[se]inittext|__\w+_text_(start|end)"
                            r"|__\w+_thunk_(start|end))$")


def read_kernel_text_symbols(path):
    """Sorted (address, name) of the text symbols in a System.map."""
    syms = []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if (len(parts) >= 3 and parts[1] in "tTwW"
                    and not SECTION_MARKER.match(parts[2])):
                syms.append((int(parts[0], 16), parts[2]))
    if not syms:
        raise ValueError(f"{path}: no text symbols")
    syms.sort()
    return syms


def where(syms, addrs, cpl, rip, halted):
    if halted:
        return "(idle: HLT)"
    if cpl != 0:
        return "(user space)"
    i = bisect.bisect_right(addrs, rip) - 1
    # Past the last function by more than any function's size: not the
    # kernel image (or a kernel relocated by KASLR).
    if i < 0 or (i == len(syms) - 1 and rip - addrs[i] > 1 << 16):
        return f"(0x{rip:x})"
    return syms[i][1]


CPU_STATE = re.compile(r"CPU#(\d+)|RIP=([0-9a-f]+) .*?CPL=(\d) .*?HLT=(\d)")


def sample_pcs(q, syms, samples, interval_ms):
    """Counter of (cpu, where) over samples of HMP "info registers -a"."""
    addrs = [a for a, _ in syms]
    seen = collections.Counter()
    for n in range(samples):
        if n:
            time.sleep(interval_ms / 1000)
        out = q.command("human-monitor-command",
                        {"command-line": "info registers -a"})
        cpu = None
        for m in CPU_STATE.finditer(out):
            if m.group(1) is not None:
                cpu = int(m.group(1))
            elif cpu is not None:
                seen[cpu, where(syms, addrs, int(m.group(3)),
                                int(m.group(2), 16), m.group(4) == "1")] += 1
    return seen


def print_pcs(seen, samples):
    print(f"# vCPU program counters, {samples} samples: cpu count where")
    for (cpu, place), count in sorted(seen.items(),
                                      key=lambda kv: (kv[0][0], -kv[1])):
        print(f"{cpu} {count} {place}")


def main(argv):
    usage = "\n".join(__doc__.splitlines()[2:10])
    cmd = argv[1] if len(argv) > 1 else ""
    shapes = {"throttle": 5, "pcs": 6, "nmi": 3, "reset": 3}
    if shapes.get(cmd) != len(argv):
        print("usage:\n" + usage, file=sys.stderr)
        return 2
    try:
        if cmd == "throttle" and not argv[4].isdigit():
            raise ValueError(f"BPS_WRITE must be a byte count, got {argv[4]!r}")
        if cmd == "pcs":
            if not (argv[4].isdigit() and argv[5].isdigit() and int(argv[4]) > 0):
                raise ValueError("SAMPLES must be a positive count and MS "
                                 f"a count of ms, got {argv[4]!r} {argv[5]!r}")
            syms = read_kernel_text_symbols(argv[3])
    except (OSError, ValueError) as e:
        print(f"qmp.py {cmd}: {e}", file=sys.stderr)
        return 2
    try:
        q = Qmp(argv[2])
        try:
            if cmd == "throttle":
                throttle(q, argv[3], argv[4])
            elif cmd == "pcs":
                print_pcs(sample_pcs(q, syms, int(argv[4]), int(argv[5])),
                          int(argv[4]))
            elif cmd == "nmi":
                q.command("inject-nmi")
            else:
                q.command("system_reset")
        finally:
            q.close()
    except (OSError, RuntimeError, ValueError) as e:
        print(f"qmp.py {cmd}: {argv[2]}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
