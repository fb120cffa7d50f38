"""lab/qmp.py against a fake QMP server on a Unix socket: the commands it
sends, and its refusals of bad input before it connects."""
import json
import os
import socket
import subprocess
import threading

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
QMP = os.path.join(ROOT, "lab", "qmp.py")


class FakeQmp:
    """Answers every command with {"return": {}}, or with an error for
    the command named in fail, and records what it was sent."""

    def __init__(self, path, fail=None, returns=None):
        self.received = []
        self.fail = fail
        self.returns = returns or {}
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen(1)
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        conn, _ = self.sock.accept()
        with conn, conn.makefile("rw") as f:
            f.write(json.dumps({"QMP": {"version": {}}}) + "\n")
            f.flush()
            for line in f:
                msg = json.loads(line)
                self.received.append(msg)
                # An event between commands must be skipped by the client.
                f.write(json.dumps({"event": "X", "data": {}}) + "\n")
                if msg["execute"] == self.fail:
                    f.write(json.dumps({"error": {"desc": "no such device"}}) + "\n")
                else:
                    ret = self.returns.get(msg["execute"], {})
                    f.write(json.dumps({"return": ret}) + "\n")
                f.flush()

    def close(self):
        self.thread.join(timeout=10)
        self.sock.close()


def run(*args):
    return subprocess.run(["/usr/bin/python3", QMP] + list(args),
                          capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize("cmd, execute", [("nmi", "inject-nmi"), ("reset", "system_reset")])
def test_one_command_after_the_handshake(tmp_path, cmd, execute):
    path = str(tmp_path / "qmp.sock")
    server = FakeQmp(path)
    p = run(cmd, path)
    server.close()
    assert p.returncode == 0, p.stderr
    assert server.received == [{"execute": "qmp_capabilities"}, {"execute": execute}]


def test_throttle_sets_only_the_write_rate(tmp_path):
    path = str(tmp_path / "qmp.sock")
    server = FakeQmp(path)
    p = run("throttle", path, "stick", "4194304")
    server.close()
    assert p.returncode == 0, p.stderr
    args = server.received[1]["arguments"]
    assert server.received[1]["execute"] == "block_set_io_throttle"
    assert args["device"] == "stick" and args["bps_wr"] == 4194304
    assert all(args[k] == 0 for k in ("bps", "bps_rd", "iops", "iops_rd", "iops_wr"))


def test_a_qmp_error_fails_with_the_socket_and_the_reason(tmp_path):
    path = str(tmp_path / "qmp.sock")
    server = FakeQmp(path, fail="block_set_io_throttle")
    p = run("throttle", path, "stick", "0")
    server.close()
    assert p.returncode == 1
    assert path in p.stderr and "no such device" in p.stderr


def test_bad_input_is_refused_before_connecting(tmp_path):
    missing = str(tmp_path / "none.sock")
    for args in (["nmi", missing, "extra"], ["throttle", missing, "stick", "4M"],
                 ["throttle", missing, "stick"], ["reset", missing, "extra"], ["bogus", missing],
                 ["pcs", missing, "/nonexistent/System.map", "3", "1"],
                 ["pcs", missing, "/dev/null", "0", "1"]):
        p = run(*args)
        assert p.returncode == 2, args
        assert missing not in p.stderr


def test_a_missing_socket_is_named():
    p = run("nmi", "/nonexistent/qmp.sock")
    assert p.returncode == 1
    assert "/nonexistent/qmp.sock" in p.stderr


# What HMP "info registers -a" prints under TCG, cut to the lines read:
# CPU 0 in a kernel function, CPU 1 halted, CPU 2 in user space, CPU 3
# still in the firmware (a CPU the kernel never started: no RIP line).
REGISTERS = (
    "\r\nCPU#0\r\nRAX=0000000000000000\r\n"
    "RIP=ffffffff81000150 RFL=00000246 [---Z-P-] CPL=0 II=0 A20=1 SMM=0 HLT=0\r\n"
    "CPU#1\r\nRIP=ffffffff81000010 RFL=00000246 [---Z-P-] CPL=0 II=0 A20=1 SMM=0 HLT=1\r\n"
    "CPU#2\r\nRIP=00007f0000001000 RFL=00000246 [---Z-P-] CPL=3 II=0 A20=1 SMM=0 HLT=0\r\n"
    "CPU#3\r\nEAX=000f49f6 EBX=00000000\r\nEIP=0000fff0 CPL=0 HLT=1\r\n")


def test_pcs_counts_where_each_vcpu_was(tmp_path):
    system_map = tmp_path / "System.map"
    system_map.write_text("ffffffff81000000 T _stext\n"
                          "ffffffff81000100 T shrink_folio_list\n"
                          # a section bound, not a function: skipped
                          "ffffffff81000120 T __sched_text_start\n"
                          "ffffffff81000200 t isolate_lru_folios\n"
                          "ffffffff82000000 D some_data\n")
    path = str(tmp_path / "qmp.sock")
    server = FakeQmp(path, returns={"human-monitor-command": REGISTERS})
    p = run("pcs", path, str(system_map), "3", "1")
    server.close()
    assert p.returncode == 0, p.stderr
    assert [m["arguments"]["command-line"] for m in server.received[1:]] == \
        ["info registers -a"] * 3
    lines = p.stdout.splitlines()
    assert lines[0] == "# vCPU program counters, 3 samples: cpu count where"
    assert lines[1:] == ["0 3 shrink_folio_list", "1 3 (idle: HLT)",
                         "2 3 (user space)"]


def test_pcs_refuses_a_map_without_text_symbols(tmp_path):
    system_map = tmp_path / "System.map"
    system_map.write_text("ffffffff82000000 D some_data\n")
    p = run("pcs", str(tmp_path / "qmp.sock"), str(system_map), "3", "1")
    assert p.returncode == 2
    assert "no text symbols" in p.stderr
