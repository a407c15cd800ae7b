"""`epq bench` and `epq probe-io` on a tiny model: a passing budget, a refused one, the
Markdown table, and JSON and SVG files that parse."""
import json
import re
import unittest
import xml.etree.ElementTree as ET

import harness
from harness import run, path, synth


class BenchTest(unittest.TestCase):
    def test_sweep_table_json_and_svg(self):
        model = synth("bench.gguf", "--preset", "tiny", "--expert-ffn", "2048")
        out_json, out_svg = path("bench.json"), path("bench.svg")
        proc = run("bench", "-m", model, "--budgets", "8M,64M,all", "--runs", "2", "--evict", "lru,ls", "-n", "8", "--ctx", "256",
                   "--json", out_json, "--svg", out_svg, "--no-probe", "-q")
        table = proc.stdout
        self.assertIn("memory limit per run:", table)
        rows = [l for l in table.splitlines() if l.startswith("| 8M") or l.startswith("| 64M") or l.startswith("| all")]
        self.assertEqual(len(rows), 6, table)
        for row in rows:
            if row.startswith("| 8M"):
                self.assertRegex(row, r"FAIL \(refused: minimum budget [\d.]+ MiB \(\d+ bytes\)\)")
            else:
                self.assertIn("PASS", row)
        with open(out_json) as f:
            data = json.load(f)
        self.assertEqual(len(data["configs"]), 6)
        passed = [c for c in data["configs"] if c["status"] == "PASS"]
        self.assertEqual(len(passed), 4)
        for c in passed:
            self.assertEqual(len(c["runs"]), 2)
            for r in c["runs"]:
                self.assertLessEqual(r["peak_rss"], c["budget_bytes"])
                self.assertGreater(r["report"]["decode_tps"], 0)
                self.assertEqual(r["report"]["generated_tokens"], 8)
        refused = [c for c in data["configs"] if c["status"] != "PASS"]
        self.assertTrue(all("refused" in c["runs"][0]["failure"] for c in refused))
        svg = ET.parse(out_svg).getroot()
        self.assertTrue(svg.tag.endswith("svg"))
        self.assertGreaterEqual(len([e for e in svg.iter() if e.tag.endswith("polyline")]), 2)

    def test_bad_budget_is_one_clear_line(self):
        model = synth("bench.gguf", "--preset", "tiny", "--expert-ffn", "2048")
        proc = run("bench", "-m", model, "--budgets", "lots", "--no-probe", check=False)
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("--budgets: expected a size such as 8G or 512M, got 'lots'", proc.stderr)


class ProbeTest(unittest.TestCase):
    def test_probe_reports_direct_and_buffered_rates(self):
        model = synth("bench.gguf", "--preset", "tiny", "--expert-ffn", "2048")
        out = run("probe-io", model, "--depths", "1,4", "--seconds", "0.1").stdout
        self.assertRegex(out, r"O_DIRECT (works|does not work)")
        rows = re.findall(r"^\| (\d+) \| ([\d-]+) \| (\d+) \|$", out, re.M)
        self.assertEqual([r[0] for r in rows], ["1", "4"])
        for _, direct, buffered in rows:
            self.assertGreater(int(buffered), 0)


if __name__ == "__main__":
    harness.main()
