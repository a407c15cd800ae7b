"""Who may use `epq serve`: the API key (through the official `openai` npm client and raw
HTTP), JSON-only POST bodies, Origin checks and CORS preflights, and a page on another
origin in headless Chromium that is refused unless --cors-origin allows it."""
import http.server
import json
import os
import subprocess
import threading
import unittest

import harness
from harness import path, synth
from test_server import CLIENTS, Server, free_port, setUpModule  # noqa: F401 (setUpModule installs the npm clients)

KEY = "sk-epq-test-3f9c2a71"
CHAT = {"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 3, "temperature": 0}

# Node scripts get their arguments as JSON in EPQ_TEST and run in tests/server/, where
# `openai` and `playwright-core` are installed.
OPENAI_CLIENT = """
import OpenAI from 'openai';
const { baseURL, keys } = JSON.parse(process.env.EPQ_TEST);
const results = {};
for (const [name, apiKey] of Object.entries(keys)) {
  const client = new OpenAI({ baseURL, apiKey, maxRetries: 0 });
  try {
    const params = { model: 'server', messages: [{ role: 'user', content: 'Hello' }], max_tokens: 4, temperature: 0 };
    const chat = await client.chat.completions.create(params);
    let streamed = '';
    for await (const chunk of await client.chat.completions.create({ ...params, stream: true })) streamed += chunk.choices[0]?.delta?.content ?? '';
    const models = await client.models.list();
    results[name] = { chat: chat.choices[0].message.content, streamed, models: models.data.map((m) => m.id) };
  } catch (e) {
    results[name] = { error: e.constructor.name, status: e.status, code: e.error?.code };
  }
}
console.log(JSON.stringify(results));
"""

# Opens `page` and runs `fetches` there: each a POST to `url` with `headers`, reported as
# the status and the error code read, or as `blocked` when the browser refuses the answer.
BROWSER = """
import { chromium } from 'playwright-core';
const { page: pageURL, url, fetches, key } = JSON.parse(process.env.EPQ_TEST);
const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--headless', '--no-sandbox', '--disable-gpu'] });
try {
  const page = await browser.newPage();
  let dialogs = 0;
  page.on('dialog', (dialog) => { dialogs++; dialog.accept(key); });  // the chat page asks for the API key
  await page.goto(pageURL);
  if (fetches) {
    console.log(JSON.stringify(await page.evaluate(async ({ url, fetches }) => {
      const results = {};
      for (const [name, headers] of Object.entries(fetches)) {
        try {
          const body = JSON.stringify({ messages: [{ role: 'user', content: 'Hello' }], max_tokens: 3 });
          const r = await fetch(url, { method: 'POST', headers, body });
          const j = await r.json();
          results[name] = { status: r.status, code: j.error ? j.error.code : null };
        } catch (e) {
          results[name] = { blocked: String(e) };
        }
      }
      return results;
    }, { url, fetches })));
  } else {  // the chat page itself: send a message, wait for the reply
    await page.fill('#input', 'Hello there');
    await page.press('#input', 'Enter');
    const reply = page.locator('.msg.assistant').first();
    await reply.and(page.locator('[data-state=done]')).waitFor({ timeout: 60000 });
    console.log(JSON.stringify({ model: await page.locator('#model').textContent(), errors: await page.locator('.msg.error').count(),
                                 text: await reply.textContent(), dialogs }));
  }
} finally {
  await browser.close();
}
"""


def node(script, **args):
    proc = subprocess.run(["node", "--input-type=module", "-e", script], cwd=CLIENTS, capture_output=True, text=True, timeout=180,
                          env=dict(os.environ, EPQ_TEST=json.dumps(args)))
    if proc.returncode != 0:
        raise AssertionError(proc.stderr)
    return json.loads(proc.stdout)


def model():
    return synth("server.gguf", "--preset", "tiny")


def error_code(payload):
    return json.loads(payload)["error"]["code"]


class PageServer:
    """A page on another origin: http://127.0.0.1:PORT/ on a port of its own."""

    def __init__(self):
        class Page(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                body = b"<!doctype html><title>another origin</title><p>hello</p>"
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.port = free_port()
        self.origin = f"http://127.0.0.1:{self.port}"
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Page)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


class ApiKey(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        key_file = path("api_key.txt")
        with open(key_file, "w") as f:
            f.write(KEY + "\n")
        cls.server = Server(model(), "--api-key-file", key_file)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_openai_client_with_the_right_key_works_and_a_wrong_one_gets_401(self):
        r = node(OPENAI_CLIENT, baseURL=f"http://127.0.0.1:{self.server.port}/v1", keys={"right": KEY, "wrong": KEY + "x", "short": "sk"})
        self.assertEqual(r["right"]["models"], ["server"])
        self.assertEqual(r["right"]["chat"], r["right"]["streamed"])
        for name in ("wrong", "short"):
            self.assertEqual(r[name], {"error": "AuthenticationError", "status": 401, "code": "invalid_api_key"})

    def test_every_api_route_needs_the_key_and_health_and_the_page_do_not(self):
        json_type = {"Content-Type": "application/json"}
        for method, route, body in [("POST", "/v1/chat/completions", CHAT), ("POST", "/v1/completions", {"prompt": "hi", "max_tokens": 1}),
                                    ("GET", "/v1/models", None), ("GET", "/metrics", None), ("GET", "/nowhere", None)]:
            for headers in [{}, {"Authorization": "Bearer " + KEY[:-1]}, {"Authorization": "Bearer " + KEY + "0"},
                            {"Authorization": "Basic " + KEY}, {"Authorization": KEY}, {"Authorization": "Bearer"}]:
                with self.subTest(route=route, headers=headers):
                    status, head, payload = self.server.exchange(method, route, body, dict(json_type, **headers))
                    self.assertEqual(status, 401, payload)
                    self.assertEqual(error_code(payload), "invalid_api_key")
                    self.assertEqual(head["www-authenticate"], "Bearer")
        status, payload = self.server.request("POST", "/v1/chat/completions", CHAT, dict(json_type, Authorization="bearer  " + KEY))
        self.assertEqual(status, 200, payload)
        self.assertEqual(self.server.request("GET", "/v1/models", headers={"Authorization": "Bearer " + KEY})[0], 200)
        self.assertEqual(self.server.request("GET", "/health", headers={})[0], 200)
        status, page = self.server.request("GET", "/", headers={})
        self.assertEqual(status, 200)
        self.assertIn("epq chat", page)

    def test_the_chat_page_asks_for_the_key_and_then_works(self):
        r = node(BROWSER, page=f"http://127.0.0.1:{self.server.port}/", key=KEY)
        self.assertEqual(r["errors"], 0, r)
        self.assertEqual(r["model"], "server")
        self.assertEqual(r["dialogs"], 1, "the page did not ask for the key once (then keep it)")


class KeySources(unittest.TestCase):
    def test_key_from_the_environment(self):
        server = Server(model(), env=dict(os.environ, EPQ_API_KEY=KEY))
        try:
            self.assertEqual(server.request("GET", "/v1/models", headers={})[0], 401)
            self.assertEqual(server.request("GET", "/v1/models", headers={"Authorization": "Bearer " + KEY})[0], 200)
        finally:
            server.stop()

    def test_bad_keys_are_one_error_line(self):
        key_file = path("empty_key.txt")
        open(key_file, "w").close()
        for args, env, fragment in [(["--api-key", ""], {}, "--api-key: the API key is empty"),
                                    (["--api-key", "two words"], {}, "visible ASCII"),
                                    ([], {"EPQ_API_KEY": ""}, "EPQ_API_KEY: the API key is empty"),
                                    (["--api-key-file", key_file], {}, "the API key is empty"),
                                    (["--api-key-file", path("no_such_key")], {}, "no_such_key"),
                                    (["--api-key", "a", "--api-key-file", key_file], {}, "excludes"),
                                    (["--cors-origin", "example.com"], {}, "is not an origin"),
                                    (["--cors-origin", "http://a.example/path"], {}, "is not an origin")]:
            with self.subTest(args=args, env=env):
                proc = harness.run("serve", "-m", model(), "--port", str(free_port()), *args, check=False, env=dict(os.environ, **env))
                self.assertEqual(proc.returncode, 1, proc.stderr)
                self.assertRegex(proc.stderr, r"^epq: error: [^\n]+\n$")
                self.assertIn(fragment, proc.stderr)

    def test_listening_beyond_loopback_without_a_key_warns(self):
        for args, warned in [(["--host", "0.0.0.0"], True), (["--host", "0.0.0.0", "--api-key", KEY], False), ([], False)]:
            with self.subTest(args=args):
                server = Server(model(), *args)
                server.stop()
                warnings = [line for line in server.proc.stderr.read().splitlines() if line.startswith("epq serve: warning")]
                self.assertEqual(len(warnings), int(warned), warnings)
                if warned:
                    self.assertIn("without an API key", warnings[0])


class OriginsAndContentType(unittest.TestCase):
    OTHER = "http://127.0.0.1:9"  # allowed by --cors-origin below

    @classmethod
    def setUpClass(cls):
        cls.server = Server(model(), "--cors-origin", "http://localhost:3000, HTTP://127.0.0.1:9/", "--cors-origin", "https://b.example")

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def post(self, headers, body=CHAT):
        return self.server.exchange("POST", "/v1/chat/completions", body, headers)

    def test_only_json_bodies_are_accepted(self):
        for content_type in ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None,
                             "application/jsonx", "text/json"]:
            with self.subTest(content_type=content_type):
                status, head, payload = self.post({} if content_type is None else {"Content-Type": content_type})
                self.assertEqual(status, 415, payload)
                self.assertEqual(error_code(payload), "unsupported_media_type")
                self.assertEqual(head["connection"], "close")  # the body was not read
        for content_type in ["application/json", "Application/JSON; charset=utf-8"]:
            self.assertEqual(self.post({"Content-Type": content_type})[0], 200)

    def test_other_origins_are_refused_and_the_servers_own_is_not(self):
        own = f"127.0.0.1:{self.server.port}"
        for origin, host in [("http://evil.example", own), ("null", own), (f"https://{own}", own), (f"http://localhost:{self.server.port}", own),
                             (f"http://rebound.example:{self.server.port}", f"rebound.example:{self.server.port}")]:
            with self.subTest(origin=origin, host=host):
                for method, route in [("POST", "/v1/chat/completions"), ("GET", "/v1/models"), ("GET", "/health"), ("OPTIONS", "/v1/chat/completions")]:
                    status, head, payload = self.server.exchange(method, route, CHAT if method == "POST" else None,
                                                                 {"Content-Type": "application/json", "Origin": origin, "Host": host})
                    self.assertEqual(status, 403, payload)
                    self.assertEqual(error_code(payload), "origin_not_allowed")
                    self.assertNotIn("access-control-allow-origin", head)
        for host in [own, f"localhost:{self.server.port}"]:
            status, head, _ = self.post({"Content-Type": "application/json", "Origin": "http://" + host, "Host": host})
            self.assertEqual(status, 200)
            self.assertNotIn("access-control-allow-origin", head)

    def test_an_allowed_origin_gets_its_preflight_and_cors_headers(self):
        for origin in ["http://localhost:3000", self.OTHER, "https://b.example"]:
            with self.subTest(origin=origin):
                status, head, _ = self.server.exchange("OPTIONS", "/v1/chat/completions", None,
                                                       {"Origin": origin, "Access-Control-Request-Method": "POST",
                                                        "Access-Control-Request-Headers": "authorization,content-type"})
                self.assertEqual(status, 204)
                self.assertEqual(head["access-control-allow-origin"], origin)
                self.assertIn("POST", head["access-control-allow-methods"])
                self.assertEqual(head["access-control-allow-headers"], "authorization,content-type")
                status, head, payload = self.post({"Content-Type": "application/json", "Origin": origin})
                self.assertEqual(status, 200, payload)
                self.assertEqual(head["access-control-allow-origin"], origin)
                self.assertEqual(head["vary"], "Origin")
                status, head, _ = self.post({"Content-Type": "text/plain", "Origin": origin})
                self.assertEqual(status, 415)
                self.assertEqual(head["access-control-allow-origin"], origin)  # the page can read why


class BrowserOnAnotherOrigin(unittest.TestCase):
    """A page served from another local port POSTs to the server from headless Chromium."""

    @classmethod
    def setUpClass(cls):
        cls.page = PageServer()

    @classmethod
    def tearDownClass(cls):
        cls.page.stop()

    def fetch_from_page(self, server, fetches):
        return node(BROWSER, page=self.page.origin + "/", url=f"http://127.0.0.1:{server.port}/v1/chat/completions", fetches=fetches)

    def test_refused_without_cors_origin(self):
        server = Server(model())
        try:
            r = self.fetch_from_page(server, {"json": {"Content-Type": "application/json"}, "plain": {"Content-Type": "text/plain"}})
            self.assertIn("blocked", r["json"])  # its preflight was refused
            self.assertIn("blocked", r["plain"])  # sent without a preflight, refused by its Origin
            self.assertEqual(server.metric('epq_requests_total{endpoint="chat"}'), 0, "a refused request reached the model")
        finally:
            server.stop()

    def test_allowed_with_cors_origin(self):
        server = Server(model(), "--cors-origin", self.page.origin, "--api-key", KEY)
        try:
            r = self.fetch_from_page(server, {"json": {"Content-Type": "application/json", "Authorization": "Bearer " + KEY},
                                              "no_key": {"Content-Type": "application/json"},
                                              "plain": {"Content-Type": "text/plain", "Authorization": "Bearer " + KEY}})
            self.assertEqual(r["json"], {"status": 200, "code": None})
            self.assertEqual(r["no_key"], {"status": 401, "code": "invalid_api_key"})
            self.assertEqual(r["plain"], {"status": 415, "code": "unsupported_media_type"})
        finally:
            server.stop()


if __name__ == "__main__":
    harness.main()
