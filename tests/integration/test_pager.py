"""The expert pager: bit-identical output at every budget, policy and I/O path; the
process stays within a kernel-enforced budget; expert reads bypass the page cache; a
budget below the minimum is refused; a model file truncated while running is an error,
never wrong tokens."""
import ctypes
import filecmp
import mmap
import os
import re
import shutil
import subprocess
import time
import unittest

import harness
from harness import PLAN_MARGIN, run, path, synth

TEXT = ("The river ran past the old mill and under the stone bridge, where the children of the village "
        "used to gather in the long summer evenings. They would throw pebbles into the water and count the rings.")


def plan_bytes(model, *args):
    """(smallest budget that runs, smallest that holds every expert), from `epq plan`.

    Both get harness.PLAN_MARGIN added (a run can measure itself a MiB larger than the plan
    did), which leaves the smallest budget only a slot or two above the top-k minimum for
    the test model's 1 MiB experts."""
    out = run("plan", "-m", model, "--ram-budget", "64G", *args).stdout
    minimum = int(re.search(r"minimum budget: .*?\((\d+) bytes", out).group(1))
    all_fit = int(re.search(r"holds every expert: .*?\((\d+) bytes", out).group(1))
    return minimum + PLAN_MARGIN, all_fit + PLAN_MARGIN


def pager_model(name="pager.gguf", *extra):
    """A tiny model with ~1 MiB experts (4 layers x 8, top-2), so budgets are fine-grained."""
    return synth(name, "--preset", "tiny", "--expert-ffn", "2048", *extra)


def text_file():
    p = path("text.txt")
    with open(p, "w") as f:
        f.write(TEXT)
    return p


def logits(model, out, *args):
    run("perplexity", "-m", model, "-f", text_file(), "--all-positions", "--logits-out", out, "-t", "2", *args)
    return out


def greedy(model, *args):
    return run("run", "-m", model, "-p", TEXT[:60], "-n", "48", "--temp", "0", "--ignore-eos", "-t", "2", *args).stdout


def resident_pages(file_path):
    """Pages of the file in the page cache, by mincore over a fresh mapping."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    size = os.path.getsize(file_path)
    fd = os.open(file_path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
        vec = ctypes.create_string_buffer(pages)
        assert libc.mincore(ctypes.c_void_p(addr), size, vec) == 0, os.strerror(ctypes.get_errno())
        libc.munmap(ctypes.c_void_p(addr), size)
        return sum(b & 1 for b in vec.raw)
    finally:
        os.close(fd)


def drop_cache(file_path):
    fd = os.open(file_path, os.O_RDONLY)
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)


class BitIdentical(unittest.TestCase):
    """Paging changes where bytes come from, never the numbers."""

    def check_model(self, model, name):
        reference = logits(model, path(f"{name}-resident.logits"))
        reference_tokens = greedy(model)
        minimum, all_fit = plan_bytes(model, "--ctx", "4096")
        mid = (minimum + all_fit) // 2
        # Every policy and I/O path where evictions happen on every token; the roomier
        # budgets with one policy each.
        cases = [(minimum, policy, io) for policy in ("lru", "ls", "ls-pos")
                 for io in (["--io", "uring"], ["--io", "pread"], ["--buffered-io"])]
        cases += [(minimum, "lrfu", ["--io", "uring"]), (mid, "lrfu", ["--io", "pread"])]
        cases += [(mid, "ls", ["--io", "uring"]), (all_fit, "ls-pos", ["--io", "pread"])]
        for budget, policy, io in cases:
            args = ["--ram-budget", str(budget), "--evict", policy, *io]
            with self.subTest(budget=budget, policy=policy, io=io):
                for batch in ("64", "1"):  # prompt batches (with waves at the minimum) and one-token passes
                    out = logits(model, path(f"{name}-paged.logits"), "--batch", batch, *args)
                    if batch == "64":
                        self.assertTrue(filecmp.cmp(reference, out, shallow=False), "logits differ from the resident run")
                self.assertEqual(greedy(model, *args), reference_tokens)

    def test_single_size_class(self):
        self.check_model(pager_model(), "tiny")

    def test_mixed_size_classes(self):
        # Q4_K/Q6_K layers plus BF16 layers: two slot sizes.
        model = pager_model("mixed.gguf", "--tail-expert-type", "BF16", "--tail-layers", "2")
        self.assertIn("1    ", run("plan", "-m", model, "--ram-budget", "64G").stdout)  # a second class
        self.check_model(model, "mixed")

    def test_matrices_in_the_four_row_layout(self):
        # With a budget the layers' resident matrices are read into the process's memory,
        # and the routed experts into the pager's slots; all in RAM the experts too, unless
        # --mmap keeps every weight in the file's mapping. Those of the layout's formats are
        # rearranged into the four-row layout where the kernel set reads it
        # (quant/rows4_layout.h); with --mmap they stay the file's. The same bits either
        # way, all in RAM, with every expert in the arena and with experts evicted and read
        # again.
        # Q8_0, IQ4_XS and the K formats only for rows shorter than 2048: here the
        # attention and the gate and up experts, not the down experts (rows of --expert-ffn
        # 2048); so too Q4_0 on a Zen 4, where Q2_K's down experts are rearranged as well
        # (KernelSet::rows4_below_cols). Q4_K, Q5_K and Q6_K in Zen 5's set; on a Zen 4 Q4_K
        # and Q5_K, rows of any length, in sixteen-row groups; Q2_K and IQ4_XS wherever the
        # set has AVX-512.
        for first, second in (("Q4_0", "Q5_1"), ("IQ4_NL", "MXFP4"), ("Q4_1", "Q5_0"), ("Q8_0", "Q8_0"), ("Q5_K", "Q6_K"),
                              ("Q6_K", "Q4_K"), ("Q2_K", "Q2_K"), ("IQ4_XS", "IQ4_XS")):
            with self.subTest(first=first, second=second):
                model = pager_model(f"rows4-{first}.gguf", "--type-attn", first, "--type-attn-v", second,
                                    "--type-expert", second, "--type-expert-down", first)
                minimum, all_fit = plan_bytes(model, "--ctx", "4096")
                for batch in ("64", "1"):
                    reference = logits(model, path(f"rows4-{first}-mapped.logits"), "--batch", batch, "--mmap")
                    for budget in (None, all_fit, minimum):
                        args = ["--ram-budget", str(budget)] if budget else []
                        out = logits(model, path(f"rows4-{first}-read.logits"), "--batch", batch, *args)
                        self.assertTrue(filecmp.cmp(reference, out, shallow=False),
                                        f"batch {batch}, budget {budget}: logits differ from the run on the file's mapping")

    def test_batch1_matches_its_own_resident_run(self):
        model = pager_model()
        reference = logits(model, path("tiny-resident-b1.logits"), "--batch", "1")
        minimum, _ = plan_bytes(model, "--ctx", "4096", "--batch", "1")
        out = logits(model, path("tiny-paged-b1.logits"), "--batch", "1", "--ram-budget", str(minimum))
        self.assertTrue(filecmp.cmp(reference, out, shallow=False))


class StrictLimit(unittest.TestCase):
    def test_peak_rss_within_a_kernel_enforced_budget(self):
        model = synth("small-ish.gguf", "--preset", "small", "--layers", "8")
        budget = 300 << 20
        proc = run("limit", "--memory", str(budget), "--", harness.EPQ, "run", "-m", model, "-p", TEXT, "-n", "32", "--temp", "0",
                   "--ignore-eos", "--ctx", "1024", "-t", "2", "--ram-budget", str(budget))
        print(proc.stderr.strip().splitlines()[-1])
        report = re.search(r"under .*? \((.*?)\): peak RSS .*? \((\d+) bytes\)", proc.stderr)
        mechanism, peak = report.group(1), int(report.group(2))
        if mechanism.startswith("prlimit"):
            print(f"note: no writable cgroup; limited with {mechanism}")
        self.assertLessEqual(peak, budget)
        own = int(re.search(r"peak RSS .*? \((\d+) bytes\)", proc.stderr).group(1))
        self.assertLessEqual(own, budget)
        # The run really paged: the model's experts are larger than the budget.
        self.assertGreater(os.path.getsize(model), budget)


class PageCache(unittest.TestCase):
    def test_expert_reads_do_not_fill_the_page_cache(self):
        model = synth("small-ish.gguf", "--preset", "small", "--layers", "8")
        for io in (["--io", "uring"], ["--buffered-io"]):
            with self.subTest(io=io):
                drop_cache(model)
                before = resident_pages(model)
                proc = run("run", "-m", model, "-p", TEXT, "-n", "16", "--temp", "0", "--ignore-eos", "-t", "2",
                           "--ram-budget", "300M", "--ctx", "1024", *io)
                read_mib = float(re.search(r"([\d.]+) MiB read per token", proc.stderr).group(1))
                self.assertGreater(read_mib, 1.0)  # experts were read
                after = resident_pages(model)
                # Only the header the parser mapped may be cached (a few pages of metadata).
                self.assertLess((after - before) * mmap.PAGESIZE, 1 << 20, f"{after - before} pages entered the cache")


class AllInRam(unittest.TestCase):
    """Without a budget the weights are read into the process's memory, with direct I/O,
    where they fit; --mmap, or too little memory, leaves them in the file's mapping."""

    def test_weights_are_read_into_memory_not_the_page_cache(self):
        model = synth("small-ish.gguf", "--preset", "small", "--layers", "8")
        gen = ["-p", TEXT, "-n", "16", "--temp", "0", "--ignore-eos", "-t", "2", "--ctx", "1024"]
        drop_cache(model)
        before = resident_pages(model)
        proc = run("run", "-m", model, *gen)
        grown = (resident_pages(model) - before) * mmap.PAGESIZE
        self.assertLess(grown, 1 << 20, f"{grown} bytes entered the page cache")
        drop_cache(model)
        mapped = run("run", "-m", model, *gen, "--mmap")
        self.assertGreater((resident_pages(model) - before) * mmap.PAGESIZE, 64 << 20, "the mapped run's weights are not in the page cache")
        self.assertEqual(proc.stdout, mapped.stdout)
        # A budget and --mmap do not go together.
        proc = run("run", "-m", model, *gen, "--mmap", "--ram-budget", "1G", check=False)
        self.assertEqual(proc.returncode, 1)
        self.assertIn("--mmap is for runs all in RAM", proc.stderr)

    def test_weights_that_do_not_fit_stay_in_the_mapping(self):
        model = synth("small-ish.gguf", "--preset", "small", "--layers", "8")
        gen = ["-p", TEXT, "-n", "8", "--temp", "0", "--ignore-eos", "-t", "2", "--ctx", "256"]
        expected = run("run", "-m", model, *gen).stdout
        # A memory cgroup with room for the model and the process, not for a tenth more.
        proc = run("limit", "--memory", str(os.path.getsize(model) + (48 << 20)), "--", harness.EPQ, "run", "-m", model, *gen)
        mechanism = re.search(r"under .*? \((.*?)\): peak RSS", proc.stderr).group(1)
        if mechanism.startswith("prlimit"):
            print(f"note: no writable cgroup ({mechanism}); the run read its weights into memory")
        else:
            self.assertIn("do not fit in the memory available", proc.stderr)
            self.assertIn("read from the file's mapping", proc.stderr)
        self.assertEqual(proc.stdout, expected)


class Refusal(unittest.TestCase):
    def test_budget_below_minimum_is_refused_with_the_minimum(self):
        model = pager_model()
        minimum, _ = plan_bytes(model)
        proc = run("run", "-m", model, "-p", "hi", "--ram-budget", str(minimum - (3 << 20)), check=False)
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("is below the minimum of", proc.stderr)
        self.assertEqual(len(proc.stderr.strip().splitlines()), 1, proc.stderr)
        self.assertEqual(proc.stdout, "")
        env = dict(os.environ, EPQ_RAM_BUDGET_MB="1")
        proc = run("run", "-m", model, "-p", "hi", check=False, env=env)
        self.assertIn("is below the minimum of", proc.stderr)

    def test_minimum_does_not_depend_on_whether_the_model_is_cached(self):
        # The kernel maps up to 16 cached pages around each page fault, one when it must read
        # the page: while the header was parsed, a cached file mapped more of it. The plan
        # measures the process after that mapping is dropped, so both give one minimum (a
        # peak measured before moved it by 2 MiB, and runs refused the plan's own minimum).
        model = path("tiny-just-written.gguf")
        with open(pager_model("mixed.gguf", "--tail-expert-type", "BF16", "--tail-layers", "2"), "rb") as src, open(model, "wb") as dst:
            dst.write(src.read())  # written through the page cache: all of it cached
        cached, _ = plan_bytes(model, "--ctx", "4096")
        drop_cache(model)
        cold, _ = plan_bytes(model, "--ctx", "4096")
        self.assertEqual(cached, cold)


class FileChanges(unittest.TestCase):
    def test_truncated_while_running_stops_with_an_error_and_no_wrong_tokens(self):
        model = pager_model()
        copy = path("tiny-victim.gguf")
        shutil.copy(model, copy)
        minimum, _ = plan_bytes(model)
        args = ["run", "-p", TEXT[:40], "-n", "3000", "--temp", "0", "--ignore-eos", "-t", "2", "--ctx", "4096"]
        expected = run(*args, "-m", model).stdout
        proc = subprocess.Popen([harness.EPQ, *args, "-m", copy, "--ram-budget", str(minimum)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, errors="surrogateescape")
        time.sleep(1.0)
        os.truncate(copy, os.path.getsize(copy) // 2)
        out, err = proc.communicate(timeout=120)
        self.assertNotEqual(proc.returncode, 0, "the run did not notice the truncation")
        self.assertIn("changed on disk", err)
        self.assertTrue(expected.startswith(out), "tokens before the error differ from the reference")
        self.assertLess(len(out), len(expected))


if __name__ == "__main__":
    harness.main()
