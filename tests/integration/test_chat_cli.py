"""`epq chat` on piped input: each reply is exactly what `epq run` gives for the whole
conversation rendered in the model's chat template, including turns after the first,
which reuse the session's cached tokens."""
import unittest

import harness
from harness import run


def chatml(turns):
    """The synthesized model's template (ChatML) with a generation prompt."""
    text = "".join(f"<|im_start|>{role}\n{content}<|im_end|>\n" for role, content in turns)
    return text + "<|im_start|>assistant\n"


class Chat(unittest.TestCase):
    def test_replies_match_run_on_the_rendered_conversation(self):
        model = harness.synth("chat.gguf", "--preset", "tiny", "--seed", "5")
        greedy = ["--temp", "0", "-n", "8", "-t", "2"]
        proc = run("chat", "-m", model, "--system", "be brief", *greedy, input="hello\n/reset\nhello\n2+2\n")
        # Each reply is printed with one newline after it, as `epq run` prints its text.
        turns = [("system", "be brief"), ("user", "hello")]
        first = run("run", "-m", model, "-p", chatml(turns), *greedy).stdout
        self.assertTrue(first.endswith("\n"))
        turns += [("assistant", first[:-1]), ("user", "2+2")]
        second = run("run", "-m", model, "-p", chatml(turns), *greedy).stdout
        self.assertNotEqual(first, second)
        # /reset starts the same conversation over, so the first reply comes twice.
        self.assertEqual(proc.stdout, first + first + second)

    def test_a_message_past_the_context_is_refused_and_the_chat_goes_on(self):
        model = harness.synth("chat.gguf", "--preset", "tiny", "--seed", "5")
        greedy = ["--temp", "0", "-n", "4", "-t", "2"]
        long_line = "words " * 200
        proc = run("chat", "-m", model, "--ctx", "64", *greedy, input=f"hello\n{long_line}\n2+2\n")
        self.assertIn("more than --ctx 64 holds; /reset starts over", proc.stderr)
        # The refused message is not part of the conversation: the third reply is the
        # one for hello, then 2+2.
        turns = [("user", "hello")]
        first = run("run", "-m", model, "--ctx", "64", "-p", chatml(turns), *greedy).stdout
        turns += [("assistant", first[:-1]), ("user", "2+2")]
        second = run("run", "-m", model, "--ctx", "64", "-p", chatml(turns), *greedy).stdout
        self.assertEqual(proc.stdout, first + second)

    def test_slash_exit_stops_before_later_lines(self):
        model = harness.synth("chat.gguf", "--preset", "tiny", "--seed", "5")
        proc = run("chat", "-m", model, "--temp", "0", "-n", "4", input="/exit\nhello\n")
        self.assertEqual(proc.stdout, "")


if __name__ == "__main__":
    harness.main()
