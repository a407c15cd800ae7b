"""A short run of scripts/soak_server.py (2 clients x 10 requests: every kind of request
once per client, good and bad, at once): no crash, no reply mixed between clients or
changed by another client's request, every bad request its status, RSS flat. The full
soak (8 x 100) is docs/results/server_soak.md."""
import json
import os
import subprocess
import unittest

import harness
from harness import path

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "soak_server.py")


class ShortSoak(unittest.TestCase):
    def test_two_clients_ten_requests_each(self):
        report = path("soak.json")
        proc = subprocess.run(["/usr/bin/python3", SCRIPT, "--epq", harness.EPQ, "--workdir", path("soak"), "--clients", "2",
                               "--requests", "10", "--time-limit", "120", "--json", report],
                              capture_output=True, text=True, timeout=300)
        print(proc.stdout)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        with open(report) as f:
            result = json.load(f)
        self.assertTrue(result["passed"])
        self.assertEqual(result["requests"], 20)
        self.assertTrue(all(n == 2 for n in result["by_kind"].values()), result["by_kind"])


if __name__ == "__main__":
    harness.main()
