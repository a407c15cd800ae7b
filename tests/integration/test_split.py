"""Split models (llama.cpp's gguf-split layout): `epq split` writes the shards, `-m` takes
the first and loads them all; logits and tokens equal the unsplit file's, all in RAM and
paged on both I/O engines; expert reads keep every shard out of the page cache; a shard
truncated while running is named; `inspect` and `plan` list the shards; every wrong shard
set is one error line and a non-zero exit; `serve` names the model without the shard
suffix."""
import filecmp
import json
import mmap
import os
import re
import shutil
import struct
import subprocess
import time
import unittest

import harness
from harness import PLAN_MARGIN, run, path, synth
from test_pager import TEXT, drop_cache, resident_pages
from test_pager import logits as logits_into
from test_server import Server

SHARDS = 3


def source_model():
    """The pager tests' tiny model: ~1 MiB experts, 4 layers x 8, top-2."""
    return synth("split-source.gguf", "--preset", "tiny", "--expert-ffn", "2048")


def shard_names(prefix, count=SHARDS):
    return [f"{prefix}-{i + 1:05d}-of-{count:05d}.gguf" for i in range(count)]


def split_model(name="good", model=None, *args):
    """Splits a model into SHARDS shards in its own directory; returns the shards' paths."""
    directory = path(name)
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory)
    prefix = os.path.join(directory, "m")
    run("split", "-m", model or source_model(), "-o", prefix, *(args or ("--shards", str(SHARDS))))
    return shard_names(prefix)


def logits(model, out, *args):
    return logits_into(model, path(out), *args)


def greedy(model, *args):
    return run("run", "-m", model, "-p", TEXT[:60], "-n", "32", "--temp", "0", "--ignore-eos", "-t", "2", *args).stdout


def minimum_budget(model):
    out = run("plan", "-m", model, "--ram-budget", "64G").stdout
    return int(re.search(r"minimum budget: .*?\((\d+) bytes", out).group(1)) + PLAN_MARGIN


def set_split_key(shard, key, value):
    """Rewrites the value of a split key in place (split.no and split.count are uint16,
    split.tensors.count an int32)."""
    with open(shard, "r+b") as f:
        header = f.read(1 << 16)
        needle = struct.pack("<Q", len(key)) + key.encode()
        at = header.index(needle) + len(needle)
        vtype = struct.unpack_from("<I", header, at)[0]
        f.seek(at + 4)
        f.write(struct.pack({2: "<H", 5: "<i"}[vtype], value))


def expect_one_error_line(test, args, fragment):
    proc = run(*args, check=False)
    test.assertNotEqual(proc.returncode, 0, proc.stdout)
    test.assertIn(fragment, proc.stderr)
    test.assertEqual(len(proc.stderr.strip().splitlines()), 1, proc.stderr)
    test.assertTrue(proc.stderr.startswith("epq: error: "), proc.stderr)


class SameNumbers(unittest.TestCase):
    def test_split_equals_unsplit_in_ram_and_paged_on_both_engines(self):
        model = source_model()
        shards = split_model()
        reference = logits(model, "unsplit.logits")
        reference_tokens = greedy(model)
        self.assertTrue(filecmp.cmp(reference, logits(shards[0], "split.logits"), shallow=False))
        self.assertEqual(greedy(shards[0]), reference_tokens)
        budget = minimum_budget(shards[0])
        for io in ("uring", "pread"):
            with self.subTest(io=io):
                args = ["--ram-budget", str(budget), "--io", io]
                out = logits(shards[0], f"split-paged-{io}.logits", "--batch", "64", *args)
                self.assertTrue(filecmp.cmp(reference, out, shallow=False), "paged logits differ from the unsplit file's")
                proc = run("run", "-m", shards[0], "-p", TEXT[:60], "-n", "32", "--temp", "0", "--ignore-eos", "-t", "2", *args)
                self.assertEqual(proc.stdout, reference_tokens)
                self.assertGreater(int(re.search(r"(\d+) evictions", proc.stderr).group(1)), 0, "the arena never evicted")

    def test_a_split_of_a_split_and_max_size(self):
        shards = split_model()
        # Re-split the split model by size: every shard's tensor data at most 8 MiB.
        directory = path("resplit")
        shutil.rmtree(directory, ignore_errors=True)
        os.makedirs(directory)
        out = run("split", "-m", shards[0], "-o", os.path.join(directory, "r"), "--max-size", "8M").stdout
        written = re.findall(r"wrote (\S+): ", out)
        self.assertGreater(len(written), SHARDS)
        self.assertEqual(written, shard_names(os.path.join(directory, "r"), len(written)))
        self.assertTrue(filecmp.cmp(logits(source_model(), "unsplit.logits"), logits(written[0], "resplit.logits"), shallow=False))

    def test_inspect_and_plan_list_the_shards(self):
        shards = split_model()
        out = run("inspect", shards[0], "--no-metadata").stdout
        self.assertIn(f"split in {SHARDS} shards", out)
        tensors = 0
        for i, shard in enumerate(shards):
            m = re.search(rf"(?m)^\s+{i + 1}\s+{re.escape(shard)}\s+[\d.]+ [KM]iB\s+(\d+)\s+32\s+\d+$", out)
            self.assertIsNotNone(m, out)
            tensors += int(m.group(1))
        self.assertIn(f"{tensors} tensors", out.splitlines()[0])
        plan = run("plan", "-m", shards[0], "--ram-budget", "64G").stdout
        self.assertIn(f"Model files ({SHARDS} shards)", plan)
        for shard in shards:
            self.assertRegex(plan, rf"(?m)^\s+{re.escape(shard)}\s+[\d.]+ [KM]iB\s+\d+ tensors$")
        self.assertIn("Model files (1 shard)", run("plan", "-m", source_model(), "--ram-budget", "64G").stdout)

    def test_serve_names_the_model_without_the_shard_suffix(self):
        server = Server(split_model("serve")[0], "--ctx", "256")
        try:
            status, body = server.get("/v1/models")
            self.assertEqual(status, 200)
            self.assertEqual(json.loads(body)["data"][0]["id"], "m")
        finally:
            server.stop()


class EveryShard(unittest.TestCase):
    def test_expert_reads_keep_every_shard_out_of_the_page_cache(self):
        shards = split_model("cache")
        for shard in shards:
            drop_cache(shard)
        before = [resident_pages(s) for s in shards]
        proc = run("run", "-m", shards[0], "-p", TEXT, "-n", "8", "--temp", "0", "--ignore-eos", "-t", "2",
                   "--ram-budget", str(minimum_budget(shards[0])))
        self.assertGreater(float(re.search(r"([\d.]+) MiB read per token", proc.stderr).group(1)), 0.5)
        for shard, pages in zip(shards, before):
            grown = (resident_pages(shard) - pages) * mmap.PAGESIZE
            self.assertLess(grown, 256 << 10, f"{shard}: {grown} bytes entered the page cache")

    def test_a_shard_truncated_while_running_is_named(self):
        shards = split_model("victim")
        args = ["run", "-m", shards[0], "-p", TEXT[:40], "-n", "3000", "--temp", "0", "--ignore-eos", "-t", "2",
                "--ram-budget", str(minimum_budget(shards[0]))]
        proc = subprocess.Popen([harness.EPQ, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                errors="surrogateescape")
        time.sleep(1.0)
        os.truncate(shards[-1], os.path.getsize(shards[-1]) // 2)
        _, err = proc.communicate(timeout=120)
        self.assertNotEqual(proc.returncode, 0, "the run did not notice the truncation")
        self.assertIn(f"{shards[-1]}: the model file changed on disk while running", err)


class BadShardSets(unittest.TestCase):
    """Each case is one line naming the file and the problem, for run, paged run, plan and inspect."""

    def check(self, shards, fragment, first=None):
        model = first or shards[0]
        for args in (["run", "-m", model, "-p", "hi", "-n", "1"], ["run", "-m", model, "-p", "hi", "-n", "1", "--ram-budget", "1G"],
                     ["plan", "-m", model, "--ram-budget", "1G"], ["inspect", model]):
            with self.subTest(args=args[0], fragment=fragment):
                expect_one_error_line(self, args, fragment)

    def test_missing_shard(self):
        shards = split_model("missing")
        os.remove(shards[1])
        self.check(shards, f"{shards[1]}: missing: the model {shards[0]} has 3 shards and this is shard 2")

    def test_later_shard_given(self):
        shards = split_model("later")
        self.check(shards, f"{shards[1]}: this is shard 2 of 3 of a split model; give the first shard, {shards[0]}", shards[1])

    def test_extra_shard(self):
        # Three files, but the split keys say the model has two shards: the name and the keys disagree.
        shards = split_model("extra")
        for s in shards:
            set_split_key(s, "split.count", 2)
        self.check(shards, f"{shards[0]}: named as shard 1 of 3, but its split keys say it is shard 1 of 2")

    def test_wrong_split_count(self):
        shards = split_model("count")
        set_split_key(shards[2], "split.count", 4)
        self.check(shards, f"{shards[2]}: split.count is 4, but the first shard {shards[0]} says 3")

    def test_wrong_split_no(self):
        shards = split_model("number")
        set_split_key(shards[1], "split.no", 2)
        self.check(shards, f"{shards[1]}: split.no is 2 (shard 3 of 3), but the file is named as shard 2")

    def test_tensor_count_sum(self):
        shards = split_model("sum")
        with open(shards[0], "rb") as f:
            header = f.read(1 << 16)
        total = struct.unpack_from("<i", header, header.index(b"split.tensors.count") + len("split.tensors.count") + 4)[0]
        for s in shards:
            set_split_key(s, "split.tensors.count", total + 1)
        self.check(shards, f"{shards[0]}: its 3 shards hold {total} tensors, but split.tensors.count says {total + 1}")

    def test_shard_of_another_model(self):
        other = split_model("other-source", synth("split-other.gguf", "--preset", "tiny", "--layers", "3"))
        shards = split_model("foreign")
        shutil.copy(other[1], shards[1])
        self.check(shards, f"{shards[1]}: split.tensors.count is ")
        self.check(shards, "a shard of another model")

    def test_duplicate_tensor(self):
        shards = split_model("duplicate")
        shutil.copy(shards[1], shards[2])
        set_split_key(shards[2], "split.no", 2)
        self.check(shards, f"{shards[2]}: tensor 'blk.")
        self.check(shards, f"is also in {shards[1]}")

    def test_split_rejects_bad_requests(self):
        model = source_model()
        prefix = path("bad-split")
        for args, fragment in ((["--shards", "1000"], "--shards 1000: the model has only"),
                               (["--shards", "2", "--max-size", "1M"], "give either --shards N or --max-size SIZE"),
                               ([], "give either --shards N or --max-size SIZE"),
                               (["--max-size", "lots"], "--max-size: expected a size")):
            with self.subTest(args=args):
                expect_one_error_line(self, ["split", "-m", model, "-o", prefix, *args], fragment)
        shards = split_model("self")
        expect_one_error_line(self, ["split", "-m", shards[0], "-o", shards[0][:-len("-00001-of-00003.gguf")], "--shards", "3"],
                              "is a file of the input model")


if __name__ == "__main__":
    harness.main()
